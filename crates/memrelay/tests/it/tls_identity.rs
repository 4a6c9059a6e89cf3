//! TLS client certificates as identities (`--tls-client-ca`, required or optional), certificates
//! read again on SIGHUP, and the handshake time limit, against real memcached: certificates are
//! made by the test with the `openssl` command, clients are rustls clients, and what reached the
//! server is read from memcached's own counters.

// TLS is the evented engine's alone: no per-engine suite here.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use crate::common::certs::{read_until, rustls_connect, start_tls_relay};
use crate::common::*;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// memrelay with a TLS listener whose certificate `ca` issued into `dir`, and `extra` options.
fn start(ca: &Ca, dir: &Path, servers: &[&Memcached], extra: &[&str]) -> (Memrelay, u16) {
    let Issued { cert, key } = ca.issue(dir, "localhost", "DNS:localhost,IP:127.0.0.1");
    start_tls_relay(&cert, &key, servers, extra)
}

/// A rustls client trusting `ca`, presenting `identity` if given, after one round trip: TLS 1.3
/// tells a client its certificate was refused only after the client's last flight.
fn connect(port: u16, ca: &Path, identity: Option<&Issued>) -> std::io::Result<TlsStream> {
    let mut stream = rustls_connect(port, ca, "localhost", identity);
    stream.write_all(b"version\r\n")?;
    let mut reply = [0u8; 64];
    let n = stream.read(&mut reply)?;
    if &reply[..n] != b"VERSION 1.6.0\r\n" {
        return Err(std::io::Error::other(format!("after the handshake: {}", show(&reply[..n]))));
    }
    Ok(stream)
}

/// Sends `request` and reads the reply up to `end`.
fn ask(stream: &mut TlsStream, request: &[u8], end: &[u8]) -> String {
    stream.write_all(request).unwrap();
    String::from_utf8_lossy(&read_until(stream, end)).into_owned()
}

fn denied(relay: &Memrelay, reason: &str) -> u64 {
    stat_of(&mut relay.client(), &format!("access_denied_{reason}")).parse().unwrap()
}

#[test]
fn a_client_certificate_names_the_identity_whose_rule_applies() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let server = Memcached::start();
    let ca_file = ca.cert.to_str().unwrap().to_owned();
    let (relay, port) = start(
        &ca,
        dir.path(),
        &[&server],
        &[
            "--tls-client-ca",
            &ca_file,
            "--access",
            r#"{ identity = "tenant-a", prefixes = ["a:"] }"#,
            "--access",
            r#"{ identity = "ops", admin = ["flush_all"] }"#,
        ],
    );
    // Without a certificate, or with one another CA signed: the handshake fails, counted (first:
    // refusals are logged at most once a second).
    let before = denied(&relay, "tls_handshake");
    let (sets, gets) = (server.stats()["cmd_set"], server.stats()["cmd_get"]);
    let other = Ca::new(dir.path(), "other-ca");
    let stranger = other.issue_as(dir.path(), "stranger", "/CN=tenant-a", "");
    assert!(connect(port, &ca.cert, None).is_err(), "a client without a certificate was taken");
    assert!(connect(port, &ca.cert, Some(&stranger)).is_err(), "a certificate of another CA was taken");
    assert!(wait_for(Duration::from_secs(5), || denied(&relay, "tls_handshake") >= before + 2));
    assert_eq!((server.stats()["cmd_get"], server.stats()["cmd_set"]), (gets, sets));
    assert!(relay.stderr().contains("access denied (tls_handshake)"), "{}", relay.stderr());
    let tenant = ca.issue_as(dir.path(), "tenant-a", "/CN=tenant-a", "");
    // An identity from a subject alternative name when the subject has no common name.
    let ops = ca.issue_as(dir.path(), "ops", "/O=memrelay test", "DNS:ops");
    let mut a = connect(port, &ca.cert, Some(&tenant)).expect("tenant-a's certificate is taken");
    assert_eq!(ask(&mut a, b"set a:1 0 0 1\r\nx\r\n", b"\r\n"), "STORED\r\n");
    let (sets, gets, flushes) = (server.stats()["cmd_set"], server.stats()["cmd_get"], server.stats()["cmd_flush"]);
    assert_eq!(ask(&mut a, b"get b:1\r\n", b"\r\n"), "CLIENT_ERROR key not allowed\r\n");
    assert_eq!(ask(&mut a, b"get a:1 b:1\r\n", b"\r\n"), "CLIENT_ERROR key not allowed\r\n");
    assert_eq!(ask(&mut a, b"mg b:1 v\r\n", b"\r\n"), "CLIENT_ERROR key not allowed\r\n");
    // base64 of "b:1"
    assert_eq!(ask(&mut a, b"mg Yjox b v\r\n", b"\r\n"), "CLIENT_ERROR key not allowed\r\n");
    assert_eq!(ask(&mut a, b"flush_all\r\n", b"\r\n"), "CLIENT_ERROR flush_all not allowed\r\n");
    // Nothing refused reached the server.
    assert_eq!(
        (server.stats()["cmd_set"], server.stats()["cmd_get"], server.stats()["cmd_flush"]),
        (sets, gets, flushes)
    );
    let mut o = connect(port, &ca.cert, Some(&ops)).expect("ops' certificate is taken");
    assert_eq!(ask(&mut o, b"flush_all\r\n", b"\r\n"), "OK\r\n");
    assert_eq!(server.stats()["cmd_flush"], flushes + 1);
}

