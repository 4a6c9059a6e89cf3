//! One event-loop thread of the evented engine: its clients (the shared client side), its
//! connections to every server, and the hooks the shared event loop calls.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memrelay_protocol::Limits;
use mio::event::Event;
use mio::net::TcpListener;
use mio::{Poll, Token};

use super::requests::Requests;
use super::upstream::{Outstanding, Upstream};
use crate::client::io::ReadLimit;
use crate::client::local::LocalAnswers;
use crate::client::{ClientSide, Next};
use crate::engine::event_loop::{self, Scheduler};
use crate::generation::{Current, Generation};
use crate::measure::metrics::Recorder;
use crate::relay::warm::Budget;
use crate::settings::Settings;
use crate::startup::{Error, Runtime};
use crate::upstream::health::Health;
use crate::upstream::registry::Registry;
use crate::upstream::tls::pump::Pump;
use crate::upstream::tls::ServerTls;

/// Upstream tokens count down from here (above every client token).
pub(super) const UPSTREAM_BASE: usize = usize::MAX - 16;
const READ_CHUNK: usize = 16 * 1024;

/// What the loop keeps per client: its in-flight entries, in request order.
#[derive(Default)]
pub(super) struct Replies {
    pub queue: VecDeque<usize>,
    /// A request whose copies must reach the replicas before the client's next request starts
    /// (read-your-writes after a `cas`).
    pub barrier: Option<usize>,
    /// The server whose reply is streaming to this client ([`crate::relay::stream`]).
    pub streaming_from: Option<usize>,
}

pub(super) struct EventLoop {
    pub poll: Poll,
    pub clients: ClientSide<Replies>,
    /// One connection per server id; a retired server's closes once nothing is outstanding on it.
    pub upstreams: Vec<Upstream>,
    pub addrs: Vec<SocketAddr>,
    /// Server ids a reload retired whose connections are still to close.
    pub retiring: Vec<usize>,
    pub inflight: Requests,
    /// The configuration in force, checked before each request is routed.
    pub current: Arc<Current>,
    /// The generation this loop routes new requests (and each next step of a request) under.
    pub config: Arc<Generation>,
    pub registry: Arc<Registry>,
    /// TLS to the servers, when it is on.
    pub server_tls: Option<Arc<ServerTls>>,
    pub max_value_len: usize,
    /// Requests one client may have in flight before memrelay stops reading its pipeline.
    pub max_in_flight: usize,
    pub health: Arc<Health>,
    pub failed: Vec<Outstanding>,
    /// Scratch: entries whose last awaited reply arrived in one read.
    pub completed: Vec<usize>,
    /// Clients whose head request may have completed.
    pub ready: Vec<usize>,
    /// Upstreams with a batch to write at the end of the turn.
    pub dirty: Vec<usize>,
    pub round_robin: usize,
    pub recorder: Recorder,
    /// Write-backs to restarted servers this loop may still start ([`crate::relay::warm`]).
    pub warm_budget: Budget,
    /// Merged replies ([`super::merged`]): entries whose parts got bytes in one read, entries
    /// being moved on (a resumed part's read may ask again), scratch.
    pub merging: Vec<usize>,
    pub pumping: Vec<usize>,
    pub pump_again: bool,
    pub resume_scratch: Vec<usize>,
}

impl EventLoop {
    pub fn new(
        poll: Poll,
        listener: Option<TcpListener>,
        settings: &Settings,
        runtime: &Runtime,
        recorder: Recorder,
        local: LocalAnswers,
    ) -> Result<EventLoop, Error> {
        let limits = Limits { max_value_len: settings.limits.max_value_size, ..Limits::default() };
        let clients = ClientSide::new(poll.registry(), listener, limits, settings.limits.max_clients, local)
            .map_err(Error::EventLoopSetup)?;
        let mut event_loop = EventLoop {
            poll,
            clients,
            upstreams: Vec::new(),
            addrs: Vec::new(),
            retiring: Vec::new(),
            inflight: Requests::default(),
            current: Arc::clone(&runtime.current),
            config: runtime.current.get(),
            registry: Arc::clone(&runtime.registry),
            server_tls: runtime.server_tls.clone(),
            max_value_len: settings.limits.max_value_size,
            max_in_flight: settings.limits.max_in_flight.max(1),
            health: Arc::clone(&runtime.health),
            failed: Vec::new(),
            completed: Vec::new(),
            ready: Vec::new(),
            dirty: Vec::new(),
            round_robin: 0,
            recorder,
            warm_budget: Budget::default(),
            merging: Vec::new(),
            pumping: Vec::new(),
            pump_again: false,
            resume_scratch: Vec::new(),
        };
        event_loop.adopt_config();
        Ok(event_loop)
    }

