//! The meta protocol's stale-while-revalidate flags are one server's state: after `md <key> I`
//! (replicated, so every copy is stale) memcached answers the first `mg` of the key `W` (you
//! win: recache it) and every later one `Z` (someone else is), all with `X` (stale). A balanced
//! `mg` reads one replica in turn, and each replica would hand out its own `W`: one winner per
//! replica. So an `mg` that a replica other than the key's primary answered with any of `W`, `X`
//! or `Z` is asked again of the primary (the one `mg` with `N`/`R` goes to), whose answer the
//! client gets: one winner across the replicas, as on one memcached. The second exchange costs
//! only the reads of stale or contended items.

use memrelay_protocol::{Command, Reply, Request};

use crate::routing::Plan;

/// Whether `request` is a balanced read whose answer may carry the flags.
pub(crate) fn applies(request: &Request, plan: Plan) -> bool {
    request.command == Command::MetaGet && matches!(plan, Plan::Forward(_))
}

/// Whether the meta reply `reply` (its bytes from the start) carries `W`, `X` or `Z`.
pub(crate) fn carries_win_flags(reply: &Reply, bytes: &[u8]) -> bool {
    let Some(line) = bytes.get(..reply.body_end) else { return false };
    // The code first; for `VA` then the length (digits, never one of the flags).
    line.split(|&b| b == b' ').skip(1).any(|token| matches!(token, b"W" | b"X" | b"Z"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use memrelay_protocol::{Expect, Parse, ReplyParser};

    fn carries(bytes: &[u8]) -> bool {
        let Parse::Complete(reply) = ReplyParser::new(Expect::Meta).parse(bytes) else { panic!("{bytes:?}") };
        carries_win_flags(&reply, bytes)
    }

    #[test]
    fn win_stale_and_contended_flags_are_found_in_every_reply_shape() {
        // memcached 1.6's own answers after `md k I` (see the test of the same name in
        // tests/it/client_compat.rs, which reads them from a real server).
        assert!(carries(b"VA 1 X W\r\nv\r\n"));
        assert!(carries(b"VA 1 c2 Z X\r\nv\r\n"));
        assert!(carries(b"HD Z X\r\n"));
        assert!(carries(b"HD W\r\n"));
        assert!(!carries(b"VA 1 c2\r\nv\r\n"));
        assert!(!carries(b"VA 1 t-1 f0\r\nW\r\n"), "a value that reads W is not a flag");
        assert!(!carries(b"EN\r\n"));
        assert!(!carries(b"HD Oxyz kW\r\n"));
    }
}
