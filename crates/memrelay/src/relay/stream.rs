//! Replies too long to hold, for both engines: once a reply the client gets as the server wrote
//! it ([`crate::relay::exchange::Exchange::may_stream`]) has more than [`STREAM_AFTER`] bytes
//! buffered, its bytes go to the client as they arrive, through a buffer of bounded size; a
//! reply that must be held whole (merged, picked among replicas, rewritten) may grow to
//! [`HOLD_LIMIT`] and fails beyond it. Memory per request is bounded either way, whatever the
//! value sizes or the number of keys.
//!
//! `--max-reply-bytes` is enforced as the reply streams: the headers declare each block's
//! length, so the limit is seen before a block that would cross it is sent. The client then gets
//! the blocks before it and `SERVER_ERROR reply too large`, without `END` — what memcached
//! answers a `get` whose reply it cannot finish (`SERVER_ERROR out of memory writing get
//! response` after the values it did write) — and the rest of the server's reply is read and
//! dropped, so the connection stays in step.

use memrelay_protocol::{Expect, Reply, ReplyError, ReplyStream, Status, Streamed};

/// A reply that may stream does once this much of it is buffered (smaller replies are handled
/// whole, as before: no cost on the common path).
pub(crate) const STREAM_AFTER: usize = 64 * 1024;

/// The most of one reply memrelay holds when it must hold it whole; beyond, the request fails
/// with `SERVER_ERROR reply too large`.
pub(crate) const HOLD_LIMIT: usize = 32 * 1024 * 1024;

/// A reply starts streaming (or one that arrived whole is relayed in place) only to a client with
/// at most this many bytes of replies waiting; the merge of a split read moves bytes on only
/// while its client's backlog is under it (evented engine).
pub(crate) const CLIENT_BACKLOG: usize = 256 * 1024;

/// How long a client may take nothing of a reply streaming to it before it is cut off (its
/// connection closed, the rest of the reply dropped), in the evented engine, where the server
/// connection then paused for it holds up nobody else. Generous: a client may send requests on
/// many connections and read them one after another (memcached itself waits for ever). A pool
/// worker, shared by every client, waits the server timeout at most, and only while no other
/// request waits for a worker.
pub(crate) const CLIENT_PATIENCE: std::time::Duration = std::time::Duration::from_secs(300);

/// A reply that takes longer than the server timeout must bring this many bytes per timeout to
/// count as progress (both engines): a server dribbling a value (a byte at a time) is failed
/// after the timeout, not waited for while the requests behind its reply wait too.
pub(crate) const PROGRESS_BYTES: usize = 64 * 1024;

/// The line a client gets when its reply crosses `--max-reply-bytes`.
pub(crate) const TOO_LARGE_LINE: &[u8] = b"SERVER_ERROR reply too large\r\n";

/// What to do with the front of a streaming reply's unconsumed bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Move {
    /// Send the first `n` bytes to the client, then consume them.
    Send(usize),
    /// Send [`TOO_LARGE_LINE`] to the client and consume the first `n` bytes (the header that
    /// crossed the limit): from now on the reply is dropped.
    Refuse(usize),
    /// Consume the first `n` bytes without sending them.
    Drop(usize),
    Incomplete,
    /// The whole reply is through; what it said, for the request's outcome.
    Done(Reply),
    Invalid(ReplyError),
}

/// One reply on its way to the client.
#[derive(Debug, Clone)]
pub(crate) struct Streaming {
    stream: ReplyStream,
    /// `--max-reply-bytes`.
    limit: u64,
    /// The limit was crossed: the rest is dropped.
    refused: bool,
    /// Items the client got whole.
    items: u32,
}

impl Streaming {
    pub fn new(expect: Expect, max_value_len: usize, max_reply_bytes: usize) -> Streaming {
        Streaming {
            stream: ReplyStream::new(expect, max_value_len),
            limit: max_reply_bytes as u64,
            refused: false,
            items: 0,
        }
    }

    /// What to do with `buf`, the reply's bytes not yet consumed.
    pub fn next(&mut self, buf: &[u8]) -> Move {
        let at_line = self.stream.between_items();
        if at_line && !self.refused {
            // The blocks before this line are through.
            self.items = self.stream.items();
        }
        match self.stream.next(buf) {
            Streamed::Forward(n) if self.refused => Move::Drop(n),
            Streamed::Forward(n) if at_line && self.stream.declared() > self.limit => {
                self.refused = true;
                let what = format!("a reply of over {} bytes", self.limit);
                crate::access::count_denial(crate::access::Reason::ReplyTooLarge, "a client", &what);
                Move::Refuse(n)
            }
            Streamed::Forward(n) => Move::Send(n),
            Streamed::Drop(n) => Move::Drop(n),
            Streamed::Incomplete => Move::Incomplete,
            Streamed::Complete { status, items } => {
                let (status, items) = if self.refused { (Status::ServerError, self.items) } else { (status, items) };
                Move::Done(Reply { status, consumed: 0, body_end: 0, items, number: 0, trailer: 0 })
            }
            Streamed::Invalid(error) => Move::Invalid(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streams `bytes` whole under `limit`: what the client gets, and the outcome.
    fn relay(bytes: &[u8], limit: usize) -> (Vec<u8>, Reply) {
        let mut streaming = Streaming::new(Expect::Values, 1 << 20, limit);
        let (mut at, mut out) = (0, Vec::new());
        loop {
            match streaming.next(&bytes[at..]) {
                Move::Send(n) => {
                    out.extend_from_slice(&bytes[at..at + n]);
                    at += n;
                }
                Move::Refuse(n) => {
                    out.extend_from_slice(TOO_LARGE_LINE);
                    at += n;
                }
                Move::Drop(n) => at += n,
                Move::Done(reply) => return (out, reply),
                other => panic!("{other:?}"),
            }
        }
    }

    const TWO: &[u8] = b"VALUE a 0 3\r\naaa\r\nVALUE b 0 3\r\nbbb\r\nEND\r\n";

    #[test]
    fn under_the_limit_the_reply_passes_as_it_is() {
        let (out, reply) = relay(TWO, usize::MAX);
        assert_eq!(out, TWO);
        assert_eq!((reply.status, reply.items), (Status::End, 2));
    }

    #[test]
    fn crossing_the_limit_ends_with_memcacheds_answer_after_the_whole_blocks() {
        // The first block (18 bytes) fits 20; the second's header crosses it.
        let (out, reply) = relay(TWO, 20);
        assert_eq!(out, b"VALUE a 0 3\r\naaa\r\nSERVER_ERROR reply too large\r\n");
        assert_eq!((reply.status, reply.items), (Status::ServerError, 1));
        // Crossed at the first header: nothing but the refusal.
        let (out, reply) = relay(TWO, 10);
        assert_eq!(out, TOO_LARGE_LINE);
        assert_eq!(reply.items, 0);
    }
}
