//! `get`, `gets`, `gat` and `gats`: any number of keys on one line (after the expiry for the
//! touching two).

use crate::limits::MAX_KEY_LEN;
use crate::request::{ErrorReply, Invalid, Request, BAD_EXPTIME, KEY_TOO_LONG};
use crate::{read_i32, Command, Parse};

pub(super) fn parse<'a>(mut request: Request, mut keys: impl Iterator<Item = (usize, &'a [u8])>) -> Parse<Request> {
    let line_end = request.consumed;
    let touching = matches!(request.command, Command::Gat | Command::Gats);
    if touching {
        let Some((_, exptime)) = keys.next() else {
            return Invalid::line(ErrorReply::Error, line_end);
        };
        let Some(exptime) = read_i32(exptime) else {
            return Invalid::line(ErrorReply::Client(BAD_EXPTIME), line_end);
        };
        request.exptime = exptime.into();
    }
    let (mut count, mut first, mut last_end) = (0, None, 0);
    for (at, key) in keys {
        if key.len() > MAX_KEY_LEN {
            return Invalid::line(ErrorReply::Client(KEY_TOO_LONG), line_end);
        }
        first.get_or_insert(at);
        last_end = at + key.len();
        count += 1;
    }
    match first {
        Some(first) => request.keys = first..last_end,
        // memcached answers a `gat <exptime>` without keys with an empty `END`.
        None if touching => request.keys = 0..0,
        None => return Invalid::line(ErrorReply::Error, line_end),
    }
    request.key_count = count;
    Parse::Complete(request)
}
