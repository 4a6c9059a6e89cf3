//! A server reply taken in as it arrives, for a caller that forwards it instead of holding it
//! whole: a value of any length passes through a buffer of any size.
//!
//! [`ReplyStream::next`] looks at the bytes of the reply not yet consumed and says what to do
//! with a prefix of them: forward it (header lines once validated, data bytes as they come, the
//! `\r\n` after a data block once it is there, the closing `END`), drop it (the `MN` a quiet
//! meta request is followed by), wait for more, or stop: the reply is complete, or it is no
//! reply (the framing is lost). It validates what [`crate::ReplyParser`] validates, so a reply
//! passes the stream exactly when it passes the parser, and the forwarded bytes are the parser's
//! answer (`..answer_len()`).

use crate::reply::{classify_line, meta_status, value_length};
use crate::{find_newline, parse_u64, tokens, trim_cr, Expect, ReplyError, Status};

/// What to do with the front of the bytes not yet consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Streamed {
    /// Forward the first `n` bytes to the client, then consume them.
    Forward(usize),
    /// Consume the first `n` bytes: they belong to no answer.
    Drop(usize),
    /// Wait for more bytes.
    Incomplete,
    /// The reply is complete (nothing more of it to consume).
    Complete {
        status: Status,
        items: u32,
    },
    Invalid(ReplyError),
}

/// The line at the front of a reply's unconsumed bytes ([`ReplyStream::ahead`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ahead<'a> {
    /// The line is not complete yet.
    Incomplete,
    /// A `VALUE` line for this key.
    Value(&'a [u8]),
    /// Another line (`END`, an error, or one [`ReplyStream::next`] refuses).
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// At the start of a line.
    Line,
    /// Inside a data block, this many data bytes to come.
    Data(usize),
    /// After a data block: its `\r\n`.
    DataEnd,
    /// After a quiet meta reply: the `MN` that follows it.
    Noop,
    Done(Status),
}

/// One reply's way through, resumable across reads.
#[derive(Debug, Clone)]
pub struct ReplyStream {
    expect: Expect,
    state: State,
    /// No line of the reply seen yet.
    first: bool,
    items: u32,
    /// The status a meta reply will end with once its data block and trailer are through.
    meta: Status,
    /// Bytes of the reply declared so far: every line seen and every data block announced.
    declared: u64,
    max_line_len: usize,
    max_value_len: usize,
}

impl ReplyStream {
    /// A reply of the shape `expect`; a data block longer than `max_value_len` is refused as
    /// the parser refuses it.
    pub fn new(expect: Expect, max_value_len: usize) -> ReplyStream {
        ReplyStream {
            expect,
            state: State::Line,
            first: true,
            items: 0,
            meta: Status::Value,
            declared: 0,
            max_line_len: 8 * 1024,
            max_value_len,
        }
    }

    /// How long the reply is known to be so far: the lines seen and the data blocks they
    /// announced, whole (a caller bounding what it forwards checks this after each header).
    pub fn declared(&self) -> u64 {
        self.declared
    }

    /// Items (`VALUE` blocks, `STAT` lines, a meta value) seen so far.
    pub fn items(&self) -> u32 {
        self.items
    }

    /// At the start of a line: every data block so far is through.
    pub fn between_items(&self) -> bool {
        self.state == State::Line
    }

