//! One event-loop thread of the evented engine: its clients (the shared client side), its
//! connections to the servers, its requests in flight, and the hooks the shared event loop
//! calls. A request's way through the loop reads top to bottom: parsed and started on its
//! [`Exchange`] (the shared per-request policy), each round's targets queued on their
//! connections (batched), the policy asked what follows when a round's last answer arrives, the
//! reply delivered to its client in request order.
//!
//! Events (a connection readable, a client that took its replies, a timer) only put what they
//! completed on the turn's lists ([`Turn`]); [`Scheduler::end_of_turn`] works the lists off until
//! they are empty. Nothing calls back into the loop.
//!
//! [`Exchange`]: crate::relay::exchange::Exchange

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memrelay_protocol::{parse_request, Command, Limits, Parse, Request};
use mio::event::Event;
use mio::net::TcpListener;
use mio::Poll;

use super::clients::{Clients, LargestReply, MergeOut, Replies, Start};
use super::connections::Connections;
use super::merged::Advance;
use super::requests::{answers, Requests, TargetResult};
use super::upstream::Outstanding;
use crate::client::budget::{Budget, HeldGauge};
use crate::client::io::{ReadLimit, SEND_DIRECT};
use crate::client::local::LocalAnswers;
use crate::client::{ClientSide, Next, Session};
use crate::engine::event_loop::{self, Scheduler};
use crate::generation::{Current, Generation};
use crate::measure::metrics::{kind_of, Outcome, Recorder, Timestamps};
use crate::relay::exchange::Step;
use crate::relay::stream::CLIENT_BACKLOG;
use crate::relay::warm::Budget as WarmBudget;
use crate::settings::Settings;
use crate::startup::{Error, Runtime};
use crate::upstream::failure::Failure;
use crate::upstream::health::Health;

const READ_CHUNK: usize = 16 * 1024;

/// A paused part of a merged reply reads on once it holds no more than this unconsumed.
const PART_RESUME: usize = 256 * 1024;

/// How often the loop publishes the bytes it holds for its clients (`client_bytes_held`).
const HELD_EVERY: Duration = Duration::from_millis(250);

/// An entry of the turn's lists: an in-flight entry and the generation it had then (a stale one
/// is skipped).
pub(super) type Work = (usize, u32);

/// What the events of a turn completed, for the loop to carry on with.
#[derive(Default)]
pub(super) struct Turn {
    /// Connections to read again (resumed, or with replies left in their buffer).
    pub readable: Vec<usize>,
    /// Entries with a merged reply whose parts got bytes, or whose client made room.
    pub merging: Vec<Work>,
    /// Entries whose round's last awaited answer arrived.
    pub completed: Vec<Work>,
    /// Clients whose head reply may be complete (or that were cut off).
    pub ready: Vec<usize>,
}

