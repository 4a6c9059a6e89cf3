//! Which requests memrelay answers itself, decided once for both engines and the access check.

use memrelay_protocol::{Command, Request};

/// memcached's `stats` groups memrelay gathers from every server (`relay::stats`); it answers
/// the others itself.
pub(crate) const SERVER_STATS_GROUPS: [&[u8]; 4] = [b"items", b"slabs", b"sizes", b"settings"];

/// Whether memrelay answers `request` itself.
pub(crate) fn is_local(request: &Request, buf: &[u8]) -> bool {
    match request.command {
        Command::Version | Command::Verbosity | Command::Quit | Command::MetaNoop => true,
        Command::Stats => !SERVER_STATS_GROUPS.contains(&&buf[request.keys.clone()]),
        // `gat <exptime>` without keys.
        Command::Gat | Command::Gats => request.key_count == 0,
        // `get __memrelay__.route(OP,KEY)`: where KEY would go (`routing::explain`).
        Command::Get => request.key_count == 1 && request.key(buf).starts_with(super::explain::QUERY_PREFIX),
        _ => false,
    }
}
