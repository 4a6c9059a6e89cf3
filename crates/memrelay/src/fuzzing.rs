//! Entry points for fuzzing and property tests: the client-side state machine and the forwarding
//! path over arbitrary bytes, with no sockets. A client's byte stream arrives in chunks, goes
//! through the same [`Framing`] both engines use, is routed over three servers, and every request
//! bound for a server is started on the same per-request policy ([`crate::relay::exchange`]) and
//! composed exactly as the engines compose it.
//!
//! [`client_stream`] checks the invariants itself (no panic, no hang, every composed request
//! parses back as what was parsed, nothing consumed twice); [`forwarded`] returns what would be
//! written to servers, for a test that reads it with memcached's grammar written independently.

use memrelay_protocol::{parse_request, Command, Limits, Parse, Request};

use crate::client::{Framing, Next};
use crate::relay::exchange::{Exchange, Step};
use crate::routing::{Plan, Router};
use crate::settings::KeyHash;
use crate::settings::{Distribution, Endpoint, NamedPool, PrefixRoute, ReadFrom, Routing, WritePolicy};
use crate::upstream::Servers;

/// Most bytes one input may make memrelay look at (keeps a fuzz case fast).
const MAX_INPUT: usize = 1 << 20;

/// A request memrelay sends to a server, as it parsed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forwarded {
    /// The bytes written to the server.
    pub bytes: Vec<u8>,
    /// What memrelay believes it sent: command, keys, flags, exptime, number, data.
    pub command: &'static str,
    pub keys: Vec<Vec<u8>>,
    pub flags: u32,
    pub exptime: i64,
    pub number: u64,
    pub data: Vec<u8>,
    /// The meta flag tokens sent.
    pub meta_flags: Vec<Vec<u8>>,
}

/// Feeds `data` as a client byte stream (the first byte chooses the chunk size and the routing
/// mode) and returns every request memrelay would write to a server, in order.
pub fn forwarded(data: &[u8]) -> Vec<Forwarded> {
    let mut out = Vec::new();
    run(data, |bytes, request, input| {
        let keys = request.keys(input).map(<[u8]>::to_vec).collect();
        let (keys, data) = match request.command {
            Command::Get | Command::Gets => (keys, Vec::new()),
            c if c.is_storage() || c == Command::MetaSet => (keys, input[request.data.clone()].to_vec()),
            _ => (keys, Vec::new()),
        };
        // A refused value is a delete of its key; quiet mode stays with memrelay.
        let command = match (request.too_large, request.command) {
            (Some(_), Command::MetaSet) => Command::MetaDelete,
            (Some(_), _) => Command::Delete,
            (None, command) => command,
        };
        let meta_flags = match (request.too_large, request.command) {
            (Some(_), _) => request.meta.base64.then(|| b"b".to_vec()).into_iter().collect(),
            (None, Command::MetaDebug) => request.meta.base64.then(|| b"b".to_vec()).into_iter().collect(),
            _ => {
                let quiet_kept = request.server_applies_quiet();
                request.meta.flag_tokens(input).filter(|f| f[0] != b'q' || quiet_kept).map(<[u8]>::to_vec).collect()
            }
        };
        let data = if request.too_large.is_some() { Vec::new() } else { data };
        out.push(Forwarded {
            bytes: bytes.to_vec(),
            command: command.name(),
            keys,
            flags: request.flags,
            exptime: request.exptime,
            number: request.number,
            data,
            meta_flags,
        });
    });
    out
}

/// Feeds `data` as a client byte stream and checks that every composed server request parses
/// back, with memrelay's own parser, as one whole request equal in every field to its source.
pub fn client_stream(data: &[u8]) {
    run(data, |bytes, sent, input| {
        let limits = Limits { max_line_len: usize::MAX, max_get_line_len: usize::MAX, ..Limits::default() };
        let Parse::Complete(back) = parse_request(bytes, &limits) else {
            panic!("composed bytes do not parse: {:?}", String::from_utf8_lossy(bytes))
        };
        // One composed request is one request (and an `mn` after one whose quiet mode the
        // server applies).
        let rest: &[u8] = if sent.server_applies_quiet() { b"mn\r\n" } else { b"" };
        assert_eq!(&bytes[back.consumed..], rest, "one composed request is one request");
        assert!(back.keys(bytes).eq(sent.keys(input)), "keys");
        if sent.too_large.is_some() {
            // A refused value: its key is deleted.
            assert!(matches!(back.command, Command::Delete | Command::MetaDelete), "{:?}", back.command);
            return;
        }
        assert_eq!(back.command, sent.command);
        // Meta flags go through token by token, quiet mode left to memrelay unless only the
        // server can apply it.
        let quiet_kept = sent.server_applies_quiet();
        assert_eq!(back.meta.quiet, quiet_kept);
        if sent.command != Command::MetaDebug {
            let flags = sent.meta.flag_tokens(input).filter(|f| f[0] != b'q' || quiet_kept);
            assert!(back.meta.flag_tokens(bytes).eq(flags));
        }
        assert_eq!(
            (back.flags, back.exptime, back.number, back.noreply),
            (sent.flags, sent.exptime, sent.number, false)
        );
        assert_eq!(&bytes[back.data.clone()], &input[sent.data.clone()]);
    });
}

