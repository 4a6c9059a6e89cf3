//! Client requests: an incremental parser over `&[u8]`.
//!
//! [`parse_request`] looks at the start of a buffer and returns a [`Request`] whose keys and data
//! are ranges into that buffer (nothing is copied), `Incomplete` when more bytes are needed, or
//! [`Invalid`] saying which error reply the client gets, how many bytes to skip (possibly more
//! than the buffer holds yet: a too-large value is skipped as it arrives) and whether the framing
//! is lost so the connection must close.

use std::ops::Range;

use crate::limits::{Limits, MAX_KEY_LEN};
use crate::{find_newline, parse_i64, parse_u64, tokens, trim_cr, Parse};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    Get,
    Gets,
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    Cas,
    Delete,
    Incr,
    Decr,
    Touch,
    FlushAll,
    Version,
    Verbosity,
    Stats,
    Quit,
}

impl Command {
    pub fn name(self) -> &'static str {
        match self {
            Command::Get => "get",
            Command::Gets => "gets",
            Command::Set => "set",
            Command::Add => "add",
            Command::Replace => "replace",
            Command::Append => "append",
            Command::Prepend => "prepend",
            Command::Cas => "cas",
            Command::Delete => "delete",
            Command::Incr => "incr",
            Command::Decr => "decr",
            Command::Touch => "touch",
            Command::FlushAll => "flush_all",
            Command::Version => "version",
            Command::Verbosity => "verbosity",
            Command::Stats => "stats",
            Command::Quit => "quit",
        }
    }

    fn from_token(token: &[u8]) -> Option<Command> {
        Some(match token {
            b"get" => Command::Get,
            b"gets" => Command::Gets,
            b"set" => Command::Set,
            b"add" => Command::Add,
            b"replace" => Command::Replace,
            b"append" => Command::Append,
            b"prepend" => Command::Prepend,
            b"cas" => Command::Cas,
            b"delete" => Command::Delete,
            b"incr" => Command::Incr,
            b"decr" => Command::Decr,
            b"touch" => Command::Touch,
            b"flush_all" => Command::FlushAll,
            b"version" => Command::Version,
            b"verbosity" => Command::Verbosity,
            b"stats" => Command::Stats,
            b"quit" => Command::Quit,
            _ => return None,
        })
    }

    /// `get` and `gets`: the reply is `VALUE` blocks and `END`.
    pub fn is_retrieval(self) -> bool {
        matches!(self, Command::Get | Command::Gets)
    }

    /// Commands followed by a data block.
    pub fn is_storage(self) -> bool {
        matches!(
            self,
            Command::Set | Command::Add | Command::Replace | Command::Append | Command::Prepend | Command::Cas
        )
    }
}

/// A parsed request. Ranges index the buffer given to [`parse_request`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub command: Command,
    /// The command line without `\r\n`.
    pub line: Range<usize>,
    /// The key, or for `get`/`gets` the space-separated key list (see [`Request::keys`]).
    pub keys: Range<usize>,
    pub key_count: usize,
    pub flags: u32,
    pub exptime: i64,
    /// `cas` unique for `cas`; delta for `incr`/`decr`; level for `verbosity`; delay for `flush_all`.
    pub number: u64,
    pub noreply: bool,
    /// The data block of a storage command, without its `\r\n`.
    pub data: Range<usize>,
    /// Bytes the whole request occupies, line and data block included.
    pub consumed: usize,
}

impl Request {
    fn new(command: Command, line: Range<usize>, consumed: usize) -> Request {
        Request {
            command,
            line,
            keys: 0..0,
            key_count: 0,
            flags: 0,
            exptime: 0,
            number: 0,
            noreply: false,
            data: 0..0,
            consumed,
        }
    }

    /// The keys, in the order given, as slices of `buf` (the buffer the request was parsed from).
    pub fn keys<'a>(&self, buf: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
        tokens(&buf[self.keys.clone()]).map(|(_, key)| key)
    }

    /// The first (for all but multi-key gets, the only) key.
    pub fn key<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        self.keys(buf).next().unwrap_or(&[])
    }

    /// The ranges of the keys in `buf`, each absolute.
    pub fn key_ranges<'a>(&self, buf: &'a [u8]) -> impl Iterator<Item = Range<usize>> + 'a {
        let base = self.keys.start;
        tokens(&buf[self.keys.clone()]).map(move |(at, key)| base + at..base + at + key.len())
    }
}