#[test]
fn optional_client_certificates_leave_the_others_to_the_fallback_rule() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let server = Memcached::start();
    let ca_file = ca.cert.to_str().unwrap().to_owned();
    let (_relay, port) = start(
        &ca,
        dir.path(),
        &[&server],
        &[
            "--tls-client-ca",
            &ca_file,
            "--tls-client-auth",
            "optional",
            "--access",
            r#"{ identity = "*", read_only = true }"#,
            "--access",
            r#"{ identity = "writer" }"#,
        ],
    );
    let mut anonymous = connect(port, &ca.cert, None).expect("optional: taken without a certificate");
    let sets = server.stats()["cmd_set"];
    assert_eq!(ask(&mut anonymous, b"set k 0 0 1\r\nx\r\n", b"\r\n"), "CLIENT_ERROR write not allowed\r\n");
    assert_eq!(server.stats()["cmd_set"], sets);
    let mut writer = connect(port, &ca.cert, Some(&ca.issue_as(dir.path(), "writer", "/CN=writer", ""))).unwrap();
    assert_eq!(ask(&mut writer, b"set k 0 0 1\r\nx\r\n", b"\r\n"), "STORED\r\n");
    assert_eq!(ask(&mut anonymous, b"get k\r\n", b"END\r\n"), "VALUE k 0 1\r\nx\r\nEND\r\n");
}

#[test]
fn sighup_reads_the_certificates_again_without_dropping_connections() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let server = Memcached::start();
    let (relay, port) = start(&ca, dir.path(), &[&server], &[]);
    let served = |stream: &TlsStream| stream.conn.peer_certificates().unwrap()[0].as_ref().to_vec();
    let mut before = connect(port, &ca.cert, None).unwrap();
    let first = served(&before);
    // A renewed certificate in the same files.
    let renewed = ca.issue(dir.path(), "localhost", "DNS:localhost,IP:127.0.0.1");
    let renewed_der = CertificateDer::pem_file_iter(&renewed.cert).unwrap().next().unwrap().unwrap().as_ref().to_vec();
    assert_ne!(first, renewed_der);
    let stderr_before = relay.stderr().len();
    unsafe { libc::kill(relay.pid() as i32, libc::SIGHUP) };
    assert!(
        wait_for(Duration::from_secs(10), || relay.stderr()[stderr_before..].contains("TLS certificates read again")),
        "{}",
        relay.stderr()
    );
    let after = connect(port, &ca.cert, None).unwrap();
    assert_eq!(served(&after), renewed_der, "a connection after SIGHUP got the old certificate");
    // The connection from before goes on.
    assert_eq!(ask(&mut before, b"set k 0 0 1\r\ny\r\n", b"\r\n"), "STORED\r\n");
    // A broken file refuses the reload; the certificate in force stays.
    std::fs::write(&renewed.cert, "not a certificate").unwrap();
    let stderr_before = relay.stderr().len();
    unsafe { libc::kill(relay.pid() as i32, libc::SIGHUP) };
    assert!(wait_for(Duration::from_secs(10), || relay.stderr()[stderr_before..].contains("reload refused")));
    let again = connect(port, &ca.cert, None).unwrap();
    assert_eq!(served(&again), renewed_der);
}

