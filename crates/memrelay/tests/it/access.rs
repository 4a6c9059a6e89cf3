//! Access control against real memcached, once per engine: logging in with memcached's ASCII
//! authentication (answers compared byte for byte with a real `memcached -Y` given the same auth
//! file), tenants held to their key prefixes (text, meta and base64 keys, multi-gets), read-only
//! identities, admin commands (compared with a real `memcached -F`), the request limits, and a
//! SIGHUP that reads the auth file again. Every refusal is checked on the servers' own counters:
//! nothing refused reaches a server.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::*;

engine_matrix!(
    logging_in_is_answered_as_memcached_y_answers_and_nothing_reaches_the_server,
    a_tenant_cannot_reach_another_tenants_keys,
    a_read_only_identity_cannot_write,
    admin_commands_need_a_grant_and_are_refused_as_memcached_f_refuses_flush_all,
    limits_refuse_large_multigets_and_replies,
    sighup_reads_the_auth_file_and_rules_again,
);

const USERS: &str = "alice:secret\nbob:two words\ncarol:ro\nroot:toor\n";

/// The server counters a request that reached it would move (memcached's own names).
const COUNTERS: &[&str] = &[
    "cmd_get",
    "cmd_set",
    "cmd_flush",
    "cmd_touch",
    "get_hits",
    "get_misses",
    "delete_hits",
    "delete_misses",
    "incr_hits",
    "incr_misses",
    "decr_hits",
    "decr_misses",
    "cas_hits",
    "cas_misses",
    "touch_hits",
    "touch_misses",
    "curr_items",
];

fn counters(server: &Memcached) -> Vec<(String, u64)> {
    let stats = server.stats();
    COUNTERS.iter().map(|&name| (name.to_string(), stats.get(name).copied().unwrap_or(0))).collect()
}

