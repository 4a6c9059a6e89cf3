//! A split read's reply merged in key order as its parts arrive ([`crate::relay::merge`]), in an
//! event loop: each part's bytes are held in its entry (`bodies`) up to [`PART_HOLD`], beyond
//! which reading from that server pauses; the merge moves bytes from the parts to the client
//! while the client's backlog is under [`CLIENT_BACKLOG`], and resumes the parts it made room in.
//! Once every part is in, the rest is moved at once (each part holds at most its bound).
//!
//! A part that fails or breaks the merge after bytes reached the client cuts the client off
//! (its connection is closed: only that tells it the reply is incomplete); the other parts'
//! replies are read and dropped, so their connections stay in step.

use memrelay_protocol::Status;

use super::requests::TargetResult;
use super::thread::EventLoop;
use crate::relay::merge::{self, MergeMove, END};
use crate::relay::stream::{CLIENT_BACKLOG, TOO_LARGE_LINE};

/// What a part of a merged reply may hold while the merge sends another part's block: reading
/// from its server pauses beyond it.
pub(super) const PART_HOLD: usize = 1024 * 1024;

impl EventLoop {
    /// Moves entry `index`'s merged reply on as far as the parts' bytes and the client allow,
    /// resuming the parts it made room in (which may bring more bytes: then again).
    pub(super) fn pump_merge(&mut self, index: usize) {
        if self.pumping.contains(&index) {
            // Called again from within (a resumed part's read): the outer call goes on.
            self.pump_again = true;
            return;
        }
        self.pumping.push(index);
        loop {
            self.pump_again = false;
            self.merge_moves(index);
            let resumed = self.resume_parts(index);
            if !resumed && !self.pump_again {
                break;
            }
        }
        self.pumping.retain(|&i| i != index);
    }

    /// The merge's moves with the bytes in hand.
    fn merge_moves(&mut self, index: usize) {
        let registry = self.poll.registry();
        let entry = self.inflight.get_mut(index);
        if entry.merged.is_some() {
            return;
        }
        let Some(merge) = entry.merge.as_mut() else { return };
        let all_in = entry.remaining == 0;
        let slot = entry.client;
        let ended = loop {
            let session = slot.and_then(|slot| self.clients.sessions.get(slot)).filter(|s| !s.io.broken);
            let Some(session) = session else { break Some(true) };
            if !all_in && session.io.unsent() > CLIENT_BACKLOG {
                break None;
            }
            let slot = slot.expect("a session has a slot");
            let (bodies, taken) = (&entry.bodies, &mut entry.taken);
            match merge.next(|p| &bodies[p][taken[p]..]) {
                MergeMove::Send { part, n } => {
                    self.clients.send(registry, slot, &bodies[part][taken[part]..taken[part] + n]);
                    taken[part] += n;
                }
                MergeMove::Refuse { part, n } => {
                    self.clients.send(registry, slot, TOO_LARGE_LINE);
                    taken[part] += n;
                }
                MergeMove::Drop { part, n } => taken[part] += n,
                MergeMove::End => self.clients.send(registry, slot, END),
                // More of the part is to come, unless its reply is in (failed, or cut short).
                MergeMove::Need(part) if matches!(entry.results[part], TargetResult::Waiting) => break None,
                MergeMove::Need(_) | MergeMove::Invalid { .. } | MergeMove::Error { .. } => break Some(true),
                MergeMove::Done(reply) => {
                    entry.merged = Some(reply);
                    break Some(false);
                }
            }
        };
        if ended == Some(true) {
            // Cut off: the client is closed, it cannot tell a short reply otherwise.
            entry.merged = Some(merge::outcome(Status::ServerError, merge.hits()));
            if let Some(session) = slot.and_then(|slot| self.clients.sessions.get_mut(slot)) {
                session.io.broken = true;
                self.ready.push(slot.expect("a session has a slot"));
            }
        }
        // What the merge consumed is given back.
        for (body, taken) in entry.bodies.iter_mut().zip(&mut entry.taken) {
            if *taken >= body.len() {
                body.clear();
                *taken = 0;
            } else if *taken > PART_HOLD / 4 {
                body.drain(..*taken);
                *taken = 0;
            }
        }
    }

    /// Resumes reading the parts of entry `index` that paused for room and have it now (all of
    /// them, dropping the rest, once the merge is over); true when one was resumed.
    pub(super) fn resume_parts(&mut self, index: usize) -> bool {
        let entry = self.inflight.get(index);
        if entry.merge.is_none() {
            return false;
        }
        let session = entry.client.and_then(|slot| self.clients.sessions.get(slot)).filter(|s| !s.io.broken);
        let over = entry.merged.is_some() || session.is_none();
        let room = session.is_some_and(|s| s.io.unsent() <= CLIENT_BACKLOG / 2);
        let mut resume = std::mem::take(&mut self.resume_scratch);
        resume.clear();
        for (part, &server) in entry.exchange.targets().iter().enumerate() {
            let upstream = &self.upstreams[server];
            let ours =
                upstream.streaming_head().is_some_and(|h| h.request == index && h.generation == entry.generation);
            if upstream.paused() && ours && (over || (room && entry.unconsumed(part) <= PART_HOLD / 2)) {
                resume.push(server);
            }
        }
        for &server in &resume {
            self.upstreams[server].resume(over);
            self.upstream_readable(server, false);
        }
        let resumed = !resume.is_empty();
        self.resume_scratch = resume;
        resumed
    }
}
