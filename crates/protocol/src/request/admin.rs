//! Commands about the server rather than a key: `flush_all`, `verbosity`, `version`, `quit`,
//! `stats`.

use crate::request::{Args, Request};
use crate::{read_i32, read_u64, Parse};

/// `flush_all [delay] [noreply]`: the delay is read as memcached reads it (a signed number; a
/// negative delay flushes at once), kept in `exptime`.
pub(super) fn flush_all(mut request: Request, args: &Args) -> Parse<Request> {
    if args.len() > 2 {
        return args.wrong_count();
    }
    request.noreply = args.noreply_last();
    if args.len() > usize::from(request.noreply) {
        match args.number(0, read_i32) {
            Ok(delay) => request.exptime = delay.into(),
            Err(invalid) => return Parse::Invalid(invalid),
        }
    }
    Parse::Complete(request)
}

/// `verbosity <level> [noreply]`: memcached takes any level token (an unreadable one as 0).
pub(super) fn verbosity(mut request: Request, args: &Args) -> Parse<Request> {
    if args.len() != 1 && args.len() != 2 {
        return args.wrong_count();
    }
    request.noreply = args.noreply_last();
    request.number = read_u64(args.get(0)).unwrap_or(0);
    Parse::Complete(request)
}

/// `version`: memcached ignores anything after it.
pub(super) fn version(request: Request, _args: &Args) -> Parse<Request> {
    Parse::Complete(request)
}

/// `quit`: memcached closes the connection whatever follows the command.
pub(super) fn quit(request: Request, _args: &Args) -> Parse<Request> {
    Parse::Complete(request)
}

/// `stats [group]`: the group (if any) is kept as the "key" for the answerer to read.
pub(super) fn stats(mut request: Request, args: &Args) -> Parse<Request> {
    if !args.is_empty() {
        request.keys = args.span(0);
    }
    Parse::Complete(request)
}