fn write_users(dir: &Path, text: &str) -> String {
    let path = dir.join("users");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// Logs in as `user`; asserts memrelay said STORED.
fn log_in(client: &mut Client, user: &str, password: &str) {
    let token = format!("{user} {password}");
    let request = format!("set auth 0 0 {}\r\n{token}\r\n", token.len());
    assert_eq!(client.line(request.as_bytes()), "STORED\r\n", "login as {user}");
}

/// memrelay's `stats` as numbers.
fn relay_stats(relay: &Memrelay) -> HashMap<String, u64> {
    let reply = relay.client().request(b"stats\r\n", b"END\r\n");
    parse_stats(&String::from_utf8(reply).unwrap())
}

/// A logged-in client of memrelay (`stats` needs one under authentication).
fn relay_stats_as(relay: &Memrelay, user: &str, password: &str) -> HashMap<String, u64> {
    let mut client = relay.client();
    log_in(&mut client, user, password);
    let reply = client.request(b"stats\r\n", b"END\r\n");
    parse_stats(&String::from_utf8(reply).unwrap())
}

fn logging_in_is_answered_as_memcached_y_answers_and_nothing_reaches_the_server(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let users = write_users(dir.path(), USERS);
    let reference = Memcached::start_with(&["-Y", &users]);
    let server = Memcached::start();
    let relay = Memrelay::start(engine, &[&server], &["--auth-file", &users]);
    let before = counters(&server);
    // One exchange at a time: memcached 1.6.18 answers only the first of requests pipelined
    // before a login.
    let script: &[&[u8]] = &[
        b"get a\r\n",
        b"get a b c\r\n",
        b"mg a v\r\n",
        b"delete a\r\n",
        b"flush_all\r\n",
        b"stats\r\n",
        b"version\r\n",
        b"quit\r\n",
        b"\r\n",
        b"set a 0 0\r\n",
        b"set x 0 0 12\r\nalice secreT\r\n",
        b"set x 0 0 5\r\nalice\r\n",
        b"set x 0 0 11\r\nalicesecret\r\n",
        b"set x 0 0 2\r\nab\n\n",
        b"set x 0 0 12\r\nnobody nopas\r\n",
        b"set x 0 0 12 noreply\r\nalice secret\r\n",
        // Logged in: ordinary requests from here on.
        b"set k 5 0 3\r\nabc\r\n",
        b"get k\r\n",
    ];
    let (mut theirs, mut ours) = (reference.client(), relay.client());
    for (i, request) in script.iter().enumerate() {
        if i == script.len() - 2 {
            // Nothing before the login reached the server.
            assert_eq!(counters(&server), before, "a request before the login reached the server");
        }
        let expected = if request.starts_with(b"get") {
            theirs.get_reply(std::str::from_utf8(request).unwrap())
        } else {
            theirs.request(request, b"\r\n")
        };
        let got = if request.starts_with(b"get") {
            ours.get_reply(std::str::from_utf8(request).unwrap())
        } else {
            ours.request(request, b"\r\n")
        };
        assert_eq!(show(&got), show(&expected), "request {:?}", show(request));
    }
    assert_eq!(show(&ours.get_reply("get k\r\n")), show(b"VALUE k 5 3\r\nabc\r\nEND\r\n"));
    // A login with spaces in the password, and memcached's stats names for logins.
    log_in(&mut relay.client(), "bob", "two words");
    let stats = relay_stats_as(&relay, "alice", "secret");
    let refused_logins = 5;
    assert_eq!(stats["auth_errors"], refused_logins);
    assert_eq!(stats["auth_cmds"], refused_logins + 3);
    assert_eq!(stats["access_denied_unauthenticated"], 10);
    // A junk line without a newline closes the connection, as in memcached.
    let mut junk = relay.client();
    junk.send(&[b'x'; 4096]);
    assert!(junk.closed_within(Duration::from_secs(5)).is_some(), "junk did not close the connection");
    assert!(relay.stderr().contains("access denied (unauthenticated)"), "{}", relay.stderr());
}

fn a_tenant_cannot_reach_another_tenants_keys(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let users = write_users(dir.path(), USERS);
    let servers = [Memcached::start(), Memcached::start()];
    // The rules in a configuration file, as operators write them.
    let config = dir.path().join("memrelay.toml");
    let metrics_port = free_port();
    std::fs::write(
        &config,
        format!(
            "auth_file = \"{users}\"\nmetrics_listen = \"127.0.0.1:{metrics_port}\"\n\n\
             [[access]]\nidentity = \"alice\"\nprefixes = [\"a:\"]\n\n\
             [[access]]\nidentity = \"bob\"\nprefixes = [\"b:\", \"shared:\"]\n"
        ),
    )
    .unwrap();
    let relay =
        Memrelay::start(engine, &[&servers[0], &servers[1]], &["--config", config.to_str().unwrap(), "--sharded"]);
    for server in &servers {
        server.set_raw("b:secret", b"bob's");
    }
    let mut alice = relay.client();
    log_in(&mut alice, "alice", "secret");
    // Her own keys work (and reach the servers).
    assert_eq!(alice.set("a:1", b"mine"), "STORED\r\n");
    assert_eq!(alice.get("a:1 a:2"), vec![("a:1".to_string(), b"mine".to_vec())]);
    let before: Vec<_> = servers.iter().map(counters).collect();
    let refused = "CLIENT_ERROR key not allowed\r\n";
    let attempts: &[&[u8]] = &[
        b"get b:secret\r\n",
        b"gets b:secret\r\n",
        b"get a:1 b:secret\r\n",
        b"gets a:1 a:2 b:secret\r\n",
        b"gat 0 b:secret\r\n",
        b"set b:secret 0 0 4\r\nmine\r\n",
        b"add b:new 0 0 1\r\nx\r\n",
        b"append b:secret 0 0 1\r\nx\r\n",
        b"cas b:secret 0 0 1 1\r\nx\r\n",
        b"delete b:secret\r\n",
        b"incr b:secret 1\r\n",
        b"touch b:secret 0\r\n",
        b"mg b:secret v\r\n",
        b"mg b:secret v q k O1\r\n",
        b"ms b:secret 4\r\nmine\r\n",
        b"md b:secret\r\n",
        b"ma b:secret\r\n",
        b"me b:secret\r\n",
        // "b:secret" in base64.
        b"mg YjpzZWNyZXQ= b v\r\n",
        b"md YjpzZWNyZXQ= b\r\n",
    ];
    for request in attempts {
        assert_eq!(alice.line(request), refused, "{}", show(request));
    }
    // noreply: refused without a word, as memcached answers nothing to a noreply request.
    alice.send(b"set b:secret 0 0 4 noreply\r\nmine\r\ndelete b:secret noreply\r\n");
    assert_eq!(alice.line(b"mn\r\n"), "MN\r\n");
    for (server, before) in servers.iter().zip(&before) {
        assert_eq!(&counters(server), before, "a refused request reached {}", server.addr());
        assert_eq!(server.get_raw("b:secret").as_deref(), Some(&b"bob's"[..]));
    }
    // The same key through bob, by its base64 form too.
    let mut bob = relay.client();
    log_in(&mut bob, "bob", "two words");
    assert_eq!(bob.get("b:secret"), vec![("b:secret".to_string(), b"bob's".to_vec())]);
    let head = bob.line(b"mg YjpzZWNyZXQ= b v\r\n");
    assert!(head.starts_with("VA 5"), "{head}");
    assert_eq!(bob.read_line(), b"bob's\r\n");
    assert_eq!(bob.line(b"get a:1\r\n"), refused);
    let refusals = attempts.len() as u64 + 2 + 1;
    assert_eq!(relay_stats_as(&relay, "bob", "two words")["access_denied_key_prefix"], refusals);
    let metrics = scrape(metrics_port, None).1;
    assert!(
        metrics.contains(&format!("memrelay_access_denied_total{{reason=\"key_prefix\"}} {refusals}")),
        "{metrics}"
    );
}

fn a_read_only_identity_cannot_write(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let users = write_users(dir.path(), USERS);
    let server = Memcached::start();
    let rule = r#"{ identity = "carol", read_only = true }"#;
    let relay = Memrelay::start(engine, &[&server], &["--auth-file", &users, "--access", rule]);
    server.set_raw("k", b"v");
    let mut carol = relay.client();
    log_in(&mut carol, "carol", "ro");
    assert_eq!(carol.get("k"), vec![("k".to_string(), b"v".to_vec())]);
    assert_eq!(carol.request(b"mg k v\r\n", b"v\r\n"), b"VA 1\r\nv\r\n");
    let before = counters(&server);
    let writes: &[&[u8]] = &[
        b"set k 0 0 1\r\nw\r\n",
        b"prepend k 0 0 1\r\nw\r\n",
        b"delete k\r\n",
        b"incr k 1\r\n",
        b"touch k 100\r\n",
        b"gat 100 k\r\n",
        b"ms k 1\r\nw\r\n",
        b"md k\r\n",
        b"ma k\r\n",
        b"mg k v T100\r\n",
        b"mg nothing v N100\r\n",
    ];
    for request in writes {
        assert_eq!(carol.line(request), "CLIENT_ERROR write not allowed\r\n", "{}", show(request));
    }
    assert_eq!(counters(&server), before, "a refused write reached the server");
    assert_eq!(server.get_raw("k").as_deref(), Some(&b"v"[..]));
    // Others write as before (no rule: every key, no admin command).
    let mut alice = relay.client();
    log_in(&mut alice, "alice", "secret");
    assert_eq!(alice.set("k", b"new"), "STORED\r\n");
    assert_eq!(server.get_raw("k").as_deref(), Some(&b"new"[..]));
    assert_eq!(relay_stats_as(&relay, "carol", "ro")["access_denied_read_only"], writes.len() as u64);
}

fn admin_commands_need_a_grant_and_are_refused_as_memcached_f_refuses_flush_all(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let users = write_users(dir.path(), USERS);
    let reference = Memcached::start_with(&["-F"]);
    let server = Memcached::start();
    let grant = r#"{ identity = "root", admin = ["flush_all", "stats", "verbosity", "cache_memlimit"] }"#;
    let relay = Memrelay::start(engine, &[&server], &["--auth-file", &users, "--access", grant]);
    server.set_raw("k", b"v");
    let mut alice = relay.client();
    log_in(&mut alice, "alice", "secret");
    let before = counters(&server);
    let memcached_says = reference.client().line(b"flush_all\r\n");
    assert_eq!(memcached_says, "CLIENT_ERROR flush_all not allowed\r\n");
    assert_eq!(alice.line(b"flush_all\r\n"), memcached_says);
    assert_eq!(alice.line(b"flush_all 10\r\n"), memcached_says);
    assert_eq!(alice.line(b"verbosity 1\r\n"), "CLIENT_ERROR verbosity not allowed\r\n");
    assert_eq!(alice.line(b"cache_memlimit 100\r\n"), "CLIENT_ERROR cache_memlimit not allowed\r\n");
    assert_eq!(alice.line(b"stats items\r\n"), "CLIENT_ERROR stats items not allowed\r\n");
    assert_eq!(alice.line(b"stats settings\r\n"), "CLIENT_ERROR stats settings not allowed\r\n");
    // Groups that would list keys are never forwarded by memrelay, granted or not.
    assert_eq!(alice.line(b"stats cachedump 1 1\r\n"), "ERROR\r\n");
    assert_eq!(alice.line(b"lru_crawler metadump all\r\n"), "ERROR\r\n");
    assert_eq!(counters(&server), before, "a refused admin command reached the server");
    assert_eq!(server.get_raw("k").as_deref(), Some(&b"v"[..]));
    // Granted: it reaches the server.
    let mut root = relay.client();
    log_in(&mut root, "root", "toor");
    assert!(root.request(b"stats items\r\n", b"END\r\n").ends_with(b"END\r\n"));
    assert_eq!(root.line(b"flush_all\r\n"), "OK\r\n");
    assert_eq!(server.stats()["cmd_flush"], before.iter().find(|(n, _)| n == "cmd_flush").unwrap().1 + 1);
    assert_eq!(server.get_raw("k"), None);
    assert_eq!(relay_stats_as(&relay, "root", "toor")["access_denied_admin"], 6);
}

fn limits_refuse_large_multigets_and_replies(engine: &str) {
    let servers = [Memcached::start(), Memcached::start()];
    // No authentication: the limits apply to every connection.
    let relay = Memrelay::start(
        engine,
        &[&servers[0], &servers[1]],
        &["--sharded", "--max-keys-per-get", "3", "--max-reply-bytes", "1000"],
    );
    let mut client = relay.client();
    let value = vec![b'v'; 600];
    for key in ["k1", "k2", "k3", "k4"] {
        assert_eq!(client.set(key, &value), "STORED\r\n");
    }
    assert_eq!(client.get("k1").len(), 1);
    let before: Vec<_> = servers.iter().map(counters).collect();
    assert_eq!(client.line(b"get k1 k2 k3 k4\r\n"), "CLIENT_ERROR too many keys\r\n");
    assert_eq!(client.line(b"gets k1 k2 k3 k4\r\n"), "CLIENT_ERROR too many keys\r\n");
    for (server, before) in servers.iter().zip(&before) {
        assert_eq!(&counters(server), before, "a multi-get over the limit reached {}", server.addr());
    }
    // Two values of 600 bytes: over 1,000 bytes of reply.
    assert_eq!(client.line(b"get k1 k2\r\n"), "SERVER_ERROR reply too large\r\n");
    assert_eq!(client.get("k3").len(), 1);
    let stats = relay_stats(&relay);
    assert_eq!((stats["access_denied_too_many_keys"], stats["access_denied_reply_too_large"]), (2, 1));
    // Everything else is as without limits: admin commands included.
    assert_eq!(client.line(b"verbosity 1\r\n"), "OK\r\n");
}

fn sighup_reads_the_auth_file_and_rules_again(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let users = write_users(dir.path(), "alice:secret\n");
    let server = Memcached::start();
    let config = dir.path().join("memrelay.toml");
    std::fs::write(&config, format!("auth_file = \"{users}\"\n")).unwrap();
    let relay = Memrelay::start(engine, &[&server], &["--config", config.to_str().unwrap()]);
    let mut alice = relay.client();
    log_in(&mut alice, "alice", "secret");
    assert_eq!(alice.set("b:1", b"x"), "STORED\r\n");
    let mut dave = relay.client();
    assert_eq!(dave.line(b"set a 0 0 8\r\ndave pw1\r\n"), "CLIENT_ERROR authentication failure\r\n");
    // Dave joins, alice is held to `a:`.
    write_users(dir.path(), "alice:secret\ndave:pw1\n");
    std::fs::write(
        &config,
        format!("auth_file = \"{users}\"\n[[access]]\nidentity = \"alice\"\nprefixes = [\"a:\"]\n"),
    )
    .unwrap();
    hang_up(&relay);
    assert!(
        wait_for(Duration::from_secs(10), || relay.stderr().contains("reload: access: 2 users must log in")),
        "{}",
        relay.stderr()
    );
    assert_eq!(dave.line(b"set a 0 0 8\r\ndave pw1\r\n"), "STORED\r\n");
    // Alice stays logged in, under her new rule.
    assert_eq!(alice.line(b"get b:1\r\n"), "CLIENT_ERROR key not allowed\r\n");
    assert_eq!(alice.set("a:1", b"x"), "STORED\r\n");
    // A broken auth file is refused whole; the users in force stay.
    std::fs::write(dir.path().join("users"), "no colon here\n").unwrap();
    hang_up(&relay);
    assert!(
        wait_for(Duration::from_secs(10), || relay.stderr().contains("reload refused: auth file")),
        "{}",
        relay.stderr()
    );
    log_in(&mut relay.client(), "dave", "pw1");
}

fn hang_up(relay: &Memrelay) {
    let status = Command::new("kill").args(["-HUP", &relay.pid().to_string()]).status().expect("kill");
    assert!(status.success());
}

/// `GET /metrics` with optional basic-auth credentials (`user:password`): the status code and body.
fn scrape(port: u16, credentials: Option<&str>) -> (u16, String) {
    use base64::Engine;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect to /metrics");
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let auth = credentials.map_or_else(String::new, |c| {
        format!("Authorization: Basic {}\r\n", base64::engine::general_purpose::STANDARD.encode(c))
    });
    write!(stream, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, response)
}

#[test]
fn metrics_ask_for_basic_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let scrapers = dir.path().join("scrapers");
    std::fs::write(&scrapers, "prometheus:scrape me\n").unwrap();
    let server = Memcached::start();
    let port = free_port().to_string();
    let listen = format!("127.0.0.1:{port}");
    let relay = Memrelay::start(
        "evented",
        &[&server],
        &["--metrics-listen", &listen, "--metrics-auth-file", scrapers.to_str().unwrap()],
    );
    let port: u16 = port.parse().unwrap();
    let (status, response) = scrape(port, None);
    assert_eq!(status, 401, "{response}");
    assert!(response.contains("WWW-Authenticate: Basic realm=\"memrelay metrics\""), "{response}");
    assert!(!response.contains("memrelay_"), "{response}");
    assert_eq!(scrape(port, Some("prometheus:scrape m")).0, 401);
    assert_eq!(scrape(port, Some("someone:scrape me")).0, 401);
    let (status, body) = scrape(port, Some("prometheus:scrape me"));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("memrelay_access_denied_total{reason=\"metrics_auth\"} 3"), "{body}");
    drop(relay);
}

