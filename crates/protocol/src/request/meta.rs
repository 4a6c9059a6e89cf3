//! The meta commands (`mg`, `ms`, `md`, `ma`, `me`, `mn`), read as memcached 1.6.18 reads them
//! (`proto_text.c`, `process_m*_command`).
//!
//! memrelay answers itself what memcached answers before it has understood the request (too few
//! tokens, a key too long, too many flags, a bad data length, a duplicate or unknown flag): those
//! are the errors after which memcached would not swallow an `ms` data block, or whose meaning
//! depends on flags memrelay rewrites (`q`). Everything else is checked by the server, to which
//! memrelay forwards the flags token by token; the server's error comes back as memcached's own.

use std::ops::Range;

use crate::limits::MAX_KEY_LEN;
use crate::request::{ErrorReply, Invalid, Request, BAD_FORMAT};
use crate::{read_i32, Command, Limits, Parse, Status};

/// memcached's `MFLAG_MAX_OPT_LENGTH`: a meta line of more tokens (the command and a final empty
/// token counted) is refused.
pub const META_FLAG_MAX_TOKENS: usize = 20;

/// What a meta request asks for, beyond its key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meta {
    /// The flag tokens, as a range of the line (forwarded token by token, `q` left out).
    pub flags: Range<usize>,
    /// `b`: the key is base64; it is placed by its decoded bytes.
    pub base64: bool,
    /// `q`: the nominal reply is left out (memrelay drops it; the servers always answer).
    pub quiet: bool,
    /// `C<cas>`: compare a cas value (only the key's primary knows it).
    pub compare_cas: bool,
    /// `c`: return the item's cas value.
    pub return_cas: bool,
    /// `T<ttl>` on `mg`: touch the item.
    pub touch: bool,
    /// `N`/`R` on `mg`: win-token (recache) coordination, meaningful on one server only.
    pub recache: bool,
    /// `N<ttl>` (`mg`, `ma`): a miss creates the item (autovivify), so the request writes.
    pub vivify: bool,
    /// The `M` mode character, 0 if none.
    pub mode: u8,
}

impl Meta {
    /// The flag tokens of `line` (the request's line) with their first character.
    pub fn flag_tokens<'a>(&self, buf: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
        crate::tokens(&buf[self.flags.clone()]).map(|(_, token)| token)
    }
}

impl Request {
    /// Whether the server, not memrelay, applies this request's quiet mode: an `ma` that may
    /// create its item (`N`) is answered in quiet mode when it did (memcached 1.6.18 answers the
    /// creation, `HD` or `VA`, and silences an increment), which only the server knows. Such a
    /// request is forwarded with `q` and followed by `mn` ([`crate::Expect::QuietMeta`]).
    pub fn server_applies_quiet(&self) -> bool {
        self.command == Command::MetaArithmetic && self.meta.vivify && self.meta.quiet
    }

    /// Whether quiet mode (`q`) leaves out a reply of this status, as memcached 1.6.18 does: a
    /// miss for `mg`, `HD` for `ms` and `md`, any success (`HD` or `VA`) for `ma`. Errors and the
    /// other codes are always sent.
    pub fn quiet_drops(&self, status: Status) -> bool {
        if self.server_applies_quiet() {
            // The server said nothing (`MN` came first).
            return status == Status::Noop;
        }
        self.meta.quiet
            && match self.command {
                Command::MetaGet => status == Status::Miss,
                Command::MetaSet | Command::MetaDelete => status == Status::Done,
                Command::MetaArithmetic => matches!(status, Status::Done | Status::Value),
                _ => false,
            }
    }
}

const BAD_FLAG: &str = "invalid flag";
const DUPLICATE_FLAG: &str = "duplicate flag";
const INVALID_OR_DUPLICATE: &str = "invalid or duplicate flag";

/// Flags memcached 1.6.18's `_meta_flag_preparse` knows (for every meta command alike).
fn known_flag(flag: u8) -> bool {
    b"bNTRlOPLkstcfvhuqFCMJDI".contains(&flag)
}

