//! Storage commands (`set`, `add`, `replace`, `append`, `prepend`, `cas`): a line, then a data
//! block of the declared length and `\r\n`.

use crate::limits::Limits;
use crate::request::{Args, ErrorReply, Invalid, Request, BAD_DATA_CHUNK, TOO_LARGE};
use crate::{read_i32, read_u32, read_u64, Command, Parse};

/// `<command> <key> <flags> <exptime> <bytes> [<cas unique>] [noreply]`. As in memcached 1.6, one
/// more token is accepted after the fixed ones and means `noreply` only when it is `noreply`; any
/// other count is `ERROR`.
pub(super) fn parse(mut request: Request, args: &Args, buf: &[u8], limits: &Limits) -> Parse<Request> {
    match fields(&mut request, args) {
        Ok(bytes) => block(request, bytes, args.line_end, buf, limits),
        Err(invalid) => Parse::Invalid(invalid),
    }
}

/// The line's fields into `request`; returns the declared data length.
fn fields(request: &mut Request, args: &Args) -> Result<usize, Invalid> {
    let fixed = if request.command == Command::Cas { 5 } else { 4 };
    if args.len() != fixed && args.len() != fixed + 1 {
        return Err(args.miscount());
    }
    request.keys = args.key(0)?;
    request.key_count = 1;
    request.flags = args.number(1, read_u32)?;
    request.exptime = args.number(2, read_i32)?.into();
    // memcached reads the length into 32 bits and refuses a negative one.
    let bytes = args.number(3, |t| read_i32(t).and_then(|v| usize::try_from(v).ok()))?;
    if request.command == Command::Cas {
        request.number = args.number(4, read_u64)?;
    }
    request.noreply = args.len() == fixed + 1 && args.noreply_last();
    Ok(bytes)
}

/// The data block after the line.
fn block(mut request: Request, bytes: usize, line_end: usize, buf: &[u8], limits: &Limits) -> Parse<Request> {
    if bytes > limits.max_value_len && request.command == Command::Set {
        // memcached answers, swallows the data block that follows and removes the old value.
        request.too_large = Some(bytes.saturating_add(2));
        return Parse::Complete(request);
    }
    if bytes > limits.max_value_len {
        // memcached answers and swallows the data block that follows.
        return Parse::Invalid(Invalid {
            reply: ErrorReply::Server(TOO_LARGE),
            skip: line_end.saturating_add(bytes).saturating_add(2),
            close: false,
            silent: request.noreply,
        });
    }
    let end = line_end + bytes + 2;
    if buf.len() < end {
        return Parse::Incomplete;
    }
    if &buf[end - 2..end] != b"\r\n" {
        // memcached answers and reads on after the declared block.
        return Parse::Invalid(Invalid {
            reply: ErrorReply::Client(BAD_DATA_CHUNK),
            skip: end,
            close: false,
            silent: request.noreply,
        });
    }
    request.data = line_end..line_end + bytes;
    request.consumed = end;
    Parse::Complete(request)
}
