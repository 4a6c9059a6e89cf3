//! Requests in flight in one event loop: what each is waiting for, and how its reply is built
//! once every target has answered.
//!
//! Entries live in a [`Pool`] and are reused with their buffers, so the steady state allocates
//! nothing. An entry is referenced from its client's reply queue (by index) and from the
//! upstreams' outstanding queues (by index and generation, so a stale reference is ignored).

use std::io::Write;
use std::net::SocketAddr;
use std::time::Instant;

use memrelay_protocol::{compose, Reply, Request, Status};

use crate::failure::{pick_reply, Failure};
use crate::metrics::{Outcome, Timestamps};
use crate::routing::{coalesce, Plan};

/// What one target answered.
#[derive(Debug, Clone, Copy)]
pub enum TargetResult {
    Waiting,
    Replied(Reply),
    Failed(Failure),
}

pub struct InFlight {
    pub generation: u32,
    /// The client's slot; `None` once the client is gone (the entry is then recycled when done).
    pub client: Option<usize>,
    /// The request's bytes as they arrived; the parsed request's ranges index them.
    pub input: Vec<u8>,
    pub request: Option<Request>,
    pub plan: Plan,
    pub targets: Vec<usize>,
    pub key_owner: Vec<usize>,
    pub results: Vec<TargetResult>,
    /// Each target's reply bytes.
    pub bodies: Vec<Vec<u8>>,
    /// Scratch for coalescing a split: each server's slot and read position.
    slot_of: Vec<usize>,
    cursors: Vec<usize>,
    pub remaining: usize,
    /// For cas: the primary stored the value and the copies to the other replicas are out.
    pub copying: bool,
    /// Servers tried so far for a read with failover.
    pub attempts: u16,
    pub times: Timestamps,
    pub sent: bool,
    pub reply: Vec<u8>,
    pub outcome: Outcome,
    pub done: bool,
}

impl InFlight {
    fn new() -> InFlight {
        InFlight {
            generation: 0,
            client: None,
            input: Vec::new(),
            request: None,
            plan: Plan::Local,
            targets: Vec::new(),
            key_owner: Vec::new(),
            results: Vec::new(),
            bodies: Vec::new(),
            slot_of: Vec::new(),
            cursors: Vec::new(),
            remaining: 0,
            copying: false,
            attempts: 0,
            times: Timestamps::at(Instant::now()),
            sent: false,
            reply: Vec::new(),
            outcome: Outcome::default(),
            done: false,
        }
    }

    /// Prepares the per-target slots for `self.targets`.
    pub fn expect_targets(&mut self) {
        let n = self.targets.len();
        self.results.clear();
        self.results.resize(n, TargetResult::Waiting);
        if self.bodies.len() < n {
            self.bodies.resize_with(n, Vec::new);
        }
        for body in &mut self.bodies[..n] {
            body.clear();
        }
        self.remaining = n;
    }

    /// Records target `slot`'s answer; true when it was the last one awaited.
    pub fn target_done(&mut self, slot: usize, result: TargetResult, bytes: &[u8]) -> bool {
        if !matches!(self.results[slot], TargetResult::Waiting) {
            return false;
        }
        self.results[slot] = result;
        self.bodies[slot].extend_from_slice(bytes);
        self.remaining -= 1;
        self.remaining == 0
    }

    fn request(&self) -> &Request {
        self.request.as_ref().expect("an in-flight entry carries a request")
    }

    fn status_or_failure(&self, slot: usize) -> Result<Status, Failure> {
        match self.results[slot] {
            TargetResult::Replied(reply) => Ok(reply.status),
            TargetResult::Failed(failure) => Err(failure),
            TargetResult::Waiting => Err(Failure::Timeout),
        }
    }

