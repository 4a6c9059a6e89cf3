//! A sharded multi-get's reply streamed in key order, for both engines ([`super::stream`] is one
//! server's reply). The client asked `get k1 … kn`; each server was asked its own keys in the
//! client's order ([`super::rewrite`]) and answers them in that order, leaving misses out. The
//! merge takes the client's keys one after another: at the front of what key i's server sent and
//! is not yet consumed is that key's `VALUE` block (a hit: it goes to the client as it arrives,
//! however long), a later key's block (key i missed), or its `END`. A part is read only when its
//! turn comes, so a later server's part waits while an earlier one is sent: in the kernel's
//! socket buffer (a pool worker reads it later), or held up to a bound while reading from that
//! server pauses (an event loop). Whatever the values, memrelay holds a bounded amount per part.
//!
//! Every part is validated as [`ReplyStream`] validates one reply. A part that breaks the
//! framing, answers with an error line, or carries a block it was not asked for in that order
//! ends the merge: part of the reply may have reached the client, so the engine cuts the client
//! off. `--max-reply-bytes` is enforced as for one reply ([`super::stream`]): the whole blocks
//! that fit, then `SERVER_ERROR reply too large` and no `END`; the rest of every part is read and
//! dropped, so the server connections stay in step.

use memrelay_protocol::{compose, Ahead, Expect, Reply, ReplyError, ReplyStream, Status, Streamed};

/// What to do next with the parts' unconsumed bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MergeMove {
    /// Send the first `n` unconsumed bytes of part `part` to the client, then consume them.
    Send { part: usize, n: usize },
    /// Send [`super::stream::TOO_LARGE_LINE`] and consume the first `n` bytes of part `part`
    /// (the header that crossed the limit): from now on the blocks are dropped.
    Refuse { part: usize, n: usize },
    /// Consume the first `n` bytes of part `part` without sending them.
    Drop { part: usize, n: usize },
    /// Send the reply's closing `END` (the parts' own are dropped).
    End,
    /// Part `part` has no more bytes in hand: read from its server.
    Need(usize),
    /// The reply is through: its status (`END`, or `SERVER_ERROR` once the limit was crossed)
    /// and the hits the client got.
    Done(Reply),
    /// Part `part` is not a `get` reply to the keys it was asked: the merge cannot go on.
    Invalid { part: usize, error: ReplyError },
    /// Part `part` answered with an error line (consume its first `n` bytes): the server did
    /// not fail, but the client cannot have the whole reply.
    Error { part: usize, n: usize },
}

/// One split multi-get's reply on its way to the client.
#[derive(Debug)]
pub(crate) struct Merge {
    parts: Vec<ReplyStream>,
    /// Parts whose reply is through (its `END`, or an error line, consumed).
    ended: Vec<bool>,
    /// The part answering each of the client's keys, in key order.
    owner: Vec<usize>,
    /// The client's keys end to end; key i ends at `key_ends[i]`.
    keys: Vec<u8>,
    key_ends: Vec<usize>,
    next_key: usize,
    /// The part whose block is on its way to the client (header sent, data or `\r\n` to come).
    sending: Option<usize>,
    /// `--max-reply-bytes`, and the reply's length as declared so far.
    limit: u64,
    declared: u64,
    refused: bool,
    end_sent: bool,
    hits: u32,
}

