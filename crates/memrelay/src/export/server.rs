//! The `/metrics` server, HTTP and HTTPS alike: hyper's HTTP/1 server on a tokio runtime of its
//! own (current-thread, on the one `metrics` thread), with `tokio-rustls` as the TLS acceptor.
//! Whatever arrives on the metrics port costs memrelay a bounded amount:
//!
//! - **connections**: at most [`Limits::connections`] open at once (from the descriptor limit,
//!   [`connection_cap`]). A connection arriving when all are taken closes one that is not yet
//!   being answered: the oldest of those least far along ([`Stage`]: over HTTPS, no whole
//!   ClientHello yet, then in the rest of the handshake, then reading the request), so a crowd of
//!   idle or dribbling connections cannot keep an honest scrape out (its ClientHello, or its
//!   request, comes whole at once). If every one is being answered, the newcomer is closed at
//!   once. After each accept the new connection reads first (the loop yields), so what a client
//!   sent with its connection counts before the next arrival picks whom to close.
//! - **time**: one deadline for the whole connection ([`Limits::deadline`],
//!   `--metrics-timeout-ms`), the TLS handshake included; one request per connection
//!   (`Connection: close`).
//! - **memory**: the request head is at most [`MAX_HEAD`] bytes (a longer one is answered 431
//!   and the connection closed); hyper's buffer at most [`MAX_BUFFER`]; the body is never read.
//! - **threads**: none per connection: the one thread runs them all.
//! - **the kernel's queue**: [`BACKLOG`] connections wait to be accepted (they hold no descriptor
//!   of ours), so a burst does not make the kernel drop an honest client's SYN (its retry comes
//!   a second later).
//! - **accept errors**: out of descriptors or buffers (EMFILE, ENFILE, ENOBUFS, ENOMEM), the
//!   accept loop waits (a doubling back-off up to [`BACKOFF_MAX`]) with one log line a second at
//!   most, and tries again; the connection waits in the kernel's queue meanwhile. Nothing here
//!   panics or ends the process.
//!
//! The thread stops within [`POLL`] of the shutdown flag, closing every connection.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::task::AbortHandle;
use tokio_rustls::LazyConfigAcceptor;

use super::endpoint::respond;
use crate::access::Access;
use crate::log_limit::OncePerSecond;

/// How often the accept loop looks at the shutdown flag.
pub(crate) const POLL: Duration = Duration::from_millis(100);
/// Most connections open at once, whatever the descriptor limit.
pub(crate) const MAX_CONNECTIONS: usize = 64;
/// Fewest, however low the descriptor limit.
const MIN_CONNECTIONS: usize = 4;
/// Largest request head (request line and headers); a longer one is answered 431.
pub(crate) const MAX_HEAD: usize = 8 * 1024;
/// Largest read buffer of a connection.
const MAX_BUFFER: usize = 16 * 1024;
/// Connections the kernel queues for accepting (capped by `net.core.somaxconn`).
const BACKLOG: i32 = 1024;
/// Longest wait between two accepts after a resource error.
const BACKOFF_MAX: Duration = Duration::from_millis(500);
const BACKOFF_FIRST: Duration = Duration::from_millis(5);

/// The bounds every connection is held to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Most connections open at once.
    pub connections: usize,
    /// From accept to close, the TLS handshake included.
    pub deadline: Duration,
}

/// Connections the endpoint may hold at once: a sixteenth of the descriptor limit (so that
/// /metrics never takes the descriptors the memcached clients need), between
/// [`MIN_CONNECTIONS`] and [`MAX_CONNECTIONS`].
pub(crate) fn connection_cap() -> usize {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit(2) writes the struct we own.
    let soft = match unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } {
        0 if limit.rlim_cur != libc::RLIM_INFINITY => usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX),
        _ => usize::MAX,
    };
    (soft / 16).clamp(MIN_CONNECTIONS, MAX_CONNECTIONS)
}

/// The endpoint, bound and ready to serve on a thread of its own.
pub(crate) struct Endpoint {
    runtime: Runtime,
    listener: std::net::TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    limits: Limits,
}

