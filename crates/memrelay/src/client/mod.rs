//! The client side, shared by both engines: the listener and the client limit, one [`Session`]
//! per connection (bytes read and not yet parsed, replies waiting for the socket, what to skip,
//! whether to close), the incremental-parse prelude every request goes through, flushing,
//! closing and the start of a shutdown. An engine adds only its own per-client state (`E`) and
//! what it does with a parsed request.
//!
//! - [`Framing`]: where a client's byte stream is between requests (what to skip, whether the
//!   framing is lost): the state machine every request goes through, without I/O.
//! - [`io`]: a connection's byte plumbing (read until drained, write until full).
//! - [`local`]: the commands memrelay answers itself.

pub mod budget;
mod framing;
pub(crate) mod io;
pub(crate) mod local;
pub mod tls;

pub use framing::{Framing, Next};

use std::collections::VecDeque;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memrelay_protocol::{binary, parse_request, ErrorReply, Limits, Parse};
use mio::net::{TcpListener, TcpStream};
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use slab::Slab;

use crate::access::{self, Guard, LoginStep};
use budget::Budget;
use io::{ClientIo, ReadLimit};
use local::LocalAnswers;
use tls::{SharedConfig, TlsSession};

/// The listening socket's token.
pub(crate) const LISTENER: Token = Token(usize::MAX - 1);
/// The TLS listening socket's token (evented engine, `--tls-listen`).
pub(crate) const TLS_LISTENER: Token = Token(usize::MAX - 3);
/// The token of the waker that interrupts a poll (signals, finished jobs).
pub(crate) const WAKER: Token = Token(usize::MAX - 2);
/// Client tokens are slab slots below this; engines number their own sockets above it.
pub(crate) const CLIENT_TOKENS: usize = usize::MAX / 2;

/// Bytes read from a client socket at a time.
/// A client's first read offers this much room; the buffer doubles while a long request needs
/// more, and is given back whole when the client goes idle ([`io::ClientIo::consume`]).
const READ_CHUNK: usize = 4 * 1024;
/// How soon to try accepting again after running out of descriptors (no new event would say).
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// One client connection.
pub(crate) struct Session<E> {
    /// Shared with the pool engine's workers, which write replies to it directly.
    pub socket: Arc<TcpStream>,
    pub io: ClientIo,
    framing: Framing,
    /// No more requests: close once the output is written (quit, lost framing, shutdown).
    pub closing: bool,
    /// Bytes wait, and the request they begin is counted inside memrelay ([`ClientSide::arriving`]).
    arriving: bool,
    /// Who the client is and what it may do ([`crate::access`]).
    guard: Guard,
    /// A client of the TLS listener: its bytes go through rustls ([`tls`]).
    tls: Option<Box<TlsSession>>,
    /// Bytes the engine holds for the client beyond its output (replies of its requests in
    /// flight, parts of a merge): they count against its budget ([`budget`]).
    pub held: usize,
    /// Reading stopped at the budget (counted once each time it does).
    over_budget: bool,
    /// What the engine keeps per client.
    pub engine: E,
}

impl<E> Session<E> {
    pub fn pending(&self) -> &[u8] {
        self.io.pending()
    }

    pub fn consume(&mut self, n: usize) {
        self.io.consume(n);
    }

    /// Moves the first `n` pending bytes (a request) into `into` and consumes them.
    pub fn take(&mut self, n: usize, into: &mut Vec<u8>) {
        self.io.take(n, into);
    }

    /// Every byte memrelay holds for the client: its replies waiting for the socket and what
    /// the engine holds for it.
    pub fn held(&self) -> usize {
        self.io.unsent() + self.held
    }

    /// Whether the client holds more than its budget: no more of its requests are taken.
    pub fn backed_up(&self, budget: &Budget) -> bool {
        budget.spent(self.held())
    }