/// `GET /metrics` over HTTPS, verifying memrelay's certificate against `ca` (a rustls client):
/// the status code and the response.
fn scrape_https(port: u16, ca: &Path, credentials: Option<&str>) -> (u16, String) {
    use base64::Engine;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for der in rustls::pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(der.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let socket = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect to /metrics");
    socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut stream = rustls::StreamOwned::new(conn, socket);
    let auth = credentials.map_or_else(String::new, |c| {
        format!("Authorization: Basic {}\r\n", base64::engine::general_purpose::STANDARD.encode(c))
    });
    write!(stream, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n{auth}\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("the answer, ended by close_notify");
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, response)
}

#[test]
fn metrics_over_https_ask_for_basic_credentials_too() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = make_certificate(dir.path());
    let ca = dir.path().join("ca.pem");
    let scrapers = dir.path().join("scrapers");
    std::fs::write(&scrapers, "prometheus:scrape me\n").unwrap();
    let server = Memcached::start();
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let (cert_arg, key_arg) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let relay = Memrelay::start(
        "evented",
        &[&server],
        &[
            "--metrics-listen",
            &listen,
            "--metrics-auth-file",
            scrapers.to_str().unwrap(),
            "--metrics-tls-cert",
            cert_arg,
            "--metrics-tls-key",
            key_arg,
        ],
    );
    assert!(wait_for(Duration::from_secs(10), || std::net::TcpStream::connect(&listen).is_ok()));
    let (status, response) = scrape_https(port, &ca, None);
    assert_eq!(status, 401, "{response}");
    assert!(response.contains("WWW-Authenticate: Basic realm=\"memrelay metrics\""), "{response}");
    assert!(!response.contains("memrelay_"), "{response}");
    assert_eq!(scrape_https(port, &ca, Some("prometheus:wrong")).0, 401);
    let (status, body) = scrape_https(port, &ca, Some("prometheus:scrape me"));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("application/openmetrics-text"), "{body}");
    assert!(body.contains("memrelay_access_denied_total{reason=\"metrics_auth\"} 2"), "{body}");
    assert!(body.trim_end().ends_with("# EOF"), "{body}");
    // Plain HTTP on the HTTPS port learns nothing.
    let (status, response) = scrape(port, Some("prometheus:scrape me"));
    assert!(status != 200 && !response.contains("memrelay_"), "{response}");
    // curl, as an operator would check it.
    let curl = Command::new("curl")
        .args(["-s", "--cacert", ca.to_str().unwrap(), "-u", "prometheus:scrape me"])
        .arg(format!("https://localhost:{port}/metrics"))
        .output();
    if let Ok(out) = curl {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && text.contains("memrelay_"), "curl: {text}");
    }
    drop(relay);
}

