//! A request's way through an event loop: parsed, routed, sent to its targets (batched per server
//! connection), retried on another replica or copied (cas) when the rules say so, finished by the
//! shared reply rules, and delivered to its client in request order.

use std::time::Instant;

use memrelay_protocol::{parse_request, Command, Limits, Parse, Request};

use super::requests::TargetResult;
use super::thread::EventLoop;
use super::upstream::{Outstanding, Upstream};
use crate::measure::metrics::{kind_of, Outcome, Timestamps};
use crate::relay::failure::Failure;
use crate::relay::next_failover;
use crate::relay::reply::primary_took;
use crate::relay::rewrite::{Outgoing, Stage};
use crate::relay::{warm, win};
use crate::routing::{placement_key, Plan};

impl EventLoop {
    pub(super) fn start_request(&mut self, slot: usize, request: Request) {
        self.refresh_config();
        let now = Instant::now();
        let index = self.inflight.alloc();
        self.inflight.count_in(index);
        let session = &mut self.clients.sessions[slot];
        let entry = self.inflight.get_mut(index);
        entry.client = Some(slot);
        entry.input.extend_from_slice(&session.pending()[..request.consumed]);
        entry.times = Timestamps::at(session.io.arrival());
        entry.times.enqueue = now;
        session.consume(request.consumed);
        session.engine.queue.push_back(index);
        // The request is in flight now, no longer arriving.
        self.clients.note_arriving(slot);
        self.count_inside();
        let entry = self.inflight.get_mut(index);
        let rr = self.round_robin;
        if request.command.is_read() {
            self.round_robin = self.round_robin.wrapping_add(1);
        }
        let router = &self.config.router;
        let repair = self.health.repair();
        let plan = if router.repairs() {
            router.route_avoiding(&request, &entry.input, rr, &mut self.route, &|s| repair.is_repairing(s))
        } else {
            router.route(&request, &entry.input, rr, &mut self.route)
        };
        entry.plan = plan;
        entry.rr = rr;
        entry.targets.clear();
        entry.targets.extend_from_slice(&self.route.targets);
        entry.key_owner.clear();
        entry.key_owner.extend_from_slice(&self.route.key_owner);
        entry.touches.clear();
        entry.touches.extend_from_slice(&self.route.touches);
        let (noreply, quit) = (request.noreply, request.command == Command::Quit);
        entry.request = Some(request);
        match plan {
            Plan::Local => {
                let request = entry.request.as_ref().expect("set above");
                if !noreply && !quit {
                    self.clients.local.answer(request, &entry.input, 0, &mut entry.reply);
                }
                entry.outcome = Outcome::default();
                entry.done = true;
                self.clients.sessions[slot].closing |= quit;
                self.ready.push(slot);
            }
            Plan::Forward(server) => {
                entry.targets.clear();
                entry.targets.push(server);
                entry.first_target = server;
                self.send_to_targets(index, now, 0);
            }
            Plan::Replicate | Plan::Split => self.send_to_targets(index, now, 0),
            Plan::PrimaryFirst => {
                // The primary first; the copies follow once it took the request. Until then the
                // client's later requests wait, so none reads a replica the copy has not reached.
                entry.targets.truncate(1);
                self.clients.sessions[slot].engine.barrier = Some(index);
                self.send_to_targets(index, now, 0);
            }
        }
        self.recorder.queue_length(now, self.upstreams.iter().map(Upstream::unsent).sum());
    }

