//! `--config FILE` and `--check-config FILE` on the real binary: a file describes the servers and
//! options, the command line overrides it, a bad file is refused with one line saying where.
//!
//! Every test is a function of the engine's name and runs once per engine (see `common`).

use std::process::Command;

use crate::common::*;

engine_matrix!(a_config_file_runs_memrelay_and_the_command_line_overrides_it);

fn check(file_text: &str) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memrelay.toml");
    std::fs::write(&path, file_text).unwrap();
    let out = Command::new(memrelay_binary()).arg("--check-config").arg(&path).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_config_accepts_a_good_file_and_refuses_bad_ones() {
    let (code, stdout, _) =
        check("servers = [\"127.0.0.1:1\", \"127.0.0.1:2\"]\ndistribution = \"ketama\"\nreplication = 2\n");
    assert_eq!(code, 0);
    assert!(stdout.contains("is valid: 2 servers"), "{stdout}");
    for (text, words) in [
        (
            "servers = [\"127.0.0.1:1\", \"127.0.0.1:2\"]\nreplication = 2\n",
            "--replication needs --distribution ketama",
        ),
        ("servers = [\"127.0.0.1:1\"]\nengine = \"threads\"\n", "threads"),
        ("servers = [\"127.0.0.1:1\"\n", "memrelay.toml"),
        ("servers = [\"127.0.0.1:1\"]\nlisten_on = \"x\"\n", "unknown key `listen_on`"),
        ("distribution = \"ketama\"\n", "--server"),
    ] {
        let (code, _, stderr) = check(text);
        assert_eq!(code, 2, "{text}");
        assert!(stderr.contains(words), "{text}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    }
}

fn a_config_file_runs_memrelay_and_the_command_line_overrides_it(engine: &str) {
    let servers: Vec<Memcached> = (0..2).map(|_| Memcached::start()).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memrelay.toml");
    let text = format!(
        "servers = [\"{}\", \"{}\"]\ndistribution = \"ketama\"\nreplication = 2\nserver_timeout_ms = 700\n",
        servers[0].addr(),
        servers[1].addr()
    );
    std::fs::write(&path, text).unwrap();
    let config = path.to_str().unwrap();
    let relay = Memrelay::start_addrs(engine, &[], &["--config", config, "--server-timeout-ms", "900"]);
    let mut c = relay.client();
    assert_eq!(c.set("k", b"v"), "STORED\r\n");
    // Replication 2 from the file: both servers hold the key.
    for server in &servers {
        assert_eq!(server.get_raw("k").as_deref(), Some(&b"v"[..]));
    }
}

/// What a start refuses, --check-config refuses too (the same checks run), with exit status 2 and
/// one line in which no control character of the input survives; a start refused for bad input
/// exits 2 as well (issue 32, item 9).
#[test]
fn check_config_refuses_what_a_start_refuses_and_bad_input_exits_2() {
    let long_name = "n".repeat(1_000_000);
    let ring_name = "r".repeat(200);
    let cases: Vec<(String, &str)> = vec![
        ("servers = [\"127.0.0.1:0\"]\n".into(), "port 0"),
        (format!("servers = [\"127.0.0.1:11211 {long_name}\"]\n"), "at most 1024 bytes"),
        // Short enough to parse, too long for the ketama ring a start builds.
        (format!("servers = [\"127.0.0.1:11211 {ring_name}\"]\n"), "ketama ring"),
        ("servers = [\"127.0.0.1:11211 a\\nreload: generation 99 in force\"]\n".into(), "control characters"),
        ("servers = [\"127.0.0.1:11211 a\\u001b[31mred\"]\n".into(), "control characters"),
        (
            "servers = [\"127.0.0.1:1\", \"127.0.0.1:2\"]\nfailover = true\n".into(),
            "--failover needs --distribution ketama",
        ),
        ("servers = [\"127.0.0.1:1\"]\nauth_file = \"/nonexistent/users\"\n".into(), "auth file"),
    ];
    let (code, _, stderr) = check("servers = [\"127.0.0.1:1\"]\nlisten = \"none\"\n");
    assert!(code == 2 && stderr.contains("--listen none needs --tls-listen"), "{stderr}");
    let dir = tempfile::tempdir().unwrap();
    for (text, words) in &cases {
        let (code, _, stderr) = check(text);
        let shown = &text[..text.len().min(120)];
        assert_eq!(code, 2, "{shown}: {stderr}");
        assert!(stderr.contains(words), "{shown}: {}", &stderr[..stderr.len().min(500)]);
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(!stderr.contains('\u{1b}') && stderr.len() < 4096, "{}", &stderr[..stderr.len().min(500)]);
        // A start with the same file: refused the same way, exit 2, before anything listens.
        let path = dir.path().join("start.toml");
        std::fs::write(&path, text).unwrap();
        let listen = format!("127.0.0.1:{}", free_port());
        let (status, said) = run_memrelay(&["--config", path.to_str().unwrap(), "--listen", &listen]);
        assert_eq!(status.code(), Some(2), "{shown}: {said}");
        assert!(said.contains(words) && said.lines().count() == 1, "{shown}: {}", &said[..said.len().min(500)]);
    }
    // Failover with ketama is taken; with `all`, a write policy that repairs fails over by itself.
    let (code, _, stderr) =
        check("servers = [\"127.0.0.1:1\", \"127.0.0.1:2\"]\ndistribution = \"ketama\"\nfailover = true\n");
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = check("servers = [\"127.0.0.1:1\", \"127.0.0.1:2\"]\nwrite_policy = \"majority\"\n");
    assert_eq!(code, 0, "{stderr}");
}

/// A reload whose file names a server with a newline is refused in one line: the newline is
/// escaped, so it cannot forge a second (`reload: generation 99 in force`).
#[test]
fn a_refused_reload_cannot_forge_a_log_line() {
    let server = Memcached::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memrelay.toml");
    std::fs::write(&path, format!("servers = [\"{}\"]\n", server.addr())).unwrap();
    let relay = Memrelay::start_addrs("evented", &[], &["--config", path.to_str().unwrap()]);
    std::fs::write(&path, format!("servers = [\"{} a\\nmemrelay: reload: generation 99 in force\"]\n", server.addr()))
        .unwrap();
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(relay.pid() as libc::pid_t, libc::SIGHUP) }, 0);
    assert!(wait_for(std::time::Duration::from_secs(10), || relay.stderr().contains("reload refused")));
    let stderr = relay.stderr();
    assert!(!stderr.lines().any(|l| l.starts_with("memrelay: reload: generation 99")), "{stderr}");
    assert!(stderr.contains("a\\nmemrelay: reload: generation 99 in force"), "{stderr}");
}

