//! TLS from memrelay to its servers (`--server-tls-ca`, `--server-tls-cert`, `--server-tls-key`)
//! against real `memcached -Z`, with certificates the test makes with the `openssl` command:
//! values reach TLS servers (read back on each server over TLS), certificates from another CA or
//! for another name are refused (SERVER_ERROR, a log line, no hang), as is a server that does not
//! speak TLS; client certificates for servers that require one; a restarted server probed and
//! repaired over TLS; TLS from clients and to servers at once; bad files refused at start.
//!
//! Every test that runs requests is a function of the engine's name and runs once per engine
//! (see `common`).

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::certs::{read_until, rustls_connect};
use crate::common::*;

engine_matrix!(
    values_reach_two_tls_servers,
    another_ca_another_name_or_no_tls_is_a_server_failure,
    a_server_that_requires_a_client_certificate,
    a_restarted_server_is_probed_and_repaired_over_tls,
    a_pool_of_tls_servers_beside_a_plain_default_pool,
);

/// A CA, and a server certificate it signed for `localhost` and 127.0.0.1.
fn certificates(dir: &Path) -> (Ca, Issued) {
    let ca = Ca::new(dir, "ca");
    let server = ca.issue(dir, "server", "DNS:localhost,IP:127.0.0.1");
    (ca, server)
}

/// memcached speaking TLS only (`-Z`) with `cert`; with `client_ca`, it requires a client
/// certificate signed by that CA (`ssl_verify_mode=2`).
fn tls_memcached(cert: &Issued, client_ca: Option<&Path>) -> Memcached {
    let mut options = format!("ssl_chain_cert={},ssl_key={}", cert.cert.display(), cert.key.display());
    if let Some(ca) = client_ca {
        options.push_str(&format!(",ssl_ca_cert={},ssl_verify_mode=2", ca.display()));
    }
    Memcached::start_with(&["-Z", "-o", &options])
}

/// Sends `request` to the TLS server on `port` directly (by its IP address, trusting `ca`) and
/// reads the reply up to `end`.
fn direct(port: u16, ca: &Path, identity: Option<&Issued>, request: &[u8], end: &[u8]) -> Vec<u8> {
    let mut tls = rustls_connect(port, ca, "127.0.0.1", identity);
    tls.write_all(request).unwrap();
    read_until(&mut tls, end)
}

fn direct_get(port: u16, ca: &Path, identity: Option<&Issued>, key: &str) -> Option<Vec<u8>> {
    let reply = direct(port, ca, identity, format!("get {key}\r\n").as_bytes(), b"END\r\n");
    parse_values(&reply).into_iter().next().map(|(_, value)| value)
}

fn direct_stats(port: u16, ca: &Path) -> HashMap<String, u64> {
    parse_stats(&String::from_utf8_lossy(&direct(port, ca, None, b"stats\r\n", b"END\r\n")))
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A plain client -> memrelay -> two TLS servers, one named by DNS name and one by IP address:
/// set, get, multi-get and delete work, and every value is on both servers (read back directly).
fn values_reach_two_tls_servers(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert) = certificates(dir.path());
    let (a, b) = (tls_memcached(&cert, None), tls_memcached(&cert, None));
    let servers = [format!("localhost:{}", a.port), b.addr()];
    let relay = Memrelay::start_addrs(engine, &servers, &["--server-tls-ca", path(&ca.cert)]);
    let mut client = relay.client();
    let keys: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    for key in &keys {
        assert_eq!(client.set(key, format!("value of {key}").as_bytes()), "STORED\r\n");
    }
    let got = client.get(&keys.join(" "));
    assert_eq!(got.len(), keys.len(), "{got:?}");
    for (key, value) in &got {
        assert_eq!(value, format!("value of {key}").as_bytes());
    }
    // A value larger than a TLS record (16 KiB) both ways.
    let big = vec![b'x'; 200_000];
    assert_eq!(client.set("big", &big), "STORED\r\n");
    assert_eq!(client.get("big"), vec![("big".to_string(), big.clone())]);
    assert_eq!(client.line(b"delete k0\r\n"), "DELETED\r\n");
    assert_eq!(client.get("k0"), vec![]);
    for server in [&a, &b] {
        assert_eq!(direct_get(server.port, &ca.cert, None, "k7").as_deref(), Some(&b"value of k7"[..]));
        assert_eq!(direct_get(server.port, &ca.cert, None, "big"), Some(big.clone()));
        assert_eq!(direct_get(server.port, &ca.cert, None, "k0"), None);
        let stats = direct_stats(server.port, &ca.cert);
        assert_eq!(stats["cmd_set"], 21, "{stats:?}");
        assert_eq!(stats["delete_hits"], 1, "{stats:?}");
    }
    let stderr = relay.stderr();
    assert!(!stderr.contains("TLS"), "{stderr}");
}

