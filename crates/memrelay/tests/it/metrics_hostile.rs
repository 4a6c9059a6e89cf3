//! The metrics port under hostile input (issue 32, items 1 and 2): whatever arrives on
//! `--metrics-listen` neither ends memrelay nor starves its memcached clients, and costs it a
//! bounded number of descriptors, threads and bytes.
//!
//! - idle connections under a low descriptor limit: memrelay lives and serves (the old tiny_http
//!   server panicked on EMFILE and memrelay exited with status 70);
//! - a request head of megabytes: refused, resident memory bounded (tiny_http read it all and
//!   answered 200);
//! - 200 slowloris connections: no thread per connection, a scrape still answered (tiny_http
//!   held a thread for each);
//! - HTTPS handshakes that dribble a byte at a time: honest scrapes answered beside them, and
//!   the dribblers cut at the connection's deadline (the old reader had 8 places, and a per-read
//!   timeout that a byte every few seconds never reached).
//!
//! Bounds are on counts and memory, never on microseconds.

use std::fs::{self, File};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;

engine_matrix!(idle_metrics_connections_under_a_low_descriptor_limit_end_nothing,);

/// A memrelay with `/metrics`, started with this test's own spawn (for a descriptor limit);
/// killed when dropped.
struct Relay {
    child: Option<Child>,
    port: u16,
    metrics: u16,
    stderr: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Relay {
    /// memrelay (`engine`) in front of `server`, `/metrics` on a port of its own with `extra`
    /// options, under a descriptor limit of `nofile` when given.
    fn start(engine: &str, server: &Memcached, nofile: Option<u64>, extra: &[&str]) -> Relay {
        let dir = tempfile::tempdir().unwrap();
        let stderr = dir.path().join("stderr");
        for _ in 0..START_ATTEMPTS {
            let (port, metrics) = (free_port(), free_port());
            let listen = format!("127.0.0.1:{metrics}");
            let mut args = vec!["--metrics-listen", &listen];
            args.extend_from_slice(extra);
            let mut command = memrelay_command(engine, port, &[server.addr()], &args);
            command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(File::create(&stderr).unwrap());
            if let Some(nofile) = nofile {
                let limit = libc::rlimit { rlim_cur: nofile as libc::rlim_t, rlim_max: nofile as libc::rlim_t };
                // SAFETY: setrlimit(2) only, between fork and exec.
                unsafe {
                    command.pre_exec(move || match libc::setrlimit(libc::RLIMIT_NOFILE, &limit) {
                        0 => Ok(()),
                        _ => Err(std::io::Error::last_os_error()),
                    });
                }
            }
            let mut child = command.spawn().expect("cannot start memrelay");
            match wait_listening(&mut child, port, "memrelay") {
                Ready::Listening => {
                    let relay = Relay { child: Some(child), port, metrics, stderr, _dir: dir };
                    assert!(
                        wait_for(Duration::from_secs(10), || TcpStream::connect(("127.0.0.1", metrics)).is_ok()),
                        "/metrics never listened: {}",
                        relay.stderr()
                    );
                    return relay;
                }
                Ready::Exited(status) => {
                    let text = fs::read_to_string(&stderr).unwrap_or_default();
                    assert!(text.contains("cannot listen"), "memrelay exited at start ({status}): {text}");
                }
            }
        }
        panic!("memrelay did not start after {START_ATTEMPTS} attempts");
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn stderr(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Panics (with its stderr) if memrelay has exited.
    fn assert_alive(&mut self) {
        let status = self.child.as_mut().unwrap().try_wait().unwrap();
        assert!(status.is_none(), "memrelay exited ({status:?}): {}", self.stderr());
    }

    /// A line of /proc/<pid>/status, as a number (`Threads`, `VmRSS` and `VmHWM` in kB).
    fn status(&self, field: &str) -> u64 {
        let text = fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = text.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// SIGTERM, and a clean exit within 10 s.
    fn stop(&mut self) {
        let mut child = self.child.take().unwrap();
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                kill_and_reap(&mut child);
                panic!("memrelay did not stop within 10 s of SIGTERM");
            }
            thread::sleep(Duration::from_millis(10));
        };
        assert!(status.success(), "memrelay stopped with {status}: {}", self.stderr());
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill_and_reap(&mut child);
        }
    }
}

/// `GET /metrics` over plain HTTP: the status (0 when there was no answer) and the response.
fn scrape(port: u16) -> (u16, String) {
    scrape_within(port, Duration::from_secs(10))
}

/// [`scrape`], waiting at most `timeout` for each step.
fn scrape_within(port: u16, timeout: Duration) -> (u16, String) {
    let target = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut stream) = TcpStream::connect_timeout(&target, timeout) else { return (0, String::new()) };
    stream.set_read_timeout(Some(timeout)).unwrap();
    if stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").is_err() {
        return (0, String::new());
    }
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response).into_owned();
    (status_of(&response), response)
}