    /// Accepts TLS clients from `listener` too ([`crate::client::tls`]).
    pub fn listen_tls(
        &mut self,
        listener: mio::net::TcpListener,
        config: Arc<crate::client::tls::SharedConfig>,
    ) -> std::io::Result<()> {
        self.clients.listen_tls(self.poll.registry(), listener, config)
    }

    /// Takes up the generation in force if a reload published a new one.
    pub fn refresh_config(&mut self) {
        if self.current.refresh(&mut self.config) {
            self.adopt_config();
        }
    }

    /// Connections for the servers the generation added; the retired servers' connections close
    /// once the requests outstanding on them are answered (or time out).
    fn adopt_config(&mut self) {
        for id in self.upstreams.len()..self.registry.len() {
            let addr = self.registry.addr(id);
            let tls = self.server_tls.as_ref().map(|tls| Pump::new(tls.peer(&self.registry.endpoint(id))));
            self.upstreams.push(Upstream::new(addr, Token(UPSTREAM_BASE - id), self.max_value_len, tls));
            self.addrs.push(addr);
        }
        for upstream in &mut self.upstreams {
            upstream.set_timeout(self.config.server_timeout);
        }
        self.retiring = (0..self.upstreams.len()).filter(|id| !self.config.servers.contains(id)).collect();
        self.close_retired();
    }

    /// Closes the retired servers' connections that have nothing outstanding.
    pub fn close_retired(&mut self) {
        let (upstreams, registry) = (&mut self.upstreams, self.poll.registry());
        self.retiring.retain(|&id| !upstreams[id].close_if_idle(registry));
    }

    pub fn run(&mut self, shutdown: &AtomicBool, grace: Duration) -> io::Result<()> {
        crate::buffer::keep_large_spares();
        event_loop::run(self, shutdown, grace)
    }

    pub fn flush(&mut self, slot: usize) {
        self.clients.flush(self.poll.registry(), slot);
        self.resume_stream(slot);
    }

    /// Publishes this loop's count of the requests inside memrelay as of now: those in flight
    /// and those that began to arrive, so the count runs from the first byte, as the response
    /// time does ([`crate::measure::in_system`]).
    pub fn count_inside(&self) {
        self.count_inside_at(Instant::now());
    }

    pub fn count_inside_at(&self, at: Instant) {
        self.recorder.requests_in_flight(self.inflight.counted() + self.clients.arriving(), at);
    }

    /// Closes the client once it is finished: broken, or closing (or at EOF) with every reply
    /// written; entries still in flight are recycled when their replies arrive.
    pub fn close_if_done(&mut self, slot: usize) {
        let Some(session) = self.clients.sessions.get(slot) else { return };
        let finished = session.io.broken
            || ((session.closing || session.io.eof) && session.io.flushed() && session.engine.queue.is_empty());
        if !finished {
            return;
        }
        // With EOF but complete requests still buffered, answer them first.
        if session.io.eof
            && !session.closing
            && !session.io.broken
            && session.has_request_buffered(&self.clients.limits)
        {
            return;
        }
        let session = self.clients.close(self.poll.registry(), slot);
        if let Some(server) = session.engine.streaming_from {
            // A reply was streaming to it: the rest is dropped now, not after the patience.
            if self.upstreams[server].paused() {
                self.upstreams[server].resume(true);
                self.upstream_readable(server, false);
            }
        }
        for &index in &session.engine.queue {
            let entry = self.inflight.get_mut(index);
            entry.client = None;
            if entry.done {
                self.inflight.release(index);
            } else {
                // A merged reply's parts paused for it: the rest is dropped now.
                self.resume_parts(index);
            }
        }
        self.count_inside();
    }
}

impl Scheduler for EventLoop {
    fn poll(&mut self) -> &mut Poll {
        &mut self.poll
    }

    fn recorder(&mut self) -> &mut Recorder {
        &mut self.recorder
    }

    fn timers(&mut self, now: Instant) -> Option<Instant> {
        self.expire(now);
        let (expired, next_handshake) = self.clients.expire_handshakes(now);
        for slot in expired {
            self.close_if_done(slot);
        }
        if !self.retiring.is_empty() {
            self.close_retired();
        }
        // Requests that timed out are answered now, not after the next event.
        self.end_of_turn();
        let mut shrunk = false;
        for upstream in &mut self.upstreams {
            shrunk |= upstream.shrink_if_idle(now);
        }
        if shrunk && !self.upstreams.iter().any(Upstream::busy) {
            // The loop has been idle for a while: the memory of its large values goes back.
            crate::buffer::release_large_spares();
        }
        let upstreams = self.upstreams.iter().flat_map(|u| [u.next_deadline(), u.shrink_at()]).flatten();
        upstreams.chain(next_handshake).min()
    }