/// Requests to `server` (alone behind memrelay) answer SERVER_ERROR in well under the client's
/// patience, again and again; memrelay logs `reason` and stays up.
fn refused(engine: &str, server: &str, ca: &Path, reason: &str) {
    let args = ["--server-tls-ca", path(ca), "--server-timeout-ms", "500"];
    // memrelay may try the server (and log) before the first request: the log's seconds count
    // from its start.
    let launched = Instant::now();
    let relay = Memrelay::start_addrs(engine, &[server.to_string()], &args);
    let mut client = relay.client();
    client.set_read_timeout(Duration::from_secs(5));
    let started = Instant::now();
    for i in 0..6 {
        let set = client.set(&format!("k{i}"), b"v");
        assert!(set.starts_with("SERVER_ERROR "), "{server}: {set}");
        let get = String::from_utf8(client.get_reply(&format!("get k{i}\r\n"))).unwrap();
        assert!(get.starts_with("SERVER_ERROR "), "{server}: {get}");
    }
    // The first failures within the server timeout each; then the server is down: at once.
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());
    assert_eq!(client.line(b"version\r\n"), "VERSION 1.6.0\r\n");
    let logged = |what: &str| relay.stderr().lines().any(|l| l.contains(server) && l.contains(what));
    assert!(wait_for(Duration::from_secs(3), || logged(reason)), "{server}: no `{reason}` in: {}", relay.stderr());
    assert!(logged("is down after"), "{}", relay.stderr());
    // Counted as the server's failures (the running totals lag by up to a window).
    let counted = wait_for(Duration::from_secs(3), || stat_of(&mut client, "server_0_failures") == "12");
    assert!(counted, "server_0_failures {}", stat_of(&mut client, "server_0_failures"));
    // Rate-limited: at most a line a second (and one more for the second it began in, one for
    // the part second the floor leaves out); the line saying the server is down is not one.
    let seconds = launched.elapsed().as_secs() + 2;
    let tls_lines = relay.stderr().lines().filter(|l| l.contains("TLS") && !l.contains("is down after")).count() as u64;
    assert!(tls_lines <= seconds, "{tls_lines} TLS lines in {seconds} s: {}", relay.stderr());
}