#[test]
fn handshakes_that_do_not_finish_in_time_are_closed_and_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let server = Memcached::start();
    let (relay, port) =
        start(&ca, dir.path(), &[&server], &["--tls-handshake-timeout-ms", "500", "--max-clients", "2000"]);
    // 300 connections that never send a byte, and 300 that send half a ClientHello.
    let hello_start = [0x16u8, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03];
    let mut stalled: Vec<TcpStream> = (0..600)
        .map(|i| {
            let mut socket = TcpStream::connect(("127.0.0.1", port)).unwrap();
            if i % 2 == 1 {
                socket.write_all(&hello_start).unwrap();
            }
            socket
        })
        .collect();
    // A real client is served all along.
    let mut client = connect(port, &ca.cert, None).expect("a client beside the stalled handshakes");
    assert_eq!(ask(&mut client, b"set k 0 0 1\r\nz\r\n", b"\r\n"), "STORED\r\n");
    // Each stalled one is closed once its time is up (EOF or reset, within a bounded wait).
    for socket in &mut stalled {
        socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut byte = [0u8; 1];
        match socket.read(&mut byte) {
            Ok(0) | Err(_) => {}
            // An alert before the close is fine; the close must follow.
            Ok(_) => {
                let mut rest = Vec::new();
                let _ = socket.read_to_end(&mut rest);
            }
        }
    }
    assert!(denied(&relay, "tls_handshake") >= 600);
    assert_eq!(ask(&mut client, b"get k\r\n", b"END\r\n"), "VALUE k 0 1\r\nz\r\nEND\r\n");
    // The closes are counted just after the sockets close: on a busy machine the count may lag
    // the EOF the test saw by a moment.
    let settled = || stat_of(&mut relay.client(), "curr_connections") == "2";
    assert!(wait_for(Duration::from_secs(10), settled), "{}", stat_of(&mut relay.client(), "curr_connections"));
}