impl Endpoint {
    /// Binds `addr` and builds the runtime (the error says why it could not); `tls` serves HTTPS.
    pub fn bind(addr: SocketAddr, tls: Option<Arc<rustls::ServerConfig>>, limits: Limits) -> io::Result<Endpoint> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build()?;
        let socket = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None)?;
        socket.set_reuse_address(true)?;
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        socket.listen(BACKLOG)?;
        Ok(Endpoint { runtime, listener: socket.into(), tls, limits })
    }

    /// Answers scrapes until `shutdown` is set.
    pub fn serve(self, registry: Registry, access: Arc<Access>, shutdown: Arc<AtomicBool>) {
        let Endpoint { runtime, listener, tls, limits } = self;
        let shared = Arc::new(Shared { registry, access, tls, limits });
        runtime.block_on(async move {
            match TcpListener::from_std(listener) {
                Ok(listener) => accept_loop(listener, shared, shutdown).await,
                Err(e) => eprintln!("memrelay: metrics: cannot serve: {e}"),
            }
        });
        // Dropping the runtime drops every connection still open.
    }
}

/// What every connection reads.
struct Shared {
    registry: Registry,
    access: Arc<Access>,
    tls: Option<Arc<rustls::ServerConfig>>,
    limits: Limits,
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, shutdown: Arc<AtomicBool>) {
    static ACCEPT_FAILED: OncePerSecond = OncePerSecond::new();
    let mut open = Open::new(shared.limits.connections);
    let mut backoff = BACKOFF_FIRST;
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !shutdown.load(Ordering::Acquire) {
        let accepted = tokio::select! {
            _ = tick.tick() => continue,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                backoff = BACKOFF_FIRST;
                if !open.make_room() {
                    drop(stream);
                    continue;
                }
                let stage = Arc::new(AtomicU8::new(Stage::Hello as u8));
                let task = tokio::spawn(connection(stream, peer, Arc::clone(&shared), Arc::clone(&stage)));
                open.push(task.abort_handle(), stage);
                // The new connection reads what is already there before anything else arrives.
                tokio::task::yield_now().await;
            }
            // The connection's own trouble (reset before it was accepted and the like).
            Err(e) if connection_error(&e) => {}
            Err(e) => {
                if let Some(left_out) = ACCEPT_FAILED.admit() {
                    let more =
                        if left_out > 0 { format!(" ({left_out} more like it not logged)") } else { String::new() };
                    eprintln!(
                        "memrelay: metrics: cannot accept: {e}; trying again in {} ms{more}",
                        backoff.as_millis()
                    );
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
    open.close_all();
}

/// Errors of one connection, not of the listener: accepting goes on at once.
fn connection_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ECONNABORTED | libc::ECONNRESET | libc::EPROTO | libc::EPERM | libc::EINTR | libc::EAGAIN)
    )
}

/// One connection, within the deadline: the TLS handshake when on, one request, its answer.
async fn connection(stream: TcpStream, peer: SocketAddr, shared: Arc<Shared>, stage: Arc<AtomicU8>) {
    let _ = stream.set_nodelay(true);
    let deadline = shared.limits.deadline;
    let work = async move {
        match shared.tls.clone() {
            None => {
                stage.store(Stage::Request as u8, Ordering::Release);
                http(TokioIo::new(stream), peer, shared, stage).await
            }
            Some(config) => {
                // A failed handshake is the client's business; rustls sent it an alert.
                let acceptor = LazyConfigAcceptor::new(rustls::server::Acceptor::default(), stream);
                let Ok(start) = acceptor.await else { return };
                stage.store(Stage::Handshake as u8, Ordering::Release);
                let Ok(tls) = start.into_stream(config).await else { return };
                stage.store(Stage::Request as u8, Ordering::Release);
                http(TokioIo::new(tls), peer, shared, stage).await
            }
        }
    };
    // Past the deadline the connection is dropped, wherever it was.
    let _ = tokio::time::timeout(deadline, work).await;
}

