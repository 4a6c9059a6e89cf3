//! Commands about the server rather than a key: `flush_all`, `verbosity`, `version`, `quit`,
//! `stats`.

use crate::request::{Args, ErrorReply, Request};
use crate::{read_u64, Parse};

/// `flush_all [delay] [noreply]`.
pub(super) fn flush_all(mut request: Request, args: &Args) -> Parse<Request> {
    if args.len() > 2 {
        return args.bad(ErrorReply::Error);
    }
    request.noreply = args.noreply_last();
    if args.len() > usize::from(request.noreply) {
        match args.number(0, read_u64) {
            Ok(delay) => request.number = delay,
            Err(invalid) => return invalid,
        }
    }
    Parse::Complete(request)
}

/// `verbosity <level> [noreply]`.
pub(super) fn verbosity(mut request: Request, args: &Args) -> Parse<Request> {
    if args.len() != 1 && args.len() != 2 {
        return args.bad(ErrorReply::Error);
    }
    match args.number(0, read_u64) {
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