    /// Whether the client's requests wait for it to take its replies (`over` its budget); counts
    /// the times they begin to.
    pub fn waits_for_budget(&mut self, over: bool) -> bool {
        if over && !self.over_budget {
            budget::count_pause();
        }
        self.over_budget = over;
        over
    }

    /// The next request (see [`Framing::next`]); none while the client holds more than its
    /// budget (back-pressure) or is closing.
    pub fn next_request(&mut self, limits: &Limits, budget: &Budget, local: &LocalAnswers) -> Next {
        if self.closing || self.io.broken {
            return Next::Wait;
        }
        if self.waits_for_budget(self.backed_up(budget)) {
            return Next::Wait;
        }
        let guarded = !self.guard.open(local.access());
        if guarded {
            if let Some(next) = self.login() {
                return next;
            }
        }
        let (next, consumed) = self.framing.next(self.io.pending(), limits);
        self.io.consume(consumed);
        if matches!(next, Next::Wait) {
            // A long value on its way: one buffer of its size, not one doubling per read.
            if let Some(total) = memrelay_protocol::declared_len(self.io.pending()) {
                self.io.reserve(total.min(limits.max_request_len()));
            }
        }
        match &next {
            Next::Invalid(reply) => {
                self.closing |= self.framing.lost;
                local.client_error();
                if let Some(ErrorReply::Binary { opcode, .. }) = reply {
                    log_binary_refusal(*opcode, self.socket.peer_addr().ok());
                }
            }
            // The access check: after parsing, before routing, the same for both engines. A
            // refused request is answered here and never reaches a server.
            Next::Request(request) if guarded => {
                let socket = &self.socket;
                let peer = || access::peer_name(socket.peer_addr().ok());
                if let Err(denial) = self.guard.check(request, self.io.pending(), peer) {
                    let silent = request.noreply;
                    self.io.consume(request.consumed);
                    return Next::Invalid((!silent).then_some(denial.reply));
                }
            }
            _ => {}
        }
        next
    }

    /// Before a connection has logged in (when it must): memcached `-Y`'s answers to its bytes.
    /// A successful login is answered `STORED` through [`Next::Invalid`], the path every reply
    /// memrelay writes without a server takes.
    fn login(&mut self) -> Option<Next> {
        // A binary-protocol client is answered by the framing (not supported, closed).
        if !self.framing.started() && binary::starts_binary(self.io.pending()) {
            return None;
        }
        match self.guard.login(self.io.pending(), self.socket.peer_addr().ok())? {
            LoginStep::Wait => Some(Next::Wait),
            LoginStep::Close => {
                self.closing = true;
                let pending = self.io.pending().len();
                self.io.consume(pending);
                Some(Next::Invalid(None))
            }
            LoginStep::Answer { reply, consumed, close } => {
                self.framing.start();
                // Closing: whatever else the client sent is not read.
                let consumed = if close { self.io.pending().len() } else { consumed };
                self.closing |= close;
                self.io.consume(consumed);
                Some(Next::Invalid(Some(reply)))
            }
        }
    }

    /// Whether a complete request (or invalid bytes to answer) is still buffered: after EOF the
    /// client is answered what it sent before it is closed.
    pub fn has_request_buffered(&self, limits: &Limits) -> bool {
        !self.pending().is_empty() && !matches!(parse_request(self.pending(), limits), Parse::Incomplete)
    }
}

/// Logs a client certificate that names no usable identity (at most one line a second).
fn log_unusable_certificate(peer: &str) {
    static LOG: crate::log_limit::OncePerSecond = crate::log_limit::OncePerSecond::new();
    let Some(others) = LOG.admit() else { return };
    let others = if others > 0 { format!(" ({others} more since the last line)") } else { String::new() };
    eprintln!(
        "memrelay: {peer}: its client certificate names no usable identity (empty, over 250 bytes, a space or a control character): the connection has none, and gets what the `*` rule grants (without one: no key){others}"
    );
}