async fn http<I>(io: I, peer: SocketAddr, shared: Arc<Shared>, stage: Arc<AtomicU8>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
{
    let service = service_fn(move |request| {
        stage.store(Stage::Answering as u8, Ordering::Release);
        let response = respond(&shared.registry, &shared.access, &request, peer);
        async move { Ok::<_, Infallible>(response) }
    });
    // A client that went away, a malformed or oversized head: hyper answered what it could.
    let _ = http1::Builder::new()
        .keep_alive(false)
        .title_case_headers(true)
        .max_header_size(MAX_HEAD)
        .max_buf_size(MAX_BUFFER)
        .serve_connection(io, service)
        .await;
}

/// How far along a connection is; to make room, the oldest of the least far along is closed.
/// Over HTTP a connection starts in `Request`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
enum Stage {
    /// No whole ClientHello yet (silent, or a byte at a time).
    Hello,
    /// The rest of the TLS handshake.
    Handshake,
    /// Reading the request head.
    Request,
    /// Answering: never closed to make room.
    Answering,
}

/// The connections open, oldest first, with their stage.
struct Open {
    cap: usize,
    connections: VecDeque<(AbortHandle, Arc<AtomicU8>)>,
}

impl Open {
    fn new(cap: usize) -> Open {
        Open { cap: cap.max(1), connections: VecDeque::with_capacity(cap) }
    }

    /// Whether one more may be opened: when all are taken, the oldest of those least far along
    /// (and not yet answering) is closed to make room; `false` when every one is answering.
    fn make_room(&mut self) -> bool {
        self.connections.retain(|(task, _)| !task.is_finished());
        if self.connections.len() < self.cap {
            return true;
        }
        let slowest = self
            .connections
            .iter()
            .enumerate()
            .map(|(at, (_, stage))| (stage.load(Ordering::Acquire), at))
            .filter(|&(stage, _)| stage < Stage::Answering as u8)
            .min();
        let Some((_, at)) = slowest else { return false };
        if let Some((task, _)) = self.connections.remove(at) {
            task.abort();
        }
        true
    }

    fn push(&mut self, task: AbortHandle, stage: Arc<AtomicU8>) {
        self.connections.push_back((task, stage));
    }

    fn close_all(&mut self) {
        for (task, _) in self.connections.drain(..) {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_follows_the_descriptor_limit_within_bounds() {
        let cap = connection_cap();
        assert!((MIN_CONNECTIONS..=MAX_CONNECTIONS).contains(&cap), "{cap}");
    }

    #[test]
    fn a_full_house_closes_its_oldest_connection_least_far_along() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        runtime.block_on(async {
            let mut open = Open::new(4);
            let mut stages = Vec::new();
            let mut tasks = Vec::new();
            for _ in 0..4 {
                assert!(open.make_room());
                let stage = Arc::new(AtomicU8::new(Stage::Hello as u8));
                let task = tokio::spawn(std::future::pending::<()>());
                open.push(task.abort_handle(), Arc::clone(&stage));
                stages.push(stage);
                tasks.push(Some(task));
            }
            // 0 answering, 1 reading its request, 3 in its handshake, 2 without a whole
            // ClientHello: 2 goes first, then 3, then 1.
            stages[0].store(Stage::Answering as u8, Ordering::Release);
            stages[1].store(Stage::Request as u8, Ordering::Release);
            stages[3].store(Stage::Handshake as u8, Ordering::Release);
            for gone in [2, 3, 1] {
                assert!(open.make_room());
                assert!(tasks[gone].take().unwrap().await.unwrap_err().is_cancelled(), "{gone}");
                let stage = Arc::new(AtomicU8::new(Stage::Answering as u8));
                open.push(tokio::spawn(std::future::pending::<()>()).abort_handle(), stage);
            }
            // Every one is answering: no room.
            assert!(!open.make_room());
            open.close_all();
            assert!(tasks[0].take().unwrap().await.unwrap_err().is_cancelled());
        });
    }
}
