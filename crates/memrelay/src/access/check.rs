//! The one access check, shared by both engines: run on every parsed request of a connection
//! under access control, after parsing and before routing, so that nothing refused is ever sent
//! to a server. It decides from the request and the identity's [`Rule`] alone (no I/O).
//!
//! A refused request is answered one `CLIENT_ERROR <what> not allowed` line, the shape memcached
//! uses for the commands its switches turn off (`-F`: `CLIENT_ERROR flush_all not allowed`), and
//! the whole request is refused, also a multi-get with one key outside the identity's prefixes:
//! memcached refuses a request it will not serve whole, and answering the allowed keys only
//! would make the refused ones look like misses.

use std::borrow::Cow;

use memrelay_protocol::{Command, ErrorReply, Request};

use super::Reason;
use crate::routing::local::SERVER_STATS_GROUPS;
use crate::settings::access_rules::{Admin, Rule};

/// A refused request: why (counted by reason) and what the client is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denial {
    pub reason: Reason,
    pub reply: ErrorReply,
}

pub const KEY_NOT_ALLOWED: &str = "key not allowed";
pub const WRITE_NOT_ALLOWED: &str = "write not allowed";
pub const TOO_MANY_KEYS: &str = "too many keys";

/// Whether `rule` lets `request` (parsed from `buf`) through; `max_keys` bounds the keys of one
/// retrieval (`--max-keys-per-get`).
pub fn check(rule: &Rule, max_keys: usize, request: &Request, buf: &[u8]) -> Result<(), Denial> {
    let deny = |reason, text| Err(Denial { reason, reply: ErrorReply::Client(text) });
    let command = request.command;
    if command.is_retrieval() && request.key_count > max_keys {
        return deny(Reason::TooManyKeys, TOO_MANY_KEYS);
    }
    if let Some(admin) = admin_command(request, buf) {
        if !rule.grants(admin) {
            return deny(Reason::Admin, not_allowed(admin, request, buf));
        }
        return Ok(());
    }
    if rule.read_only && writes(request) {
        return deny(Reason::ReadOnly, WRITE_NOT_ALLOWED);
    }
    if rule.prefixes.is_some() && request.key_count > 0 {
        let allowed = if request.meta.base64 {
            // Placed, and stored, by the decoded bytes: the prefix is theirs. A key that does not
            // decode is refused here (memcached refuses it too).
            decoded(request.key(buf)).is_some_and(|key| rule.allows_key(&key))
        } else {
            request.keys(buf).all(|key| rule.allows_key(key))
        };
        if !allowed {
            return deny(Reason::KeyPrefix, KEY_NOT_ALLOWED);
        }
    }
    Ok(())
}

/// The admin command `request` is, if it is one.
fn admin_command(request: &Request, buf: &[u8]) -> Option<Admin> {
    match request.command {
        Command::FlushAll => Some(Admin::FlushAll),
        Command::Verbosity => Some(Admin::Verbosity),
        Command::CacheMemlimit => Some(Admin::CacheMemlimit),
        Command::Stats if SERVER_STATS_GROUPS.contains(&&buf[request.keys.clone()]) => Some(Admin::Stats),
        _ => None,
    }
}

/// The refusal's text, naming what was refused as memcached names it.
fn not_allowed(admin: Admin, request: &Request, buf: &[u8]) -> &'static str {
    match admin {
        Admin::FlushAll => "flush_all not allowed",
        Admin::Verbosity => "verbosity not allowed",
        Admin::CacheMemlimit => "cache_memlimit not allowed",
        Admin::Stats => match &buf[request.keys.clone()] {
            b"items" => "stats items not allowed",
            b"slabs" => "stats slabs not allowed",
            b"sizes" => "stats sizes not allowed",
            _ => "stats settings not allowed",
        },
    }
}

/// Whether `request` changes anything on a server: the keyed writes, the touching reads (`gat`,
/// `gats`, `mg` with `T`), `mg` with `N`, which creates the item it misses, and `mg` with `R`,
/// which takes the item's recache token (its `W` makes the writers that come after wait on `Z`).
fn writes(request: &Request) -> bool {
    let command = request.command;
    command.is_keyed_write()
        || matches!(command, Command::Gat | Command::Gats)
        || (command == Command::MetaGet && (request.meta.touch || request.meta.recache))
}