    fn accept(&mut self) {
        self.clients.accept(self.poll.registry(), Replies::default);
    }

    fn accept_retry_at(&self) -> Option<Instant> {
        self.clients.accept_retry_at()
    }

    /// Reads what the client sent; with enough requests in flight, reading pauses (pump reads
    /// again once replies drain).
    fn read_client(&mut self, slot: usize, to_eof: bool) {
        let Some(session) = self.clients.sessions.get(slot) else { return };
        let limit = if session.engine.queue.len() >= self.max_in_flight || session.backed_up() {
            ReadLimit::Bytes(READ_CHUNK)
        } else {
            ReadLimit::None
        };
        self.clients.read(slot, to_eof, limit);
        // A client that begins to arrive counts from the read that brought its first byte.
        self.count_inside_at(self.clients.arrival(slot));
    }

    fn flush_client(&mut self, slot: usize) {
        self.flush(slot);
    }

    /// Parses and starts the client's requests, up to the in-flight limit.
    fn pump(&mut self, slot: usize) {
        let mut starved = false;
        loop {
            let Some(session) = self.clients.sessions.get_mut(slot) else { return };
            if session.engine.queue.len() >= self.max_in_flight {
                // `--max-in-flight`: the rest of its pipeline waits (counted when some does).
                if !session.pending().is_empty() {
                    crate::access::count_yield();
                }
                break;
            }
            if let Some(barrier) = session.engine.barrier {
                if !self.inflight.get(barrier).done {
                    break;
                }
            }
            match session.next_request(&self.clients.limits, &self.clients.local) {
                Next::Wait => {
                    starved = true;
                    break;
                }
                Next::Invalid(reply) => {
                    let index = self.inflight.alloc();
                    let entry = self.inflight.get_mut(index);
                    entry.client = Some(slot);
                    if let Some(reply) = reply {
                        reply.write_to(&mut entry.reply);
                    }
                    entry.done = true;
                    entry.request = None;
                    session.engine.queue.push_back(index);
                    self.ready.push(slot);
                }
                Next::Request(request) => self.start_request(slot, request),
            }
        }
        // Bytes buffered are bounded by the parser (a line, a value), not here: a partial long
        // get line must be read on.
        // A socket the last read drained is not read again (its next bytes bring an event).
        let reading = starved
            && self.clients.sessions.get(slot).is_some_and(|s| {
                !s.io.eof
                    && !s.io.drained()
                    && !s.closing
                    && !s.backed_up()
                    && s.engine.queue.len() < self.max_in_flight
            });
        if reading {
            // Reading may have stopped at the in-flight limit with bytes left in the socket.
            let pending = self.clients.sessions[slot].pending().len();
            self.read_client(slot, false);
            if self.clients.sessions[slot].pending().len() > pending {
                return self.pump(slot);
            }
        }
        self.clients.note_arriving(slot);
        self.count_inside();
        self.close_if_done(slot);
    }

    fn engine_event(&mut self, Token(token): Token, event: &Event) {
        if token > UPSTREAM_BASE - self.upstreams.len() && token <= UPSTREAM_BASE {
            let server = UPSTREAM_BASE - token;
            if event.is_writable() {
                self.upstream_writable(server);
            }
            if event.is_readable() || event.is_read_closed() || event.is_error() {
                self.upstream_readable(server, event.is_read_closed() || event.is_error());
            }
        }
    }

    /// Writes the batches of the turn and delivers completed replies.
    fn end_of_turn(&mut self) {
        while !self.ready.is_empty() || !self.dirty.is_empty() {
            while let Some(server) = self.dirty.pop() {
                self.flush_upstream(server);
            }
            while let Some(slot) = self.ready.pop() {
                self.deliver(slot);
                self.pump(slot);
            }
        }
        // Entries of clients that left are counted out when released, here or there.
        self.count_inside();
    }

    fn begin_shutdown(&mut self) {
        self.clients.begin_shutdown(self.poll.registry());
        for slot in self.clients.slots() {
            self.close_if_done(slot);
        }
    }

    fn idle(&self) -> bool {
        self.inflight.in_use() == 0
    }
}