/// The shared driver: chunks `data` into a buffer, runs the framing, routes and composes every
/// request, and calls `sent(bytes, source request, source buffer)` for each target's bytes (a
/// split multi-get's sub-gets are checked by key only, so they are not reported).
fn run(data: &[u8], mut sent: impl FnMut(&[u8], &Request, &[u8])) {
    let Some((&mode, data)) = data.split_first() else { return };
    let data = &data[..data.len().min(MAX_INPUT)];
    let chunk = usize::from(mode % 16) * 7 + 1;
    let router = router(mode);
    let limits = Limits::default();
    let mut framing = Framing::default();
    let mut exchange = Exchange::default();
    let mut buffer: Vec<u8> = Vec::new();
    let mut composed = Vec::new();
    for piece in data.chunks(chunk) {
        buffer.extend_from_slice(piece);
        // Each turn consumes bytes or waits; the bound only guards against a bug that does neither.
        for _ in 0..=buffer.len() {
            let (next, consumed) = framing.next(&buffer, &limits);
            buffer.drain(..consumed);
            let request = match next {
                Next::Wait => break,
                Next::Invalid(_) => continue,
                Next::Request(request) => request,
            };
            let input: Vec<u8> = buffer.drain(..request.consumed).collect();
            let now = std::time::Instant::now();
            let policy = (false, std::time::Duration::ZERO);
            let step = exchange.start(&request, &input, 0, &router, policy, &AllUp, now);
            if step == Step::Local && request.command == Command::Get {
                // `get __memrelay__.route(OP,KEY)`: whatever the key, an answer or a reason.
                if let Some((op, key)) = crate::routing::explain::query(request.key(&input)) {
                    let _ = crate::routing::explain::servers_for(&router, op, key, &|s| s == 0);
                }
            }
            let Step::Send { from, .. } = step else {
                continue;
            };
            let outgoing = exchange.outgoing(&request, &input);
            for &target in &exchange.targets()[from..] {
                composed.clear();
                outgoing.compose_for(target, &mut composed);
                if exchange.plan() != Plan::Split {
                    sent(&composed, &request, &input);
                }
            }
        }
    }
}

/// Every server up, none cold or being repaired.
struct AllUp;

impl Servers for AllUp {
    fn is_down(&self, _: usize) -> bool {
        false
    }

    fn is_cold(&self, _: usize) -> bool {
        false
    }

    fn is_repairing(&self, _: usize) -> bool {
        false
    }

    fn missed(&self, _: usize, _: &[u8]) {}
}

