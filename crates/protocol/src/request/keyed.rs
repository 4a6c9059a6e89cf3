//! Commands on one key without a data block: `delete`, `incr`/`decr`, `touch`.

use crate::request::{Args, ErrorReply, Request, BAD_FORMAT};
use crate::{parse_i64, parse_u64, Parse};

/// `delete <key> [0] [noreply]`: the legacy time argument must be 0.
pub(super) fn delete(mut request: Request, args: &Args) -> Parse<Request> {
    let legacy_zero_ok = args.without_noreply() == 2 && args.get(1) == b"0";
    if args.without_noreply() != 1 && !legacy_zero_ok {
        return args.bad(ErrorReply::Client(BAD_FORMAT));
    }
    request.noreply = args.noreply_last();
    complete(request, args, |_| Ok(()))
}

/// `incr|decr <key> <delta> [noreply]`.
pub(super) fn arithmetic(request: Request, args: &Args) -> Parse<Request> {
    if args.len() != 2 && !(args.len() == 3 && args.noreply_last()) {
        return args.bad(ErrorReply::Client(BAD_FORMAT));
    }
    complete(request, args, |request| {
        request.number =
            parse_u64(args.get(1)).ok_or_else(|| args.bad(ErrorReply::Client("invalid numeric delta argument")))?;
        request.noreply = args.len() == 3;
        Ok(())
    })
}

/// `touch <key> <exptime> [noreply]`.
pub(super) fn touch(request: Request, args: &Args) -> Parse<Request> {
    if args.len() != 2 && !(args.len() == 3 && args.noreply_last()) {
        return args.bad(ErrorReply::Client(BAD_FORMAT));
    }
    complete(request, args, |request| {
        request.exptime = args.number(1, parse_i64)?;
        request.noreply = args.len() == 3;
        Ok(())
    })
}

/// The key (argument 0) and whatever `rest` reads into `request`.
fn complete(
    mut request: Request,
    args: &Args,
    rest: impl FnOnce(&mut Request) -> Result<(), Parse<Request>>,
) -> Parse<Request> {
    let parsed = args.key(0).and_then(|keys| {
        request.keys = keys;
        request.key_count = 1;
        rest(&mut request)
    });
    match parsed {
        Ok(()) => Parse::Complete(request),
        Err(invalid) => invalid,
    }
}