/// A certificate signed by another CA, one whose names are not the host memrelay was given, a
/// server that does not speak TLS, and one that never answers the handshake: each a server
/// failure with its reason in the log.
fn another_ca_another_name_or_no_tls_is_a_server_failure(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (ca, _) = certificates(dir.path());
    let other_ca = Ca::new(dir.path(), "other-ca");
    let strange = tls_memcached(&other_ca.issue(dir.path(), "strange", "DNS:localhost,IP:127.0.0.1"), None);
    refused(engine, &strange.addr(), &ca.cert, "UnknownIssuer");
    let elsewhere = tls_memcached(&ca.issue(dir.path(), "elsewhere", "DNS:cache.example,IP:10.1.2.3"), None);
    refused(engine, &elsewhere.addr(), &ca.cert, "not valid for name");
    refused(engine, &format!("localhost:{}", elsewhere.port), &ca.cert, "not valid for name");
    let plain = Memcached::start();
    refused(engine, &plain.addr(), &ca.cert, "does not speak TLS");
    // A server that takes the connection and never answers the handshake: the server timeout.
    let stopped = tls_memcached(&ca.issue(dir.path(), "stopped", "DNS:localhost,IP:127.0.0.1"), None);
    stopped.pause();
    refused(engine, &stopped.addr(), &ca.cert, "TLS handshake did not finish: server timeout");
    // A refused connection is no TLS matter: SERVER_ERROR, and nothing about TLS in the log.
    let dead = format!("127.0.0.1:{}", free_port());
    let relay = Memrelay::start_addrs(engine, &[dead], &["--server-tls-ca", path(&ca.cert)]);
    let reply = String::from_utf8(relay.client().get_reply("get a\r\n")).unwrap();
    assert!(reply.starts_with("SERVER_ERROR server unavailable"), "{reply}");
    assert!(!relay.stderr().contains("TLS"), "{}", relay.stderr());
}

/// A server that requires a client certificate: served with --server-tls-cert/--server-tls-key,
/// SERVER_ERROR (not a hang) without.
fn a_server_that_requires_a_client_certificate(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert) = certificates(dir.path());
    let client_cert = ca.issue(dir.path(), "memrelay", "DNS:memrelay");
    let server = tls_memcached(&cert, Some(&ca.cert));
    let args = [
        "--server-tls-ca",
        path(&ca.cert),
        "--server-tls-cert",
        path(&client_cert.cert),
        "--server-tls-key",
        path(&client_cert.key),
    ];
    let relay = Memrelay::start(engine, &[&server], &args);
    let mut client = relay.client();
    assert_eq!(client.set("a", b"with a certificate"), "STORED\r\n", "{}", relay.stderr());
    assert_eq!(client.get("a"), vec![("a".to_string(), b"with a certificate".to_vec())]);
    let stored = direct_get(server.port, &ca.cert, Some(&client_cert), "a");
    assert_eq!(stored.as_deref(), Some(&b"with a certificate"[..]));
    drop(relay);
    refused(engine, &server.addr(), &ca.cert, "CertificateRequired");
}

/// A server that was killed and restarted (empty) under `--write-policy majority`: the health
/// probe sees it back and restarted, and the repair thread brings it up to date (its missed
/// writes and a resync from `lru_crawler metadump`), all over TLS.
fn a_restarted_server_is_probed_and_repaired_over_tls(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert) = certificates(dir.path());
    let mut servers: Vec<Memcached> = (0..3).map(|_| tls_memcached(&cert, None)).collect();
    let fast = ["--restart-check-ms", "100", "--probe-first-ms", "50", "--probe-max-ms", "200"];
    let mut args = vec!["--server-tls-ca", path(&ca.cert), "--write-policy", "majority"];
    args.extend_from_slice(&fast);
    let relay = Memrelay::start(engine, &servers.iter().collect::<Vec<_>>(), &args);
    let mut client = relay.client();
    const KEYS: usize = 50;
    for i in 0..KEYS {
        assert_eq!(client.set(&format!("old{i}"), b"v1"), "STORED\r\n");
    }
    servers[1].kill();
    for i in 0..KEYS {
        assert_eq!(client.set(&format!("old{i}"), b"v2"), "STORED\r\n", "overwrite {i}");
        assert_eq!(client.set(&format!("new{i}"), b"n"), "STORED\r\n", "new {i}");
    }
    servers[1].restart();
    let keys: Vec<String> = (0..KEYS).flat_map(|i| [format!("old{i}"), format!("new{i}")]).collect();
    let request = format!("get {}\r\n", keys.join(" "));
    let converged = wait_for(Duration::from_secs(20), || {
        servers.iter().all(|server| {
            let values = parse_values(&direct(server.port, &ca.cert, None, request.as_bytes(), b"END\r\n"));
            values.len() == keys.len()
                && values.iter().all(|(key, value)| value == if key.starts_with("old") { &b"v2"[..] } else { b"n" })
        })
    });
    assert!(converged, "not repaired; memrelay said: {}", relay.stderr());
    let mut stats = relay.client();
    assert!(wait_for(Duration::from_secs(5), || stat_of(&mut stats, "server_1_repairing") == "0"));
    // The missed writes alone converge these keys; the restart (a new pid) is noticed on its own
    // schedule and brings the resync after them.
    assert!(wait_for(Duration::from_secs(10), || relay.stderr().contains("resynced")), "{}", relay.stderr());
}