/// Three servers; `mode` picks all-servers, sharded, or ketama with two replicas.
fn router(mode: u8) -> Router {
    let servers: Vec<Endpoint> = (1..=3).map(Endpoint::local).collect();
    let ketama = mode / 16 % 3 == 2;
    let routing = Routing {
        sharded: mode / 16 % 3 == 1,
        distribution: if ketama { Distribution::Ketama } else { Distribution::All },
        hash: KeyHash::Md5,
        hash_tag: None,
        replication: if ketama { 2 } else { 1 },
        read_from: ReadFrom::Primary,
        failover: false,
        write_policy: WritePolicy::All,
    };
    if (mode / 48).is_multiple_of(2) {
        return Router::new(&routing, &servers).expect("a valid ring");
    }
    // Pools and routes: keys starting with `a` or `k` in pools of their own (a replicated one and
    // a single server), so that multi-gets span pools.
    let pool = |name: &str, ports: std::ops::Range<u16>, replication| NamedPool {
        name: name.into(),
        servers: ports.map(Endpoint::local).collect(),
        routing: Routing { distribution: Distribution::Ketama, replication, ..routing.clone() },
    };
    let pools = [pool("hot", 4..6, 2), pool("one", 6..7, 1)];
    let routes: Vec<PrefixRoute> = [r#"{ prefix = "a", pool = "hot" }"#, r#"{ prefix = "k", pool = "one" }"#]
        .iter()
        .map(|r| r.parse().expect("a valid route"))
        .collect();
    Router::of_pools((&routing, &servers), &pools, (&routes, None), &(0..6).collect::<Vec<_>>()).expect("valid pools")
}

/// The auth file and access-rule parsers and the login reader over arbitrary bytes. `data` is
/// up to three parts separated by a line `--`: an auth file, an access rule (TOML), a client's
/// bytes. Checks: no panic; every user the file lists logs in with its password and no other;
/// a rule that parses writes back as itself; a login consumes only what it was given and a
/// successful one names a listed user; the access check of every request the client bytes hold
/// returns (allowed or refused) under the rule.
pub fn access_rules(data: &[u8]) {
    use crate::access::authfile::Users;
    use crate::access::check::check;
    use crate::access::login::{login, Login};
    use crate::settings::access_rules::Rule;

    let data = &data[..data.len().min(MAX_INPUT)];
    let mut parts = split_parts(data);
    let (file, rule_text, client) =
        (parts.next().unwrap_or(&[]), parts.next().unwrap_or(&[]), parts.next().unwrap_or(&[]));
    let users = Users::parse(file).unwrap_or_default();
    for (user, password) in file_entries(file, &users) {
        assert!(users.check(&user, &password).is_some(), "a listed user cannot log in");
        let mut wrong = password.clone();
        wrong.push(b'x');
        assert!(users.check(&user, &wrong).is_none() || users.names().filter(|n| *n == user).count() > 1);
    }
    let rule = std::str::from_utf8(rule_text).ok().and_then(|text| Rule::parse(text).ok());
    if let Some(rule) = &rule {
        assert_eq!(Rule::parse(&rule.to_inline()).as_ref(), Ok(rule), "a rule does not read back as itself");
    }
    let rule = rule.unwrap_or_else(Rule::no_admin);
    match login(client) {
        Login::Credentials { user, password, consumed } => {
            assert!(consumed <= client.len());
            if let Some(user) = users.check(user, password) {
                assert!(users.names().any(|n| n == user), "logged in as an unlisted user");
            }
        }
        Login::Refuse { consumed, .. } => assert!(consumed <= client.len()),
        Login::Wait | Login::Close => {}
    }
    let limits = Limits::default();
    let mut rest = client;
    for _ in 0..1000 {
        match parse_request(rest, &limits) {
            Parse::Complete(request) => {
                let _ = check(&rule, 4, &request, rest);
                rest = &rest[request.consumed.max(1).min(rest.len())..];
            }
            Parse::Invalid(invalid) => rest = &rest[invalid.skip.clamp(1, rest.len().max(1)).min(rest.len())..],
            Parse::Incomplete => break,
        }
        if rest.is_empty() {
            break;
        }
    }
}

/// The identity a client certificate names, over arbitrary bytes as its DER: no panic, and a
/// name only in the form an access rule's identity takes (one word, 1 to 250 bytes). (A
/// certificate reaches this only after rustls verified its chain; the parser must hold anyway.)
pub fn client_certificate(data: &[u8]) {
    let data = &data[..data.len().min(MAX_INPUT)];
    if let Some(name) = crate::client::tls::certificate_identity(data) {
        assert!(!name.is_empty() && name.len() <= 250, "identity of {} bytes", name.len());
        assert!(!name.contains(|c: char| c == ' ' || c.is_control()), "identity {name:?} is not one word");
    }
}

/// The parts of a fuzz input, separated by a line `--`.
fn split_parts(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(data);
    std::iter::from_fn(move || {
        let current = rest?;
        match current.windows(4).position(|w| w == b"\n--\n") {
            Some(at) => {
                rest = Some(&current[at + 4..]);
                Some(&current[..at + 1])
            }
            None => {
                rest = None;
                Some(current)
            }
        }
    })
}

/// The user and password of each line of an auth file that parsed, read independently of
/// [`crate::access::authfile`]: the user before the first `:`, the password after it up to `\r`,
/// `\n` or NUL.
fn file_entries(file: &[u8], users: &crate::access::authfile::Users) -> Vec<(Vec<u8>, Vec<u8>)> {
    if users.is_empty() {
        return Vec::new();
    }
    file.split_inclusive(|&b| b == b'\n')
        .filter_map(|line| {
            let colon = line.iter().position(|&b| b == b':')?;
            let after = &line[colon + 1..];
            let end = after.iter().position(|&b| matches!(b, b'\r' | b'\n' | 0)).unwrap_or(after.len());
            Some((line[..colon].to_vec(), after[..end].to_vec()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipelined_stream_is_forwarded_request_by_request() {
        let stream = b"\x05set a 0 0 1 noreply\r\nx\r\nget a b\r\nincr n 18446744073709551615\r\nversion\r\n";
        let sent = forwarded(stream);
        let lines: Vec<&[u8]> = sent.iter().map(|f| &f.bytes[..]).collect();
        // set to all three servers, get to one, incr to all three; version is answered locally.
        assert_eq!(lines.len(), 7);
        assert_eq!(lines[0], b"set a 0 0 1\r\nx\r\n");
        assert_eq!(lines[3], b"get a b\r\n");
        assert_eq!(lines[4], b"incr n 18446744073709551615\r\n");
        client_stream(stream);
    }
}
