//! TLS from clients (`--tls-listen`, evented engine) against real memcached, with certificates
//! the test makes with the `openssl` command (the test kit's `make_certificate`): `openssl
//! s_client` and a rustls client as real TLS clients, the plain listener beside the TLS one, logging in over TLS, the minimum version, a
//! client that does not speak TLS, and bad certificate files refused at start.

// TLS is the evented engine's alone: no per-engine suite here.

use std::io::{ErrorKind, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use crate::common::certs::{read_until, rustls_client, start_tls_relay};
use crate::common::*;

/// memrelay with a plain and a TLS listener; returns it and the TLS port.
fn start_tls(dir: &Path, servers: &[&Memcached], extra: &[&str]) -> (Memrelay, u16) {
    let (cert, key) = make_certificate(dir);
    start_tls_relay(&cert, &key, servers, extra)
}

/// What `openssl s_client` did: whether it exited with success, and what it printed on stdout
/// (memrelay's replies) and stderr (its account of the handshake).
struct SClient {
    success: bool,
    out: String,
    err: String,
}

/// Sends `input` through `openssl s_client` (verifying memrelay's certificate against it) and
/// returns what it did; `input` should end with `quit`, which closes the connection.
///
/// s_client may exit before it has taken all of `input`: a refused handshake ends it at once. The
/// write then fails (a broken pipe), an outcome like any other: its exit status and what it
/// printed say what happened. A child still running after 10 s is killed (and counts as failed).
fn s_client(port: u16, ca: &Path, input: &[u8], extra: &[&str]) -> SClient {
    let mut child = Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}"), "-quiet", "-ign_eof", "-verify_return_error"])
        .arg("-CAfile")
        .arg(ca)
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl s_client");
    // Read both outputs beside the write, so that neither a full pipe nor a child that never
    // exits holds the test up.
    let read_all = |mut from: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut text = Vec::new();
            let _ = from.read_to_end(&mut text);
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let out = read_all(Box::new(child.stdout.take().unwrap()));
    let err = read_all(Box::new(child.stderr.take().unwrap()));
    let mut stdin = child.stdin.take().unwrap();
    match stdin.write_all(input) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::BrokenPipe => {} // it exited first: judged below
        Err(e) => panic!("writing to openssl s_client: {e}"),
    }
    drop(stdin);
    if !wait_for(Duration::from_secs(10), || child.try_wait().unwrap().is_some()) {
        kill_and_reap(&mut child);
    }
    let success = child.wait().map(|s| s.success()).unwrap_or(false);
    SClient { success, out: out.join().unwrap(), err: err.join().unwrap() }
}

#[test]
fn openssl_s_client_and_a_rustls_client_speak_to_memcached_through_tls() {
    let dir = tempfile::tempdir().unwrap();
    let server = Memcached::start();
    let (relay, port) = start_tls(dir.path(), &[&server], &[]);
    let ca = dir.path().join("ca.pem");
    let before = server.stats()["cmd_set"];
    let run = s_client(port, &ca, b"set a 0 0 2\r\nhi\r\nget a\r\nversion\r\nquit\r\n", &[]);
    assert!(run.success, "s_client failed: {}{}", run.out, run.err);
    assert_eq!(run.out, "STORED\r\nVALUE a 0 2\r\nhi\r\nEND\r\nVERSION 1.6.0\r\n");
    assert_eq!(server.stats()["cmd_set"], before + 1);
    assert_eq!(server.get_raw("a").as_deref(), Some(&b"hi"[..]));
    // A rustls client pipelining 2,000 requests and a large value, over TLS 1.3.
    let mut tls = rustls_client(port, &ca);
    let value = vec![b'x'; 300_000];
    let mut request = format!("set big 0 0 {}\r\n", value.len()).into_bytes();
    request.extend_from_slice(&value);
    request.extend_from_slice(b"\r\n");
    for i in 0..2000 {
        request.extend_from_slice(format!("mg k{i} v\r\n").as_bytes());
    }
    request.extend_from_slice(b"get big\r\n");
    tls.write_all(&request).unwrap();
    let reply = read_until(&mut tls, b"END\r\n");
    assert!(reply.starts_with(b"STORED\r\n"), "{}", show(&reply[..40.min(reply.len())]));
    assert_eq!(reply.windows(4).filter(|w| w == b"EN\r\n").count(), 2000);
    assert!(reply.ends_with(&[&value[..], b"\r\nEND\r\n"].concat()));
    assert_eq!(tls.conn.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_3));
    // The plain listener beside it.
    assert_eq!(relay.client().get("a"), vec![("a".to_string(), b"hi".to_vec())]);
}

