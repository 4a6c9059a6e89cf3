//! The bytes a target server gets for a request. They are always composed from the parsed
//! request (`compose::request`), never relayed as the client sent them: a server then reads
//! exactly the request memrelay parsed, so no spelling of a request (odd separators, bytes after
//! a NUL, over-long lines, signs in numbers) can make a server see a different request, or two,
//! and shift replies onto other clients sharing the connection.
//!
//! On top of that: `noreply` and quiet mode (`q`) are always removed (the servers must answer so
//! the connection stays in step and the client's next request sees the write; memrelay drops
//! the replies the client did not ask for), a split multi-get becomes one sub-get per server, a
//! `set` or `ms` whose value was too large becomes a delete of the key (memcached removes the old
//! value), and a request the key's primary answered first is copied to the other replicas in a
//! form that means the same there ([`Outgoing::compose_copy`]).

use memrelay_protocol::{compose, Command, Expect, Request};

use crate::routing::Plan;

/// Which exchange of a request the bytes are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// The request itself (to its targets, or to a replica on failover).
    Request,
    /// The copies after the primary took a [`Plan::PrimaryFirst`] request.
    Copies,
    /// A read that missed on a cold (restarted) server, asked again of a replica
    /// ([`super::warm`]).
    WarmRead,
}

/// What one target of a request is sent.
pub(crate) struct Outgoing<'a> {
    pub request: &'a Request,
    /// The request's bytes as they arrived (its ranges index them).
    pub input: &'a [u8],
    pub plan: Plan,
    pub stage: Stage,
    /// For a split: the server of each key.
    pub key_owner: &'a [usize],
    /// For a split `gat`: the keys each server touches without answering them
    /// ([`crate::routing::RouteBuf::touches`]).
    pub touches: &'a [(usize, usize)],
    /// The gutter's TTL and the gutter servers standing in for down ones: what they are sent
    /// has its expiry capped ([`super::gutter`]).
    pub gutter: Option<(u32, &'a [usize])>,
}

impl Outgoing<'_> {
    /// Appends the bytes for `server` to `out`.
    pub fn compose_for(&self, server: usize, out: &mut Vec<u8>) {
        let request = self.request;
        let key = request.key(self.input);
        let gutter_ttl = self.gutter.and_then(|(ttl, servers)| servers.contains(&server).then_some(ttl));
        if request.too_large.is_some() {
            match request.command {
                Command::MetaSet => {
                    let flags: &[&[u8]] = if request.meta.base64 { &[b"b"] } else { &[] };
                    compose::meta(out, Command::MetaDelete, key, None, flags.iter().copied());
                }
                _ => compose::keyed(out, Command::Delete, key, None::<u64>, false),
            }
        } else if self.stage == Stage::Copies {
            self.compose_copy(out);
        } else if self.stage == Stage::WarmRead {
            super::warm::compose_read(request.key(self.input), out);
        } else if self.plan == Plan::Split {
            let keys = request.keys(self.input).zip(self.key_owner).filter(|(_, &owner)| owner == server);
            let keys = keys.map(|(key, _)| key);
            let exptime = gutter_ttl.map_or(request.exptime, |ttl| super::gutter::cap_now(request.exptime, ttl));
            match request.command {
                c @ (Command::Gat | Command::Gats) if self.touches.is_empty() => {
                    compose::retrieval_touching(out, c, exptime, keys)
                }
                c @ (Command::Gat | Command::Gats) => {
                    // The keys it answers first, in order, then the ones it only touches: the
                    // coalescing reads its answers at the front and never reaches the rest.
                    let all: Vec<&[u8]> = request.keys(self.input).collect();
                    let touched = self.touches.iter().filter(|&&(_, s)| s == server).map(|&(i, _)| all[i]);
                    compose::retrieval_touching(out, c, exptime, keys.chain(touched))
                }
                c => compose::retrieval(out, c, keys),
            }
        } else if let Some(ttl) = gutter_ttl {
            super::gutter::compose(out, request, self.input, ttl);
        } else {
            compose::request(out, request, self.input, false);
        }
    }

    /// What the other replicas get once the primary has answered: a `cas` becomes a `set` (the
    /// token means nothing there), a touching read a `touch`, and a meta command keeps only the
    /// flags that change the item (no cas to compare, nothing to return).
    fn compose_copy(&self, out: &mut Vec<u8>) {
        let (request, input) = (self.request, self.input);
        let key = request.key(input);
        let keep: &[u8] = match request.command {
            Command::Cas => {
                let data = &input[request.data.clone()];
                compose::storage(out, Command::Set, key, request.flags, request.exptime, data, 0, false);
                return;
            }
            Command::Gat | Command::Gats => {
                compose::keyed(out, Command::Touch, key, Some(request.exptime), false);
                return;
            }
            // The touch, and the autovivify that creates a missing item there too.
            Command::MetaGet => b"bTN",
            Command::MetaSet => b"bFTM",
            Command::MetaDelete => b"bIT",
            Command::MetaArithmetic => b"bNJDTM",
            other => unreachable!("{} is never copied", other.name()),
        };
        // A compare-and-set in set or replace mode is a plain set on the copies (as `cas`).
        let plain_set = request.command == Command::MetaSet && matches!(request.meta.mode, 0 | b'S' | b'R');
        let flags =
            request.meta.flag_tokens(input).filter(|flag| keep.contains(&flag[0]) && !(plain_set && flag[0] == b'M'));
        let data = (request.command == Command::MetaSet).then(|| &input[request.data.clone()]);
        compose::meta(out, request.command, key, data, flags);
    }

    /// The shape of the reply the target sends.
    pub fn expect(&self) -> Expect {
        match self.request.command {
            Command::Set if self.request.too_large.is_some() => Expect::Line,
            _ if self.stage == Stage::WarmRead => Expect::Meta,
            Command::Cas | Command::Gat | Command::Gats if self.stage == Stage::Copies => Expect::Line,
            _ if self.stage == Stage::Request && self.request.server_applies_quiet() => Expect::QuietMeta,
            command => expect_for(command),
        }
    }
}