    /// Builds the client's reply from the targets' answers (all are in).
    pub fn finish(&mut self, addrs: &[SocketAddr]) {
        self.reply.clear();
        let keys = self.request().key_count as u32;
        self.outcome = Outcome { keys, ..Outcome::default() };
        match self.plan {
            Plan::Split => self.finish_split(addrs),
            _ => {
                let n = self.targets.len();
                let statuses = (0..n).map(|slot| self.status_or_failure(slot));
                match pick_reply(statuses) {
                    Some((slot, Ok(_))) => self.relay(slot),
                    Some((slot, Err(failure))) => self.server_error(failure, addrs[self.targets[slot]]),
                    None => {}
                }
            }
        }
        if self.request().noreply {
            self.reply.clear();
        }
        self.done = true;
    }

    fn finish_split(&mut self, addrs: &[SocketAddr]) {
        for slot in 0..self.targets.len() {
            match self.results[slot] {
                TargetResult::Replied(reply) if reply.status.is_error() => return self.relay(slot),
                TargetResult::Replied(_) => {}
                TargetResult::Failed(failure) => return self.server_error(failure, addrs[self.targets[slot]]),
                TargetResult::Waiting => return self.server_error(Failure::Timeout, addrs[self.targets[slot]]),
            }
        }
        // Server s's body is the body of the slot whose target is s.
        let servers = self.targets.iter().copied().max().unwrap_or(0) + 1;
        self.slot_of.clear();
        self.slot_of.resize(servers, usize::MAX);
        self.cursors.clear();
        self.cursors.resize(servers, 0);
        for (slot, &server) in self.targets.iter().enumerate() {
            self.slot_of[server] = slot;
        }
        let request = self.request.as_ref().expect("an in-flight entry carries a request");
        let (bodies, results, slot_of) = (&self.bodies, &self.results, &self.slot_of);
        let body = |server: usize| {
            let slot = slot_of[server];
            let TargetResult::Replied(reply) = results[slot] else { unreachable!("checked above") };
            &bodies[slot][..reply.body_end]
        };
        let hits = coalesce(request.keys(&self.input), &self.key_owner, body, &mut self.cursors, &mut self.reply);
        self.reply.extend_from_slice(compose::END);
        self.outcome.hits = hits;
        self.outcome.misses = self.outcome.keys - hits;
    }

    fn relay(&mut self, slot: usize) {
        let TargetResult::Replied(reply) = self.results[slot] else { return };
        self.reply.extend_from_slice(&self.bodies[slot][..reply.consumed]);
        self.outcome.error = reply.status.is_error();
        if self.request().command.is_retrieval() && reply.status == Status::End {
            self.outcome.hits = reply.items;
            self.outcome.misses = self.outcome.keys.saturating_sub(reply.items);
        }
    }

    fn server_error(&mut self, failure: Failure, addr: SocketAddr) {
        self.reply.clear();
        // Formatting only on the failure path.
        let _ = write!(self.reply, "SERVER_ERROR {} ({addr})\r\n", failure.reason());
        self.outcome.error = true;
    }
}

/// In-flight entries, reused.
#[derive(Default)]
pub struct Pool {
    entries: Vec<InFlight>,
    free: Vec<usize>,
}

impl Pool {
    pub fn alloc(&mut self) -> usize {
        match self.free.pop() {
            Some(index) => index,
            None => {
                self.entries.push(InFlight::new());
                self.entries.len() - 1
            }
        }
    }

    pub fn release(&mut self, index: usize) {
        let entry = &mut self.entries[index];
        entry.generation = entry.generation.wrapping_add(1);
        entry.client = None;
        entry.input.clear();
        entry.request = None;
        entry.reply.clear();
        entry.done = false;
        entry.sent = false;
        entry.copying = false;
        entry.attempts = 0;
        self.free.push(index);
    }

    pub fn get(&self, index: usize) -> &InFlight {
        &self.entries[index]
    }

    pub fn get_mut(&mut self, index: usize) -> &mut InFlight {
        &mut self.entries[index]
    }

    pub fn in_use(&self) -> usize {
        self.entries.len() - self.free.len()
    }
}
