//! Client requests: an incremental parser over `&[u8]`, one file per command family.
//!
//! [`parse_request`] looks at the start of a buffer and returns a [`Request`] whose keys and data
//! are ranges into that buffer (nothing is copied), `Incomplete` when more bytes are needed, or
//! [`Invalid`] saying which error reply the client gets, how many bytes to skip (possibly more
//! than the buffer holds yet: a too-large value is skipped as it arrives) and whether the framing
//! is lost so the connection must close.

use std::ops::Range;

mod admin;
mod keyed;
mod meta;
mod retrieval;
mod storage;

pub use meta::{Meta, META_FLAG_MAX_TOKENS};

#[cfg(test)]
mod declared_len_tests {
    use super::declared_len;

    #[test]
    fn storage_requests_declare_their_length() {
        assert_eq!(declared_len(b"set k 0 0 5\r\nab"), Some(13 + 5 + 2));
        assert_eq!(declared_len(b"cas k 0 0 5 99\r\n"), Some(16 + 5 + 2));
        assert_eq!(declared_len(b"ms k 5 T0\r\n"), Some(11 + 5 + 2));
        assert_eq!(declared_len(b"set k 0 0 5"), None, "no line yet");
        assert_eq!(declared_len(b"get k\r\n"), None);
        assert_eq!(declared_len(b"set k 0 0 x\r\n"), None);
    }
}

use crate::limits::{Limits, MAX_KEY_LEN, MAX_WHOLE_LINE_LEN};
use crate::{find_newline, tokens, trim_cr, Parse};

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
    /// `cache_memlimit <megabytes> [noreply]`: every server's memory limit.
    CacheMemlimit,
    Version,
    Verbosity,
    Stats,
    Quit,
    /// `gat <exptime> <key>*`: get and touch.
    Gat,
    Gats,
    /// The meta commands: `mg`, `ms`, `md`, `ma`, `me`, `mn` (memcached 1.6's protocol.txt).
    MetaGet,
    MetaSet,
    MetaDelete,
    MetaArithmetic,
    MetaDebug,
    MetaNoop,
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
            Command::CacheMemlimit => "cache_memlimit",
            Command::Version => "version",
            Command::Verbosity => "verbosity",
            Command::Stats => "stats",
            Command::Quit => "quit",
            Command::Gat => "gat",
            Command::Gats => "gats",
            Command::MetaGet => "mg",
            Command::MetaSet => "ms",
            Command::MetaDelete => "md",
            Command::MetaArithmetic => "ma",
            Command::MetaDebug => "me",
            Command::MetaNoop => "mn",
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
            b"cache_memlimit" => Command::CacheMemlimit,
            b"version" => Command::Version,
            b"verbosity" => Command::Verbosity,
            b"stats" => Command::Stats,
            b"quit" => Command::Quit,
            b"gat" => Command::Gat,
            b"gats" => Command::Gats,
            b"mg" => Command::MetaGet,
            b"ms" => Command::MetaSet,
            b"md" => Command::MetaDelete,
            b"ma" => Command::MetaArithmetic,
            b"me" => Command::MetaDebug,
            b"mn" => Command::MetaNoop,
            _ => return None,
        })
    }

    /// `get`, `gets`, `gat`, `gats`: the reply is `VALUE` blocks and `END`.
    pub fn is_retrieval(self) -> bool {
        matches!(self, Command::Get | Command::Gets | Command::Gat | Command::Gats)
    }

    /// Writes of one key that every replica of it must take (copied to them, or repaired).
    pub fn is_keyed_write(self) -> bool {
        self.is_storage()
            || matches!(
                self,
                Command::Delete
                    | Command::Incr
                    | Command::Decr
                    | Command::Touch
                    | Command::MetaSet
                    | Command::MetaDelete
                    | Command::MetaArithmetic
            )
    }

    /// Reads that take their turn in the read round robin: the retrievals and `mg`.
    pub fn is_read(self) -> bool {
        self.is_retrieval() || self == Command::MetaGet
    }

    /// The meta commands, whose replies are two-letter codes.
    pub fn is_meta(self) -> bool {
        matches!(
            self,
            Command::MetaGet
                | Command::MetaSet
                | Command::MetaDelete
                | Command::MetaArithmetic
                | Command::MetaDebug
                | Command::MetaNoop
        )
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
    /// Expiry of a storage command or `touch`; the delay of `flush_all`.
    pub exptime: i64,
    /// `cas` unique for `cas`; delta for `incr`/`decr`; level for `verbosity`.
    pub number: u64,
    pub noreply: bool,
    /// The data block of a storage command (`ms` too), without its `\r\n`.
    pub data: Range<usize>,
    /// A value refused as too large (`set` or `ms`): the data block, this many bytes after the
    /// line, is discarded as it arrives; the client is told `SERVER_ERROR object too large for
    /// cache` and, as memcached does, the key's old value is removed.
    pub too_large: Option<usize>,
    /// What a meta command asked for (default for the text commands).
    pub meta: Meta,
    /// Bytes the whole request occupies, line and data block included.
    pub consumed: usize,
}