pub(super) struct EventLoop {
    pub poll: Poll,
    pub clients: Clients,
    pub servers: Connections,
    pub inflight: Requests,
    pub turn: Turn,
    /// The configuration in force, checked before each request is routed.
    current: Arc<Current>,
    /// The generation this loop routes new requests (and each next step of a request) under.
    config: Arc<Generation>,
    pub max_value_len: usize,
    /// Requests one client may have in flight before memrelay stops reading its pipeline.
    max_in_flight: usize,
    pub health: Arc<Health>,
    /// Scratch: the requests outstanding on a connection that failed.
    pub failed: Vec<Outstanding>,
    round_robin: usize,
    pub recorder: Recorder,
    /// Write-backs to restarted servers this loop may still start ([`crate::relay::warm`]).
    warm_budget: WarmBudget,
    /// This loop's share of `client_bytes_held`, and when it publishes it next.
    held: HeldGauge,
    held_at: Instant,
    /// What a new client's replies are expected to be ([`Replies::may_start`]).
    largest_reply: LargestReply,
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
        let budget = Budget::new(settings.limits.client_budget, settings.limits.max_value_size);
        let registry = poll.registry();
        let clients = ClientSide::new(registry, listener, limits, budget, settings.limits.max_clients, local)
            .map_err(Error::EventLoopSetup)?;
        let servers =
            Connections::new(Arc::clone(&runtime.registry), runtime.server_tls.clone(), settings.limits.max_value_size);
        let mut event_loop = EventLoop {
            poll,
            clients,
            servers,
            inflight: Requests::default(),
            turn: Turn::default(),
            current: Arc::clone(&runtime.current),
            config: runtime.current.get(),
            max_value_len: settings.limits.max_value_size,
            max_in_flight: settings.limits.max_in_flight.max(1),
            health: Arc::clone(&runtime.health),
            failed: Vec::new(),
            round_robin: 0,
            recorder,
            warm_budget: WarmBudget::default(),
            held: HeldGauge::default(),
            held_at: Instant::now(),
            largest_reply: LargestReply::new(Instant::now()),
        };
        event_loop.servers.adopt(&event_loop.config, event_loop.poll.registry());
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
    fn refresh_config(&mut self) {
        if self.current.refresh(&mut self.config) {
            self.servers.adopt(&self.config, self.poll.registry());
        }
    }

    pub fn run(&mut self, shutdown: &AtomicBool, grace: Duration) -> io::Result<()> {
        crate::buffer::keep_large_spares();
        event_loop::run(self, shutdown, grace)
    }

    /// Publishes this loop's count of the requests inside memrelay as of now: those in flight
    /// and those that began to arrive, so the count runs from the first byte, as the response
    /// time does ([`crate::measure::in_system`]).
    fn count_inside(&self) {
        self.count_inside_at(Instant::now());
    }

    fn count_inside_at(&self, at: Instant) {
        self.recorder.requests_in_flight(self.inflight.counted() + self.clients.arriving(), at);
    }

    // ---- A request's way: started, sent, each round completed, delivered. ----

    fn start_request(&mut self, slot: usize, request: Request) {
        self.refresh_config();
        let now = Instant::now();
        let index = self.inflight.alloc();
        self.inflight.count_in(index);
        let session = &mut self.clients.sessions[slot];
        let entry = self.inflight.get_mut(index);
        entry.client = Some(slot);
        entry.times = Timestamps::at(session.io.arrival());
        entry.times.enqueue = now;
        session.take(request.consumed, &mut entry.input);
        session.engine.queue.push_back(index);
        self.inflight.recharge(index, &mut session.held);
        // The request is in flight now, no longer arriving.
        self.clients.note_arriving(slot);
        self.count_inside();
        let entry = self.inflight.get_mut(index);
        let rr = self.round_robin;
        if request.command.is_read() {
            self.round_robin = self.round_robin.wrapping_add(1);
        }
        let (noreply, quit) = (request.noreply, request.command == Command::Quit);
        let config = &self.config;
        let policy = (config.failover, config.server_timeout);
        let step = entry.exchange.start(&request, &entry.input, rr, &config.router, policy, &*self.health, now);
        entry.request = Some(request);
        match step {
            Step::Local => {
                let request = entry.request.as_ref().expect("set above");
                if !noreply && !quit {
                    self.clients.local.answer(request, &entry.input, 0, &mut entry.reply);
                }
                entry.outcome = Outcome::default();
                entry.done = true;
                self.clients.sessions[slot].closing |= quit;
                self.turn.ready.push(slot);
            }
            Step::Send { from, deadline } => {
                if entry.exchange.holds_back_later_requests() {
                    // Until the copies are out the client's later requests wait, so none reads
                    // a replica the copy has not reached.
                    self.clients.sessions[slot].engine.barrier = Some(index);
                }
                self.send_to_targets(index, now, from, deadline);
            }
            Step::Finish => unreachable!("a request starts by going somewhere"),
        }
        self.recorder.queue_length(now, self.servers.unsent());
    }