    /// Queues the entry's request on its targets' connections from target `from` on (the ones
    /// before have answered already).
    pub(super) fn send_to_targets(&mut self, index: usize, now: Instant, from: usize) {
        let entry = self.inflight.get_mut(index);
        entry.expect_targets(from);
        let generation = entry.generation;
        for target in from..entry.targets.len() {
            let entry = self.inflight.get(index);
            let request = entry.request.as_ref().expect("an in-flight entry carries a request");
            let outgoing = Outgoing {
                request,
                input: &entry.input,
                plan: entry.plan,
                stage: entry.stage,
                key_owner: &entry.key_owner,
                touches: &entry.touches,
            };
            let server = entry.targets[target];
            let expect = outgoing.expect();
            let repairing = request.command.is_keyed_write()
                && self.health.repair().is_repairing(server)
                && self.config.router.write_policy_of(request, &entry.input).repairs();
            let upstream = &mut self.upstreams[server];
            self.recorder.server_request(server);
            if repairing {
                // The repair thread is the only writer there until it is up to date.
                self.target_done(index, target, TargetResult::Failed(Failure::Repairing), &[]);
            } else if self.health.is_down(server) {
                self.recorder.server_failure(server);
                self.target_done(index, target, TargetResult::Failed(Failure::Down), &[]);
            } else if upstream.available(self.poll.registry(), now) {
                let target = target as u16;
                let outstanding = Outstanding {
                    request: index,
                    generation,
                    target,
                    expect,
                    deadline: now + self.config.server_timeout,
                    queued: now,
                };
                upstream.push(|out| outgoing.compose_for(server, out), outstanding);
                if !self.dirty.contains(&server) {
                    self.dirty.push(server);
                }
            } else {
                self.recorder.server_failure(server);
                self.health.failed(server, Failure::Unavailable);
                self.target_done(index, target, TargetResult::Failed(Failure::Unavailable), &[]);
            }
        }
    }

    /// Target `target` of entry `index` has answered (or failed).
    pub(super) fn target_done(&mut self, index: usize, target: usize, result: TargetResult, bytes: &[u8]) {
        if self.inflight.get_mut(index).target_done(target, result, bytes) {
            self.targets_complete(index);
        }
    }