/// The error reply a client gets for bad input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorReply {
    /// `ERROR`: unknown command.
    Error,
    /// `CLIENT_ERROR <reason>`.
    Client(&'static str),
    /// `SERVER_ERROR <reason>`.
    Server(&'static str),
}

impl ErrorReply {
    pub fn write_to(self, out: &mut Vec<u8>) {
        match self {
            ErrorReply::Error => out.extend_from_slice(b"ERROR\r\n"),
            ErrorReply::Client(reason) => {
                out.extend_from_slice(b"CLIENT_ERROR ");
                out.extend_from_slice(reason.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            ErrorReply::Server(reason) => {
                out.extend_from_slice(b"SERVER_ERROR ");
                out.extend_from_slice(reason.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
        }
    }
}

/// Bad input: what to answer and how to go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invalid {
    pub reply: ErrorReply,
    /// Bytes to discard from the start of the buffer (may exceed what has arrived so far).
    pub skip: usize,
    /// The framing is lost: answer, then close the connection.
    pub close: bool,
}

impl Invalid {
    fn line(reply: ErrorReply, line_len: usize) -> Parse<Request> {
        Parse::Invalid(Invalid { reply, skip: line_len, close: false })
    }
}

const BAD_FORMAT: &str = "bad command line format";
const KEY_TOO_LONG: &str = "key too long";
const BAD_DATA_CHUNK: &str = "bad data chunk";
const LINE_TOO_LONG: &str = "line too long";
pub const TOO_LARGE: &str = "object too large for cache";

/// Parses one request from the start of `buf`.
pub fn parse_request(buf: &[u8], limits: &Limits) -> Parse<Request> {
    let Some(newline) = find_newline(buf) else {
        if buf.len() > limits.max_line_len {
            return Parse::Invalid(Invalid { reply: ErrorReply::Client(LINE_TOO_LONG), skip: buf.len(), close: true });
        }
        return Parse::Incomplete;
    };
    let line_with_end = newline + 1;
    if newline > limits.max_line_len {
        return Parse::Invalid(Invalid { reply: ErrorReply::Client(LINE_TOO_LONG), skip: line_with_end, close: true });
    }
    let line = trim_cr(&buf[..newline]);
    let mut toks = tokens(line);
    let Some((_, name)) = toks.next() else {
        return Invalid::line(ErrorReply::Error, line_with_end);
    };
    let Some(command) = Command::from_token(name) else {
        return Invalid::line(ErrorReply::Error, line_with_end);
    };
    let mut request = Request::new(command, 0..line.len(), line_with_end);
    // Commands other than get take a handful of tokens; collect them into a fixed array.
    let mut args: [&[u8]; 8] = [&[]; 8];
    let mut arg_at: [usize; 8] = [0; 8];
    let mut argc = 0;

    match command {
        Command::Get | Command::Gets => {
            let mut count = 0;
            let mut first = None;
            let mut last_end = 0;
            for (at, key) in toks {
                if key.len() > MAX_KEY_LEN {
                    return Invalid::line(ErrorReply::Client(KEY_TOO_LONG), line_with_end);
                }
                first.get_or_insert(at);
                last_end = at + key.len();
                count += 1;
            }
            let Some(first) = first else {
                return Invalid::line(ErrorReply::Error, line_with_end);
            };
            request.keys = first..last_end;
            request.key_count = count;
            return Parse::Complete(request);
        }
        _ => {
            for (at, tok) in toks {
                if argc == args.len() {
                    return Invalid::line(ErrorReply::Client(BAD_FORMAT), line_with_end);
                }
                args[argc] = tok;
                arg_at[argc] = at;
                argc += 1;
            }
        }
    }
    let args = &args[..argc];
    let noreply_last = args.last() == Some(&&b"noreply"[..]);

    let key_at = |i: usize| -> Result<Range<usize>, Parse<Request>> {
        let key = args[i];
        if key.len() > MAX_KEY_LEN {
            return Err(Invalid::line(ErrorReply::Client(KEY_TOO_LONG), line_with_end));
        }
        Ok(arg_at[i]..arg_at[i] + key.len())
    };
    macro_rules! key {
        ($i:expr) => {
            match key_at($i) {
                Ok(range) => range,
                Err(invalid) => return invalid,
            }
        };
    }
    macro_rules! number {
        ($parse:expr) => {
            match $parse {
                Some(value) => value,
                None => return Invalid::line(ErrorReply::Client(BAD_FORMAT), line_with_end),
            }
        };
    }

    match command {
        Command::Get | Command::Gets => unreachable!("handled above"),
        Command::Set | Command::Add | Command::Replace | Command::Append | Command::Prepend | Command::Cas => {
            let fixed = if command == Command::Cas { 5 } else { 4 };
            if args.len() != fixed && !(args.len() == fixed + 1 && noreply_last) {
                return Invalid::line(ErrorReply::Client(BAD_FORMAT), line_with_end);
            }
            request.keys = key!(0);
            request.key_count = 1;
            request.flags = number!(parse_u64(args[1]).and_then(|v| u32::try_from(v).ok()));
            request.exptime = number!(parse_i64(args[2]));
            let bytes = number!(parse_u64(args[3]).and_then(|v| usize::try_from(v).ok()));
            if command == Command::Cas {
                request.number = number!(parse_u64(args[4]));
            }
            request.noreply = args.len() == fixed + 1;
            if bytes > limits.max_value_len {
                // memcached answers and swallows the data block that follows.
                return Parse::Invalid(Invalid {
                    reply: ErrorReply::Server(TOO_LARGE),
                    skip: line_with_end.saturating_add(bytes).saturating_add(2),
                    close: false,
                });
            }
            let end = line_with_end + bytes + 2;
            if buf.len() < end {
                return Parse::Incomplete;
            }
            if &buf[end - 2..end] != b"\r\n" {
                return Parse::Invalid(Invalid { reply: ErrorReply::Client(BAD_DATA_CHUNK), skip: end, close: true });
            }
            request.data = line_with_end..line_with_end + bytes;
            request.consumed = end;
        }
        Command::Delete => {
            // `delete <key> [0] [noreply]`: the legacy time argument must be 0.
            let without_noreply = if noreply_last { args.len() - 1 } else { args.len() };
            let legacy_zero_ok = without_noreply == 2 && args[1] == b"0";
            if without_noreply != 1 && !legacy_zero_ok {
                return Invalid::line(ErrorReply::Client(BAD_FORMAT), line_with_end);
            }
            request.keys = key!(0);
            request.key_count = 1;
            request.noreply = noreply_last;
        }
        Command::Incr | Command::Decr => {
            if args.len() != 2 && !(args.len() == 3 && noreply_last) {
                return Invalid::line(ErrorReply::Client(BAD_FORMAT), line_with_end);
            }
            request.keys = key!(0);
            request.key_count = 1;
            request.number = match parse_u64(args[1]) {
                Some(delta) => delta,
                None => return Invalid::line(ErrorReply::Client("invalid numeric delta argument"), line_with_end),
            };
            request.noreply = args.len() == 3;
        }
        Command::Touch => {
            if args.len() != 2 && !(args.len() == 3 && noreply_last) {
                return Invalid::line(ErrorReply::Client(BAD_FORMAT), line_with_end);
            }
            request.keys = key!(0);
            request.key_count = 1;
            request.exptime = number!(parse_i64(args[1]));
            request.noreply = args.len() == 3;
        }
        Command::FlushAll => {
            let without_noreply = if noreply_last { args.len() - 1 } else { args.len() };
            match without_noreply {
                0 => {}
                1 => request.number = number!(parse_u64(args[0])),
                _ => return Invalid::line(ErrorReply::Client(BAD_FORMAT), line_with_end),
            }
            request.noreply = noreply_last;
        }
        Command::Verbosity => {
            let without_noreply = if noreply_last { args.len() - 1 } else { args.len() };
            if without_noreply != 1 {
                return Invalid::line(ErrorReply::Error, line_with_end);
            }
            request.number = number!(parse_u64(args[0]));
            request.noreply = noreply_last;
        }
        Command::Version | Command::Quit => {
            if !args.is_empty() {
                return Invalid::line(ErrorReply::Error, line_with_end);
            }
        }
        Command::Stats => {
            // `stats [group]`: the group (if any) is kept as the "key" for the answerer to read.
            if !args.is_empty() {
                let last = args.len() - 1;
                request.keys = arg_at[0]..arg_at[last] + args[last].len();
            }
        }
    }
    Parse::Complete(request)
}