    /// Queues the entry's request on its targets' connections from target `from` on (the ones
    /// before have answered already), each through the policy's gate.
    fn send_to_targets(&mut self, index: usize, now: Instant, from: usize, deadline: Instant) {
        let entry = self.inflight.get_mut(index);
        entry.expect_targets(from);
        let generation = entry.generation;
        for target in from..entry.exchange.targets().len() {
            let entry = self.inflight.get(index);
            let request = entry.request.as_ref().expect("an in-flight entry carries a request");
            let outgoing = entry.exchange.outgoing(request, &entry.input);
            let server = entry.exchange.targets()[target];
            let expect = outgoing.expect();
            let gated = entry.exchange.gate(target, &*self.health);
            let conn = self.servers.for_request(server);
            let upstream = self.servers.get_mut(conn);
            upstream.note_downs(self.health.downs(server));
            self.recorder.server_request(server);
            if let Some(failure) = gated {
                // Not sent: not the server's failure (a down server's is counted, as it was).
                if failure == Failure::Down {
                    self.recorder.server_failure(server);
                }
                self.target_done(index, target, TargetResult::Failed(failure), &[]);
            } else if let Err(failure) = upstream.available(self.poll.registry(), now) {
                self.recorder.server_failure(server);
                self.health.failed(server, failure);
                self.target_done(index, target, TargetResult::Failed(failure), &[]);
            } else {
                let len = entry.input.len() + 64;
                let outstanding =
                    Outstanding { request: index, generation, target: target as u16, expect, deadline, queued: now };
                upstream.push(len, |out| outgoing.compose_for(server, out), outstanding);
                self.inflight.get_mut(index).conns[target] = conn;
                self.servers.mark_dirty(conn);
            }
        }
    }

    /// Target `target` of entry `index` has answered (or failed): onto the turn's lists if that
    /// completed its round or may move its merged reply on.
    pub(super) fn target_done(&mut self, index: usize, target: usize, result: TargetResult, bytes: &[u8]) {
        let entry = self.inflight.get_mut(index);
        let work = (index, entry.generation);
        if entry.target_done(target, result, bytes) {
            self.turn.completed.push(work);
        } else if entry.merge.is_some() {
            // A part of a merged reply failed: the merge may be waiting on it.
            self.turn.merging.push(work);
        }
    }

    /// Every target of entry `index` has answered: the policy says what follows (another round,
    /// or the reply).
    fn complete_round(&mut self, index: usize) {
        if self.inflight.get(index).merge.is_some() {
            // Every part is in: the merged reply is moved on to its end, which is the answer.
            self.advance_merge(index);
            let entry = self.inflight.get_mut(index);
            let ended = entry.merge.as_ref().and_then(|m| m.ended());
            if let (Some(reply), TargetResult::Replied(_)) = (ended, entry.results[0]) {
                entry.results[0] = TargetResult::Replied(reply);
            }
        }
        let entry = self.inflight.get_mut(index);
        let now = Instant::now();
        entry.times.last_reply = now;
        let request = entry.request.as_ref().expect("an in-flight entry carries a request");
        let answer = answers(&entry.results, &entry.bodies);
        let router = &self.config.router;
        let step =
            entry.exchange.next(request, &entry.input, answer, router, &*self.health, &mut self.warm_budget, now);
        if let Step::Send { from, deadline } = step {
            return self.send_to_targets(index, now, from, deadline);
        }
        entry.finish(self.servers.addrs(), &*self.health);
        // The replica had the value: write it back to the cold server, fire and forget.
        let mut bytes = Vec::new();
        let write_back = entry.exchange.write_back(answers(&entry.results, &entry.bodies)(0), &mut bytes);
        match entry.client {
            Some(client) => {
                if let Some(session) = self.clients.sessions.get_mut(client) {
                    self.inflight.recharge(index, &mut session.held);
                }
                self.turn.ready.push(client);
            }
            None => self.inflight.release(index),
        }
        if let Some(cold) = write_back {
            self.start_write_back(cold, bytes, now);
        }
    }

