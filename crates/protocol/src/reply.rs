//! Server replies: an incremental parser that resumes where it stopped.
//!
//! A reply to a multi-get can arrive over many reads; [`ReplyParser`] remembers how far it has
//! validated the `VALUE` blocks, so each byte is looked at about once. What a reply looks like
//! depends on the request, so the caller says what it [`Expect`]s.

use std::ops::Range;

use crate::{find_newline, parse_u64, tokens, trim_cr, Parse};

/// Why bytes from a server are not a reply to what was asked: the connection's framing is lost,
/// so every request outstanding on it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyError {
    /// A line longer than any reply line, without its newline.
    LineTooLong,
    /// A `VALUE` header whose length is missing, not a number, or beyond any buffer.
    BadValueHeader,
    /// A data block not followed by `\r\n`.
    BadDataBlock,
    /// A line that is no reply to this request.
    Unexpected,
}

impl ReplyError {
    pub fn reason(self) -> &'static str {
        match self {
            ReplyError::LineTooLong => "reply line too long",
            ReplyError::BadValueHeader => "bad VALUE header",
            ReplyError::BadDataBlock => "bad data block",
            ReplyError::Unexpected => "unexpected reply line",
        }
    }
}

impl std::fmt::Display for ReplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.reason())
    }
}

/// The shape of the reply a request gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// `VALUE` blocks then `END` (get, gets).
    Values,
    /// One status line (storage, delete, incr/decr, touch, flush_all, verbosity, version).
    Line,
    /// `STAT` lines then `END`.
    Stats,
    /// A meta reply: a two-letter code and flags (`HD`, `EN`, `NF`, `NS`, `EX`, `ME`, `MN`), or
    /// `VA <size> <flags>*` and a data block.
    Meta,
    /// A meta request sent in quiet mode and followed by `mn`: the reply quiet mode let through,
    /// if any, then `MN` (which the reply's `trailer` counts).
    QuietMeta,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// `END` closing zero or more `VALUE` blocks (or `STAT` lines).
    End,
    Stored,
    NotStored,
    Exists,
    NotFound,
    Deleted,
    Touched,
    Ok,
    /// The new value after incr/decr.
    Number,
    Version,
    /// Meta `HD`: done (stored, deleted, found without a value).
    Done,
    /// Meta `VA`: a value follows.
    Value,
    /// Meta `EN`: a miss.
    Miss,
    /// Meta `ME`: a debug line.
    Debug,
    /// Meta `MN`.
    Noop,
    Error,
    ClientError,
    ServerError,
}

impl Status {
    /// A reply that means the command did what was asked.
    pub fn is_success(self) -> bool {
        matches!(
            self,
            Status::End
                | Status::Stored
                | Status::Deleted
                | Status::Touched
                | Status::Ok
                | Status::Number
                | Status::Version
                | Status::Done
                | Status::Value
                | Status::Debug
                | Status::Noop
        )
    }

    pub fn is_error(self) -> bool {
        matches!(self, Status::Error | Status::ClientError | Status::ServerError)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub status: Status,
    /// Bytes the whole reply occupies.
    pub consumed: usize,
    /// For `Values`/`Stats`: the blocks before `END` are `buf[..body_end]`; otherwise the status
    /// line without `\r\n` is `buf[..body_end]`.
    pub body_end: usize,
    /// Number of `VALUE` blocks (hits) or `STAT` lines.
    pub items: u32,
    /// The number of an incr/decr reply.
    pub number: u64,
    /// Bytes at the end of `consumed` that belong to no answer (the `MN` after a quiet request):
    /// the answer is `buf[..consumed - trailer]`.
    pub trailer: usize,
}

impl Reply {
    /// The length of the answer itself (without a trailing `MN`).
    pub fn answer_len(&self) -> usize {
        self.consumed - self.trailer
    }
}

/// Parses one reply, resuming across calls with a growing buffer. Call [`ReplyParser::reset`]
/// before the next reply.
#[derive(Debug, Clone)]
pub struct ReplyParser {
    expect: Expect,
    /// Bytes already validated as complete `VALUE`/`STAT` items.
    scanned: usize,
    items: u32,
    /// Longest line accepted from a server before its framing is considered lost.
    max_line_len: usize,
    /// Largest data block a `VALUE` may declare (what clients may store: more is a lie).
    max_value_len: usize,
}

impl ReplyParser {
    pub fn new(expect: Expect) -> ReplyParser {
        ReplyParser { expect, scanned: 0, items: 0, max_line_len: 8 * 1024, max_value_len: usize::MAX - 1024 }
    }