/// TLS from a client and to the servers at once (evented: the TLS listener is its alone).
#[test]
fn tls_from_clients_and_to_servers_together() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert) = certificates(dir.path());
    let (a, b) = (tls_memcached(&cert, None), tls_memcached(&cert, None));
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let args = [
        "--tls-listen",
        &listen,
        "--tls-cert",
        path(&cert.cert),
        "--tls-key",
        path(&cert.key),
        "--server-tls-ca",
        path(&ca.cert),
    ];
    let _relay = Memrelay::start("evented", &[&a, &b], &args);
    let mut tls = rustls_connect(port, &ca.cert, "localhost", None);
    let mut request = Vec::new();
    for i in 0..500 {
        request.extend_from_slice(format!("set k{i} 0 0 {}\r\nvalue {i}\r\n", format!("value {i}").len()).as_bytes());
    }
    request.extend_from_slice(b"get k1 k499\r\n");
    tls.write_all(&request).unwrap();
    let reply = read_until(&mut tls, b"END\r\n");
    assert_eq!(reply.windows(8).filter(|w| w == b"STORED\r\n").count(), 500);
    assert!(reply.ends_with(b"VALUE k1 0 7\r\nvalue 1\r\nVALUE k499 0 9\r\nvalue 499\r\nEND\r\n"), "{}", show(&reply));
    for server in [&a, &b] {
        assert_eq!(direct_get(server.port, &ca.cert, None, "k250").as_deref(), Some(&b"value 250"[..]));
    }
}

/// Bad files and combinations are refused at start, with one line naming the option and file;
/// the options read from a configuration file too.
#[test]
fn bad_options_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert) = certificates(dir.path());
    let check = |extra: &[&str]| {
        let mut args = vec!["--server", "127.0.0.1:1", "--check-config", "/dev/null"];
        args.extend_from_slice(extra);
        let (status, stderr) = run_memrelay(&args);
        (status.code(), stderr)
    };
    let (ca_path, cert_path, key_path) = (path(&ca.cert), path(&cert.cert), path(&cert.key));
    assert_eq!(check(&["--server-tls-ca", ca_path]).0, Some(0));
    assert_eq!(
        check(&["--server-tls-ca", ca_path, "--server-tls-cert", cert_path, "--server-tls-key", key_path]).0,
        Some(0)
    );
    let refused = |extra: &[&str], says: &[&str]| {
        let (code, stderr) = check(extra);
        assert_eq!(code, Some(2), "{extra:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{extra:?}: {stderr}");
        for part in says {
            assert!(stderr.contains(part), "{extra:?}: `{part}` not in {stderr}");
        }
    };
    let missing = dir.path().join("missing.pem");
    refused(&["--server-tls-ca", path(&missing)], &["--server-tls-ca", path(&missing)]);
    // A key is no CA certificate.
    refused(&["--server-tls-ca", key_path], &["--server-tls-ca", key_path, "no certificate"]);
    refused(&["--server-tls-ca", ca_path, "--server-tls-cert", cert_path], &["--server-tls-key"]);
    refused(&["--server-tls-ca", ca_path, "--server-tls-key", key_path], &["--server-tls-cert"]);
    refused(
        &["--server-tls-ca", ca_path, "--server-tls-cert", key_path, "--server-tls-key", key_path],
        &["--server-tls-cert", key_path],
    );
    refused(
        &["--server-tls-ca", ca_path, "--server-tls-cert", cert_path, "--server-tls-key", cert_path],
        &["--server-tls-key", cert_path],
    );
    // A key that is not the certificate's.
    let other = ca.issue(dir.path(), "other", "DNS:other");
    refused(
        &["--server-tls-ca", ca_path, "--server-tls-cert", cert_path, "--server-tls-key", path(&other.key)],
        &["--server-tls-cert", "--server-tls-key"],
    );
    refused(&["--server-tls-cert", cert_path, "--server-tls-key", key_path], &["--server-tls-ca"]);
    refused(&["--server-tls-ca", ca_path, "--server-tls-min-version", "11"], &["--server-tls-min-version"]);
    // In a configuration file, as the other options are.
    let file = dir.path().join("memrelay.toml");
    let text = format!(
        "servers = [\"127.0.0.1:1\"]\nserver_tls_ca = \"{ca_path}\"\nserver_tls_cert = \"{cert_path}\"\n\
         server_tls_key = \"{key_path}\"\nserver_tls_min_version = \"13\"\n"
    );
    std::fs::write(&file, text).unwrap();
    let (status, stderr) = run_memrelay(&["--check-config", path(&file)]);
    assert_eq!(status.code(), Some(0), "{stderr}");
    std::fs::write(&file, format!("servers = [\"127.0.0.1:1\"]\nserver_tls_ca = \"{}\"\n", path(&missing))).unwrap();
    let (status, stderr) = run_memrelay(&["--check-config", path(&file)]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--server-tls-ca") && stderr.contains(path(&missing)), "{stderr}");
}