    /// Sends `bytes` (one composed `ms`) to `server` as a request of no client: its reply is
    /// read and dropped.
    fn start_write_back(&mut self, server: usize, bytes: Vec<u8>, now: Instant) {
        let limits = Limits { max_value_len: bytes.len(), max_line_len: bytes.len(), max_get_line_len: bytes.len() };
        let Parse::Complete(request) = parse_request(&bytes, &limits) else { return };
        let index = self.inflight.alloc();
        let entry = self.inflight.get_mut(index);
        entry.client = None;
        entry.input.extend_from_slice(&bytes);
        let timeout = self.config.server_timeout;
        let step = entry.exchange.start_to(server, &request, &entry.input, &self.config.router, timeout, now);
        entry.request = Some(request);
        entry.times = Timestamps::at(now);
        if let Step::Send { from, deadline } = step {
            self.send_to_targets(index, now, from, deadline);
        }
    }

    /// Moves entry `index`'s merged reply on as far as its parts' bytes and its client allow;
    /// the parts' connections that paused for room read on once there is room (or drop the
    /// rest, once the merge is over).
    fn advance_merge(&mut self, index: usize) {
        let entry = self.inflight.get_mut(index);
        let Some(merge) = entry.merge.as_mut() else { return };
        let all_in = entry.remaining == 0;
        let slot = entry.client;
        let results = &entry.results;
        let mut out = MergeOut { clients: &mut self.clients, registry: self.poll.registry(), slot, sent: 0 };
        let advance =
            merge.advance(&mut entry.bodies, |p| matches!(results[p], TargetResult::Waiting), all_in, &mut out);
        entry.streamed += out.sent;
        if let Some(slot) = slot {
            if let Some(session) = self.clients.sessions.get_mut(slot) {
                self.inflight.recharge(index, &mut session.held);
                if advance == Advance::CutOff {
                    // Cut off: the client is closed, it cannot tell a short reply otherwise.
                    session.io.broken = true;
                }
            }
            if advance == Advance::CutOff {
                self.turn.ready.push(slot);
            }
        }
        self.resume_parts(index);
    }

    /// Resumes reading the parts of entry `index` whose connections paused and may read on: a
    /// part that holds little once its client has taken its backlog (the part the merge waits
    /// for holds nothing), every part once the merge is over (the rest is dropped).
    fn resume_parts(&mut self, index: usize) {
        let entry = self.inflight.get(index);
        let session = entry.client.and_then(|slot| self.clients.sessions.get(slot)).filter(|s| !s.io.broken);
        let over = entry.merge_ended() || session.is_none();
        let room = session.is_some_and(|s| s.io.unsent() <= CLIENT_BACKLOG / 2);
        for (part, &conn) in entry.conns.iter().enumerate() {
            let Some(upstream) = (conn != usize::MAX).then(|| self.servers.get(conn)) else { continue };
            let ours =
                upstream.streaming_head().is_some_and(|h| h.request == index && h.generation == entry.generation);
            let little = entry.unconsumed(part) <= PART_RESUME;
            if upstream.paused() && ours && (over || (room && little)) {
                self.servers.get_mut(conn).resume(over);
                self.turn.readable.push(conn);
            }
        }
    }