    /// Refuses `VALUE` blocks longer than `max_value_len`, so a server cannot make the caller
    /// buffer more than that for one value.
    pub fn with_max_value_len(mut self, max_value_len: usize) -> ReplyParser {
        self.max_value_len = max_value_len;
        self
    }

    pub fn reset(&mut self, expect: Expect) {
        self.expect = expect;
        self.scanned = 0;
        self.items = 0;
    }

    pub fn parse(&mut self, buf: &[u8]) -> Parse<Reply, ReplyError> {
        loop {
            let pos = self.scanned;
            let Some(newline) = find_newline(&buf[pos..]) else {
                if buf.len() - pos > self.max_line_len {
                    return Parse::Invalid(ReplyError::LineTooLong);
                }
                return Parse::Incomplete;
            };
            let line = trim_cr(&buf[pos..pos + newline]);
            let after_line = pos + newline + 1;
            let first = pos == 0;

            if self.expect == Expect::Meta {
                return self.meta(buf, line, after_line);
            }
            if self.expect == Expect::QuietMeta {
                return self.quiet_meta(buf, line, after_line);
            }
            if line == b"END" && self.expect != Expect::Line {
                return Parse::Complete(Reply {
                    status: Status::End,
                    consumed: after_line,
                    body_end: pos,
                    items: self.items,
                    number: 0,
                    trailer: 0,
                });
            }
            match self.expect {
                Expect::Values if line.starts_with(b"VALUE ") => {
                    let end = match self.data_block(buf, after_line, value_length(line)) {
                        Ok(end) => end,
                        Err(incomplete_or_invalid) => return incomplete_or_invalid,
                    };
                    self.scanned = end;
                    self.items += 1;
                    continue;
                }
                Expect::Stats if line.starts_with(b"STAT ") => {
                    self.scanned = after_line;
                    self.items += 1;
                    continue;
                }
                _ => {}
            }
            if !first {
                return Parse::Invalid(ReplyError::Unexpected);
            }
            let Some((status, number)) = classify_line(line, self.expect) else {
                return Parse::Invalid(ReplyError::Unexpected);
            };
            return Parse::Complete(Reply {
                status,
                consumed: after_line,
                body_end: line.len(),
                items: 0,
                number,
                trailer: 0,
            });
        }
    }
}

impl ReplyParser {
    /// Where the data block of `bytes` declared bytes, starting at `after_line`, ends (after its
    /// `\r\n`); or the parse to return: incomplete, or invalid for a missing or absurd length
    /// (a server may declare any; past the limit it is a lie) or a block not ended by `\r\n`.
    fn data_block(
        &self,
        buf: &[u8],
        after_line: usize,
        bytes: Option<usize>,
    ) -> Result<usize, Parse<Reply, ReplyError>> {
        let end = bytes
            .filter(|&bytes| bytes <= self.max_value_len)
            .and_then(|bytes| after_line.checked_add(bytes)?.checked_add(2))
            .ok_or(Parse::Invalid(ReplyError::BadValueHeader))?;
        if buf.len() < end {
            return Err(Parse::Incomplete);
        }
        if &buf[end - 2..end] != b"\r\n" {
            return Err(Parse::Invalid(ReplyError::BadDataBlock));
        }
        Ok(end)
    }

    /// [`Expect::QuietMeta`]: `MN` alone (quiet mode said nothing), or a meta reply and `MN`.
    fn quiet_meta(&self, buf: &[u8], line: &[u8], after_line: usize) -> Parse<Reply, ReplyError> {
        let reply = self.meta(buf, line, after_line);
        let Parse::Complete(mut reply) = reply else { return reply };
        if reply.status == Status::Noop {
            return Parse::Complete(reply);
        }
        const NOOP: &[u8] = b"MN\r\n";
        match buf.get(reply.consumed..reply.consumed + NOOP.len()) {
            Some(NOOP) => {
                reply.consumed += NOOP.len();
                reply.trailer = NOOP.len();
                Parse::Complete(reply)
            }
            Some(_) => Parse::Invalid(ReplyError::Unexpected),
            None if NOOP.starts_with(&buf[reply.consumed..]) => Parse::Incomplete,
            None => Parse::Invalid(ReplyError::Unexpected),
        }
    }