#[test]
fn client_certificate_options_are_checked_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let Issued { cert, key } = ca.issue(dir.path(), "localhost", "DNS:localhost");
    let run = |extra: &[&str]| {
        let mut args = vec!["--server", "127.0.0.1:1", "--check-config", "/dev/null"];
        args.extend_from_slice(extra);
        run_memrelay(&args)
    };
    let (cert, key, ca) = (cert.to_str().unwrap(), key.to_str().unwrap(), ca.cert.to_str().unwrap());
    let tls = ["--tls-listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key];
    let (status, said) = run(&[&tls[..], &["--tls-client-ca", ca]].concat());
    assert!(status.success(), "{said}");
    let (status, said) = run(&[&tls[..], &["--tls-client-ca", key]].concat());
    assert!(!status.success() && said.contains("--tls-client-ca"), "{said}");
    let (status, said) = run(&["--tls-client-ca", ca]);
    assert!(!status.success() && said.contains("needs --tls-listen"), "{said}");
    // Rules naming identities need a way to have one.
    let (status, said) = run(&["--access", r#"{ identity = "x" }"#]);
    assert!(!status.success() && said.contains("--tls-client-ca"), "{said}");
    let (status, said) = run(&[&tls[..], &["--tls-client-ca", ca, "--access", r#"{ identity = "x" }"#]].concat());
    assert!(status.success(), "{said}");
}

/// The fuzz target's seeds (real certificates) name what they should, and replay without a
/// panic; arbitrary bytes and the seeds with bytes flipped go through the same checks.
#[test]
fn client_certificate_fuzz_seeds_replay_and_name_their_identities() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/client_certificate");
    let seed = |name: &str| std::fs::read(root.join(name)).unwrap();
    assert_eq!(memrelay::certificate_identity(&seed("cn-tenant-a.der")).as_deref(), Some("tenant-a"));
    // No common name: the first DNS name of the subject alternative names.
    assert_eq!(memrelay::certificate_identity(&seed("san-only-ops.der")).as_deref(), Some("ops.example"));
    // A name no rule could name is no identity.
    assert_eq!(memrelay::certificate_identity(&seed("cn-two-words.der")), None);
    let mut seeds = Vec::new();
    for entry in std::fs::read_dir(&root).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        memrelay::fuzzing::client_certificate(&bytes);
        seeds.push(bytes);
    }
    // Each seed with bytes flipped, one position at a time (every 3rd byte), and truncated.
    for seed in &seeds {
        for at in (0..seed.len()).step_by(3) {
            let mut flipped = seed.clone();
            flipped[at] ^= 0x5a;
            memrelay::fuzzing::client_certificate(&flipped);
            memrelay::fuzzing::client_certificate(&seed[..at]);
        }
    }
}

/// Issue 32, item 5: with rules naming certificate identities, a client without an identity
/// (the plain listener; a certificate whose name no rule could name) gets no key unless a `*`
/// rule grants it, and nothing it asks reaches a server.
#[test]
fn a_client_without_an_identity_gets_no_key_unless_a_star_rule_grants_it() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let server = Memcached::start();
    server.set_raw("a:1", b"alice's");
    server.set_raw("b:1", b"bob's");
    let ca_file = ca.cert.to_str().unwrap().to_owned();
    let rules = [
        "--tls-client-ca",
        &ca_file,
        "--tls-client-auth",
        "required",
        "--access",
        r#"{ identity = "tenant-a", prefixes = ["a:"] }"#,
        "--access",
        r#"{ identity = "tenant-b", prefixes = ["b:"] }"#,
    ];
    let (relay, port) = start(&ca, dir.path(), &[&server], &rules);
    let (sets, gets) = (server.stats()["cmd_set"], server.stats()["cmd_get"]);
    let refused = "CLIENT_ERROR key not allowed\r\n";
    let mut plain = relay.client();
    assert_eq!(plain.line(b"get a:1 b:1\r\n"), refused);
    assert_eq!(plain.line(b"get b:1\r\n"), refused);
    assert_eq!(plain.line(b"set b:1 0 0 4\r\nmine\r\n"), refused);
    assert_eq!(plain.line(b"mg a:1 v\r\n"), refused);
    assert_eq!(plain.line(b"flush_all\r\n"), "CLIENT_ERROR flush_all not allowed\r\n");
    // Requests without a key are still answered.
    assert!(plain.line(b"version\r\n").starts_with("VERSION "));
    // A certificate whose name is not one word: no identity, the same answer.
    let spaced = ca.issue_as(dir.path(), "spaced", "/CN=tenant a", "");
    let mut odd = connect(port, &ca.cert, Some(&spaced)).expect("a CA-signed certificate is taken");
    assert_eq!(ask(&mut odd, b"get a:1\r\n", b"\r\n"), refused);
    assert_eq!(ask(&mut odd, b"set a:1 0 0 1\r\nx\r\n", b"\r\n"), refused);
    assert!(wait_for(Duration::from_secs(5), || relay.stderr().contains("names no usable identity")));
    assert_eq!(
        (server.stats()["cmd_set"], server.stats()["cmd_get"]),
        (sets, gets),
        "a refused request reached the server"
    );
    // A named identity still gets its own keys.
    let tenant = ca.issue_as(dir.path(), "tenant-a", "/CN=tenant-a", "");
    let mut a = connect(port, &ca.cert, Some(&tenant)).unwrap();
    assert_eq!(ask(&mut a, b"get a:1\r\n", b"END\r\n"), "VALUE a:1 0 7\r\nalice's\r\nEND\r\n");
    drop(relay);
    // A `*` rule grants what it says to every client without an identity.
    let star = [&rules[..], &["--access", r#"{ identity = "*", prefixes = ["pub:"], read_only = true }"#]].concat();
    server.set_raw("pub:1", b"news");
    let (relay, _) = start(&ca, dir.path(), &[&server], &star);
    let mut plain = relay.client();
    assert_eq!(plain.get_reply("get pub:1\r\n"), b"VALUE pub:1 0 4\r\nnews\r\nEND\r\n");
    assert_eq!(plain.line(b"get b:1\r\n"), refused);
    assert_eq!(plain.line(b"set pub:1 0 0 1\r\nx\r\n"), "CLIENT_ERROR write not allowed\r\n");
}

/// `--listen none`: the TLS listener alone, so no client can skip the certificate.
#[test]
fn the_plain_listener_can_be_switched_off() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let server = Memcached::start();
    let Issued { cert, key } = ca.issue(dir.path(), "localhost", "DNS:localhost,IP:127.0.0.1");
    let (plain_port, tls_port) = (free_port(), free_port());
    let (plain, tls) = (format!("127.0.0.1:{plain_port}"), format!("127.0.0.1:{tls_port}"));
    let ca_file = ca.cert.to_str().unwrap().to_owned();
    let args = [
        "--engine",
        "evented",
        "--server",
        &server.addr(),
        "--listen",
        &plain,
        "--listen",
        "none",
        "--tls-listen",
        &tls,
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--tls-client-ca",
        &ca_file,
    ];
    let mut child = std::process::Command::new(memrelay_binary())
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let ready = wait_listening(&mut child, tls_port, "memrelay");
    let served = matches!(ready, Ready::Listening) && {
        let client = ca.issue_as(dir.path(), "client", "/CN=client", "");
        connect(tls_port, &ca.cert, Some(&client)).is_ok()
    };
    let plain_open = TcpStream::connect(&plain).is_ok();
    kill_and_reap(&mut child);
    assert!(served, "the TLS listener did not serve");
    assert!(!plain_open, "the plain listener is on");
}
