//! `/metrics` over HTTPS (`--metrics-tls-cert`, `--metrics-tls-key`): the endpoint's answers
//! ([`super::endpoint::answer`], basic auth included) behind rustls, as the client listener's TLS.
//!
//! Why not tiny_http's own TLS: its `ssl-rustls` feature (tiny_http 0.12) pulls rustls 0.20 and
//! ring 0.16, both out of support (rustls 0.20 got no fix for RUSTSEC-2024-0336), beside the
//! rustls 0.23 memrelay already has. A scrape is one small request, so it is served here: each
//! connection on a thread of its own (at most [`MAX_CONNECTIONS`] at once, each bounded by
//! [`IO_TIMEOUT`] per read or write), one request, `Connection: close`.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus_client::registry::Registry;
use rustls::{ServerConfig, ServerConnection, StreamOwned};

use super::endpoint::{answer, AnswerKind, CHALLENGE, CONTENT_TYPE, POLL};
use crate::access::Access;
use crate::settings::MetricsTls;

/// Scrapes served at once; connections beyond are closed at once.
pub(crate) const MAX_CONNECTIONS: usize = 8;
/// Longest wait for one read or write of a scrape (the handshake's too), and for the whole
/// request head: a client sending a byte every few seconds does not keep a slot for long.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request head read (request line and headers).
const MAX_HEAD: usize = 16 * 1024;

/// The rustls configuration (the error names the option and the file).
pub fn server_config(tls: &MetricsTls) -> Result<Arc<ServerConfig>, String> {
    let (certs, key) = crate::tls_files::certified_key(&tls.cert, &tls.key, "--metrics-tls-cert", "--metrics-tls-key")?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS versions: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("--metrics-tls-cert/--metrics-tls-key: {e}"))?;
    Ok(Arc::new(config))
}

/// Binds the endpoint.
pub(crate) fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let listener = TcpListener::bind(addr)?;
    // Accepting polls, so that the shutdown flag is seen.
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Answers scrapes until `shutdown` is set.
pub(crate) fn serve(
    listener: TcpListener,
    config: Arc<ServerConfig>,
    registry: Registry,
    access: Arc<Access>,
    shutdown: Arc<AtomicBool>,
) {
    let registry = Arc::new(registry);
    let active = Arc::new(AtomicUsize::new(0));
    while !shutdown.load(Ordering::Acquire) {
        let (stream, peer) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(POLL);
                continue;
            }
            // Out of descriptors and the like: try again a little later.
            Err(_) => {
                std::thread::sleep(POLL);
                continue;
            }
        };
        if active.load(Ordering::Acquire) >= MAX_CONNECTIONS {
            continue;
        }
        active.fetch_add(1, Ordering::AcqRel);
        let (config, registry, access, done) =
            (Arc::clone(&config), Arc::clone(&registry), Arc::clone(&access), Arc::clone(&active));
        let spawned = std::thread::Builder::new().name("metrics-https".into()).spawn(move || {
            // A scrape that fails (handshake refused, timeout, client gone) is no error of ours.
            let _ = scrape(stream, peer, config, &registry, &access);
            done.fetch_sub(1, Ordering::AcqRel);
        });
        if spawned.is_err() {
            // The connection went with the closure; its count is given back here.
            active.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// One connection: the handshake, one request, its answer, close_notify.
fn scrape(
    stream: TcpStream,
    peer: SocketAddr,
    config: Arc<ServerConfig>,
    registry: &Registry,
    access: &Access,
) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let conn = ServerConnection::new(config).map_err(io::Error::other)?;
    let mut tls = StreamOwned::new(conn, stream);
    let head = read_head(&mut tls)?;
    let Some(request) = Request::parse(&head) else {
        return respond(&mut tls, 400, "bad request\n", AnswerKind::Plain);
    };
    let answer = answer(registry, access, request.authorization, request.target, Some(peer));
    respond(&mut tls, answer.status, &answer.body, answer.kind)
}

/// Reads until the end of the request head (`\r\n\r\n`), at most [`MAX_HEAD`] bytes, within
/// [`IO_TIMEOUT`] in all (plus the one read under way when it runs out).
fn read_head(stream: &mut impl Read) -> io::Result<Vec<u8>> {
    let deadline = Instant::now() + IO_TIMEOUT;
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        if Instant::now() > deadline {
            return Err(io::ErrorKind::TimedOut.into());
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        head.extend_from_slice(&chunk[..n]);
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            head.truncate(end + 2);
            return Ok(head);
        }
        if head.len() > MAX_HEAD {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "request head too large"));
        }
    }
}

/// What the answer depends on: the request target and the `Authorization` header's value.
struct Request<'a> {
    target: &'a str,
    authorization: Option<&'a [u8]>,
}

impl<'a> Request<'a> {
    /// `METHOD TARGET HTTP/1.x` then header lines; `None` when it is not that.
    fn parse(head: &'a [u8]) -> Option<Request<'a>> {
        let mut lines = head.split(|&b| b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l));
        let line = std::str::from_utf8(lines.next()?).ok()?;
        let mut words = line.split(' ');
        let (_method, target, version) = (words.next()?, words.next()?, words.next()?);
        if words.next().is_some() || !version.starts_with("HTTP/1.") {
            return None;
        }
        let authorization = lines.find_map(|l| {
            let colon = l.iter().position(|&b| b == b':')?;
            l[..colon].eq_ignore_ascii_case(b"authorization").then(|| l[colon + 1..].trim_ascii())
        });
        Some(Request { target, authorization })
    }
}

fn respond(
    stream: &mut StreamOwned<ServerConnection, TcpStream>,
    status: u16,
    body: &str,
    kind: AnswerKind,
) -> io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        _ => "Not Found",
    };
    let extra = match kind {
        AnswerKind::Metrics => format!("Content-Type: {CONTENT_TYPE}\r\n"),
        AnswerKind::Challenge => format!("WWW-Authenticate: {CHALLENGE}\r\nContent-Type: text/plain\r\n"),
        AnswerKind::Plain => "Content-Type: text/plain\r\n".into(),
    };
    let head =
        format!("HTTP/1.1 {status} {reason}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.conn.send_close_notify();
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_head_gives_its_target_and_credentials() {
        let head = b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nauthorization:  Basic cDpx \r\n";
        let request = Request::parse(head).unwrap();
        assert_eq!(request.target, "/metrics?x=1");
        assert_eq!(request.authorization, Some(&b"Basic cDpx"[..]));
        assert!(Request::parse(b"GET /metrics HTTP/1.1\r\nHost: a\r\n").unwrap().authorization.is_none());
        for bad in
            [&b"GET /metrics\r\n"[..], b"\xff / HTTP/1.1\r\n", b"GET / SPDY/3\r\n", b"GET  / HTTP/1.1 x\r\n", b""]
        {
            assert!(Request::parse(bad).is_none(), "{}", bad.escape_ascii());
        }
    }
}