    /// A meta reply whose first line is `line`, `after_line` bytes into `buf`.
    fn meta(&self, buf: &[u8], line: &[u8], after_line: usize) -> Parse<Reply, ReplyError> {
        let single = |status| {
            Parse::Complete(Reply {
                status,
                consumed: after_line,
                body_end: line.len(),
                items: 0,
                number: 0,
                trailer: 0,
            })
        };
        let mut fields = tokens(line).map(|(_, t)| t);
        let status = match fields.next().unwrap_or_default() {
            b"VA" => {
                let bytes = fields.next().and_then(parse_u64).and_then(|bytes| usize::try_from(bytes).ok());
                let end = match self.data_block(buf, after_line, bytes) {
                    Ok(end) => end,
                    Err(incomplete_or_invalid) => return incomplete_or_invalid,
                };
                return Parse::Complete(Reply {
                    status: Status::Value,
                    consumed: end,
                    body_end: line.len(),
                    items: 1,
                    number: 0,
                    trailer: 0,
                });
            }
            _ => match meta_status(line) {
                Some(status) => status,
                None => return Parse::Invalid(ReplyError::Unexpected),
            },
        };
        let mut reply = single(status);
        if let Parse::Complete(r) = &mut reply {
            r.items = u32::from(matches!(status, Status::Done | Status::Debug));
        }
        reply
    }
}

/// The status of a meta reply line without a value (`HD`, `EN`, … or an error line).
pub(crate) fn meta_status(line: &[u8]) -> Option<Status> {
    let code = tokens(line).map(|(_, t)| t).next().unwrap_or_default();
    Some(match code {
        b"HD" => Status::Done,
        b"EN" => Status::Miss,
        b"NF" => Status::NotFound,
        b"NS" => Status::NotStored,
        b"EX" => Status::Exists,
        b"ME" => Status::Debug,
        b"MN" => Status::Noop,
        _ => classify_line(line, Expect::Meta)?.0,
    })
}

/// The data length of a well-formed `VALUE <key> <flags> <bytes> [<cas>]` line: a key memcached
/// could store, flags that fit 32 bits, a cas that fits 64, nothing more.
pub(crate) fn value_length(line: &[u8]) -> Option<usize> {
    let mut fields = tokens(line).map(|(_, t)| t);
    let (_value, key, flags, bytes) = (fields.next()?, fields.next()?, fields.next()?, fields.next()?);
    let cas_ok = fields.next().is_none_or(|cas| parse_u64(cas).is_some());
    let well_formed = cas_ok
        && fields.next().is_none()
        && key.len() <= crate::limits::MAX_KEY_LEN
        && parse_u64(flags).is_some_and(|f| f <= u64::from(u32::MAX));
    well_formed.then(|| parse_u64(bytes).and_then(|b| usize::try_from(b).ok())).flatten()
}

/// One `VALUE` block at the start of `body` (the part of a complete reply before `END`): the
/// range of its key and the length of the whole block, header and data included.
pub fn value_block(body: &[u8]) -> Option<(Range<usize>, usize)> {
    let newline = find_newline(body)?;
    let line = trim_cr(&body[..newline]);
    let mut fields = tokens(line);
    if fields.next()?.1 != b"VALUE" {
        return None;
    }
    let (key_at, key) = fields.next()?;
    let bytes = fields.nth(1).and_then(|(_, t)| parse_u64(t)).and_then(|b| usize::try_from(b).ok())?;
    let len = (newline + 1).checked_add(bytes)?.checked_add(2)?;
    (len <= body.len()).then_some((key_at..key_at + key.len(), len))
}

/// A single-line reply: an error line is valid whatever was expected.
pub(crate) fn classify_line(line: &[u8], expect: Expect) -> Option<(Status, u64)> {
    let status = match line {
        b"ERROR" => Status::Error,
        _ if line.starts_with(b"CLIENT_ERROR") => Status::ClientError,
        _ if line.starts_with(b"SERVER_ERROR") => Status::ServerError,
        // `cache_memlimit` refused by the server (relayed as it wrote it).
        _ if line.starts_with(b"MEMLIMIT_") => Status::ServerError,
        _ if expect != Expect::Line => return None,
        b"STORED" => Status::Stored,
        b"NOT_STORED" => Status::NotStored,
        b"EXISTS" => Status::Exists,
        b"NOT_FOUND" => Status::NotFound,
        b"DELETED" => Status::Deleted,
        b"TOUCHED" => Status::Touched,
        b"OK" => Status::Ok,
        _ if line.starts_with(b"VERSION ") => Status::Version,
        _ => return parse_u64(line).map(|n| (Status::Number, n)),
    };
    Some((status, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(expect: Expect, bytes: &[u8]) -> Parse<Reply, ReplyError> {
        ReplyParser::new(expect).parse(bytes)
    }

    #[test]
    fn values_then_end() {
        let bytes = b"VALUE a 0 1\r\nx\r\nVALUE b 5 3 99\r\nabc\r\nEND\r\n";
        let Parse::Complete(reply) = parse_all(Expect::Values, bytes) else { panic!() };
        assert_eq!(reply.status, Status::End);
        assert_eq!(reply.items, 2);
        assert_eq!(reply.consumed, bytes.len());
        assert_eq!(&bytes[reply.body_end..], b"END\r\n");
    }

    #[test]
    fn value_data_may_contain_end_and_newlines() {
        let bytes = b"VALUE a 0 7\r\nEND\r\nxy\r\nEND\r\n";
        let Parse::Complete(reply) = parse_all(Expect::Values, bytes) else { panic!() };
        assert_eq!(reply.items, 1);
        assert_eq!(reply.consumed, bytes.len());
    }

    #[test]
    fn resumes_at_every_split() {
        let bytes = b"VALUE a 0 1\r\nx\r\nVALUE bb 0 2\r\nyz\r\nEND\r\n";
        for split in 0..bytes.len() {
            let mut parser = ReplyParser::new(Expect::Values);
            let mut buf = bytes[..split].to_vec();
            assert_eq!(parser.parse(&buf), Parse::Incomplete, "split {split}");
            buf.extend_from_slice(&bytes[split..]);
            let Parse::Complete(reply) = parser.parse(&buf) else { panic!("split {split}") };
            assert_eq!((reply.items, reply.consumed), (2, bytes.len()));
        }
    }

    #[test]
    fn status_lines() {
        for (line, status) in [
            (&b"STORED\r\n"[..], Status::Stored),
            (b"NOT_STORED\r\n", Status::NotStored),
            (b"EXISTS\r\n", Status::Exists),
            (b"NOT_FOUND\r\n", Status::NotFound),
            (b"DELETED\r\n", Status::Deleted),
            (b"TOUCHED\r\n", Status::Touched),
            (b"OK\r\n", Status::Ok),
            (b"VERSION 1.6.18\r\n", Status::Version),
            (b"SERVER_ERROR out of memory\r\n", Status::ServerError),
            (b"CLIENT_ERROR bad data chunk\r\n", Status::ClientError),
            (b"ERROR\r\n", Status::Error),
        ] {
            let Parse::Complete(reply) = parse_all(Expect::Line, line) else { panic!() };
            assert_eq!(reply.status, status);
            assert_eq!(reply.consumed, line.len());
        }
        let Parse::Complete(reply) = parse_all(Expect::Line, b"42\r\n") else { panic!() };
        assert_eq!((reply.status, reply.number), (Status::Number, 42));
    }

    #[test]
    fn errors_answer_a_get_too() {
        let Parse::Complete(reply) = parse_all(Expect::Values, b"SERVER_ERROR busy\r\n") else { panic!() };
        assert_eq!(reply.status, Status::ServerError);
    }

    #[test]
    fn walks_value_blocks() {
        let body = b"VALUE a 0 1\r\nx\r\nVALUE bcd 0 2 7\r\nyz\r\n";
        let (key, len) = value_block(body).unwrap();
        assert_eq!((&body[key], len), (&b"a"[..], 16));
        let (key, len) = value_block(&body[16..]).unwrap();
        assert_eq!((&body[16..][key], len), (&b"bcd"[..], body.len() - 16));
        assert_eq!(value_block(b""), None);
    }

    #[test]
    fn meta_replies() {
        for (bytes, status, items) in [
            (&b"VA 2 f5 Oab\r\nhi\r\n"[..], Status::Value, 1),
            (b"HD c77 kfoo\r\n", Status::Done, 1),
            (b"EN\r\n", Status::Miss, 0),
            (b"NF Oab\r\n", Status::NotFound, 0),
            (b"NS\r\n", Status::NotStored, 0),
            (b"EX\r\n", Status::Exists, 0),
            (b"ME k exp=-1 la=1 cas=2 fetch=no cls=1 size=63\r\n", Status::Debug, 1),
            (b"MN\r\n", Status::Noop, 0),
            (b"CLIENT_ERROR bad command line format\r\n", Status::ClientError, 0),
        ] {
            let Parse::Complete(reply) = parse_all(Expect::Meta, bytes) else { panic!("{bytes:?}") };
            assert_eq!((reply.status, reply.items, reply.consumed), (status, items, bytes.len()));
        }
        assert_eq!(parse_all(Expect::Meta, b"VA 5 f1\r\nhi"), Parse::Incomplete);
        assert_eq!(parse_all(Expect::Meta, b"VA x\r\n"), Parse::Invalid(ReplyError::BadValueHeader));
        assert_eq!(parse_all(Expect::Meta, b"VA 1\r\nxyz\r\n"), Parse::Invalid(ReplyError::BadDataBlock));
        assert_eq!(parse_all(Expect::Meta, b"STORED\r\n"), Parse::Invalid(ReplyError::Unexpected));
    }

    #[test]
    fn stats_lines() {
        let bytes = b"STAT pid 1\r\nSTAT uptime 2\r\nEND\r\n";
        let Parse::Complete(reply) = parse_all(Expect::Stats, bytes) else { panic!() };
        assert_eq!((reply.items, reply.consumed), (2, bytes.len()));
    }

    #[test]
    fn malformed_value_headers_are_errors() {
        for header in [
            &b"VALUE k x 5\r\nhello\r\nEND\r\n"[..],
            b"VALUE k 0 5 1 2\r\nhello\r\nEND\r\n",
            b"VALUE k 4294967296 1\r\nx\r\nEND\r\n",
            b"VALUE k 0\r\n",
        ] {
            assert_eq!(parse_all(Expect::Values, header), Parse::Invalid(ReplyError::BadValueHeader), "{header:?}");
        }
        assert!(matches!(parse_all(Expect::Values, b"VALUE k 7 1 99\r\nx\r\nEND\r\n"), Parse::Complete(_)));
    }

    #[test]
    fn absurd_value_lengths_are_errors_not_panics() {
        // after_line + bytes + 2 overflowed usize and panicked in the reply parser.
        let header = b"VALUE k 0 18446744073709551583\r\n";
        assert_eq!(parse_all(Expect::Values, header), Parse::Invalid(ReplyError::BadValueHeader));
        assert_eq!(
            parse_all(Expect::Values, b"VALUE k 0 99999999999999999999\r\n"),
            Parse::Invalid(ReplyError::BadValueHeader)
        );
        assert_eq!(value_block(b"VALUE k 0 18446744073709551615\r\n"), None);
        assert_eq!(parse_all(Expect::Values, b"VALUE k 0 1\r\nxyz\r\n"), Parse::Invalid(ReplyError::BadDataBlock));
    }

    #[test]
    fn garbage_is_invalid() {
        assert_eq!(parse_all(Expect::Values, b"HELLO\r\n"), Parse::Invalid(ReplyError::Unexpected));
        assert!(matches!(parse_all(Expect::Values, b"VALUE a 0 1\r\nxyz\r\n"), Parse::Invalid(_)));
        assert!(matches!(parse_all(Expect::Line, b"WHAT\r\n"), Parse::Invalid(_)));
    }

    #[test]
    fn a_quiet_meta_reply_is_what_quiet_mode_let_through_then_mn() {
        // memcached 1.6.18's answers to `ma c N0 q` + `mn` (created) and `ma c q` + `mn`.
        let Parse::Complete(reply) = parse_all(Expect::QuietMeta, b"HD\r\nMN\r\n") else { panic!() };
        assert_eq!((reply.status, reply.consumed, reply.answer_len()), (Status::Done, 8, 4));
        let Parse::Complete(reply) = parse_all(Expect::QuietMeta, b"VA 1\r\n5\r\nMN\r\n") else { panic!() };
        assert_eq!((reply.status, reply.consumed, reply.answer_len()), (Status::Value, 13, 9));
        let Parse::Complete(reply) = parse_all(Expect::QuietMeta, b"MN\r\n") else { panic!() };
        assert_eq!((reply.status, reply.consumed, reply.answer_len()), (Status::Noop, 4, 4));
        assert_eq!(parse_all(Expect::QuietMeta, b"HD\r\nM"), Parse::Incomplete);
        assert_eq!(parse_all(Expect::QuietMeta, b"HD\r\n"), Parse::Incomplete);
        assert_eq!(parse_all(Expect::QuietMeta, b"HD\r\nHD\r\n"), Parse::Invalid(ReplyError::Unexpected));
    }
}
