//! What an event loop keeps per client beside the shared client side ([`crate::client`]): its
//! requests in flight in order, a read-your-writes barrier, the connection a reply streams to it
//! from; and the client as a merged reply sees it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use mio::Registry;

use super::merged::MergeClient;
use crate::client::budget::Budget;
use crate::client::ClientSide;

/// The loop's state of one client.
#[derive(Default)]
pub(super) struct Replies {
    /// Its in-flight entries, in request order.
    pub queue: VecDeque<usize>,
    /// A request whose copies must reach the replicas before the client's next request starts
    /// (read-your-writes after a `cas`).
    pub barrier: Option<usize>,
    /// The connection whose reply is streaming to this client ([`crate::relay::stream`]).
    pub streaming_from: Option<usize>,
    /// How many requests it may have in flight now ([`Replies::window`]); 0 until its first
    /// reply.
    window: usize,
    /// The size of its last reply: what each of its requests in flight is expected to bring.
    expected: usize,
}

/// Whether a client may start a request ([`Replies::may_start`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Start {
    Yes,
    /// Its window is full: it waits for replies.
    Window,
    /// Its replies would not fit its budget: it waits until it takes them.
    Budget,
}

/// The requests a client may have in flight before its first reply: a pipeline of large values
/// sends at most this many to the shared connections before memrelay has seen how large they are.
const FIRST_WINDOW: usize = 16;

impl Replies {
    /// How many requests the client may have in flight now, at most `max_in_flight`: as many
    /// replies as its budget holds, at the size of its last reply, growing (doubling per reply)
    /// while its replies are small. A pipeline of large values thus puts no more on the shared
    /// server connections than the client's budget can take, so few replies are left to drop
    /// (and few for other clients to wait behind) when it does not read.
    pub fn window(&self, max_in_flight: usize) -> usize {
        if self.window == 0 { FIRST_WINDOW } else { self.window }.min(max_in_flight)
    }

    /// Whether the client may start one more request: within its window, and, unless it holds
    /// nothing and has nothing in flight, only if what it holds (`held`) and what its requests in
    /// flight are expected to bring stay within its budget. A reply is expected to be as large as
    /// its last; before its first, as large as the largest the loop saw lately (`first_guess`),
    /// so that a new connection pipelining large values waits at its budget (and is left alone)
    /// instead of putting more on the shared server connections than it can hold and being cut
    /// off (and, reconnecting, doing it again).
    pub fn may_start(
        &self,
        held: usize,
        budget: &Budget,
        max_in_flight: usize,
        first_guess: impl FnOnce() -> usize,
    ) -> Start {
        let in_flight = self.queue.len();
        if in_flight >= self.window(max_in_flight) {
            return Start::Window;
        }
        if in_flight == 0 && held == 0 {
            // One request at a time, however large its replies.
            return Start::Yes;
        }
        let each = if self.window == 0 { first_guess() } else { self.expected };
        if held.saturating_add((in_flight + 1).saturating_mul(each)) <= budget.limit() {
            Start::Yes
        } else {
            Start::Budget
        }
    }

    /// A reply of `len` bytes went to the client: the window follows it.
    pub fn replied(&mut self, len: usize, budget: &Budget, max_in_flight: usize) {
        let fit = budget.limit() / len.max(1);
        let grown = self.window(max_in_flight).saturating_mul(2);
        self.window = fit.min(grown).clamp(1, max_in_flight);
        self.expected = len;
    }
}

/// The largest reply a loop delivered lately (in this period of [`LargestReply::PERIOD`] or the
/// one before): what a new client's replies are expected to be, before it has had one.
pub(super) struct LargestReply {
    this_period: usize,
    last_period: usize,
    since: Instant,
}

impl LargestReply {
    const PERIOD: Duration = Duration::from_secs(10);

    pub fn new(now: Instant) -> LargestReply {
        LargestReply { this_period: 0, last_period: 0, since: now }
    }

    pub fn seen(&mut self, len: usize, now: Instant) {
        let elapsed = now.saturating_duration_since(self.since);
        if elapsed >= Self::PERIOD {
            self.last_period = if elapsed < 2 * Self::PERIOD { self.this_period } else { 0 };
            self.this_period = 0;
            self.since = now;
        }
        self.this_period = self.this_period.max(len);
    }

    pub fn guess(&self, now: Instant) -> usize {
        match now.saturating_duration_since(self.since) {
            elapsed if elapsed < Self::PERIOD => self.this_period.max(self.last_period),
            elapsed if elapsed < 2 * Self::PERIOD => self.this_period,
            _ => 0,
        }
    }
}

/// The loop's clients.
pub(super) type Clients = ClientSide<Replies>;

/// Cuts the client in `slot` off: its connection closes once the loop gets to it (it is on the
/// turn's ready list), the rest of its replies is read and dropped; counted.
pub(super) fn cut_off(clients: &mut Clients, slot: usize) {
    if let Some(session) = clients.sessions.get_mut(slot) {
        if !session.io.broken {
            session.io.broken = true;
            crate::client::budget::count_cut_off();
        }
    }
}

/// The client of a merged reply: its backlog, and the socket the merge writes to.
pub(super) struct MergeOut<'a> {
    pub clients: &'a mut Clients,
    pub registry: &'a Registry,
    pub slot: Option<usize>,
    /// Bytes sent to it.
    pub sent: usize,
}

impl MergeClient for MergeOut<'_> {
    fn backlog(&self) -> Option<usize> {
        let session = self.clients.sessions.get(self.slot?)?;
        (!session.io.broken).then(|| session.io.unsent())
    }

    fn send(&mut self, bytes: &[u8]) {
        if let Some(slot) = self.slot {
            self.clients.send(self.registry, slot, bytes);
            self.sent += bytes.len();
        }
    }
}
