//! Warming a restarted server (mcrouter's WarmUpRoute, for memrelay's replicas): while a server
//! is cold ([`crate::upstream::health`]), a single-key `get` that misses there is asked again of another
//! replica of the key with `mg <key> v f t` (the value, its flags and its remaining TTL); the
//! client gets that replica's answer as a text reply, and the value is written back to the cold
//! server with `ms <key> <len> F<flags> T<ttl> ME` (add mode: a newer value stored meanwhile is
//! not overwritten). Write-backs are fire-and-forget and limited per thread ([`Budget`]), so the
//! client never waits longer than the replica's read.

use std::time::Instant;

use memrelay_protocol::{compose, Command, Reply, Request, Status};

use crate::routing::{Plan, Router};
use crate::upstream::Servers;

/// Write-backs a thread may start per second (a token bucket of one second's worth).
pub(crate) const WRITE_BACKS_PER_SECOND: f64 = 5000.0;

/// Whether a request is one warming retries: a plain single-key `get` forwarded to one server.
pub(crate) fn applies(request: &Request, plan: Plan) -> bool {
    request.command == Command::Get && request.key_count == 1 && matches!(plan, Plan::Forward(_))
}

/// Whether the reply is a miss.
pub(crate) fn missed(reply: &Reply) -> bool {
    reply.status == Status::End && reply.items == 0
}

/// The replica to ask instead of `cold`: the key's first other replica that is neither down nor
/// cold itself. `scratch` is reused.
pub(crate) fn replica(
    router: &Router,
    servers: &impl Servers,
    key: &[u8],
    cold: usize,
    scratch: &mut Vec<usize>,
) -> Option<usize> {
    router.replicas(key, scratch);
    scratch.iter().copied().find(|&s| s != cold && !servers.is_down(s) && !servers.is_cold(s))
}

/// `mg <key> v f t\r\n`
pub(crate) fn compose_read(key: &[u8], out: &mut Vec<u8>) {
    compose::meta(out, Command::MetaGet, key, None, [&b"v"[..], b"f", b"t"]);
}

/// The replica's `VA <len> f<flags> t<ttl>` block, read apart.
struct Found<'a> {
    flags: u32,
    ttl: i64,
    data: &'a [u8],
}

fn found<'a>(reply: &Reply, bytes: &'a [u8]) -> Option<Found<'a>> {
    if reply.status != Status::Value {
        return None;
    }
    let line = &bytes[..reply.body_end];
    let mut flags = 0;
    let mut ttl = -1;
    for token in line.split(|&b| b == b' ').skip(2) {
        match token.split_first() {
            Some((b'f', n)) => flags = u32::try_from(digits(n)?).ok()?,
            Some((b't', b"-1")) => ttl = -1,
            Some((b't', n)) => ttl = i64::try_from(digits(n)?).ok()?,
            _ => {}
        }
    }
    let data_start = reply.body_end + 2;
    let data = bytes.get(data_start..reply.consumed.checked_sub(2)?)?;
    Some(Found { flags, ttl, data })
}

/// A decimal number of digits only (servers write them so).
fn digits(text: &[u8]) -> Option<u64> {
    if text.is_empty() || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse().ok()
}

/// The client's reply to its `get` from the replica's meta reply: the value as a text `VALUE`
/// block, or the miss (`END`) the cold server gave when the replica has nothing either.
/// Returns whether it was a hit.
pub(crate) fn client_reply(key: &[u8], reply: Option<(&Reply, &[u8])>, out: &mut Vec<u8>) -> bool {
    out.clear();
    match reply.and_then(|(reply, bytes)| found(reply, bytes)) {
        Some(value) => {
            compose::value(out, key, value.flags, value.data, None);
            out.extend_from_slice(compose::END);
            true
        }
        None => {
            out.extend_from_slice(compose::END);
            false
        }
    }
}

/// The write-back to the cold server: `ms <key> <len> F<flags> T<ttl> ME` and the value, or
/// `false` when the replica had nothing.
pub(crate) fn write_back(key: &[u8], reply: &Reply, bytes: &[u8], out: &mut Vec<u8>) -> bool {
    copy(key, reply, bytes, b"ME", out)
}

/// The replica's value of `key` as an `ms` with its flags and remaining TTL and the extra flags
/// `mode` (`ME`: add, only where the key is absent; none: a plain set), or `false` when the
/// replica had nothing. `key` may carry `b` in `mode` when it is base64.
pub(crate) fn copy(key: &[u8], reply: &Reply, bytes: &[u8], mode: &[u8], out: &mut Vec<u8>) -> bool {
    let Some(value) = found(reply, bytes) else { return false };
    let flags = format!("F{}", value.flags);
    // `t-1`: no expiry, which `T0` sets.
    let ttl = format!("T{}", value.ttl.max(0));
    let extra = mode.split(|&b| b == b' ').filter(|t| !t.is_empty());
    compose::meta(
        out,
        Command::MetaSet,
        key,
        Some(value.data),
        [flags.as_bytes(), ttl.as_bytes()].into_iter().chain(extra),
    );
    true
}

/// A token bucket: at most [`WRITE_BACKS_PER_SECOND`] write-backs a second per thread.
#[derive(Debug)]
pub(crate) struct Budget {
    tokens: f64,
    last: Instant,
}

impl Default for Budget {
    fn default() -> Self {
        Budget { tokens: WRITE_BACKS_PER_SECOND, last: Instant::now() }
    }
}

impl Budget {
    pub fn take(&mut self, now: Instant) -> bool {
        let refill = now.saturating_duration_since(self.last).as_secs_f64() * WRITE_BACKS_PER_SECOND;
        self.tokens = (self.tokens + refill).min(WRITE_BACKS_PER_SECOND);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memrelay_protocol::{Expect, Parse, ReplyParser};

    fn meta(bytes: &[u8]) -> Reply {
        let Parse::Complete(reply) = ReplyParser::new(Expect::Meta).parse(bytes) else { panic!() };
        reply
    }

    #[test]
    fn a_replica_hit_becomes_a_text_reply_and_a_write_back() {
        let bytes = b"VA 5 f7 t30\r\nhello\r\n";
        let reply = meta(bytes);
        let mut out = Vec::new();
        assert!(client_reply(b"k", Some((&reply, bytes)), &mut out));
        assert_eq!(out, b"VALUE k 7 5\r\nhello\r\nEND\r\n");
        out.clear();
        assert!(write_back(b"k", &reply, bytes, &mut out));
        assert_eq!(out, b"ms k 5 F7 T30 ME\r\nhello\r\n");
        let bytes = b"VA 1 f0 t-1\r\nx\r\n";
        out.clear();
        assert!(write_back(b"k", &meta(bytes), bytes, &mut out));
        assert_eq!(out, b"ms k 1 F0 T0 ME\r\nx\r\n");
    }

    #[test]
    fn a_replica_miss_or_error_is_the_original_miss() {
        let mut out = Vec::new();
        assert!(!client_reply(b"k", Some((&meta(b"EN\r\n"), b"EN\r\n")), &mut out));
        assert_eq!(out, b"END\r\n");
        assert!(!client_reply(b"k", None, &mut out));
        assert!(!write_back(b"k", &meta(b"EN\r\n"), b"EN\r\n", &mut out));
    }

    #[test]
    fn the_budget_refills_with_time() {
        let start = Instant::now();
        let mut budget = Budget { tokens: 2.0, last: start };
        assert!(budget.take(start) && budget.take(start) && !budget.take(start));
        assert!(budget.take(start + std::time::Duration::from_millis(1)));
    }
}
