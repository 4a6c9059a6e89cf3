//! Commands about the server rather than a key: `flush_all`, `cache_memlimit`, `verbosity`,
//! `version`, `quit`, `stats`.

use crate::request::{Args, ErrorReply, Invalid, Request, BAD_EXPTIME};
use crate::{read_i32, read_u32, Parse};

/// `flush_all [delay] [noreply]`: the delay is read as memcached reads it (a signed number; a
/// negative delay flushes at once), kept in `exptime`.
pub(super) fn flush_all(mut request: Request, args: &Args) -> Parse<Request> {
    if args.len() > 2 {
        return args.wrong_count();
    }
    request.noreply = args.noreply_last();
    if args.len() > usize::from(request.noreply) {
        match read_i32(args.get(0)) {
            Some(delay) => request.exptime = delay.into(),
            None => return args.bad(ErrorReply::Client(BAD_EXPTIME)),
        }
    }
    Parse::Complete(request)
}

/// `verbosity <level> [noreply]`: the level is read as memcached reads it (`safe_strtoul`; a
/// second token is left unread); an unreadable one is `CLIENT_ERROR bad command line format`,
/// left out under `noreply` (`verbosity noreply` reads `noreply` as the level).
pub(super) fn verbosity(mut request: Request, args: &Args) -> Parse<Request> {
    if args.len() != 1 && args.len() != 2 {
        return args.wrong_count();
    }
    request.noreply = args.noreply_last();
    match args.number(0, read_u32) {
        Ok(level) => request.number = level.into(),
        Err(invalid) => return Parse::Invalid(invalid),
    }
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

/// Smallest and largest limits memcached accepts, in megabytes (`process_memlimit_command`).
pub const MEMLIMIT_MIN_MB: u64 = 8;
pub const MEMLIMIT_MAX_MB: u64 = 1_000_000_000;

/// `cache_memlimit <megabytes> [noreply]`, refused as memcached refuses it: an unreadable number
/// is `ERROR`, fewer than 8 MB `MEMLIMIT_TOO_SMALL ...`, more than 10^9 MB (bytes given for
/// megabytes) `MEMLIMIT_ADJUST_FAILED ...`. Only an acceptable limit reaches the servers.
pub(super) fn cache_memlimit(mut request: Request, args: &Args) -> Parse<Request> {
    if args.is_empty() || args.len() > 2 {
        return args.wrong_count();
    }
    request.noreply = args.noreply_last();
    let Some(megabytes) = read_u32(args.get(0)) else {
        return Parse::Invalid(Invalid { reply: ErrorReply::Error, silent: request.noreply, ..args.miscount() });
    };
    let refusal = match u64::from(megabytes) {
        mb if mb < MEMLIMIT_MIN_MB => "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m",
        mb if mb > MEMLIMIT_MAX_MB => "MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes",
        mb => {
            request.number = mb;
            return Parse::Complete(request);
        }
    };
    Parse::Invalid(Invalid { reply: ErrorReply::Line(refusal), silent: request.noreply, ..args.miscount() })
}