#[test]
fn logging_in_and_access_rules_work_the_same_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    std::fs::write(&users, "alice:secret\n").unwrap();
    let server = Memcached::start();
    let rule = r#"{ identity = "alice", prefixes = ["a:"] }"#;
    let (_relay, port) = start_tls(dir.path(), &[&server], &["--auth-file", users.to_str().unwrap(), "--access", rule]);
    let input = b"get a:1\r\nset auth 0 0 12\r\nalice secret\r\nset a:1 0 0 1\r\nx\r\nget b:1\r\nquit\r\n";
    let run = s_client(port, &dir.path().join("ca.pem"), input, &[]);
    assert!(run.success, "{}{}", run.out, run.err);
    assert_eq!(run.out, "CLIENT_ERROR unauthenticated\r\nSTORED\r\nSTORED\r\nCLIENT_ERROR key not allowed\r\n");
    assert_eq!(server.get_raw("a:1").as_deref(), Some(&b"x"[..]));
}

#[test]
fn the_minimum_version_and_clients_without_tls_are_refused_without_harm() {
    let dir = tempfile::tempdir().unwrap();
    let server = Memcached::start();
    let (relay, port) = start_tls(dir.path(), &[&server], &["--tls-min-version", "1.3"]);
    let ca = dir.path().join("ca.pem");
    // A TLS 1.2 client is refused in the handshake, with TLS's own alert for it: s_client fails
    // (it may exit before it has taken its input), and memrelay answers nothing.
    let run = s_client(port, &ca, b"version\r\nquit\r\n", &["-tls1_2"]);
    assert!(
        !run.success && run.out.is_empty() && run.err.contains("alert protocol version"),
        "a TLS 1.2 client with --tls-min-version 1.3: exit success {}, replies {:?}, stderr {}",
        run.success,
        run.out,
        run.err
    );
    // Plain text on the TLS port: the connection is closed, nothing is sent to a server.
    let before = server.stats()["cmd_get"];
    let mut plain = Client::connect(&format!("127.0.0.1:{port}"));
    plain.send(b"get a\r\n");
    assert!(plain.closed_within(Duration::from_secs(5)).is_some(), "plain text on the TLS port stayed open");
    assert_eq!(server.stats()["cmd_get"], before);
    // Others are served all along.
    let run = s_client(port, &ca, b"version\r\nquit\r\n", &[]);
    assert!(run.success && run.out == "VERSION 1.6.0\r\n", "{}{}", run.out, run.err);
    assert_eq!(relay.client().line(b"version\r\n"), "VERSION 1.6.0\r\n");
}

#[test]
fn bad_certificate_files_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = make_certificate(dir.path());
    let run = |cert: &Path, key: &Path, engine: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_memrelay"))
            .args([
                "--server",
                "127.0.0.1:1",
                "--engine",
                engine,
                "--tls-listen",
                "127.0.0.1:0",
                "--check-config",
                "/dev/null",
            ])
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    assert_eq!(run(&cert, &key, "evented").0, Some(0));
    let (code, said) = run(&key, &key, "evented");
    assert!(code == Some(2) && said.contains("--tls-cert") && said.lines().count() == 1, "{said}");
    let (code, said) = run(&cert, &cert, "evented");
    assert!(code == Some(2) && said.contains("--tls-key"), "{said}");
    let (code, said) = run(&cert, &key, "pool");
    assert!(code == Some(2) && said.contains("--engine evented"), "{said}");
}