pub(super) fn parse<'a>(
    mut request: Request,
    toks: impl Iterator<Item = (usize, &'a [u8])>,
    buf: &[u8],
    limits: &Limits,
) -> Parse<Request> {
    let command = request.command;
    let line_end = request.consumed;
    if command == Command::MetaNoop {
        return Parse::Complete(request);
    }
    let answer = |reason| Invalid::line(ErrorReply::Client(reason), line_end);
    // Tokens after the command: the key, then (ms) the data length, then flags.
    let mut args: [(usize, &[u8]); META_FLAG_MAX_TOKENS] = [(0, &[]); META_FLAG_MAX_TOKENS];
    let mut count = 0;
    for token in toks {
        if count < args.len() {
            args[count] = token;
        }
        count += 1;
    }
    let Some(&(key_at, key)) = args[..count.min(args.len())].first() else {
        return match command {
            Command::MetaDebug => answer(BAD_FORMAT),
            _ => Invalid::line(ErrorReply::Error, line_end),
        };
    };
    if key.len() > MAX_KEY_LEN {
        return answer(BAD_FORMAT);
    }
    request.keys = key_at..key_at + key.len();
    request.key_count = 1;
    if command == Command::MetaDebug {
        // `me <key> [b]`: only the token after the key is read.
        request.meta.base64 = count > 1 && args[1].1 == b"b";
        return Parse::Complete(request);
    }
    // memcached counts the command and a final empty token.
    let ntokens = count + 2;
    let mut first_flag = 1;
    let mut data_len = 0;
    if command == Command::MetaSet {
        if ntokens == 3 {
            return answer(BAD_FORMAT);
        }
        if ntokens > META_FLAG_MAX_TOKENS {
            return answer("options flags too long");
        }
        match read_i32(args[1].1) {
            Some(len) if (0..=i32::MAX - 2).contains(&len) => data_len = len as usize,
            _ => return answer(BAD_FORMAT),
        }
        first_flag = 2;
    } else if ntokens > META_FLAG_MAX_TOKENS {
        return answer(if command == Command::MetaGet {
            "options flags are too long"
        } else {
            "options flags too long"
        });
    }
    // From here on memcached swallows an `ms` data block after an error.
    let swallow = if command == Command::MetaSet { data_len + 2 } else { 0 };
    let refuse = |reason| {
        Parse::Invalid(Invalid {
            reply: ErrorReply::Client(reason),
            skip: line_end.saturating_add(swallow),
            close: false,
            silent: false,
        })
    };
    let flags = &args[first_flag..count];
    let mut seen = [false; 128];
    for &(_, token) in flags {
        let flag = token[0];
        if flag >= 127 || seen[usize::from(flag)] {
            return refuse(match command {
                Command::MetaDelete | Command::MetaArithmetic => INVALID_OR_DUPLICATE,
                _ => DUPLICATE_FLAG,
            });
        }
        seen[usize::from(flag)] = true;
        if !known_flag(flag) {
            return refuse(match command {
                Command::MetaDelete | Command::MetaArithmetic => INVALID_OR_DUPLICATE,
                _ => BAD_FLAG,
            });
        }
        let meta = &mut request.meta;
        match flag {
            b'b' => meta.base64 = true,
            b'q' => meta.quiet = true,
            b'C' => meta.compare_cas = true,
            b'c' => meta.return_cas = true,
            b'T' => meta.touch = true,
            b'N' => (meta.recache, meta.vivify) = (true, true),
            b'R' => meta.recache = true,
            b'M' => meta.mode = token.get(1).copied().unwrap_or(0),
            _ => {}
        }
    }
    if let (Some(&(from, _)), Some(&(at, last))) = (flags.first(), flags.last()) {
        request.meta.flags = from..at + last.len();
    }
    if command != Command::MetaSet {
        return Parse::Complete(request);
    }
    if data_len > limits.max_value_len {
        // memcached answers and removes the key's old value (in every mode).
        request.too_large = Some(data_len + 2);
        return Parse::Complete(request);
    }
    let end = line_end + data_len + 2;
    if buf.len() < end {
        return Parse::Incomplete;
    }
    request.consumed = end;
    if &buf[end - 2..end] != b"\r\n" {
        // memcached answers (even in quiet mode) and reads on after the block.
        return Parse::Invalid(Invalid {
            reply: ErrorReply::Client(super::BAD_DATA_CHUNK),
            skip: end,
            close: false,
            silent: false,
        });
    }
    request.data = line_end..line_end + data_len;
    Parse::Complete(request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_request;

    fn parse(bytes: &[u8]) -> Parse<Request> {
        parse_request(bytes, &Limits::default())
    }

    fn error_of(bytes: &[u8]) -> (ErrorReply, usize) {
        match parse(bytes) {
            Parse::Invalid(invalid) => (invalid.reply, invalid.skip),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn meta_get_flags() {
        let line = b"mg foo v q Oab k T30\r\n";
        let Parse::Complete(request) = parse(line) else { panic!() };
        assert_eq!(request.command, Command::MetaGet);
        assert_eq!(request.key(line), b"foo");
        assert!(request.meta.quiet && request.meta.touch && !request.meta.return_cas);
        let flags: Vec<_> = request.meta.flag_tokens(line).collect();
        assert_eq!(flags, [&b"v"[..], b"q", b"Oab", b"k", b"T30"]);
    }

    #[test]
    fn meta_set_frames_its_data_block() {
        let bytes = b"ms k 5 T0 F3 C99\r\nhello\r\nmn\r\n";
        let Parse::Complete(request) = parse(bytes) else { panic!() };
        assert_eq!((&bytes[request.data.clone()], request.consumed), (&b"hello"[..], 25));
        assert!(request.meta.compare_cas);
        assert_eq!(parse(b"ms k 5 T0\r\nhel"), Parse::Incomplete);
    }

    #[test]
    fn errors_memcached_answers_before_reading_the_block_do_not_swallow_it() {
        assert_eq!(error_of(b"ms k\r\nxx\r\n"), (ErrorReply::Client(BAD_FORMAT), 6));
        assert_eq!(error_of(b"ms k -1\r\n"), (ErrorReply::Client(BAD_FORMAT), 9));
        assert_eq!(error_of(b"ms\r\n"), (ErrorReply::Error, 4));
        // After the length is read, memcached swallows the block.
        assert_eq!(error_of(b"ms k 2 v v\r\nxx\r\n"), (ErrorReply::Client(DUPLICATE_FLAG), 16));
        assert_eq!(error_of(b"md k v v\r\n"), (ErrorReply::Client(INVALID_OR_DUPLICATE), 10));
        assert_eq!(error_of(b"mg k !\r\n"), (ErrorReply::Client(BAD_FLAG), 8));
        assert_eq!(error_of(b"ms k 2\r\nxyz\r\n").0, ErrorReply::Client(super::super::BAD_DATA_CHUNK));
    }

    #[test]
    fn too_large_values_are_refused_with_the_key() {
        let limits = Limits { max_value_len: 10, ..Limits::default() };
        let Parse::Complete(request) = parse_request(b"ms k 11 T0\r\n", &limits) else { panic!() };
        assert_eq!((request.too_large, request.consumed), (Some(13), 12));
    }

    #[test]
    fn noop_and_debug() {
        assert!(matches!(parse(b"mn\r\n"), Parse::Complete(r) if r.command == Command::MetaNoop));
        let Parse::Complete(request) = parse(b"me a2V5 b\r\n") else { panic!() };
        assert!(request.meta.base64);
        assert_eq!(error_of(b"me\r\n").0, ErrorReply::Client(BAD_FORMAT));
    }
}
