//! Commands about the server rather than a key: `flush_all`, `verbosity`, `version`, `quit`,
//! `stats`.

use crate::request::{Args, ErrorReply, Request, BAD_FORMAT};
use crate::{parse_u64, Parse};

/// `flush_all [delay] [noreply]`.
pub(super) fn flush_all(mut request: Request, args: &Args) -> Parse<Request> {
    match args.without_noreply() {
        0 => {}
        1 => match args.number(0, parse_u64) {
            Ok(delay) => request.number = delay,
            Err(invalid) => return invalid,
        },
        _ => return args.bad(ErrorReply::Client(BAD_FORMAT)),
    }
    request.noreply = args.noreply_last();
    Parse::Complete(request)
}

/// `verbosity <level> [noreply]`.
pub(super) fn verbosity(mut request: Request, args: &Args) -> Parse<Request> {
    if args.without_noreply() != 1 {
        return args.bad(ErrorReply::Error);
    }
    match args.number(0, parse_u64) {
        Ok(level) => request.number = level,
        Err(invalid) => return invalid,
    }
    request.noreply = args.noreply_last();
    Parse::Complete(request)
}

/// `version`, `quit`: nothing after the command.
pub(super) fn no_arguments(request: Request, args: &Args) -> Parse<Request> {
    if !args.is_empty() {
        return args.bad(ErrorReply::Error);
    }
    Parse::Complete(request)
}

/// `stats [group]`: the group (if any) is kept as the "key" for the answerer to read.
pub(super) fn stats(mut request: Request, args: &Args) -> Parse<Request> {
    if !args.is_empty() {
        request.keys = args.span(0);
    }
    Parse::Complete(request)
}