    /// Every target of entry `index` has answered: retry, copy (cas) or finish.
    pub(super) fn targets_complete(&mut self, index: usize) {
        let entry = self.inflight.get_mut(index);
        let now = Instant::now();
        entry.times.last_reply = now;
        let request = entry.request.as_ref().expect("an in-flight entry carries a request");
        let key = request.key(&entry.input);
        // A split read with failover that a server answering keys failed: routed again, all of
        // it, without the servers that failed (at most once per server).
        if self.config.failover
            && entry.plan == Plan::Split
            && entry.stage == Stage::Request
            && request.command.is_read()
        {
            let mut failed = false;
            for (i, &server) in entry.targets.iter().enumerate() {
                let answers_keys = entry.key_owner.contains(&server);
                if matches!(entry.results[i], TargetResult::Failed(_))
                    && answers_keys
                    && !entry.avoided.contains(&server)
                {
                    entry.avoided.push(server);
                    failed = true;
                }
            }
            if failed {
                let repair = self.health.repair();
                let avoided = &entry.avoided;
                let avoid = |s| repair.is_repairing(s) || avoided.contains(&s);
                let plan = self.config.router.route_avoiding(request, &entry.input, entry.rr, &mut self.route, &avoid);
                // Unless every server left for some key failed too (the route then names one).
                let answering = match &plan {
                    Plan::Forward(server) => std::slice::from_ref(server),
                    _ => &self.route.key_owner[..],
                };
                if answering.iter().all(|s| !entry.avoided.contains(s)) {
                    entry.plan = plan;
                    entry.targets.clear();
                    match plan {
                        Plan::Forward(server) => {
                            entry.targets.push(server);
                            entry.first_target = server;
                        }
                        _ => entry.targets.extend_from_slice(&self.route.targets),
                    }
                    entry.key_owner.clear();
                    entry.key_owner.extend_from_slice(&self.route.key_owner);
                    entry.touches.clear();
                    entry.touches.extend_from_slice(&self.route.touches);
                    return self.send_to_targets(index, now, 0);
                }
            }
        }
        // A read with failover: try the key's next replica that is not being repaired.
        if self.config.failover && entry.plan != Plan::Split && request.command.is_read() {
            if let TargetResult::Failed(_) = entry.results[0] {
                self.config.router.replicas(&placement_key(request, &entry.input), &mut self.replicas);
                let repair = self.health.repair();
                let mut attempt = usize::from(entry.attempts);
                let next = next_failover(&self.replicas, entry.first_target, &mut attempt, |s| repair.is_repairing(s));
                entry.attempts = u16::try_from(attempt).unwrap_or(u16::MAX);
                if let Some(next) = next {
                    entry.targets[0] = next;
                    return self.send_to_targets(index, now, 0);
                }
            }
        }
        // A balanced mg a replica answered with win/stale flags: the primary's answer counts.
        if entry.stage == Stage::Request && win::applies(request, entry.plan) {
            if let TargetResult::Replied(reply) = entry.results[0] {
                if win::carries_win_flags(&reply, &entry.bodies[0]) {
                    let repair = self.health.repair();
                    let key = placement_key(request, &entry.input);
                    let primary =
                        self.config.router.primary_avoiding(&key, &|s| repair.is_repairing(s), &mut self.replicas);
                    if primary != entry.targets[0] {
                        entry.targets[0] = primary;
                        return self.send_to_targets(index, now, 0);
                    }
                }
            }
        }
        // A miss on a server that restarted a short while ago: ask a replica that has the key.
        if entry.stage == Stage::Request && warm::applies(request, entry.plan) {
            let cold = entry.targets[0];
            if let TargetResult::Replied(reply) = entry.results[0] {
                if warm::missed(&reply) && self.health.is_cold(cold) {
                    let other = warm::replica(&self.config.router, &self.health, key, cold, &mut self.replicas);
                    if let Some(other) = other.filter(|_| self.warm_budget.take(now)) {
                        entry.stage = Stage::WarmRead;
                        entry.warming = Some(cold);
                        entry.targets[0] = other;
                        return self.send_to_targets(index, now, 0);
                    }
                }
            }
        }
        // The primary took the request: copy it to the other replicas (the primary stays
        // target 0, with its answer).
        if entry.plan == Plan::PrimaryFirst && entry.stage == Stage::Request {
            let took = matches!(entry.results[0], TargetResult::Replied(r) if primary_took(&r));
            let repair = self.health.repair();
            let key = placement_key(request, &entry.input);
            self.config.router.write_targets_leading(&key, &mut self.route.targets, &|s| repair.is_repairing(s));
            if took && self.route.targets.len() > 1 {
                entry.stage = Stage::Copies;
                entry.targets.clear();
                entry.targets.extend_from_slice(&self.route.targets);
                return self.send_to_targets(index, now, 1);
            }
        }
        let policy = self.config.router.write_policy_of(request, &entry.input);
        if policy.repairs() && request.command.is_keyed_write() {
            let key = placement_key(request, &entry.input);
            for (&server, result) in entry.targets.iter().zip(&entry.results) {
                // A target still waiting when its request finished timed out.
                if !matches!(result, TargetResult::Replied(_)) {
                    self.health.repair().missed(server, &key);
                }
            }
        }
        entry.finish(&self.addrs, policy);
        // The replica had the value: write it back to the cold server, fire and forget.
        let mut write_back = None;
        if let (Some(cold), TargetResult::Replied(reply)) = (entry.warming, entry.results[0]) {
            let key = entry.request.as_ref().map(|r| r.key(&entry.input)).unwrap_or_default();
            let mut bytes = Vec::new();
            if warm::write_back(key, &reply, &entry.bodies[0], &mut bytes) {
                write_back = Some((cold, bytes));
            }
        }
        let entry = self.inflight.get_mut(index);
        if let Some(client) = entry.client {
            self.ready.push(client);
        } else {
            self.inflight.release(index);
        }
        if let Some((cold, bytes)) = write_back {
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
        entry.request = Some(request);
        entry.plan = Plan::Forward(server);
        entry.targets.clear();
        entry.targets.push(server);
        entry.first_target = server;
        entry.key_owner.clear();
        entry.touches.clear();
        entry.times = Timestamps::at(now);
        self.send_to_targets(index, now, 0);
    }

    /// Moves the client's completed head replies, in order, to its socket.
    pub(super) fn deliver(&mut self, slot: usize) {
        let Some(session) = self.clients.sessions.get_mut(slot) else { return };
        let mut written = None;
        while let Some(&index) = session.engine.queue.front() {
            let entry = self.inflight.get_mut(index);
            if !entry.done {
                break;
            }
            session.engine.queue.pop_front();
            if session.engine.barrier == Some(index) {
                session.engine.barrier = None;
            }
            session.io.output().extend_from_slice(&entry.reply);
            entry.times.reply_written = Instant::now();
            written = Some(entry.times.reply_written);
            if let Some(request) = entry.request.as_ref() {
                let targets = entry.targets.len().max(1) as u16;
                self.recorder.record(kind_of(request), &entry.times, &entry.outcome, targets);
            }
            self.inflight.release(index);
        }
        // Counted out at the instant their response times end.
        self.count_inside_at(written.unwrap_or_else(Instant::now));
        self.flush(slot);
        self.close_if_done(slot);
    }
}