impl Request {
    pub(crate) fn new(command: Command, line: Range<usize>, consumed: usize) -> Request {
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
            too_large: None,
            meta: Meta::default(),
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
    /// A line of memcached's own that is none of the above (`MEMLIMIT_TOO_SMALL ...`).
    Line(&'static str),
    /// The answer to a binary-protocol request (memrelay speaks the text protocol only): a
    /// binary response header for the request's opcode with status "not supported", the
    /// request's opaque echoed, and a short message as its body ([`crate::binary`]).
    Binary { opcode: u8, opaque: u32 },
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
            ErrorReply::Line(line) => {
                out.extend_from_slice(line.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            ErrorReply::Binary { opcode, opaque } => crate::binary::not_supported(opcode, opaque, out),
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
    /// The request asked for `noreply`: as memcached, send no error line for it (an error found
    /// before the command's arguments are read, such as a wrong count, is still answered).
    pub silent: bool,
}

impl Invalid {
    pub(crate) fn line(reply: ErrorReply, line_len: usize) -> Parse<Request> {
        Parse::Invalid(Invalid { reply, skip: line_len, close: false, silent: false })
    }
}

pub(crate) const BAD_FORMAT: &str = "bad command line format";
/// A key over 250 bytes: memcached 1.6.18's words for it.
pub(crate) const KEY_TOO_LONG: &str = BAD_FORMAT;
/// A `touch`, `gat` or `flush_all` whose expiry is not a number (memcached 1.6.18's words).
pub(crate) const BAD_EXPTIME: &str = "invalid exptime argument";
pub(crate) const BAD_DATA_CHUNK: &str = "bad data chunk";
const LINE_TOO_LONG: &str = "line too long";
pub const TOO_LARGE: &str = "object too large for cache";

/// Parses one request from the start of `buf`: frames the line, finds the command, and hands
/// the arguments to the command's family.
/// How long the storage request that `buf` begins says it is (its line, its data block and the
/// block's `\r\n`), once its line is there: a reader can make room for all of it at once
/// instead of growing a buffer read by read. `None` for anything else; a hint only (the parser
/// still decides what the bytes are).
pub fn declared_len(buf: &[u8]) -> Option<usize> {
    let newline = crate::find_newline(buf)?;
    let mut fields = crate::tokens(crate::trim_cr(&buf[..newline])).map(|(_, t)| t);
    let bytes = match fields.next()? {
        b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas" => fields.nth(3)?,
        b"ms" => fields.nth(1)?,
        _ => return None,
    };
    let bytes = usize::try_from(crate::parse_u64(bytes)?).ok()?;
    (newline + 1).checked_add(bytes)?.checked_add(2)
}

pub fn parse_request(buf: &[u8], limits: &Limits) -> Parse<Request> {
    let multiget = is_multiget_line(buf);
    let max_line = if multiget { limits.max_get_line_len } else { limits.max_line_len };
    // Closed as memcached closes it, without a word; but a get line over memrelay's own bound
    // (memcached has none) is told why.
    let silent = !multiget;
    let Some(newline) = find_newline(buf) else {
        if buf.len() > max_line {
            return Parse::Invalid(Invalid {
                reply: ErrorReply::Client(LINE_TOO_LONG),
                skip: buf.len(),
                close: true,
                silent,
            });
        }
        return Parse::Incomplete;
    };
    let line_end = newline + 1;
    // A whole line is read as memcached reads it when its newline is in memcached's read buffer.
    let max_whole = if multiget { max_line } else { max_line.max(MAX_WHOLE_LINE_LEN) };
    if line_end > max_whole {
        return Parse::Invalid(Invalid {
            reply: ErrorReply::Client(LINE_TOO_LONG),
            skip: line_end,
            close: true,
            silent,
        });
    }
    // memcached reads a line as a C string: a NUL ends it, whatever follows on the line is not
    // read. Reading it the same way keeps memrelay's idea of the request and the server's equal.
    let line = trim_cr(&buf[..newline]);
    let line = match line.iter().position(|&b| b == 0) {
        Some(nul) => &line[..nul],
        None => line,
    };
    let mut toks = tokens(line);
    let Some(command) = toks.next().and_then(|(_, name)| Command::from_token(name)) else {
        return Invalid::line(ErrorReply::Error, line_end);
    };
    let request = Request::new(command, 0..line.len(), line_end);
    if command.is_retrieval() {
        return retrieval::parse(request, toks);
    }
    if command.is_meta() {
        return meta::parse(request, toks, buf, limits);
    }
    let Some(args) = Args::collect(toks, line_end) else {
        // More tokens than any of these commands takes: memcached's tokenizer stops at 24 and its
        // dispatch finds no form with that many, `ERROR` (`version` and `quit` look at none).
        return match command {
            Command::Version | Command::Quit => {
                let args = Args::collect(std::iter::empty(), line_end).expect("no arguments");
                if command == Command::Version {
                    admin::version(request, &args)
                } else {
                    admin::quit(request, &args)
                }
            }
            _ => Invalid::line(ErrorReply::Error, line_end),
        };
    };
    match command {
        c if c.is_retrieval() || c.is_meta() => unreachable!("parsed above"),
        c if c.is_storage() => storage::parse(request, &args, buf, limits),
        Command::Delete => keyed::delete(request, &args),
        Command::Incr | Command::Decr => keyed::arithmetic(request, &args),
        Command::Touch => keyed::touch(request, &args),
        Command::FlushAll => admin::flush_all(request, &args),
        Command::CacheMemlimit => admin::cache_memlimit(request, &args),
        Command::Verbosity => admin::verbosity(request, &args),
        Command::Version => admin::version(request, &args),
        Command::Quit => admin::quit(request, &args),
        Command::Stats => admin::stats(request, &args),
        _ => unreachable!("every command is a family's"),
    }
}

/// Whether the line is a `get`/`gets`, whose length memcached does not bound (it looks past at
/// most 100 leading spaces).
fn is_multiget_line(buf: &[u8]) -> bool {
    let spaces = buf.iter().take(101).take_while(|&&b| b == b' ').count();
    let rest = &buf[spaces..];
    spaces <= 100 && (rest.starts_with(b"get ") || rest.starts_with(b"gets "))
}

/// The arguments after the command name (at most [`Args::MAX`]), with their offsets in the line.
pub(crate) struct Args<'a> {
    tokens: [&'a [u8]; Args::MAX],
    at: [usize; Args::MAX],
    len: usize,
    /// Where the line ends (after its `\n`): what a bad line makes the client skip.
    pub line_end: usize,
}

impl<'a> Args<'a> {
    /// Commands other than get take a handful of tokens.
    const MAX: usize = 8;

    fn collect(toks: impl Iterator<Item = (usize, &'a [u8])>, line_end: usize) -> Option<Args<'a>> {
        let mut args = Args { tokens: [&[]; Args::MAX], at: [0; Args::MAX], len: 0, line_end };
        for (at, token) in toks {
            if args.len == Args::MAX {
                return None;
            }
            args.tokens[args.len] = token;
            args.at[args.len] = at;
            args.len += 1;
        }
        Some(args)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, i: usize) -> &'a [u8] {
        self.tokens[i]
    }

    /// The last argument is `noreply`.
    pub fn noreply_last(&self) -> bool {
        self.len > 0 && self.tokens[self.len - 1] == b"noreply"
    }

    /// Argument `i` as a key: its range in the line, or the error for a key too long.
    pub fn key(&self, i: usize) -> Result<Range<usize>, Invalid> {
        let key = self.tokens[i];
        if key.len() > MAX_KEY_LEN {
            return Err(self.refusal(ErrorReply::Client(KEY_TOO_LONG)));
        }
        Ok(self.at[i]..self.at[i] + key.len())
    }

    /// The range from argument `first` to the end of the last one.
    pub fn span(&self, first: usize) -> Range<usize> {
        let last = self.len - 1;
        self.at[first]..self.at[last] + self.tokens[last].len()
    }

    /// The line is bad: answer `reply` (unless the line ends in `noreply`), skip the line, keep
    /// the connection.
    pub fn bad(&self, reply: ErrorReply) -> Parse<Request> {
        Parse::Invalid(self.refusal(reply))
    }

    /// What [`Args::bad`] answers, for a `Result`.
    pub fn refusal(&self, reply: ErrorReply) -> Invalid {
        Invalid { reply, skip: self.line_end, close: false, silent: self.noreply_last() }
    }

    /// The command has the wrong number of arguments: `ERROR`, answered even with `noreply`.
    pub fn wrong_count(&self) -> Parse<Request> {
        Parse::Invalid(self.miscount())
    }

    /// What [`Args::wrong_count`] answers, for a `Result`.
    pub fn miscount(&self) -> Invalid {
        Invalid { reply: ErrorReply::Error, skip: self.line_end, close: false, silent: false }
    }

    /// Argument `i` parsed by `parse`, or the bad-format error.
    pub fn number<T>(&self, i: usize, parse: impl Fn(&[u8]) -> Option<T>) -> Result<T, Invalid> {
        parse(self.tokens[i]).ok_or_else(|| self.refusal(ErrorReply::Client(BAD_FORMAT)))
    }
}