    /// Moves the client's completed head replies, in order, to its socket.
    fn deliver(&mut self, slot: usize) {
        let mut written = None;
        loop {
            let Some(session) = self.clients.sessions.get_mut(slot) else { return };
            let Some(&index) = session.engine.queue.front() else { break };
            let entry = self.inflight.get_mut(index);
            if !entry.done {
                break;
            }
            session.engine.queue.pop_front();
            if session.engine.barrier == Some(index) {
                session.engine.barrier = None;
            }
            let reply = entry.reply_bytes();
            let len = reply.len().max(entry.streamed);
            session.engine.replied(len, &self.clients.budget, self.max_in_flight);
            let now = Instant::now();
            self.largest_reply.seen(len, now);
            if reply.len() < SEND_DIRECT {
                session.io.output().extend_from_slice(reply);
            } else {
                // A large value goes to the socket from where it is (not copied once more).
                self.clients.send(self.poll.registry(), slot, reply);
            }
            let entry = self.inflight.get_mut(index);
            entry.times.reply_written = now;
            written = Some(entry.times.reply_written);
            if let Some(request) = entry.request.as_ref() {
                let targets = entry.exchange.targets().len().max(1) as u16;
                self.recorder.record(kind_of(request), &entry.times, &entry.outcome, targets);
            }
            self.inflight.discharge(index, &mut self.clients.sessions[slot].held);
            self.inflight.release(index);
        }
        if let Some(session) = self.clients.sessions.get_mut(slot) {
            if session.engine.queue.is_empty() && session.pending().is_empty() {
                // Nothing in flight, nothing waiting: an idle client holds no queue storage (its
                // next request allocates 32 bytes again, a fraction of a per-cent of its cost).
                session.engine.queue = VecDeque::new();
            }
        }
        // Counted out at the instant their response times end.
        self.count_inside_at(written.unwrap_or_else(Instant::now));
        self.flush(slot);
        self.close_if_done(slot);
    }

    fn flush(&mut self, slot: usize) {
        self.clients.flush(self.poll.registry(), slot);
        self.resume_for(slot);
    }

    /// Closes the client once it is finished: broken, or closing (or at EOF) with every reply
    /// written; entries still in flight are recycled when their replies arrive, and a
    /// connection paused for it drops the rest of its reply.
    fn close_if_done(&mut self, slot: usize) {
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
        if let Some(conn) = session.engine.streaming_from {
            if self.servers.get(conn).paused() {
                self.servers.get_mut(conn).resume(true);
                self.turn.readable.push(conn);
            }
        }
        for &index in &session.engine.queue {
            let entry = self.inflight.get_mut(index);
            entry.client = None;
            let mut held = 0;
            self.inflight.discharge(index, &mut held);
            if self.inflight.get(index).done {
                self.inflight.release(index);
            } else {
                // A merged reply's parts paused for it: the rest is dropped now.
                self.resume_parts(index);
            }
        }
        self.count_inside();
    }

    /// Publishes the bytes this loop holds for its clients (at most every [`HELD_EVERY`]).
    fn publish_held(&mut self, now: Instant) {
        if now < self.held_at {
            return;
        }
        self.held_at = now + HELD_EVERY;
        let total = self.clients.sessions.iter().map(|(_, s)| s.held() + s.pending().len()).sum();
        self.held.publish(total);
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
        if self.servers.retiring() {
            self.servers.close_retired(self.poll.registry());
        }
        // Requests that timed out are answered now, not after the next event.
        self.end_of_turn();
        let shrunk = self.servers.tidy(now, self.poll.registry());
        if shrunk && !self.servers.busy() {
            // The loop has been idle for a while: the memory of its large values goes back.
            crate::buffer::release_large_spares();
        }
        self.publish_held(now);
        // (The bytes held are published at least once a measurement window: the loop wakes then.)
        self.servers.next_timer().into_iter().chain(next_handshake).min()
    }

    fn accept(&mut self) {
        self.clients.accept(self.poll.registry(), Replies::default);
    }

    fn accept_retry_at(&self) -> Option<Instant> {
        self.clients.accept_retry_at()
    }

