//! Routing: which servers a request goes to, and how split replies are put back together.
//!
//! Pure functions, no I/O, shared by both engines:
//! - [`Router::route`] turns a parsed request into a [`Plan`] (forward to one server, replicate to
//!   several, split a multi-get, cas on the primary then copy, or answer locally);
//! - [`coalesce`] merges the `VALUE` blocks of split sub-gets back into the order the keys were
//!   asked for (twemproxy's fragment/coalesce).
//!
//! Round robin is an input (`rr`, one counter kept by the caller, seed 000 section 1.3), so a
//! route is a function of the request and that number alone.

use memrelay_protocol::{compose, value_block, Command, Expect, Request};

use crate::config::{Config, Distribution, ReadFrom};
use crate::ketama::{Ring, RingServer};

/// Most copies of a key (the replica scratch array is this long).
pub const MAX_REPLICAS: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Send the request as it arrived to this server and relay its reply.
    Forward(usize),
    /// Send to every server in `targets`; the reply is a success only if every server succeeded.
    Replicate,
    /// A multi-get split over `targets`: key i goes to `key_owner[i]`; replies are coalesced.
    Split,
    /// `cas` on `targets[0]` (the key's primary, the only server that knows the token); when it
    /// succeeds the stored value is copied with `set` to the rest of `targets`.
    Cas,
    /// memrelay answers itself (version, verbosity, stats, quit).
    Local,
}

/// Scratch space a route is written into, owned by the caller and reused (no allocation once
/// warm).
#[derive(Debug, Default)]
pub struct RouteBuf {
    /// The servers involved, each once, in the order they are first needed.
    pub targets: Vec<usize>,
    /// For `Split`: the server of each key, in key order.
    pub key_owner: Vec<usize>,
    replicas: Vec<usize>,
}

#[derive(Debug)]
pub struct Router {
    servers: usize,
    sharded: bool,
    distribution: Distribution,
    replication: usize,
    read_from: ReadFrom,
    /// The ring also names the primary of a key for `gets`/`cas` with `--distribution all`.
    ring: Ring,
}

impl Router {
    pub fn new(config: &Config) -> Result<Router, String> {
        let mut ring_servers = Vec::with_capacity(config.server_names.len());
        for name in &config.server_names {
            ring_servers.push(RingServer::from_host_port(name, 1).map_err(|e| format!("--server {name}: {e}"))?);
        }
        let ring = Ring::new(&ring_servers, config.args.hash).map_err(|e| e.to_string())?;
        Ok(Router {
            servers: config.servers.len(),
            sharded: config.args.sharded,
            distribution: config.args.distribution,
            replication: config.replication,
            read_from: config.args.read_from,
            ring,
        })
    }

    pub fn servers(&self) -> usize {
        self.servers
    }

    pub fn route(&self, request: &Request, buf: &[u8], rr: usize, out: &mut RouteBuf) -> Plan {
        out.targets.clear();
        out.key_owner.clear();
        match request.command {
            Command::Version | Command::Verbosity | Command::Stats | Command::Quit => Plan::Local,
            Command::FlushAll => {
                out.targets.extend(0..self.servers);
                Plan::Replicate
            }
            Command::Gets => {
                for key in request.keys(buf) {
                    let owner = self.ring.primary(key);
                    out.key_owner.push(owner);
                }
                self.split_by_owner(out)
            }
            Command::Get if self.distribution == Distribution::Ketama => {
                for (i, key) in request.keys(buf).enumerate() {
                    let owner = self.read_server(key, rr.wrapping_add(i), &mut out.replicas);
                    out.key_owner.push(owner);
                }
                self.split_by_owner(out)
            }
            Command::Get => {
                let keys = request.key_count;
                if keys == 1 || !self.sharded {
                    return Plan::Forward(rr % self.servers);
                }
                // min(keys, servers) groups of consecutive keys, the first server rotating.
                let groups = keys.min(self.servers);
                for group in 0..groups {
                    let server = (rr + group) % self.servers;
                    out.targets.push(server);
                    let (from, to) = (group * keys / groups, (group + 1) * keys / groups);
                    out.key_owner.extend(std::iter::repeat(server).take(to - from));
                }
                Plan::Split
            }
            Command::Cas => {
                self.write_targets(request.key(buf), &mut out.targets);
                Plan::Cas
            }
            Command::Set
            | Command::Add
            | Command::Replace
            | Command::Append
            | Command::Prepend
            | Command::Delete
            | Command::Incr
            | Command::Decr
            | Command::Touch => {
                self.write_targets(request.key(buf), &mut out.targets);
                Plan::Replicate
            }
        }
    }

