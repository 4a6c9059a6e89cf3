//! `get` and `gets`: any number of keys on one line.

use crate::limits::MAX_KEY_LEN;
use crate::request::{ErrorReply, Invalid, Request, KEY_TOO_LONG};
use crate::Parse;

pub(super) fn parse<'a>(mut request: Request, keys: impl Iterator<Item = (usize, &'a [u8])>) -> Parse<Request> {
    let line_end = request.consumed;
    let (mut count, mut first, mut last_end) = (0, None, 0);
    for (at, key) in keys {
        if key.len() > MAX_KEY_LEN {
            return Invalid::line(ErrorReply::Client(KEY_TOO_LONG), line_end);
        }
        first.get_or_insert(at);
        last_end = at + key.len();
        count += 1;
    }
    let Some(first) = first else {
        return Invalid::line(ErrorReply::Error, line_end);
    };
    request.keys = first..last_end;
    request.key_count = count;
    Parse::Complete(request)
}