fn decoded(key: &[u8]) -> Option<Cow<'static, [u8]>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(key).ok().map(Cow::Owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use memrelay_protocol::{parse_request, Limits, Parse};

    fn verdict(rule: &str, request: &[u8]) -> Result<(), (Reason, String)> {
        let rule = Rule::parse(rule).unwrap();
        let Parse::Complete(parsed) = parse_request(request, &Limits::default()) else { panic!("{request:?}") };
        check(&rule, 4, &parsed, request).map_err(|d| {
            let mut out = Vec::new();
            d.reply.write_to(&mut out);
            (d.reason, String::from_utf8(out).unwrap())
        })
    }

    const TENANT: &str = r#"identity = "a", prefixes = ["a:"]"#;

    #[test]
    fn keys_outside_the_prefixes_are_refused_in_every_command() {
        assert_eq!(verdict(TENANT, b"get a:1\r\n"), Ok(()));
        assert_eq!(verdict(TENANT, b"get a:1 a:2\r\n"), Ok(()));
        let refused = Err((Reason::KeyPrefix, "CLIENT_ERROR key not allowed\r\n".to_string()));
        for request in [
            &b"get b:1\r\n"[..],
            b"gets a:1 b:1\r\n",
            b"set b:1 0 0 1\r\nx\r\n",
            b"delete b:1\r\n",
            b"incr b:1 1\r\n",
            b"touch b:1 0\r\n",
            b"gat 0 a:1 b:1\r\n",
            b"mg b:1 v\r\n",
            b"ms b:1 1\r\nx\r\n",
            b"md b:1\r\n",
            b"ma b:1\r\n",
            b"me b:1\r\n",
            // "b:1" in base64, and a key that is not base64 at all.
            b"mg YjpxMQ== b v\r\n",
            b"mg !!! b v\r\n",
        ] {
            assert_eq!(verdict(TENANT, request), refused, "{}", String::from_utf8_lossy(request));
        }
        // "a:1" in base64: allowed by its decoded bytes.
        assert_eq!(verdict(TENANT, b"mg YToxMQ== b v\r\n"), Ok(()));
        // The raw base64 text starting with the prefix is not enough: "a:" is "YTo" encoded.
        assert_eq!(
            verdict(r#"identity = "a", prefixes = ["YTo"]"#, b"mg YToxMQ== b v\r\n").unwrap_err().0,
            Reason::KeyPrefix
        );
    }

    #[test]
    fn read_only_identities_cannot_write_or_touch() {
        let reader = r#"identity = "r", read_only = true"#;
        assert_eq!(verdict(reader, b"get x\r\n"), Ok(()));
        assert_eq!(verdict(reader, b"mg x v c\r\n"), Ok(()));
        for request in [
            &b"set x 0 0 1\r\nx\r\n"[..],
            b"cas x 0 0 1 5\r\nx\r\n",
            b"append x 0 0 1\r\nx\r\n",
            b"delete x\r\n",
            b"decr x 1\r\n",
            b"touch x 10\r\n",
            b"gat 10 x\r\n",
            b"ms x 1\r\nx\r\n",
            b"md x q\r\n",
            b"ma x\r\n",
            b"mg x v T30\r\n",
            b"mg x v N30\r\n",
            b"mg x R30 v\r\n",
            b"mg x v R1 t\r\n",
        ] {
            assert_eq!(
                verdict(reader, request),
                Err((Reason::ReadOnly, "CLIENT_ERROR write not allowed\r\n".into())),
                "{}",
                String::from_utf8_lossy(request)
            );
        }
    }

    #[test]
    fn admin_commands_need_their_grant() {
        let plain = r#"identity = "p""#;
        assert_eq!(verdict(plain, b"flush_all\r\n").unwrap_err().1, "CLIENT_ERROR flush_all not allowed\r\n");
        assert_eq!(verdict(plain, b"verbosity 1\r\n").unwrap_err().1, "CLIENT_ERROR verbosity not allowed\r\n");
        assert_eq!(verdict(plain, b"cache_memlimit 100\r\n").unwrap_err().0, Reason::Admin);
        assert_eq!(verdict(plain, b"stats items\r\n").unwrap_err().1, "CLIENT_ERROR stats items not allowed\r\n");
        // memrelay's own counters and version are everyone's.
        assert_eq!(verdict(plain, b"stats\r\n"), Ok(()));
        assert_eq!(verdict(plain, b"version\r\n"), Ok(()));
        let admin = r#"identity = "p", prefixes = [], read_only = true, admin = ["flush_all", "stats"]"#;
        assert_eq!(verdict(admin, b"flush_all\r\n"), Ok(()));
        assert_eq!(verdict(admin, b"stats slabs\r\n"), Ok(()));
        assert_eq!(verdict(admin, b"verbosity 1\r\n").unwrap_err().0, Reason::Admin);
    }

    #[test]
    fn a_multiget_over_the_key_limit_is_refused_whoever_asks() {
        let everything = r#"identity = "*", admin = ["flush_all"]"#;
        assert_eq!(verdict(everything, b"get a b c d\r\n"), Ok(()));
        let refused = Err((Reason::TooManyKeys, "CLIENT_ERROR too many keys\r\n".to_string()));
        assert_eq!(verdict(everything, b"get a b c d e\r\n"), refused);
        assert_eq!(verdict(everything, b"gats 0 a b c d e\r\n"), refused);
    }
}