/// Asks for writable events on a client socket, or stops asking.
fn reregister(registry: &Registry, socket: &TcpStream, slot: usize, want: bool) {
    let interest = if want { Interest::READABLE | Interest::WRITABLE } else { Interest::READABLE };
    let fd = socket.as_raw_fd();
    let _ = registry.reregister(&mut SourceFd(&fd), Token(slot), interest);
}

/// Logs a binary-protocol client refused, at most one line a second for the whole process (the
/// others are counted into the next line), so a flood of them cannot flood the log.
fn log_binary_refusal(opcode: u8, peer: Option<std::net::SocketAddr>) {
    static LOG: crate::log_limit::OncePerSecond = crate::log_limit::OncePerSecond::new();
    let Some(others) = LOG.admit() else { return };
    let peer = peer.map_or_else(|| "a client".to_string(), |p| p.to_string());
    let others = if others > 0 { format!(" ({others} more since the last line)") } else { String::new() };
    eprintln!(
        "memrelay: {peer} spoke the binary protocol (opcode 0x{opcode:02x}): answered \"not supported\" and closed; memrelay speaks the text protocol only{others}"
    );
}

/// The clients of one event loop, and the listener it accepts them from.
pub(crate) struct ClientSide<E> {
    listener: Option<TcpListener>,
    /// The TLS listener beside the plain one, and its configuration.
    tls_listener: Option<(TcpListener, Arc<SharedConfig>, Registry)>,
    /// TLS clients still in their handshake, by deadline (accept order is deadline order);
    /// entries of clients gone or done are skipped when they come up.
    handshakes: VecDeque<(Instant, usize)>,
    pub sessions: Slab<Session<E>>,
    pub limits: Limits,
    /// What each client may make memrelay hold.
    pub budget: Budget,
    /// Most clients of the whole process (every loop's clients count).
    max_clients: usize,
    pub local: LocalAnswers,
    /// Accepting failed for want of descriptors: try again then.
    accept_retry_at: Option<Instant>,
    /// Clients with bytes waiting (read, not yet taken as a request): see [`ClientSide::arriving`].
    arriving: usize,
}

impl<E> ClientSide<E> {
    pub fn new(
        registry: &Registry,
        mut listener: Option<TcpListener>,
        limits: Limits,
        budget: Budget,
        max_clients: usize,
        local: LocalAnswers,
    ) -> std::io::Result<ClientSide<E>> {
        if let Some(listener) = &mut listener {
            registry.register(listener, LISTENER, Interest::READABLE)?;
        }
        Ok(ClientSide {
            listener,
            tls_listener: None,
            handshakes: VecDeque::new(),
            // Room for every client this loop may take, reserved and not touched: only the slots
            // in use become resident, and the slab never moves (growing by doubling copied it and
            // left the old copies' pages to the trimmer).
            sessions: Slab::with_capacity(max_clients),
            limits,
            budget,
            max_clients,
            local,
            accept_retry_at: None,
            arriving: 0,
        })
    }

    /// Adds a TLS listener beside the plain one (evented engine).
    pub fn listen_tls(
        &mut self,
        registry: &Registry,
        mut listener: TcpListener,
        config: Arc<SharedConfig>,
    ) -> std::io::Result<()> {
        registry.register(&mut listener, TLS_LISTENER, Interest::READABLE)?;
        // Reading a TLS client may need writable events (handshake records), where the caller
        // passes no registry.
        self.tls_listener = Some((listener, config, registry.try_clone()?));
        Ok(())
    }

    /// Accepts every waiting client of both listeners; one over the process-wide limit is told
    /// so and closed.
    pub fn accept(&mut self, registry: &Registry, mut state: impl FnMut() -> E) {
        self.accept_retry_at = None;
        self.accept_from(registry, false, &mut state);
        self.accept_from(registry, true, &mut state);
    }

