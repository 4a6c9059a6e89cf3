//! Requests in flight in one event loop: what each is waiting for, and its reply once every
//! target has answered (the shared per-request policy, [`Exchange`], decides each round).
//!
//! Entries live in [`Requests`] and are reused with their buffers, so the steady state allocates
//! nothing. An entry is referenced from its client's reply queue (by index) and from the
//! upstreams' outstanding queues (by index and generation, so a stale reference is ignored).

use std::net::SocketAddr;
use std::time::Instant;

use memrelay_protocol::{Reply, Request};

use super::merged::MergedReply;
use crate::buffer::clear_and_recycle;
use crate::measure::metrics::{Outcome, Timestamps};
use crate::relay::exchange::Exchange;
use crate::relay::reply::{Answer, ReplyBytes};
use crate::upstream::failure::Failure;
use crate::upstream::Servers;

/// What one target answered.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TargetResult {
    Waiting,
    Replied(Reply),
    Failed(Failure),
}

pub(crate) struct InFlight {
    pub generation: u32,
    /// The client's slot; `None` once the client is gone (the entry is then recycled when done).
    pub client: Option<usize>,
    /// The request's bytes as they arrived; the parsed request's ranges index them.
    pub input: Vec<u8>,
    pub request: Option<Request>,
    /// Its way through the servers (the shared per-request policy).
    pub exchange: Exchange,
    pub results: Vec<TargetResult>,
    /// Each target's reply bytes.
    pub bodies: Vec<Vec<u8>>,
    /// The connection each target's request went out on.
    pub conns: Vec<usize>,
    /// Scratch for coalescing a split: each server's read position.
    cursors: Vec<usize>,
    /// A split read's reply streaming to the client in key order: the parts' bytes arrive in
    /// `bodies` ([`MergedReply`]).
    pub merge: Option<MergedReply>,
    pub remaining: usize,
    /// Bytes of this entry charged to its client's budget ([`Requests::recharge`]).
    charged: usize,
    /// Bytes of its reply that went to the client as they arrived (streamed or merged).
    pub streamed: usize,
    pub times: Timestamps,
    pub sent: bool,
    /// The client's reply, when composed (see `relayed`).
    pub reply: Vec<u8>,
    /// The reply is a target's answer as it came, sent from its body rather than copied.
    pub relayed: ReplyBytes,
    pub outcome: Outcome,
    pub done: bool,
    /// Counted among the requests inside memrelay (a client's request, reply not yet written).
    counted: bool,
}

impl InFlight {
    fn new() -> InFlight {
        InFlight {
            generation: 0,
            counted: false,
            client: None,
            input: Vec::new(),
            request: None,
            exchange: Exchange::default(),
            results: Vec::new(),
            bodies: Vec::new(),
            conns: Vec::new(),
            cursors: Vec::new(),
            merge: None,
            remaining: 0,
            charged: 0,
            streamed: 0,
            times: Timestamps::at(Instant::now()),
            sent: false,
            reply: Vec::new(),
            relayed: ReplyBytes::Composed,
            outcome: Outcome::default(),
            done: false,
        }
    }

    /// Prepares the per-target results for the exchange's targets from `from` on (the answers
    /// of the targets before `from` are kept).
    pub fn expect_targets(&mut self, from: usize) {
        let n = self.exchange.targets().len();
        self.results.truncate(from);
        self.results.resize(n, TargetResult::Waiting);
        if self.bodies.len() < n {
            self.bodies.resize_with(n, Vec::new);
        }
        for body in &mut self.bodies[from..n] {
            body.clear();
        }
        self.conns.truncate(from);
        self.conns.resize(n, usize::MAX);
        self.remaining = n - from;
    }

    /// Records target `target`'s answer; true when it was the last one awaited.
    pub fn target_done(&mut self, target: usize, result: TargetResult, bytes: &[u8]) -> bool {
        if !matches!(self.results[target], TargetResult::Waiting) {
            return false;
        }
        self.results[target] = result;
        crate::buffer::reserve(&mut self.bodies[target], bytes.len());
        self.bodies[target].extend_from_slice(bytes);
        self.remaining -= 1;
        self.remaining == 0
    }

    /// Part `part`'s bytes of a merged reply not yet consumed.
    pub fn unconsumed(&self, part: usize) -> usize {
        self.merge.as_ref().map_or(self.bodies[part].len(), |m| m.unconsumed(&self.bodies, part))
    }

