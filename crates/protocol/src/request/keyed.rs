//! Commands on one key without a data block: `delete`, `incr`/`decr`, `touch`.

use crate::request::{Args, ErrorReply, Invalid, Request, BAD_EXPTIME};

const DELETE_USAGE: &str = "bad command line format.  Usage: delete <key> [noreply]";
use crate::{read_i32, read_u64, Parse};

/// `delete <key> [0] [noreply]`: the legacy time argument must be 0 (memcached 1.6's rules).
pub(super) fn delete(mut request: Request, args: &Args) -> Parse<Request> {
    if args.is_empty() || args.len() > 3 {
        return args.wrong_count();
    }
    let hold_is_zero = args.len() > 1 && args.get(1) == b"0";
    let valid = match args.len() {
        1 => true,
        2 => hold_is_zero || args.noreply_last(),
        _ => hold_is_zero && args.noreply_last(),
    };
    if !valid {
        return args.bad(ErrorReply::Client(DELETE_USAGE));
    }
    request.noreply = args.len() > 1 && args.noreply_last();
    complete(request, args, |_| Ok(()))
}

/// `incr|decr <key> <delta> [noreply]` (a third token other than `noreply` is ignored, as
/// memcached ignores it).
pub(super) fn arithmetic(request: Request, args: &Args) -> Parse<Request> {
    if args.len() != 2 && args.len() != 3 {
        return args.wrong_count();
    }
    complete(request, args, |request| {
        request.number =
            read_u64(args.get(1)).ok_or_else(|| args.refusal(ErrorReply::Client("invalid numeric delta argument")))?;
        request.noreply = args.len() == 3 && args.noreply_last();
        Ok(())
    })
}

/// `touch <key> <exptime> [noreply]`.
pub(super) fn touch(request: Request, args: &Args) -> Parse<Request> {
    if args.len() != 2 && args.len() != 3 {
        return args.wrong_count();
    }
    complete(request, args, |request| {
        let exptime = read_i32(args.get(1));
        request.exptime = exptime.ok_or_else(|| args.refusal(ErrorReply::Client(BAD_EXPTIME)))?.into();
        request.noreply = args.len() == 3 && args.noreply_last();
        Ok(())
    })
}

/// The key (argument 0) and whatever `rest` reads into `request`.
fn complete(
    mut request: Request,
    args: &Args,
    rest: impl FnOnce(&mut Request) -> Result<(), Invalid>,
) -> Parse<Request> {
    let parsed = args.key(0).and_then(|keys| {
        request.keys = keys;
        request.key_count = 1;
        rest(&mut request)
    });
    match parsed {
        Ok(()) => Parse::Complete(request),
        Err(invalid) => Parse::Invalid(invalid),
    }
}