    fn accept_from(&mut self, registry: &Registry, tls: bool, state: &mut impl FnMut() -> E) {
        loop {
            let accepted = match (tls, &self.listener, &self.tls_listener) {
                (false, Some(listener), _) => listener.accept(),
                (true, _, Some((listener, _, _))) => listener.accept(),
                _ => return,
            };
            match accepted {
                Ok((stream, _)) => {
                    // Taken atomically: the event loops accept at the same time.
                    if !self.local.try_connection_opened(self.max_clients as u64) {
                        if !tls {
                            let _ = (&stream).write(b"SERVER_ERROR too many connections\r\n");
                        }
                        continue;
                    }
                    let session_tls = match &self.tls_listener {
                        Some((_, config, _)) if tls => {
                            match TlsSession::new(config.get(), Instant::now() + config.settings().handshake_timeout) {
                                Some(session) => Some(Box::new(session)),
                                None => {
                                    self.local.connection_closed();
                                    continue;
                                }
                            }
                        }
                        _ => None,
                    };
                    let _ = stream.set_nodelay(true);
                    let entry = self.sessions.vacant_entry();
                    let fd = stream.as_raw_fd();
                    if registry.register(&mut SourceFd(&fd), Token(entry.key()), Interest::READABLE).is_err() {
                        self.local.connection_closed();
                        continue;
                    }
                    if let Some(tls) = &session_tls {
                        self.handshakes.push_back((tls.deadline, entry.key()));
                    }
                    entry.insert(Session {
                        socket: Arc::new(stream),
                        io: ClientIo::new(READ_CHUNK, self.limits.max_request_len()),
                        framing: Framing::default(),
                        closing: false,
                        arriving: false,
                        guard: Guard::new(self.local.access()),
                        tls: session_tls,
                        held: 0,
                        over_budget: false,
                        engine: state(),
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // Out of descriptors and the like: the listener stays readable, so no new event
                // will come (edge-triggered); try again shortly.
                Err(_) => {
                    self.accept_retry_at = Some(Instant::now() + ACCEPT_RETRY);
                    break;
                }
            }
        }
    }

    /// Marks broken the TLS clients whose handshake is past its deadline (the engine closes them),
    /// counting and logging them; returns them and when the next deadline is.
    pub fn expire_handshakes(&mut self, now: Instant) -> (Vec<usize>, Option<Instant>) {
        let mut expired = Vec::new();
        while let Some(&(deadline, slot)) = self.handshakes.front() {
            let session = self.sessions.get_mut(slot);
            let waiting = session.as_ref().and_then(|s| s.tls.as_ref()).filter(|tls| tls.deadline == deadline);
            match waiting {
                Some(tls) if !tls.handshaking() => {}
                Some(_) if deadline > now => return (expired, Some(deadline)),
                Some(_) => {
                    let session = session.expect("found above");
                    session.io.broken = true;
                    let peer = access::peer_name(session.socket.peer_addr().ok());
                    access::count_denial(access::Reason::TlsHandshake, &peer, "TLS handshake not finished in time");
                    expired.push(slot);
                }
                None => {}
            }
            self.handshakes.pop_front();
        }
        (expired, None)
    }

    /// When accepting must be tried again without an event (after running out of descriptors).
    pub fn accept_retry_at(&self) -> Option<Instant> {
        self.accept_retry_at
    }

    /// Reads what the client sent (see [`ClientIo::read`]); true when reading paused at `limit`.
    pub fn read(&mut self, slot: usize, to_eof: bool, limit: ReadLimit) -> bool {
        let Some(session) = self.sessions.get_mut(slot) else { return false };
        let paused = match &mut session.tls {
            Some(tls) => {
                let paused = tls.read(&session.socket, &mut session.io, to_eof, limit);
                let peer = || access::peer_name(session.socket.peer_addr().ok());
                if let Some(identity) = tls.take_identity() {
                    match identity {
                        Ok(Some(name)) => session.guard.certified(name.into()),
                        Ok(None) => {}
                        Err(()) => log_unusable_certificate(&peer()),
                    }
                } else if let Some(failure) = tls.take_failure() {
                    access::count_denial(access::Reason::TlsHandshake, &peer(), &format!("TLS handshake: {failure}"));
                }
                // The handshake may have left records for a socket that is full.
                if let (Some(want), Some((_, _, registry))) =
                    (tls.flush(&session.socket, &mut session.io), &self.tls_listener)
                {
                    reregister(registry, &session.socket, slot, want);
                }
                paused
            }
            None => session.io.read(&*session.socket, to_eof, limit),
        };
        self.note_arriving(slot);
        paused
    }

    /// Requests that have begun to arrive and that no engine has taken yet: one per client
    /// with bytes waiting. An engine counts them among the requests inside memrelay, so that
    /// its count, like the response time, runs from the read that brought a request's first
    /// byte (in the pool the next request of a client often arrives while the worker that
    /// answered the previous one is still handing it back). A pipelining client's requests
    /// behind its first waiting one are not counted until they come first.
    pub fn arriving(&self) -> usize {
        self.arriving
    }

    /// When the client's first waiting byte was read (now if none waits).
    pub fn arrival(&self, slot: usize) -> Instant {
        self.sessions.get(slot).map_or_else(Instant::now, |s| s.io.arrival())
    }

    /// Brings [`ClientSide::arriving`] up to date after the client's waiting bytes changed (a
    /// read, or requests taken from them).
    pub fn note_arriving(&mut self, slot: usize) {
        let Some(session) = self.sessions.get_mut(slot) else { return };
        let waiting = !session.pending().is_empty();
        if waiting != session.arriving {
            session.arriving = waiting;
            if waiting {
                self.arriving += 1;
            } else {
                self.arriving -= 1;
            }
        }
    }

    /// Sends `bytes` to the client after its output (over TLS through the session; in the clear
    /// straight to the socket while nothing waits before them).
    pub fn send(&mut self, registry: &Registry, slot: usize, bytes: &[u8]) {
        let Some(session) = self.sessions.get_mut(slot) else { return };
        let want = match &mut session.tls {
            Some(tls) => {
                session.io.output().extend_from_slice(bytes);
                tls.flush(&session.socket, &mut session.io)
            }
            None => session.io.send(&*session.socket, bytes),
        };
        if let Some(want) = want {
            reregister(registry, &session.socket, slot, want);
        }
    }

    /// Writes what the socket takes of the client's output; asks for writable events otherwise.
    pub fn flush(&mut self, registry: &Registry, slot: usize) {
        let Some(session) = self.sessions.get_mut(slot) else { return };
        let want = match &mut session.tls {
            Some(tls) => tls.flush(&session.socket, &mut session.io),
            None => session.io.flush(&*session.socket),
        };
        if let Some(want) = want {
            reregister(registry, &session.socket, slot, want);
        }
    }

    /// Removes the client and closes its socket (a worker may still hold a reference to it).
    pub fn close(&mut self, registry: &Registry, slot: usize) -> Session<E> {
        let session = self.sessions.remove(slot);
        if session.arriving {
            self.arriving -= 1;
        }
        let fd = session.socket.as_raw_fd();
        let _ = registry.deregister(&mut SourceFd(&fd));
        let mut session = session;
        if let Some(tls) = &mut session.tls {
            tls.close(&session.socket);
        }
        let _ = session.socket.shutdown(std::net::Shutdown::Both);
        self.local.connection_closed();
        session
    }

    /// Stops accepting and marks every client closing; returns nothing new to accept from now on.
    pub fn begin_shutdown(&mut self, registry: &Registry) {
        if let Some(mut listener) = self.listener.take() {
            let _ = registry.deregister(&mut listener);
        }
        if let Some((mut listener, _, _)) = self.tls_listener.take() {
            let _ = registry.deregister(&mut listener);
        }
        for (_, session) in self.sessions.iter_mut() {
            session.closing = true;
        }
    }

    /// Slots of every client (to visit them while the slab may change).
    pub fn slots(&self) -> Vec<usize> {
        self.sessions.iter().map(|(slot, _)| slot).collect()
    }
}