    /// Reads what the client sent; with enough requests in flight, or past its budget, reading
    /// pauses (pump reads again once replies drain).
    fn read_client(&mut self, slot: usize, to_eof: bool) {
        let Some(session) = self.clients.sessions.get(slot) else { return };
        let limit = if self.may_start(session) != Start::Yes || session.backed_up(&self.clients.budget) {
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

    /// Parses and starts the client's requests, up to the in-flight limit and within its budget.
    fn pump(&mut self, slot: usize) {
        loop {
            let mut starved = false;
            loop {
                let Some(session) = self.clients.sessions.get(slot) else { return };
                let start = self.may_start(session);
                if start != Start::Yes {
                    // `--max-in-flight`, or what its budget holds of replies like its last: the
                    // rest of its pipeline waits (counted when some does).
                    let session = &mut self.clients.sessions[slot];
                    if !session.pending().is_empty() {
                        crate::access::count_yield();
                        session.waits_for_budget(start == Start::Budget);
                    }
                    break;
                }
                if let Some(barrier) = session.engine.barrier {
                    if !self.inflight.get(barrier).done {
                        break;
                    }
                }
                let session = &mut self.clients.sessions[slot];
                match session.next_request(&self.clients.limits, &self.clients.budget, &self.clients.local) {
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
                        self.turn.ready.push(slot);
                    }
                    Next::Request(request) => self.start_request(slot, request),
                }
            }
            // Bytes buffered are bounded by the parser (a line, a value), not here: a partial
            // long get line must be read on. A socket the last read drained is not read again
            // (its next bytes bring an event).
            let budget = &self.clients.budget;
            let reading = starved
                && self.clients.sessions.get(slot).is_some_and(|s| {
                    !s.io.eof
                        && !s.io.drained()
                        && !s.closing
                        && !s.backed_up(budget)
                        && self.may_start(s) == Start::Yes
                });
            if !reading {
                break;
            }
            // Reading may have stopped at the in-flight limit with bytes left in the socket.
            let pending = self.clients.sessions[slot].pending().len();
            self.read_client(slot, false);
            if self.clients.sessions[slot].pending().len() == pending {
                break;
            }
        }
        self.clients.note_arriving(slot);
        self.count_inside();
        self.close_if_done(slot);
    }

    fn engine_event(&mut self, token: mio::Token, event: &Event) {
        let Some(conn) = self.servers.of_token(token) else { return };
        if event.is_writable() {
            self.server_writable(conn);
        }
        if event.is_readable() || event.is_read_closed() || event.is_error() {
            self.read_server(conn, event.is_read_closed() || event.is_error());
        }
    }

    /// Works off what the turn's events completed, until nothing is left: what is in hand first
    /// (merged replies to move on, rounds completed, batches to write, replies to deliver and the
    /// clients' next requests), then connections to read again.
    fn end_of_turn(&mut self) {
        loop {
            if let Some(index) = self.next_work(|turn| &mut turn.merging) {
                self.advance_merge(index);
            } else if let Some(index) = self.next_work(|turn| &mut turn.completed) {
                self.complete_round(index);
            } else if let Some(conn) = self.servers.next_dirty() {
                self.flush_server(conn);
            } else if let Some(slot) = self.turn.ready.pop() {
                self.deliver(slot);
                self.pump(slot);
            } else if let Some(conn) = self.turn.readable.pop() {
                self.read_server(conn, false);
            } else {
                break;
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

impl EventLoop {
    /// Whether the client may start one more request ([`Replies::may_start`]).
    fn may_start(&self, session: &Session<Replies>) -> Start {
        let guess = || self.largest_reply.guess(Instant::now());
        session.engine.may_start(session.held(), &self.clients.budget, self.max_in_flight, guess)
    }

    /// The next entry of one of the turn's lists that is still the entry it was.
    fn next_work(&mut self, list: impl Fn(&mut Turn) -> &mut Vec<Work>) -> Option<usize> {
        while let Some((index, generation)) = list(&mut self.turn).pop() {
            if self.inflight.get(index).generation == generation {
                return Some(index);
            }
        }
        None
    }
}
