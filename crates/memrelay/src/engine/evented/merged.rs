//! A split read's reply merged in key order as its parts arrive ([`crate::relay::merge`]), in an
//! event loop. Each part's bytes are held in its entry's `bodies` and charged to the client's
//! budget ([`crate::client::budget`]); the merge moves bytes from the parts to the client while
//! the client's backlog is under [`CLIENT_BACKLOG`]. Once every part is in, the rest is moved at
//! once. Whether a part's server connection pauses, or the client is cut off, is the loop's
//! decision (`server_events`), the same as for any reply that streams.
//!
//! A part that fails or breaks the merge after bytes reached the client cuts the client off
//! (only closing its connection tells it the reply is incomplete); the other parts' replies are
//! read and dropped, so their connections stay in step.

use memrelay_protocol::{Reply, Status};

use crate::relay::merge::{self, Merge, MergeMove, END};
use crate::relay::stream::{CLIENT_BACKLOG, TOO_LARGE_LINE};

/// A consumed prefix of a part's bytes longer than this is given back (the rest moved to the
/// front) rather than kept until the part is through.
const COMPACT_AFTER: usize = 256 * 1024;

/// The merge of one split read's reply, and how far it has consumed each part.
pub(super) struct MergedReply {
    merge: Merge,
    /// `taken[p]`: the bytes of part p's body the merge has consumed.
    taken: Vec<usize>,
    /// How the merged reply ended (through, or cut off), once it has.
    ended: Option<Reply>,
}

/// The client of a merged reply, as the merge sees it.
pub(super) trait MergeClient {
    /// Its replies waiting for the socket; `None` once it is gone or broken.
    fn backlog(&self) -> Option<usize>;
    fn send(&mut self, bytes: &[u8]);
}

/// What moving a merged reply on did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Advance {
    /// It waits for bytes of a part, or for the client to take what it has.
    Waiting,
    /// It is through: its outcome is [`MergedReply::ended`].
    Through,
    /// It cannot be finished (a part failed or broke it, or the client left): the client must
    /// be cut off, it cannot tell a short reply otherwise.
    CutOff,
}

impl MergedReply {
    pub fn new(merge: Merge, parts: usize) -> MergedReply {
        MergedReply { merge, taken: vec![0; parts], ended: None }
    }

    /// How the merged reply ended, once it has.
    pub fn ended(&self) -> Option<Reply> {
        self.ended
    }

    /// Part `part`'s bytes in `bodies` not yet consumed.
    pub fn unconsumed(&self, bodies: &[Vec<u8>], part: usize) -> usize {
        bodies[part].len() - self.taken.get(part).copied().unwrap_or(0)
    }

    /// Moves the reply on as far as the parts' bytes and the client allow. `waiting(p)`: part p's
    /// reply is still arriving; `all_in`: every part's reply is in (then the rest moves at once,
    /// whatever the client's backlog: each part holds at most its bound).
    pub fn advance(
        &mut self,
        bodies: &mut [Vec<u8>],
        waiting: impl Fn(usize) -> bool,
        all_in: bool,
        client: &mut impl MergeClient,
    ) -> Advance {
        if self.ended.is_some() {
            return Advance::Waiting;
        }
        let cut_off = loop {
            let Some(backlog) = client.backlog() else { break true };
            if !all_in && backlog > CLIENT_BACKLOG {
                break false;
            }
            let taken = &mut self.taken;
            match self.merge.next(|p| &bodies[p][taken[p]..]) {
                MergeMove::Send { part, n } => {
                    client.send(&bodies[part][taken[part]..taken[part] + n]);
                    taken[part] += n;
                }
                MergeMove::Refuse { part, n } => {
                    client.send(TOO_LARGE_LINE);
                    taken[part] += n;
                }
                MergeMove::Drop { part, n } => taken[part] += n,
                MergeMove::End => client.send(END),
                // More of the part is to come, unless its reply is in (failed, or cut short).
                MergeMove::Need(part) if waiting(part) => break false,
                MergeMove::Need(_) | MergeMove::Invalid { .. } | MergeMove::Error { .. } => break true,
                MergeMove::Done(reply) => {
                    self.ended = Some(reply);
                    break false;
                }
            }
        };
        self.give_back(bodies);
        if cut_off {
            self.ended = Some(merge::outcome(Status::ServerError, self.merge.hits()));
            return Advance::CutOff;
        }
        if self.ended.is_some() {
            Advance::Through
        } else {
            Advance::Waiting
        }
    }

    /// What the merge consumed of the parts is given back.
    fn give_back(&mut self, bodies: &mut [Vec<u8>]) {
        for (body, taken) in bodies.iter_mut().zip(&mut self.taken) {
            if *taken >= body.len() {
                body.clear();
                *taken = 0;
            } else if *taken > COMPACT_AFTER {
                body.drain(..*taken);
                *taken = 0;
            }
        }
    }
}