impl Merge {
    /// The merge of a split `get`/`gets` of `keys`: `targets[p]` is part p's server, `key_owner`
    /// the server of each key. A value longer than `max_value_len` breaks its part.
    pub fn new<'a>(
        keys: impl Iterator<Item = &'a [u8]>,
        targets: &[usize],
        key_owner: &[usize],
        max_value_len: usize,
        limit: usize,
    ) -> Merge {
        let mut merge = Merge {
            parts: (0..targets.len()).map(|_| ReplyStream::new(Expect::Values, max_value_len)).collect(),
            ended: vec![false; targets.len()],
            owner: Vec::with_capacity(key_owner.len()),
            keys: Vec::new(),
            key_ends: Vec::with_capacity(key_owner.len()),
            next_key: 0,
            sending: None,
            limit: limit as u64,
            declared: 0,
            refused: false,
            end_sent: false,
            hits: 0,
        };
        for (key, server) in keys.zip(key_owner) {
            merge.keys.extend_from_slice(key);
            merge.key_ends.push(merge.keys.len());
            merge.owner.push(targets.iter().position(|t| t == server).expect("every key's server is a target"));
        }
        merge
    }

    fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.key_ends[i - 1] };
        &self.keys[start..self.key_ends[i]]
    }

    /// What to do with the parts' unconsumed bytes (`pending(p)`, part p's).
    pub fn next<'b>(&mut self, pending: impl Fn(usize) -> &'b [u8]) -> MergeMove {
        if let Some(part) = self.sending {
            return self.send_block(part, pending(part));
        }
        while self.next_key < self.owner.len() {
            let part = self.owner[self.next_key];
            if self.ended[part] {
                // Its server answered its keys: this one missed.
                self.next_key += 1;
                continue;
            }
            let buf = pending(part);
            match self.parts[part].ahead(buf) {
                Ahead::Incomplete => return MergeMove::Need(part),
                Ahead::Value(key) if key == self.key(self.next_key) => {
                    self.next_key += 1;
                    return self.start_block(part, buf);
                }
                // A later key's block: this one missed.
                Ahead::Value(_) => self.next_key += 1,
                Ahead::Other => return self.end_part(part, buf),
            }
        }
        // Every key is placed: what is left of each part is its `END`.
        for part in 0..self.parts.len() {
            if !self.ended[part] {
                let buf = pending(part);
                return match self.parts[part].ahead(buf) {
                    Ahead::Incomplete => MergeMove::Need(part),
                    // A block for a key it was not asked, or not in the order asked.
                    Ahead::Value(_) => MergeMove::Invalid { part, error: ReplyError::Unexpected },
                    Ahead::Other => self.end_part(part, buf),
                };
            }
        }
        if !self.end_sent {
            self.end_sent = true;
            if !self.refused {
                return MergeMove::End;
            }
        }
        let status = if self.refused { Status::ServerError } else { Status::End };
        MergeMove::Done(outcome(status, self.hits))
    }

    /// A `VALUE` header for the key whose turn it is, at the front of `buf`.
    fn start_block(&mut self, part: usize, buf: &[u8]) -> MergeMove {
        let before = self.parts[part].declared();
        let n = match self.parts[part].next(buf) {
            Streamed::Forward(n) => n,
            Streamed::Invalid(error) => return MergeMove::Invalid { part, error },
            _ => return MergeMove::Invalid { part, error: ReplyError::Unexpected },
        };
        self.sending = Some(part);
        self.declared += self.parts[part].declared() - before;
        if self.refused {
            return MergeMove::Drop { part, n };
        }
        if self.declared > self.limit {
            self.refused = true;
            let what = format!("a split get's reply of over {} bytes", self.limit);
            crate::access::count_denial(crate::access::Reason::ReplyTooLarge, "a client", &what);
            return MergeMove::Refuse { part, n };
        }
        self.hits += 1;
        MergeMove::Send { part, n }
    }

    /// The data of the block part `part` is sending, and its `\r\n`.
    fn send_block(&mut self, part: usize, buf: &[u8]) -> MergeMove {
        match self.parts[part].next(buf) {
            Streamed::Forward(n) => {
                if self.parts[part].between_items() {
                    self.sending = None;
                }
                if self.refused {
                    MergeMove::Drop { part, n }
                } else {
                    MergeMove::Send { part, n }
                }
            }
            Streamed::Incomplete => MergeMove::Need(part),
            Streamed::Invalid(error) => MergeMove::Invalid { part, error },
            _ => MergeMove::Invalid { part, error: ReplyError::Unexpected },
        }
    }

    /// A line other than a `VALUE` at the front of part `part`: its `END`, or an error line.
    fn end_part(&mut self, part: usize, buf: &[u8]) -> MergeMove {
        let n = match self.parts[part].next(buf) {
            Streamed::Forward(n) => n,
            Streamed::Incomplete => return MergeMove::Need(part),
            Streamed::Invalid(error) => return MergeMove::Invalid { part, error },
            _ => return MergeMove::Invalid { part, error: ReplyError::Unexpected },
        };
        match self.parts[part].next(&[]) {
            Streamed::Complete { status: Status::End, .. } => {
                self.ended[part] = true;
                MergeMove::Drop { part, n }
            }
            _ => {
                self.ended[part] = true;
                MergeMove::Error { part, n }
            }
        }
    }

    /// The blocks the client got whole so far.
    pub fn hits(&self) -> u32 {
        self.hits
    }

    /// Whether part `part`'s reply is through: the last move about it consumes its last line.
    pub fn through(&self, part: usize) -> bool {
        self.ended[part]
    }
}

