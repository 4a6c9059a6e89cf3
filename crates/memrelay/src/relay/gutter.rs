//! What a gutter server is sent ([`crate::routing::Router::divert`] chose it): the request, with
//! every expiry it carries capped at the gutter's TTL, as mcrouter's `FailoverWithExptimeRoute`
//! does. An expiry of 0 (never) becomes the TTL; a longer one, relative or a point in time,
//! becomes the TTL; a shorter one, or one already past, stays. A store with no expiry at all
//! (`ms` without `T`) gets `T<ttl>`. So what the gutter holds for a down server is gone a TTL
//! after the server is back, and no stale value outlives it for long.
//!
//! The requests diverted to a gutter are counted (`stats` `gutter_requests`, `/metrics`).

use std::sync::atomic::{AtomicU64, Ordering};

use memrelay_protocol::{compose, Command, Request};

/// memcached reads an expiry above 30 days as a point in time (unix seconds).
const RELATIVE_LIMIT: i64 = 30 * 24 * 3600;

static DIVERTED: AtomicU64 = AtomicU64::new(0);

/// Counts a request sent to a gutter.
pub(crate) fn count() {
    DIVERTED.fetch_add(1, Ordering::Relaxed);
}

/// Requests sent to a gutter since start.
pub fn diverted() -> u64 {
    DIVERTED.load(Ordering::Relaxed)
}

/// `exptime` capped at `ttl` seconds, `now_unix` the time a point-in-time expiry is read
/// against.
pub(crate) fn cap(exptime: i64, ttl: u32, now_unix: i64) -> i64 {
    let ttl = i64::from(ttl);
    match exptime {
        0 => ttl,
        e if e < 0 => e,
        e if e > RELATIVE_LIMIT => match e - now_unix {
            left if left <= 0 => e,
            left => left.min(ttl),
        },
        e => e.min(ttl),
    }
}

/// [`cap`] against the clock.
pub(crate) fn cap_now(exptime: i64, ttl: u32) -> i64 {
    cap(exptime, ttl, now_unix())
}

fn now_unix() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// Appends `request` as the gutter gets it: [`compose::request`] with its expiry capped.
pub(crate) fn compose(out: &mut Vec<u8>, request: &Request, input: &[u8], ttl: u32) {
    let now = now_unix();
    match request.command {
        c if c.is_storage() || matches!(c, Command::Touch | Command::Gat | Command::Gats) => {
            let mut capped = request.clone();
            capped.exptime = cap(request.exptime, ttl, now);
            compose::request(out, &capped, input, false);
        }
        c @ (Command::MetaSet | Command::MetaGet | Command::MetaArithmetic) => {
            let key = request.key(input);
            let data = (c == Command::MetaSet).then(|| &input[request.data.clone()]);
            let mut flags: Vec<Vec<u8>> = Vec::new();
            let mut has_ttl = false;
            for flag in request.meta.flag_tokens(input).filter(|flag| flag[0] != b'q') {
                match flag[0] {
                    // `T`: the item's expiry; `N`: the expiry of the item a miss creates.
                    b'T' | b'N' => {
                        has_ttl |= flag[0] == b'T';
                        let asked = std::str::from_utf8(&flag[1..]).ok().and_then(|t| t.parse::<i64>().ok());
                        let capped = asked.map_or(i64::from(ttl), |e| cap(e, ttl, now));
                        flags.push(format!("{}{capped}", flag[0] as char).into_bytes());
                    }
                    _ => flags.push(flag.to_vec()),
                }
            }
            if c == Command::MetaSet && !has_ttl {
                flags.push(format!("T{ttl}").into_bytes());
            }
            if request.server_applies_quiet() {
                compose::meta(out, c, key, data, flags.iter().map(Vec::as_slice));
                out.extend_from_slice(b"mn\r\n");
            } else {
                compose::meta(out, c, key, data, flags.iter().map(Vec::as_slice));
            }
        }
        _ => compose::request(out, request, input, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memrelay_protocol::{parse_request, Limits, Parse};

    fn composed(line: &[u8], ttl: u32) -> String {
        let Parse::Complete(request) = parse_request(line, &Limits::default()) else { panic!("{line:?}") };
        let mut out = Vec::new();
        compose(&mut out, &request, line, ttl);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_expiry_is_capped_at_the_ttl() {
        let now = 2_000_000_000;
        assert_eq!(cap(0, 10, now), 10);
        assert_eq!(cap(5, 10, now), 5);
        assert_eq!(cap(3600, 10, now), 10);
        assert_eq!(cap(-1, 10, now), -1);
        assert_eq!(cap(now + 3600, 10, now), 10);
        assert_eq!(cap(now + 3, 10, now), 3);
        assert_eq!(cap(now - 5, 10, now), now - 5); // already past: stays expired
    }

    #[test]
    fn stores_touches_and_meta_flags_carry_the_capped_expiry() {
        assert_eq!(composed(b"set k 3 0 1\r\nx\r\n", 10), "set k 3 10 1\r\nx\r\n");
        assert_eq!(composed(b"add k 3 7 1\r\nx\r\n", 10), "add k 3 7 1\r\nx\r\n");
        assert_eq!(composed(b"touch k 3600\r\n", 10), "touch k 10\r\n");
        assert_eq!(composed(b"gat 0 a b\r\n", 10), "gat 10 a b\r\n");
        assert_eq!(composed(b"ms k 1 T0 F5\r\nx\r\n", 10), "ms k 1 T10 F5\r\nx\r\n");
        assert_eq!(composed(b"ms k 1 F5\r\nx\r\n", 10), "ms k 1 F5 T10\r\nx\r\n");
        assert_eq!(composed(b"mg k v T100 N0\r\n", 10), "mg k v T10 N10\r\n");
        // No expiry to carry: as composed for any server.
        assert_eq!(composed(b"get k\r\n", 10), "get k\r\n");
        assert_eq!(composed(b"delete k\r\n", 10), "delete k\r\n");
        assert_eq!(composed(b"incr k 2\r\n", 10), "incr k 2\r\n");
    }
}