    /// Whether the merged reply is over (through, or cut off): the rest of its parts is dropped.
    pub fn merge_ended(&self) -> bool {
        self.merge.as_ref().is_some_and(|m| m.ended().is_some())
    }

    /// Bytes this entry holds for its client: the request, the reply, the parts not consumed.
    fn held(&self) -> usize {
        let bodies: usize = (0..self.bodies.len()).map(|p| self.unconsumed(p)).sum();
        self.input.len() + self.reply.len() + bodies
    }

    /// Builds the client's reply from the targets' answers (all are in).
    pub fn finish(&mut self, addrs: &[SocketAddr], servers: &impl Servers) {
        let request = self.request.as_ref().expect("an in-flight entry carries a request");
        let answer = answers(&self.results, &self.bodies);
        (self.outcome, self.relayed) = self.exchange.finish(
            request,
            &self.input,
            answer,
            |s| addrs[s],
            servers,
            &mut self.cursors,
            &mut self.reply,
        );
        self.done = true;
    }

    /// The client's reply bytes (once finished).
    pub fn reply_bytes(&self) -> &[u8] {
        match self.relayed {
            ReplyBytes::Composed => &self.reply,
            ReplyBytes::Relayed { target, len } => &self.bodies[target][..len],
        }
    }
}

/// Target i's answer (a target still waiting when its request finished timed out).
pub(crate) fn answers<'a>(results: &'a [TargetResult], bodies: &'a [Vec<u8>]) -> impl Fn(usize) -> Answer<'a> {
    move |i| match results[i] {
        TargetResult::Replied(reply) => Answer::Replied(reply, &bodies[i]),
        TargetResult::Failed(failure) => Answer::Failed(failure),
        TargetResult::Waiting => Answer::Failed(Failure::Timeout),
    }
}

/// A buffer of an entry larger than this is given back when the entry is released.
const KEEP_CAPACITY: usize = 64 * 1024;

/// In-flight entries, reused.
#[derive(Default)]
pub(crate) struct Requests {
    entries: Vec<InFlight>,
    free: Vec<usize>,
    /// Entries counted inside memrelay ([`crate::measure::in_system`]).
    counted: usize,
}

impl Requests {
    pub fn alloc(&mut self) -> usize {
        match self.free.pop() {
            Some(index) => index,
            None => {
                self.entries.push(InFlight::new());
                self.entries.len() - 1
            }
        }
    }

    /// Brings what entry `index` charges its client (`held`, the engine's share of the client's
    /// budget) up to date after its bytes changed; returns the client's new total.
    pub fn recharge(&mut self, index: usize, held: &mut usize) -> usize {
        let entry = &mut self.entries[index];
        let now = entry.held();
        *held = (*held + now).saturating_sub(entry.charged);
        entry.charged = now;
        *held
    }

    /// Takes entry `index`'s charge off its client (`held`): the reply went out, or the client
    /// left.
    pub fn discharge(&mut self, index: usize, held: &mut usize) {
        let entry = &mut self.entries[index];
        *held = held.saturating_sub(entry.charged);
        entry.charged = 0;
    }

    /// Counts entry `index` inside memrelay (a client's request started).
    pub fn count_in(&mut self, index: usize) {
        if !self.entries[index].counted {
            self.entries[index].counted = true;
            self.counted += 1;
        }
    }

    /// Entry `index` is no longer inside memrelay (its reply was written, or its client left).
    pub fn count_out(&mut self, index: usize) {
        if self.entries[index].counted {
            self.entries[index].counted = false;
            self.counted -= 1;
        }
    }

    /// Client requests inside memrelay.
    pub fn counted(&self) -> usize {
        self.counted
    }

    pub fn release(&mut self, index: usize) {
        self.count_out(index);
        let entry = &mut self.entries[index];
        entry.generation = entry.generation.wrapping_add(1);
        entry.client = None;
        // Entries are reused: one large request or reply must not keep its memory with them.
        clear_and_recycle(&mut entry.input, KEEP_CAPACITY);
        entry.request = None;
        entry.merge = None;
        entry.charged = 0;
        entry.streamed = 0;
        clear_and_recycle(&mut entry.reply, KEEP_CAPACITY);
        entry.relayed = ReplyBytes::Composed;
        for body in &mut entry.bodies {
            clear_and_recycle(body, KEEP_CAPACITY);
        }
        entry.done = false;
        entry.sent = false;
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