    /// The key of the `VALUE` line at the front of `buf`, looked at without consuming it (a
    /// merge in key order asks each server's reply whether its next item is the key it needs).
    /// Meaningful [between items](ReplyStream::between_items) of a `get`'s reply.
    pub fn ahead<'a>(&self, buf: &'a [u8]) -> Ahead<'a> {
        let Some(newline) = find_newline(buf) else {
            // A line that can no longer end in bounds is [`ReplyStream::next`]'s to refuse.
            return if buf.len() > self.max_line_len { Ahead::Other } else { Ahead::Incomplete };
        };
        let mut fields = tokens(trim_cr(&buf[..newline])).map(|(_, t)| t);
        match (fields.next(), fields.next()) {
            (Some(b"VALUE"), Some(key)) => Ahead::Value(key),
            _ => Ahead::Other,
        }
    }

    /// What to do with the front of `buf`, the reply's bytes not yet consumed.
    pub fn next(&mut self, buf: &[u8]) -> Streamed {
        match self.state {
            State::Done(status) => Streamed::Complete { status, items: self.items },
            State::Data(left) => {
                if buf.is_empty() {
                    return Streamed::Incomplete;
                }
                let n = left.min(buf.len());
                self.state = if n == left { State::DataEnd } else { State::Data(left - n) };
                Streamed::Forward(n)
            }
            State::DataEnd => match buf {
                [b'\r', b'\n', ..] => {
                    self.state = match self.expect {
                        Expect::Meta => State::Done(self.meta),
                        Expect::QuietMeta => State::Noop,
                        _ => State::Line,
                    };
                    Streamed::Forward(2)
                }
                [] | [b'\r'] => Streamed::Incomplete,
                _ => Streamed::Invalid(ReplyError::BadDataBlock),
            },
            State::Noop => {
                const NOOP: &[u8] = b"MN\r\n";
                if buf.len() >= NOOP.len() {
                    if &buf[..NOOP.len()] != NOOP {
                        return Streamed::Invalid(ReplyError::Unexpected);
                    }
                    self.state = State::Done(self.meta);
                    return Streamed::Drop(NOOP.len());
                }
                if NOOP.starts_with(buf) {
                    Streamed::Incomplete
                } else {
                    Streamed::Invalid(ReplyError::Unexpected)
                }
            }
            State::Line => self.line(buf),
        }
    }

    fn line(&mut self, buf: &[u8]) -> Streamed {
        let Some(newline) = find_newline(buf) else {
            return if buf.len() > self.max_line_len {
                Streamed::Invalid(ReplyError::LineTooLong)
            } else {
                Streamed::Incomplete
            };
        };
        let line = trim_cr(&buf[..newline]);
        let len = newline + 1;
        let first = std::mem::replace(&mut self.first, false);
        self.declared += len as u64;
        let next = match self.expect {
            Expect::Meta | Expect::QuietMeta if first => self.meta_line(line),
            Expect::Meta | Expect::QuietMeta => Err(ReplyError::Unexpected),
            _ if line == b"END" && self.expect != Expect::Line => Ok(State::Done(Status::End)),
            Expect::Values if line.starts_with(b"VALUE ") => {
                value_length(line).ok_or(ReplyError::BadValueHeader).and_then(|bytes| self.data(bytes))
            }
            Expect::Stats if line.starts_with(b"STAT ") => {
                self.items += 1;
                Ok(State::Line)
            }
            _ if first => classify_line(line, self.expect).map(|(s, _)| State::Done(s)).ok_or(ReplyError::Unexpected),
            _ => Err(ReplyError::Unexpected),
        };
        match next {
            Ok(state) => {
                self.state = state;
                Streamed::Forward(len)
            }
            Err(error) => Streamed::Invalid(error),
        }
    }

    /// The first line of a meta reply.
    fn meta_line(&mut self, line: &[u8]) -> Result<State, ReplyError> {
        let mut fields = tokens(line).map(|(_, t)| t);
        if fields.next() == Some(b"VA") {
            let bytes = fields.next().and_then(parse_u64).and_then(|b| usize::try_from(b).ok());
            self.meta = Status::Value;
            return bytes.ok_or(ReplyError::BadValueHeader).and_then(|bytes| self.data(bytes));
        }
        let status = meta_status(line).ok_or(ReplyError::Unexpected)?;
        self.items = u32::from(matches!(status, Status::Done | Status::Debug));
        self.meta = status;
        Ok(if self.expect == Expect::QuietMeta && status != Status::Noop { State::Noop } else { State::Done(status) })
    }

    /// A header announced a data block of `bytes`.
    fn data(&mut self, bytes: usize) -> Result<State, ReplyError> {
        if bytes > self.max_value_len {
            return Err(ReplyError::BadValueHeader);
        }
        self.items += 1;
        self.declared += bytes as u64 + 2;
        Ok(State::Data(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Parse, ReplyParser};

    /// Streams `bytes` arriving `chunk` bytes at a time: the bytes forwarded and how it ended.
    fn stream(expect: Expect, bytes: &[u8], chunk: usize) -> (Vec<u8>, Streamed) {
        let mut stream = ReplyStream::new(expect, 1 << 20);
        let (mut buf, mut out, mut fed) = (Vec::new(), Vec::new(), 0);
        loop {
            match stream.next(&buf) {
                Streamed::Forward(n) => {
                    out.extend_from_slice(&buf[..n]);
                    buf.drain(..n);
                }
                Streamed::Drop(n) => {
                    buf.drain(..n);
                }
                Streamed::Incomplete if fed < bytes.len() => {
                    let end = (fed + chunk).min(bytes.len());
                    buf.extend_from_slice(&bytes[fed..end]);
                    fed = end;
                }
                end @ (Streamed::Incomplete | Streamed::Complete { .. } | Streamed::Invalid(_)) => {
                    return (out, end);
                }
            }
        }
    }

    /// The parser's verdict on the same bytes, whole.
    fn parsed(expect: Expect, bytes: &[u8]) -> Parse<crate::Reply, ReplyError> {
        ReplyParser::new(expect).with_max_value_len(1 << 20).parse(bytes)
    }

    #[test]
    fn forwards_what_the_parser_answers_at_every_chunk_size() {
        let cases: [(Expect, &[u8]); 9] = [
            (Expect::Values, b"VALUE a 0 1\r\nx\r\nVALUE bb 5 3 99\r\nEND\r\nEND\r\n"),
            (Expect::Values, b"END\r\n"),
            (Expect::Values, b"SERVER_ERROR out of memory\r\n"),
            (Expect::Meta, b"VA 3 f5\r\nabc\r\n"),
            (Expect::Meta, b"EN\r\n"),
            (Expect::QuietMeta, b"VA 2\r\nhi\r\nMN\r\n"),
            (Expect::QuietMeta, b"MN\r\n"),
            (Expect::Stats, b"STAT pid 1\r\nSTAT uptime 2\r\nEND\r\n"),
            (Expect::Line, b"STORED\r\n"),
        ];
        for (expect, bytes) in cases {
            let Parse::Complete(reply) = parsed(expect, bytes) else { panic!("{bytes:?}") };
            for chunk in 1..=bytes.len() {
                let (out, end) = stream(expect, bytes, chunk);
                assert_eq!(out, &bytes[..reply.answer_len()], "{bytes:?} in chunks of {chunk}");
                assert_eq!(end, Streamed::Complete { status: reply.status, items: reply.items }, "{bytes:?}");
            }
        }
    }

    #[test]
    fn refuses_what_the_parser_refuses() {
        let cases: [(Expect, &[u8]); 6] = [
            (Expect::Values, b"VALUE a 0 1\r\nxy\r\nEND\r\n"),
            (Expect::Values, b"VALUE a 0\r\nEND\r\n"),
            (Expect::Values, b"VALUE a 0 99999999999\r\n"),
            (Expect::Values, b"STORED\r\n"),
            (Expect::Meta, b"VA x\r\n"),
            (Expect::QuietMeta, b"HD\r\nHD\r\n"),
        ];
        for (expect, bytes) in cases {
            assert!(matches!(parsed(expect, bytes), Parse::Invalid(_)), "{bytes:?}");
            let (_, end) = stream(expect, bytes, 1);
            assert!(matches!(end, Streamed::Invalid(_)), "{bytes:?}: {end:?}");
        }
    }

    #[test]
    fn a_long_value_passes_a_small_buffer_and_is_declared_whole_at_its_header() {
        let value = vec![b'v'; 100_000];
        let mut bytes = b"VALUE k 0 100000\r\n".to_vec();
        bytes.extend_from_slice(&value);
        bytes.extend_from_slice(b"\r\nEND\r\n");
        let mut stream = ReplyStream::new(Expect::Values, 1 << 20);
        assert_eq!(stream.next(&bytes[..18]), Streamed::Forward(18));
        assert_eq!(stream.declared(), 18 + 100_002);
        assert!(!stream.between_items());
        let (out, end) = self::stream(Expect::Values, &bytes, 4096);
        assert_eq!(out, bytes);
        assert_eq!(end, Streamed::Complete { status: Status::End, items: 1 });
    }
}
