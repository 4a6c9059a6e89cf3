//! What an event loop keeps per client beside the shared client side ([`crate::client`]): its
//! requests in flight in order, a read-your-writes barrier, the connection a reply streams to it
//! from; and the client as a merged reply sees it.

use std::collections::VecDeque;

use mio::Registry;

use super::merged::MergeClient;
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
}

impl MergeClient for MergeOut<'_> {
    fn backlog(&self) -> Option<usize> {
        let session = self.clients.sessions.get(self.slot?)?;
        (!session.io.broken).then(|| session.io.unsent())
    }

    fn send(&mut self, bytes: &[u8]) {
        if let Some(slot) = self.slot {
            self.clients.send(self.registry, slot, bytes);
        }
    }
}
