//! A request's way through an event loop: parsed, started on its [`Exchange`] (the shared
//! per-request policy), each round's targets sent (batched per server connection), the policy
//! asked what follows when a round's last answer arrives, and the reply delivered to its client
//! in request order.
//!
//! [`Exchange`]: crate::relay::exchange::Exchange

use std::collections::VecDeque;
use std::time::Instant;

use memrelay_protocol::{parse_request, Command, Limits, Parse, Request};

use super::requests::{answers, TargetResult};
use super::thread::EventLoop;
use super::upstream::{Outstanding, Upstream};
use crate::client::io::SEND_DIRECT;
use crate::measure::metrics::{kind_of, Outcome, Timestamps};
use crate::relay::exchange::Step;
use crate::upstream::failure::Failure;

impl EventLoop {
    pub(super) fn start_request(&mut self, slot: usize, request: Request) {
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
                self.ready.push(slot);
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
        self.recorder.queue_length(now, self.upstreams.iter().map(Upstream::unsent).sum());
    }

    /// Queues the entry's request on its targets' connections from target `from` on (the ones
    /// before have answered already), each through the policy's gate.
    pub(super) fn send_to_targets(&mut self, index: usize, now: Instant, from: usize, deadline: Instant) {
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
            let upstream = &mut self.upstreams[server];
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
                let target = target as u16;
                let outstanding = Outstanding { request: index, generation, target, expect, deadline, queued: now };
                upstream.push(entry.input.len() + 64, |out| outgoing.compose_for(server, out), outstanding);
                if !self.dirty.contains(&server) {
                    self.dirty.push(server);
                }
            }
        }
    }

    /// Target `target` of entry `index` has answered (or failed).
    pub(super) fn target_done(&mut self, index: usize, target: usize, result: TargetResult, bytes: &[u8]) {
        if self.inflight.get_mut(index).target_done(target, result, bytes) {
            self.targets_complete(index);
        } else if self.inflight.get(index).merge.is_some() {
            // A part of a merged reply failed: the merge may be waiting on it.
            self.pump_merge(index);
        }
    }

    /// Every target of entry `index` has answered: the policy says what follows (another round,
    /// or the reply).
    pub(super) fn targets_complete(&mut self, index: usize) {
        if self.inflight.get(index).merge.is_some() {
            // Every part is in: the merged reply is moved on to its end, which is the answer.
            self.pump_merge(index);
            let entry = self.inflight.get_mut(index);
            if let (Some(reply), TargetResult::Replied(_)) = (entry.merged, entry.results[0]) {
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
        entry.finish(&self.addrs, &*self.health);
        // The replica had the value: write it back to the cold server, fire and forget.
        let mut bytes = Vec::new();
        let write_back = entry.exchange.write_back(answers(&entry.results, &entry.bodies)(0), &mut bytes);
        if let Some(client) = entry.client {
            self.ready.push(client);
        } else {
            self.inflight.release(index);
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

    /// Moves the client's completed head replies, in order, to its socket.
    pub(super) fn deliver(&mut self, slot: usize) {
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
            if reply.len() < SEND_DIRECT {
                session.io.output().extend_from_slice(reply);
            } else {
                // A large value goes to the socket from where it is (not copied once more).
                self.clients.send(self.poll.registry(), slot, reply);
            }
            entry.times.reply_written = Instant::now();
            written = Some(entry.times.reply_written);
            if let Some(request) = entry.request.as_ref() {
                let targets = entry.exchange.targets().len().max(1) as u16;
                self.recorder.record(kind_of(request), &entry.times, &entry.outcome, targets);
            }
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
}