fn status_of(response: &str) -> u16 {
    response.strip_prefix("HTTP/1.1 ").and_then(|s| s.get(..3)).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// Scrapes until one is answered 200 (at most `attempts`, 100 ms apart): whether one was.
fn a_scrape_succeeds(port: u16, attempts: usize) -> bool {
    (0..attempts).any(|i| {
        if i > 0 {
            thread::sleep(Duration::from_millis(100));
        }
        let (status, body) = scrape(port);
        status == 200 && body.trim_end().ends_with("# EOF")
    })
}

/// A memcached client of `relay` stores and reads a key.
fn memcached_clients_are_served(relay: &Relay, client: &mut Client, key: &str) {
    assert_eq!(client.set(key, b"still here"), "STORED\r\n", "{}", relay.stderr());
    assert_eq!(client.get(key), vec![(key.to_string(), b"still here".to_vec())]);
}

/// Item 1: at a 256-descriptor limit, 300 idle connections to /metrics (the endpoint holds 16 at
/// most there). memrelay (either engine) stays up, a client connected before and one connecting
/// after are served, and a scrape is answered; then 200 memcached clients come (more than the
/// descriptor budget lets in) and a scrape beside them: memrelay stays up and answers scrapes and
/// clients once they leave. (tiny_http took two descriptors per connection and panicked on
/// EMFILE, `try_clone().unwrap()`: exit status 70, every client lost.)
fn idle_metrics_connections_under_a_low_descriptor_limit_end_nothing(engine: &str) {
    let server = Memcached::start();
    let mut relay = Relay::start(engine, &server, Some(256), &["--workers", "4", "--threads", "1"]);
    let mut before = Client::connect(&relay.addr());
    memcached_clients_are_served(&relay, &mut before, "before");
    let target = std::net::SocketAddr::from(([127, 0, 0, 1], relay.metrics));
    let idle: Vec<TcpStream> =
        (0..300).filter_map(|_| TcpStream::connect_timeout(&target, Duration::from_secs(2)).ok()).collect();
    // Time for memrelay to accept them all (and, before, to run out of descriptors).
    thread::sleep(Duration::from_millis(500));
    relay.assert_alive();
    memcached_clients_are_served(&relay, &mut before, "before-again");
    let mut after = Client::connect(&relay.addr());
    memcached_clients_are_served(&relay, &mut after, "after");
    assert!(a_scrape_succeeds(relay.metrics, 20), "no scrape answered beside {} idle connections", idle.len());
    relay.assert_alive();
    drop(idle);
    // Then a crowd of memcached clients, and a scrape beside it; memrelay lives, and answers
    // once they have left.
    let crowd: Vec<TcpStream> = (0..200)
        .filter_map(|_| TcpStream::connect_timeout(&relay.addr().parse().unwrap(), Duration::from_secs(1)).ok())
        .collect();
    let _ = scrape_within(relay.metrics, Duration::from_secs(1));
    thread::sleep(Duration::from_millis(300));
    relay.assert_alive();
    drop(crowd);
    assert!(a_scrape_succeeds(relay.metrics, 30), "no scrape answered once the clients left");
    memcached_clients_are_served(&relay, &mut before, "before-at-last");
    drop((before, after));
    relay.stop();
}

/// Item 2: four connections each sending a 16 MB request head. Each is refused (431, or closed),
/// never answered 200, and memrelay's peak resident memory grows by less than 24 MB (tiny_http
/// buffered every byte: 64 MB and more).
#[test]
fn request_heads_of_megabytes_are_refused_in_bounded_memory() {
    const HEAD: usize = 16 << 20;
    let server = Memcached::start();
    let mut relay = Relay::start("evented", &server, None, &[]);
    assert!(a_scrape_succeeds(relay.metrics, 20));
    let peak_before = relay.status("VmHWM");
    let metrics = relay.metrics;
    let senders: Vec<_> = (0..4)
        .map(|_| {
            thread::spawn(move || {
                let mut stream = TcpStream::connect(("127.0.0.1", metrics)).unwrap();
                stream.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
                stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let chunk = vec![b'a'; 64 << 10];
                let mut sent = stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Big: ").is_ok();
                let mut written = 0;
                while sent && written < HEAD {
                    sent = stream.write_all(&chunk).is_ok();
                    written += chunk.len();
                }
                if sent {
                    let _ = stream.write_all(b"\r\n\r\n");
                }
                let mut response = Vec::new();
                let _ = stream.read_to_end(&mut response);
                String::from_utf8_lossy(&response).into_owned()
            })
        })
        .collect();
    for sender in senders {
        let response = sender.join().unwrap();
        let status = status_of(&response);
        assert!(status == 0 || status == 431, "a 16 MB head was answered {status}");
    }
    let growth_kb = relay.status("VmHWM").saturating_sub(peak_before);
    assert!(growth_kb < 24 * 1024, "peak RSS grew by {growth_kb} kB for 4 heads of 16 MB");
    relay.assert_alive();
    assert!(a_scrape_succeeds(relay.metrics, 20));
    relay.stop();
}

/// Item 2: 200 slowloris connections (a header line every 300 ms). memrelay's thread count
/// stays within 4 of what it was, and a scrape is answered while they are there and after
/// (tiny_http held a thread for each: 197 threads).
#[test]
fn slowloris_connections_hold_no_threads_and_do_not_keep_scrapes_out() {
    let server = Memcached::start();
    let mut relay = Relay::start("evented", &server, None, &[]);
    assert!(a_scrape_succeeds(relay.metrics, 20));
    let threads_before = relay.status("Threads");
    let mut slow: Vec<TcpStream> = (0..200)
        .filter_map(|_| {
            let mut stream = TcpStream::connect(("127.0.0.1", relay.metrics)).ok()?;
            stream.set_nonblocking(true).unwrap();
            let _ = stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n");
            Some(stream)
        })
        .collect();
    let mut most_threads = relay.status("Threads");
    let mut answered_beside = false;
    for round in 0..8 {
        thread::sleep(Duration::from_millis(300));
        for stream in &mut slow {
            let _ = stream.write_all(format!("X-{round}: a\r\n").as_bytes());
        }
        most_threads = most_threads.max(relay.status("Threads"));
        if round == 3 {
            answered_beside = a_scrape_succeeds(relay.metrics, 20);
        }
    }
    assert!(
        most_threads <= threads_before + 4,
        "threads: {threads_before} before, {most_threads} beside 200 slowloris connections"
    );
    assert!(answered_beside, "no scrape answered beside 200 slowloris connections");
    drop(slow);
    assert!(a_scrape_succeeds(relay.metrics, 20));
    relay.assert_alive();
    relay.stop();
}

/// The first bytes a TLS client sends: a whole ClientHello.
fn client_hello() -> Vec<u8> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut hello = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut hello).unwrap();
    }
    hello
}