/// What a streamed reply (its bytes gone to the client) said: its status and items.
pub(crate) fn outcome(status: Status, items: u32) -> Reply {
    Reply { status, consumed: 0, body_end: 0, items, number: 0, trailer: 0 }
}

/// The `END` a merged reply closes with.
pub(crate) const END: &[u8] = compose::END;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay::reply::coalesce;
    use crate::relay::stream::TOO_LARGE_LINE;

    /// Merges the parts arriving `chunk` bytes at a time each; what the client gets and how the
    /// merge ended. Each part's bytes are fed only when the merge needs them.
    fn merge(keys: &[&str], owner: &[usize], parts: &[&[u8]], chunk: usize, limit: usize) -> (Vec<u8>, MergeMove) {
        let targets: Vec<usize> = (0..parts.len()).collect();
        let mut merge = Merge::new(keys.iter().map(|k| k.as_bytes()), &targets, owner, 1 << 20, limit);
        let mut fed = vec![0; parts.len()];
        let mut bufs: Vec<Vec<u8>> = vec![Vec::new(); parts.len()];
        let mut out = Vec::new();
        for _ in 0..100_000 {
            let step = {
                let bufs = &bufs;
                merge.next(|p| &bufs[p][..])
            };
            match step {
                MergeMove::Send { part, n } => {
                    out.extend_from_slice(&bufs[part][..n]);
                    bufs[part].drain(..n);
                }
                MergeMove::Refuse { part, n } => {
                    out.extend_from_slice(TOO_LARGE_LINE);
                    bufs[part].drain(..n);
                }
                MergeMove::Drop { part, n } => {
                    bufs[part].drain(..n);
                }
                MergeMove::End => out.extend_from_slice(END),
                MergeMove::Need(part) if fed[part] < parts[part].len() => {
                    let end = (fed[part] + chunk).min(parts[part].len());
                    bufs[part].extend_from_slice(&parts[part][fed[part]..end]);
                    fed[part] = end;
                }
                other => {
                    if matches!(other, MergeMove::Done(_)) {
                        assert!(bufs.iter().all(Vec::is_empty), "every part consumed whole");
                    }
                    return (out, other);
                }
            }
        }
        panic!("the merge did not end");
    }

    /// What the hold-whole path (`coalesce`) makes of the same parts: the reference.
    fn coalesced(keys: &[&str], owner: &[usize], parts: &[&[u8]]) -> Vec<u8> {
        let bodies: Vec<&[u8]> = parts.iter().map(|p| &p[..p.len() - END.len()]).collect();
        let mut cursors = vec![0; parts.len()];
        let mut out = Vec::new();
        coalesce(keys.iter().map(|k| k.as_bytes()), owner, |s| bodies[s], &mut cursors, &mut out);
        out.extend_from_slice(END);
        out
    }

    const KEYS: [&str; 5] = ["a", "b", "c", "d", "e"];
    const OWNER: [usize; 5] = [0, 1, 0, 1, 1];
    // b and e missed; c's value is empty.
    const PART_0: &[u8] = b"VALUE a 0 5\r\nhello\r\nVALUE c 7 0\r\n\r\nEND\r\n";
    const PART_1: &[u8] = b"VALUE d 1 3\r\nddd\r\nEND\r\n";

    #[test]
    fn a_merge_sends_what_holding_the_parts_whole_sends_at_every_chunk_size() {
        let expected = coalesced(&KEYS, &OWNER, &[PART_0, PART_1]);
        assert_eq!(expected, b"VALUE a 0 5\r\nhello\r\nVALUE c 7 0\r\n\r\nVALUE d 1 3\r\nddd\r\nEND\r\n");
        for chunk in 1..=PART_0.len() {
            let (out, end) = merge(&KEYS, &OWNER, &[PART_0, PART_1], chunk, usize::MAX);
            assert_eq!(out, expected, "chunks of {chunk}");
            let MergeMove::Done(reply) = end else { panic!("{end:?}") };
            assert_eq!((reply.status, reply.items), (Status::End, 3));
        }
    }

    #[test]
    fn every_key_missed_is_one_end() {
        let (out, end) = merge(&KEYS, &OWNER, &[b"END\r\n", b"END\r\n"], 2, usize::MAX);
        assert_eq!(out, b"END\r\n");
        assert!(matches!(end, MergeMove::Done(Reply { status: Status::End, items: 0, .. })));
    }

    #[test]
    fn the_limit_ends_the_merge_as_memcached_ends_a_get_it_cannot_finish() {
        // a's block (20 bytes) fits 30; c's header crosses it. The rest is dropped, no END.
        let (out, end) = merge(&KEYS, &OWNER, &[PART_0, PART_1], 3, 30);
        assert_eq!(out, [&b"VALUE a 0 5\r\nhello\r\n"[..], TOO_LARGE_LINE].concat());
        assert!(matches!(end, MergeMove::Done(Reply { status: Status::ServerError, items: 1, .. })));
    }

    #[test]
    fn a_part_that_lies_or_fails_ends_the_merge() {
        // A block for a key its server was not asked.
        let (_, end) = merge(&KEYS, &OWNER, &[PART_0, b"VALUE zz 0 1\r\nz\r\nEND\r\n"], 4, usize::MAX);
        assert_eq!(end, MergeMove::Invalid { part: 1, error: ReplyError::Unexpected });
        // Its keys out of order: d's block before b's.
        let lying = b"VALUE d 0 1\r\nd\r\nVALUE b 0 1\r\nb\r\nEND\r\n";
        let (_, end) = merge(&KEYS, &OWNER, &[PART_0, lying], 4, usize::MAX);
        assert_eq!(end, MergeMove::Invalid { part: 1, error: ReplyError::Unexpected });
        // A data block longer than announced.
        let (_, end) = merge(&KEYS, &OWNER, &[b"VALUE a 0 1\r\nxy\r\nEND\r\n", PART_1], 4, usize::MAX);
        assert_eq!(end, MergeMove::Invalid { part: 0, error: ReplyError::BadDataBlock });
        // An error line.
        let (out, end) = merge(&KEYS, &OWNER, &[PART_0, b"SERVER_ERROR out of memory\r\n"], 64, usize::MAX);
        assert_eq!(out, b"VALUE a 0 5\r\nhello\r\n");
        assert_eq!(end, MergeMove::Error { part: 1, n: 28 });
    }

    #[test]
    fn a_later_part_is_not_read_while_an_earlier_block_is_sent() {
        // Key a's block is long; the merge asks nothing of part 1 until a is through.
        let long = [&b"VALUE a 0 1000\r\n"[..], &[b'x'; 1000], b"\r\nEND\r\n"].concat();
        let targets = [0, 1];
        let mut merge = Merge::new([&b"a"[..], b"b"].into_iter(), &targets, &[0, 1], 1 << 20, usize::MAX);
        let mut buf0 = long.clone();
        let mut sent = 0;
        loop {
            match merge.next(|p| if p == 0 { &buf0[..] } else { &[][..] }) {
                MergeMove::Send { part: 0, n } => {
                    buf0.drain(..n);
                    sent += n;
                }
                MergeMove::Need(1) => break,
                other => panic!("{other:?} after {sent} bytes"),
            }
        }
        assert_eq!(sent, long.len() - END.len(), "all of a's block before part 1 is read");
    }
}