    /// The servers a write of `key` goes to: all of them, or the key's replicas on the ring; the
    /// key's primary first either way.
    pub fn write_targets(&self, key: &[u8], targets: &mut Vec<usize>) {
        targets.clear();
        match self.distribution {
            Distribution::All => {
                let primary = self.ring.primary(key);
                targets.push(primary);
                targets.extend((0..self.servers).filter(|&s| s != primary));
            }
            Distribution::Ketama => self.replicas(key, targets),
        }
    }

    /// The key's replicas on the ring, primary first (with `all`: every server, primary first).
    pub fn replicas(&self, key: &[u8], out: &mut Vec<usize>) {
        let copies = match self.distribution {
            Distribution::All => self.servers,
            Distribution::Ketama => self.replication,
        };
        out.clear();
        out.resize(copies, 0);
        let found = self.ring.replicas(key, copies, out);
        out.truncate(found);
    }

    fn read_server(&self, key: &[u8], rr: usize, scratch: &mut Vec<usize>) -> usize {
        match self.read_from {
            ReadFrom::Primary => self.ring.primary(key),
            ReadFrom::AnyReplica => {
                self.replicas(key, scratch);
                scratch[rr % scratch.len()]
            }
        }
    }

    /// Turns `key_owner` into a plan: one server for all keys is a plain forward.
    fn split_by_owner(&self, out: &mut RouteBuf) -> Plan {
        let first = out.key_owner[0];
        if out.key_owner.iter().all(|&s| s == first) {
            return Plan::Forward(first);
        }
        for &owner in &out.key_owner {
            if !out.targets.contains(&owner) {
                out.targets.push(owner);
            }
        }
        Plan::Split
    }
}

/// Appends to `out`, in the order `keys` were asked for, the `VALUE` block each server returned
/// for it. `body(s)` is server s's reply without its `END`; `cursors` (one per server, zeroed by
/// the caller) track how far each body has been consumed. A server answers its keys in the
/// order asked and leaves misses out, so a key's block, if any, is at its server's cursor.
/// Returns the number of hits.
pub fn coalesce<'a>(
    keys: impl Iterator<Item = &'a [u8]>,
    key_owner: &[usize],
    body: impl Fn(usize) -> &'a [u8],
    cursors: &mut [usize],
    out: &mut Vec<u8>,
) -> u32 {
    let mut hits = 0;
    for (key, &server) in keys.zip(key_owner) {
        let rest = &body(server)[cursors[server]..];
        if let Some((key_range, len)) = value_block(rest) {
            if &rest[key_range] == key {
                out.extend_from_slice(&rest[..len]);
                cursors[server] += len;
                hits += 1;
            }
        }
    }
    hits
}

/// The shape of the reply a server sends to this command.
pub fn expect_for(command: Command) -> Expect {
    match command {
        Command::Get | Command::Gets => Expect::Values,
        Command::Stats => Expect::Stats,
        _ => Expect::Line,
    }
}