/// Connections that sent the first `sent` bytes of a ClientHello, non-blocking.
fn dribblers(port: u16, count: usize, hello: &[u8], sent: usize) -> Vec<TcpStream> {
    (0..count)
        .filter_map(|_| {
            let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
            stream.set_nonblocking(true).unwrap();
            let _ = stream.write_all(&hello[..sent]);
            Some(stream)
        })
        .collect()
}

/// `GET /metrics` over HTTPS, trusting `ca`: the status (0 when the handshake or the request
/// failed).
fn scrape_https(port: u16, ca: &Path) -> u16 {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for der in rustls::pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(der.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let Ok(socket) = TcpStream::connect(("127.0.0.1", port)) else { return 0 };
    socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut stream = rustls::StreamOwned::new(conn, socket);
    if stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n").is_err() {
        return 0;
    }
    let mut response = Vec::new();
    if stream.read_to_end(&mut response).is_err() {
        return 0;
    }
    let response = String::from_utf8_lossy(&response);
    match response.trim_end().ends_with("# EOF") {
        true => status_of(&response),
        false => 0,
    }
}

/// memrelay with /metrics over HTTPS; its CA's certificate.
fn https_relay(dir: &Path, server: &Memcached, extra: &[&str]) -> (Relay, std::path::PathBuf) {
    let (cert, key) = make_certificate(dir);
    let mut args = vec!["--metrics-tls-cert", cert.to_str().unwrap(), "--metrics-tls-key", key.to_str().unwrap()];
    args.extend_from_slice(extra);
    (Relay::start("evented", server, None, &args), dir.join("ca.pem"))
}