/// Pools (issue 44): the default pool is one plain memcached, the `secure` pool one `memcached
/// -Z` with its own `server_tls_ca`; keys routed to `secure` are stored over TLS (read back on the
/// server over TLS), the others in plain text (read back directly), and a multi-get spans both.
fn a_pool_of_tls_servers_beside_a_plain_default_pool(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert) = certificates(dir.path());
    let (plain, secure) = (Memcached::start(), tls_memcached(&cert, None));
    let config = dir.path().join("memrelay.toml");
    std::fs::write(
        &config,
        format!(
            "servers = [\"{}\"]\n[pools.secure]\nservers = [\"{}\"]\nserver_tls_ca = \"{}\"\n\n\
             [[routes]]\nprefix = \"s:\"\npool = \"secure\"\n",
            plain.addr(),
            secure.addr(),
            path(&ca.cert)
        ),
    )
    .unwrap();
    let relay = Memrelay::start_addrs(engine, &[], &["--config", path(&config)]);
    let mut client = relay.client();
    assert_eq!(client.set("s:1", b"tls"), "STORED\r\n", "{}", relay.stderr());
    assert_eq!(client.set("p:1", b"plain"), "STORED\r\n", "{}", relay.stderr());
    assert_eq!(direct_get(secure.port, &ca.cert, None, "s:1").as_deref(), Some(&b"tls"[..]));
    assert_eq!(plain.get_raw("p:1").as_deref(), Some(&b"plain"[..]));
    assert!(plain.get_raw("s:1").is_none());
    let got = client.get("p:1 s:1");
    assert_eq!(got, [("p:1".to_string(), b"plain".to_vec()), ("s:1".to_string(), b"tls".to_vec())]);
}

#[test]
fn a_pools_tls_files_are_read_at_start_and_name_the_pool() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("memrelay.toml");
    std::fs::write(
        &config,
        "servers = [\"127.0.0.1:1\"]\n[pools.secure]\nservers = [\"127.0.0.1:2\"]\nserver_tls_ca = \"/nonexistent/ca.pem\"\n",
    )
    .unwrap();
    let (status, stderr) = run_memrelay(&["--check-config", path(&config)]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("pool `secure`") && stderr.contains("server_tls_ca"), "{stderr}");
}