/// Writes `request` without `noreply` into `out` (cleared first): the servers must answer so
/// that the client's next request sees the write. False when the command has nothing to rewrite.
pub fn without_noreply(request: &Request, input: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    let key = request.key(input);
    match request.command {
        c if c.is_storage() => {
            let data = &input[request.data.clone()];
            compose::storage(out, c, key, request.flags, request.exptime, data, request.number, false)
        }
        Command::Incr | Command::Decr => compose::keyed(out, request.command, key, Some(request.number as i64), false),
        Command::Touch => compose::keyed(out, Command::Touch, key, Some(request.exptime), false),
        Command::Delete => compose::keyed(out, Command::Delete, key, None, false),
        Command::FlushAll => {
            let delay = (request.number > 0).then_some(request.number);
            compose::keyless(out, Command::FlushAll, delay, false)
        }
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Args;
    use clap::Parser;
    use memrelay_protocol::{parse_request, Limits, Parse};

    fn router(extra: &[&str]) -> Router {
        let mut argv =
            vec!["memrelay", "--server", "127.0.0.1:1", "--server", "127.0.0.1:2", "--server", "127.0.0.1:3"];
        argv.extend_from_slice(extra);
        Router::new(&Config::from_args(Args::parse_from(argv)).unwrap()).unwrap()
    }

    fn route(router: &Router, line: &[u8], rr: usize) -> (Plan, RouteBuf) {
        let Parse::Complete(request) = parse_request(line, &Limits::default()) else { panic!() };
        let mut out = RouteBuf::default();
        let plan = router.route(&request, line, rr, &mut out);
        (plan, out)
    }

    #[test]
    fn reads_round_robin_over_all_servers() {
        let r = router(&[]);
        let servers: Vec<_> = (0..6).map(|rr| route(&r, b"get k\r\n", rr).0).collect();
        assert_eq!(servers, [0, 1, 2, 0, 1, 2].map(Plan::Forward));
        // Non-sharded multi-get: one server too.
        assert_eq!(route(&r, b"get a b c d\r\n", 4).0, Plan::Forward(1));
    }

    #[test]
    fn writes_go_everywhere_primary_first() {
        let r = router(&[]);
        for line in [&b"set k 0 0 1\r\nx\r\n"[..], b"delete k\r\n", b"incr k 1\r\n", b"touch k 1\r\n", b"flush_all\r\n"]
        {
            let (plan, out) = route(&r, line, 7);
            assert_eq!(plan, Plan::Replicate);
            let mut sorted = out.targets.clone();
            sorted.sort();
            assert_eq!(sorted, [0, 1, 2]);
        }
    }

    #[test]
    fn sharded_multiget_splits_into_consecutive_groups() {
        let r = router(&["--sharded"]);
        // 7 keys over 3 servers: groups of 2, 2, 3 (floor boundaries), first server = rr % 3.
        let (plan, out) = route(&r, b"get a b c d e f g\r\n", 1);
        assert_eq!(plan, Plan::Split);
        assert_eq!(out.targets, [1, 2, 0]);
        assert_eq!(out.key_owner, [1, 1, 2, 2, 0, 0, 0]);
        // Fewer keys than servers: one key each.
        let (_, out) = route(&r, b"get a b\r\n", 2);
        assert_eq!(out.key_owner, [2, 0]);
        // One key is a plain forward.
        assert_eq!(route(&r, b"get a\r\n", 2).0, Plan::Forward(2));
    }

    #[test]
    fn gets_and_cas_use_the_primary() {
        let r = router(&[]);
        let (Plan::Forward(primary), _) = route(&r, b"gets k\r\n", 0) else { panic!() };
        for rr in 1..5 {
            assert_eq!(route(&r, b"gets k\r\n", rr).0, Plan::Forward(primary));
        }
        let (plan, out) = route(&r, b"cas k 0 0 1 5\r\nx\r\n", 3);
        assert_eq!((plan, out.targets[0], out.targets.len()), (Plan::Cas, primary, 3));
    }

    #[test]
    fn local_commands() {
        let r = router(&[]);
        for line in [&b"version\r\n"[..], b"stats\r\n", b"quit\r\n", b"verbosity 1\r\n"] {
            assert_eq!(route(&r, line, 0).0, Plan::Local);
        }
    }

    #[test]
    fn coalesce_restores_key_order_with_misses_and_repeats() {
        // Keys a b c a over two servers: a, c on server 0; b, a on server 1. b misses.
        let keys: [&[u8]; 4] = [b"a", b"b", b"c", b"a"];
        let owner = [0, 1, 0, 1];
        let server0 = b"VALUE a 0 1\r\n1\r\nVALUE c 0 1\r\n3\r\n".as_slice();
        let server1 = b"VALUE a 0 1\r\n1\r\n".as_slice();
        let mut out = Vec::new();
        let mut cursors = [0, 0];
        let hits =
            coalesce(keys.into_iter(), &owner, |s| if s == 0 { server0 } else { server1 }, &mut cursors, &mut out);
        assert_eq!(hits, 3);
        assert_eq!(out, b"VALUE a 0 1\r\n1\r\nVALUE c 0 1\r\n3\r\nVALUE a 0 1\r\n1\r\n");
    }
}