/// The shape of the reply a server sends to this command.
pub fn expect_for(command: Command) -> Expect {
    match command {
        c if c.is_retrieval() => Expect::Values,
        c if c.is_meta() => Expect::Meta,
        Command::Stats => Expect::Stats,
        _ => Expect::Line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memrelay_protocol::{parse_request, Limits, Parse};

    fn composed(line: &[u8], plan: Plan, copying: bool, key_owner: &[usize], server: usize) -> Vec<u8> {
        let stage = if copying { Stage::Copies } else { Stage::Request };
        let Parse::Complete(request) = parse_request(line, &Limits::default()) else { panic!("{line:?}") };
        let mut out = Vec::new();
        Outgoing { request: &request, input: line, plan, stage, key_owner, touches: &[], gutter: None }
            .compose_for(server, &mut out);
        out
    }

    #[test]
    fn requests_are_composed_canonically_without_noreply() {
        let cases: [(&[u8], &[u8]); 6] = [
            (b"set  k 0 0 1 noreply\r\nx\r\n", b"set k 0 0 1\r\nx\r\n"),
            (b"incr k 18446744073709551615 noreply\r\n", b"incr k 18446744073709551615\r\n"),
            (b"delete k 0\r\n", b"delete k\r\n"),
            (b"touch k -1\r\n", b"touch k -1\r\n"),
            (b"get a\0 victim\r\n", b"get a\r\n"),
            (b"flush_all 0 noreply\r\n", b"flush_all\r\n"),
        ];
        for (line, want) in cases {
            assert_eq!(composed(line, Plan::Replicate, false, &[], 0), want, "{:?}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn sub_gets_and_cas_copies() {
        assert_eq!(composed(b"get a b c\r\n", Plan::Split, false, &[1, 0, 1], 1), b"get a c\r\n");
        assert_eq!(composed(b"cas k 3 9 1 77\r\nx\r\n", Plan::PrimaryFirst, true, &[], 0), b"set k 3 9 1\r\nx\r\n");
    }

    #[test]
    fn a_split_gat_asks_each_server_its_keys_then_the_keys_it_only_touches() {
        let line = b"gat 30 a b c\r\n";
        let Parse::Complete(request) = parse_request(line, &Limits::default()) else { panic!() };
        // a and c answered by 0, b by 1; every key's other copy is on the other server.
        let (owners, touches) = ([0, 1, 0], [(0, 1), (1, 0), (2, 1)]);
        let outgoing = |server| {
            let mut out = Vec::new();
            let plan = Plan::Split;
            Outgoing {
                request: &request,
                input: line,
                plan,
                stage: Stage::Request,
                key_owner: &owners,
                touches: &touches,
                gutter: None,
            }
            .compose_for(server, &mut out);
            out
        };
        assert_eq!(outgoing(0), b"gat 30 a c b\r\n");
        assert_eq!(outgoing(1), b"gat 30 b a c\r\n");
    }

    #[test]
    fn copies_keep_what_changes_the_item_and_quiet_mode_is_removed() {
        let copy = |line: &[u8]| composed(line, Plan::PrimaryFirst, true, &[], 0);
        assert_eq!(copy(b"ms k 1 C5 T9 F3 q k Oab c I\r\nx\r\n"), b"ms k 1 T9 F3\r\nx\r\n");
        assert_eq!(copy(b"ms k 1 C5 MA b\r\nx\r\n"), b"ms k 1 MA b\r\nx\r\n");
        assert_eq!(copy(b"md k C5 I T30 q\r\n"), b"md k I T30\r\n");
        assert_eq!(copy(b"ma k C5 D3 MD N0 J1 v t\r\n"), b"ma k D3 MD N0 J1\r\n");
        assert_eq!(copy(b"mg k T30 v c k\r\n"), b"mg k T30\r\n");
        assert_eq!(copy(b"gat 30 k\r\n"), b"touch k 30\r\n");
        let forwarded = composed(b"mg k  v q   Oab\r\n", Plan::Forward(0), false, &[], 0);
        assert_eq!(forwarded, b"mg k v Oab\r\n");
        let refused = |line: &[u8]| {
            let limits = Limits { max_value_len: 4, ..Limits::default() };
            let Parse::Complete(request) = parse_request(line, &limits) else { panic!() };
            let mut out = Vec::new();
            let outgoing = Outgoing {
                request: &request,
                input: line,
                plan: Plan::Replicate,
                stage: Stage::Request,
                key_owner: &[],
                touches: &[],
                gutter: None,
            };
            outgoing.compose_for(0, &mut out);
            out
        };
        assert_eq!(refused(b"set k 0 0 9 noreply\r\n"), b"delete k\r\n");
        assert_eq!(refused(b"ms a2V5 9 b q\r\n"), b"md a2V5 b\r\n");
    }
}