/// Issue 43, item 9: a reload of an emptied file was refused with "the following required
/// arguments were not provided:" naming none; it names `--server` (and the file's `servers`), as
/// a start does.
#[test]
fn a_refused_reload_names_the_missing_servers() {
    let server = Memcached::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memrelay.toml");
    std::fs::write(&path, format!("servers = [\"{}\"]\n", server.addr())).unwrap();
    let relay = Memrelay::start_addrs("evented", &[], &["--config", path.to_str().unwrap()]);
    std::fs::write(&path, "").unwrap();
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(relay.pid() as libc::pid_t, libc::SIGHUP) }, 0);
    assert!(wait_for(std::time::Duration::from_secs(10), || relay.stderr().contains("reload refused")));
    let stderr = relay.stderr();
    let refused = stderr.lines().find(|l| l.contains("reload refused")).unwrap();
    assert!(
        refused.contains("not provided: --server <HOST:PORT[:WEIGHT] [NAME]> (in a configuration file: servers = ["),
        "{stderr}"
    );
    // A start with the same file says the same.
    let listen = format!("127.0.0.1:{}", free_port());
    let (status, said) = run_memrelay(&["--config", path.to_str().unwrap(), "--listen", &listen]);
    assert_eq!(status.code(), Some(2), "{said}");
    assert!(said.contains("not provided: --server <HOST:PORT[:WEIGHT] [NAME]>") && said.lines().count() == 1, "{said}");
}

fn mkfifo(path: &std::path::Path) {
    let name = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
}

/// Issue 43, item 7: memrelay's own files are read only as regular files of a sensible size. A
/// configuration file that is a FIFO, `/dev/zero` or 20 MB is refused at once with one line (a
/// FIFO once hung the start, `/dev/zero` took 5.7 GB); a reload of a file replaced by a FIFO is
/// refused and the next reload still works; a FIFO in the spool folder does not hang the start.
#[test]
fn own_files_that_are_not_regular_or_too_large_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.toml");
    mkfifo(&fifo);
    let large = dir.path().join("large.toml");
    std::fs::write(&large, format!("servers = [\"127.0.0.1:1\"]\n# {}\n", "x".repeat(20 << 20))).unwrap();
    for (file, says) in
        [(fifo.as_path(), "a FIFO"), (std::path::Path::new("/dev/zero"), "a device"), (&large, "more than")]
    {
        let (status, stderr) = run_memrelay(&["--check-config", file.to_str().unwrap()]);
        assert_eq!(status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(says) && stderr.lines().count() == 1, "{stderr}");
    }

    let server = Memcached::start();
    let path = dir.path().join("memrelay.toml");
    let good = format!("servers = [\"{}\"]\n", server.addr());
    std::fs::write(&path, &good).unwrap();
    let spool = dir.path().join("spool");
    std::fs::create_dir(&spool).unwrap();
    mkfifo(&spool.join(format!("{}.spool", server.addr())));
    let relay = Memrelay::start_addrs(
        "evented",
        &[],
        &["--config", path.to_str().unwrap(), "--repair-spool-dir", spool.to_str().unwrap()],
    );
    let hang_up = || {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(relay.pid() as libc::pid_t, libc::SIGHUP) }, 0);
    };
    std::fs::remove_file(&path).unwrap();
    mkfifo(&path);
    hang_up();
    assert!(
        wait_for(std::time::Duration::from_secs(10), || relay.stderr().contains("reload refused")),
        "{}",
        relay.stderr()
    );
    assert!(relay.stderr().lines().any(|l| l.contains("reload refused") && l.contains("a FIFO")), "{}", relay.stderr());
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, &good).unwrap();
    hang_up();
    let generation = || stat_of(&mut relay.client(), "config_generation");
    assert!(wait_for(std::time::Duration::from_secs(10), || generation() == "2"), "{}", relay.stderr());
}