/// Item 2: 100 connections sending a ClientHello a byte at a time (more than the endpoint holds
/// at once). Honest scrapes over HTTPS are answered while they are there (the old reader's 8
/// places were all taken: every scrape failed).
#[test]
fn dribbling_tls_handshakes_do_not_keep_https_scrapes_out() {
    let dir = tempfile::tempdir().unwrap();
    let server = Memcached::start();
    let (mut relay, ca) = https_relay(dir.path(), &server, &[]);
    assert_eq!(scrape_https(relay.metrics, &ca), 200);
    let hello = client_hello();
    let mut slow = dribblers(relay.metrics, 100, &hello, 6);
    let mut answered = 0;
    for (round, at) in (6..12).enumerate() {
        thread::sleep(Duration::from_millis(200));
        for stream in &mut slow {
            let _ = stream.write_all(&hello[at..at + 1]);
        }
        if round % 2 == 1 && (0..5).any(|_| scrape_https(relay.metrics, &ca) == 200) {
            answered += 1;
        }
    }
    assert_eq!(answered, 3, "HTTPS scrapes answered beside 100 dribbling handshakes");
    relay.assert_alive();
    drop(slow);
    relay.stop();
}

/// Item 2: the deadline covers the whole connection, the TLS handshake included: with
/// `--metrics-timeout-ms 1000`, ten handshakes dribbling a byte every 200 ms are all closed
/// within a few seconds (the old per-read timeout never fired while bytes kept coming).
#[test]
fn the_connection_deadline_cuts_dribbling_tls_handshakes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Memcached::start();
    let (mut relay, ca) = https_relay(dir.path(), &server, &["--metrics-timeout-ms", "1000"]);
    let hello = client_hello();
    let mut slow = dribblers(relay.metrics, 10, &hello, 6);
    let mut closed = vec![false; slow.len()];
    let started = Instant::now();
    let mut at = 6;
    while closed.iter().any(|c| !c) && started.elapsed() < Duration::from_secs(8) && at < hello.len() {
        thread::sleep(Duration::from_millis(200));
        for (stream, closed) in slow.iter_mut().zip(&mut closed) {
            if *closed {
                continue;
            }
            let mut byte = [0u8; 64];
            *closed = match stream.read(&mut byte) {
                Ok(_) => true, // EOF, or an alert before it
                Err(e) if e.kind() == ErrorKind::WouldBlock => stream.write_all(&hello[at..at + 1]).is_err(),
                Err(_) => true,
            };
        }
        at += 1;
    }
    let cut = closed.iter().filter(|c| **c).count();
    assert_eq!(cut, slow.len(), "dribbling handshakes closed within {:?}", started.elapsed());
    assert_eq!(scrape_https(relay.metrics, &ca), 200);
    relay.assert_alive();
    relay.stop();
}
