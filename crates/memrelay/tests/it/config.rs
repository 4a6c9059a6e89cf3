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
    let out = Command::new(env!("CARGO_BIN_EXE_memrelay")).arg("--check-config").arg(&path).output().unwrap();
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