#[test]
fn bad_metrics_tls_files_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = make_certificate(dir.path());
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let base = ["--server", "127.0.0.1:1", "--metrics-listen", "127.0.0.1:0"];
    for (extra, says) in [
        (&["--metrics-tls-cert", key, "--metrics-tls-key", key][..], "--metrics-tls-cert"),
        (&["--metrics-tls-cert", cert, "--metrics-tls-key", cert][..], "--metrics-tls-key"),
        (&["--metrics-tls-cert", cert][..], "--metrics-tls-key"),
    ] {
        let args: Vec<&str> = base.iter().chain(extra).copied().chain(["--check-config", "/dev/null"]).collect();
        let (status, stderr) = run_memrelay(&args);
        assert_eq!(status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(says) && stderr.trim().lines().count() == 1, "{extra:?}: {stderr}");
    }
    let (status, stderr) =
        run_memrelay(&["--server", "127.0.0.1:1", "--metrics-tls-cert", cert, "--metrics-tls-key", key]);
    assert!(status.code() == Some(2) && stderr.contains("--metrics-listen"), "{stderr}");
}

/// The saved seeds of the `access_rules` fuzz target replay on stable Rust (CI needs no nightly).
#[test]
fn access_rules_fuzz_seeds_replay() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/access_rules");
    let mut replayed = 0;
    for entry in std::fs::read_dir(&root).expect("the access_rules seeds") {
        memrelay::fuzzing::access_rules(&std::fs::read(entry.unwrap().path()).unwrap());
        replayed += 1;
    }
    assert!(replayed > 0, "no seeds in {}", root.display());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
    /// Arbitrary bytes, and arbitrary bytes around the seeds' separators, through the same checks.
    #[test]
    fn access_rules_take_arbitrary_bytes(
        file in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
        rule in "[a-z_ =\\[\\]\",{}*:]{0,80}",
        client in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
    ) {
        let mut input = file;
        input.extend_from_slice(b"\n--\n");
        input.extend_from_slice(rule.as_bytes());
        input.extend_from_slice(b"\n--\n");
        input.extend_from_slice(&client);
        memrelay::fuzzing::access_rules(&input);
    }
}

/// `--max-in-flight` (evented): a pipeline deeper than the bound waits unread and is served in
/// order, every request once, and the waits are counted.
#[test]
fn a_deep_pipeline_waits_at_max_in_flight_and_is_served_whole() {
    let server = Memcached::start();
    let relay = Memrelay::start("evented", &[&server], &["--max-in-flight", "2", "--threads", "1"]);
    server.set_raw("k", b"v");
    let before = server.stats()["cmd_get"];
    let mut client = relay.client();
    let pipeline: Vec<u8> = (0..200).flat_map(|i| format!("get k\r\nmg k{i} v\r\n").into_bytes()).collect();
    client.send(&pipeline);
    for i in 0..200 {
        assert_eq!(client.read_retrieval(), b"VALUE k 0 1\r\nv\r\nEND\r\n", "request {i}");
        assert_eq!(client.read_line(), b"EN\r\n", "request {i}");
    }
    assert_eq!(server.stats()["cmd_get"] - before, 400);
    assert!(relay_stats(&relay)["conn_yields"] > 0);
}
