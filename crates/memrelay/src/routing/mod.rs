//! Routing: which servers a request goes to. Pure functions, no I/O, shared by both engines:
//! [`Router::route`] turns a parsed request into a [`Plan`] (forward to one server, replicate to
//! several, split a multi-get, cas on the primary then copy, or answer locally). Keys are placed
//! by [`placement`] (ketama, modula or random, twemproxy's hash and hash tag); how the replies
//! are put back together is [`crate::relay`]'s.
//!
//! Round robin is an input (`rr`, one counter kept by the caller, seed 000 section 1.3), so a
//! route is a function of the request and that number alone; so is the set of servers reads
//! must avoid while they are repaired ([`crate::upstream::repair_set`]), passed as a predicate: a read goes to
//! the next server (or replica) in its turn that is not being repaired, and the reads that need
//! the key's primary (cas values, win tokens) go to its first replica that is not.

pub mod explain;
pub mod hashkit;
pub mod ketama;
pub(crate) mod local;
pub mod modula;
pub mod placement;
mod routes;

pub use routes::Router;

use memrelay_protocol::{Command, Request};

use crate::settings::{Distribution, Endpoint, ReadFrom, Routing, WritePolicy};
use ketama::RingServer;
use placement::Placement;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Send the request as it arrived to this server and relay its reply.
    Forward(usize),
    /// Send to every server in `targets`; the reply is a success only if every server succeeded.
    Replicate,
    /// A multi-get split over `targets`: key i goes to `key_owner[i]`; replies are coalesced.
    Split,
    /// To `targets[0]`, the key's primary, first: the only server that knows the key's cas value
    /// (`cas`, meta commands with `C`) or whose answer counts (a touching read). When it succeeds
    /// there, a copy ([`crate::relay::rewrite`]) goes to the rest of `targets`.
    PrimaryFirst,
    /// memrelay answers itself (version, verbosity, stats, quit, mn).
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
    /// For a `Split` multi-key `gat`/`gats`: (key index, server) for each replica of a key other
    /// than the one answering it; those servers touch the key too, and their values are ignored.
    pub touches: Vec<(usize, usize)>,
    replicas: Vec<usize>,
}

impl RouteBuf {
    /// Empties it for the next route (keeping its memory).
    fn clear(&mut self) {
        self.targets.clear();
        self.key_owner.clear();
        self.touches.clear();
    }

    /// Adds `server` to the targets unless it is one already.
    fn add_target(&mut self, server: usize) {
        if !self.targets.contains(&server) {
            self.targets.push(server);
        }
    }
}

/// One pool's placement: its servers (by stable id), how keys are placed on them and how many
/// copies each key has. [`Router`] picks the pool of a key and asks it.
#[derive(Debug)]
pub struct ServerPool {
    servers: usize,
    /// The stable id ([`crate::upstream::registry`]) of the server at each position of the configuration:
    /// routes are computed on positions and answered in ids.
    ids: Vec<usize>,
    sharded: bool,
    distribution: Distribution,
    replication: usize,
    read_from: ReadFrom,
    write_policy: WritePolicy,
    fails_over: bool,
    /// Where keys live; with `--distribution all` it still names the primary of a key for
    /// `gets`/`cas` (from a ketama ring).
    placement: Placement,
}

impl ServerPool {
    /// The pool of `servers`, whose stable ids are `ids` (one per server, in order; the ring
    /// hashes their names as given); the error says why the ring could not be built.
    pub fn new(routing: &Routing, servers: &[Endpoint], ids: Vec<usize>) -> Result<ServerPool, String> {
        assert_eq!(servers.len(), ids.len(), "one id per server");
        let mut ring_servers = Vec::with_capacity(servers.len());
        for server in servers {
            let ring_server = match &server.label {
                Some(label) => RingServer::new(label.as_str(), server.weight),
                None => RingServer::from_host_port(&server.address, server.weight)
                    .map_err(|e| format!("--server {}: {e}", server.address))?,
            };
            ring_servers.push(ring_server);
        }
        let placement = Placement::new(routing.distribution, &ring_servers, routing.hash, routing.hash_tag)?;
        Ok(ServerPool {
            servers: servers.len(),
            ids,
            sharded: routing.sharded,
            distribution: routing.distribution,
            replication: routing.replication,
            read_from: routing.read_from,
            write_policy: routing.write_policy,
            fails_over: routing.fails_over(),
            placement,
        })
    }

    /// The pool's write policy (a route may name another for its keys).
    pub fn write_policy(&self) -> WritePolicy {
        self.write_policy
    }

    /// Whether a failed read of this pool's keys is retried on another replica.
    pub fn fails_over(&self) -> bool {
        self.fails_over
    }

    /// Whether reads rotate over every server of the pool (`distribution = "all"`).
    pub fn reads_in_turn(&self) -> bool {
        self.distribution == Distribution::All
    }

    /// The pool's servers, by id, in the configuration's order.
    pub fn ids(&self) -> &[usize] {
        &self.ids
    }

    /// The route of `request`, whose reads stay off the servers `repairing` names (unless every
    /// candidate is); writes still go to every replica (the engine fails the ones being repaired
    /// at once, and the repair brings them up to date).
    pub fn route_avoiding(
        &self,
        request: &Request,
        buf: &[u8],
        rr: usize,
        out: &mut RouteBuf,
        repairing: &dyn Fn(usize) -> bool,
    ) -> Plan {
        out.clear();
        if local::is_local(request, buf) {
            return Plan::Local;
        }
        let key = || placement_key(request, buf);
        match request.command {
            Command::Version | Command::Verbosity | Command::Quit | Command::MetaNoop => Plan::Local,
            // The groups memrelay gathers from every server (`relay::stats`).
            Command::Stats | Command::FlushAll | Command::CacheMemlimit => {
                out.targets.extend(&self.ids);
                Plan::Replicate
            }
            Command::Gets => {
                for key in request.keys(buf) {
                    let owner = self.primary_avoiding(key, repairing, &mut out.replicas);
                    out.key_owner.push(owner);
                }
                self.split_by_owner(out)
            }
            Command::Get if self.distribution != Distribution::All => {
                for (i, key) in request.keys(buf).enumerate() {
                    let owner = self.read_server(key, rr.wrapping_add(i), &mut out.replicas, repairing);
                    out.key_owner.push(owner);
                }
                self.split_by_owner(out)
            }
            Command::Get => {
                let keys = request.key_count;
                if keys == 1 || !self.sharded {
                    return Plan::Forward(self.in_turn(rr, repairing));
                }
                // min(keys, servers) groups of consecutive keys, the first server rotating.
                let groups = keys.min(self.servers);
                for group in 0..groups {
                    let server = self.in_turn(rr + group, repairing);
                    out.targets.push(server);
                    let (from, to) = (group * keys / groups, (group + 1) * keys / groups);
                    out.key_owner.extend(std::iter::repeat_n(server, to - from));
                }
                Plan::Split
            }
            // A touching read of one key: the primary answers, the replicas are touched after.
            Command::Gat | Command::Gats if request.key_count == 1 => {
                self.write_targets(request.key(buf), &mut out.targets);
                lead_with_unrepaired(&mut out.targets, repairing);
                Self::primary_first(out)
            }
            // Several keys: each key's primary answers it, and its other replicas touch it in the
            // same exchange (after the keys they answer: `relay::rewrite`).
            Command::Gat | Command::Gats => {
                for (i, key) in request.keys(buf).enumerate() {
                    let owner = self.primary_avoiding(key, repairing, &mut out.replicas);
                    out.key_owner.push(owner);
                    if self.is_random() {
                        continue; // the server drawn is the key's only one
                    }
                    self.write_targets(key, &mut out.replicas);
                    out.touches.extend(out.replicas.iter().filter(|&&s| s != owner).map(|&s| (i, s)));
                }
                let plan = self.split_by_owner(out);
                if out.touches.is_empty() {
                    return plan;
                }
                if let Plan::Forward(owner) = plan {
                    out.targets.push(owner);
                }
                for i in 0..out.touches.len() {
                    out.add_target(out.touches[i].1);
                }
                Plan::Split
            }
            Command::Cas => {
                self.write_targets(request.key(buf), &mut out.targets);
                lead_with_unrepaired(&mut out.targets, repairing);
                Plan::PrimaryFirst
            }
            Command::MetaGet => {
                let meta = &request.meta;
                let key = key();
                if meta.touch || meta.vivify {
                    // A touch, or an item a miss creates (`N`), must reach every replica: the
                    // primary answers, the copies follow (`relay::rewrite`).
                    self.write_targets(&key, &mut out.targets);
                    lead_with_unrepaired(&mut out.targets, repairing);
                    Self::primary_first(out)
                } else if meta.return_cas || meta.recache {
                    // The cas value, and the win token of recache coordination, are one server's.
                    Plan::Forward(self.primary_avoiding(&key, repairing, &mut out.replicas))
                } else if self.distribution != Distribution::All {
                    Plan::Forward(self.read_server(&key, rr, &mut out.replicas, repairing))
                } else {
                    Plan::Forward(self.in_turn(rr, repairing))
                }
            }
            Command::MetaDebug => Plan::Forward(self.primary_avoiding(&key(), repairing, &mut out.replicas)),
            Command::MetaSet | Command::MetaDelete | Command::MetaArithmetic => {
                self.write_targets(&key(), &mut out.targets);
                if request.meta.compare_cas {
                    lead_with_unrepaired(&mut out.targets, repairing);
                    Plan::PrimaryFirst
                } else {
                    Plan::Replicate
                }
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
                let primary = self.primary(key);
                targets.push(primary);
                targets.extend(self.ids.iter().filter(|&&s| s != primary));
            }
            Distribution::Ketama | Distribution::Modula | Distribution::Random => self.replicas(key, targets),
        }
    }

    /// [`Router::write_targets`] with the first replica not being repaired moved first: where
    /// the primary must answer first (`cas`, touching reads), the replica standing in for it.
    pub fn write_targets_leading(&self, key: &[u8], targets: &mut Vec<usize>, repairing: &dyn Fn(usize) -> bool) {
        self.write_targets(key, targets);
        lead_with_unrepaired(targets, repairing);
    }

    /// The key's replicas, primary first (with `all`: every server, primary first; with
    /// `random`: the one server drawn for this request).
    pub fn replicas(&self, key: &[u8], out: &mut Vec<usize>) {
        let copies = match self.distribution {
            Distribution::All => self.servers,
            Distribution::Ketama | Distribution::Modula | Distribution::Random => self.replication,
        };
        out.clear();
        out.resize(copies, 0);
        let found = self.placement.replicas(key, copies, out);
        out.truncate(found);
        for position in out.iter_mut() {
            *position = self.ids[*position];
        }
    }

    /// The key's primary server (its id).
    fn primary(&self, key: &[u8]) -> usize {
        self.ids[self.placement.primary(key)]
    }

    /// Whether keys have no server of their own (`--distribution random`): every request draws
    /// one, so no answer is worth asking a key's primary again for.
    pub fn is_random(&self) -> bool {
        self.placement.is_random()
    }

    pub(crate) fn read_server(
        &self,
        key: &[u8],
        rr: usize,
        scratch: &mut Vec<usize>,
        repairing: &dyn Fn(usize) -> bool,
    ) -> usize {
        match self.read_from {
            ReadFrom::Primary => self.primary_avoiding(key, repairing, scratch),
            ReadFrom::AnyReplica => {
                self.replicas(key, scratch);
                let n = scratch.len();
                (0..n).map(|j| scratch[(rr + j) % n]).find(|&s| !repairing(s)).unwrap_or(scratch[rr % n])
            }
        }
    }

    /// The server that reads one key of a multi-get whose keys span pools (`rr` already
    /// advanced to the key): as a single-key read of the pool would choose it.
    pub(crate) fn reader(
        &self,
        key: &[u8],
        rr: usize,
        scratch: &mut Vec<usize>,
        repairing: &dyn Fn(usize) -> bool,
    ) -> usize {
        match self.distribution {
            Distribution::All => self.in_turn(rr, repairing),
            _ => self.read_server(key, rr, scratch, repairing),
        }
    }

    /// The server whose turn `rr` is, or the next one after it not being repaired.
    pub(crate) fn in_turn(&self, rr: usize, repairing: &dyn Fn(usize) -> bool) -> usize {
        let n = self.servers;
        (0..n).map(|j| self.ids[(rr + j) % n]).find(|&s| !repairing(s)).unwrap_or(self.ids[rr % n])
    }

    /// The key's first replica not being repaired (its primary when none is). Every memrelay
    /// with the same servers and the same servers under repair agrees on it.
    pub fn primary_avoiding(&self, key: &[u8], repairing: &dyn Fn(usize) -> bool, scratch: &mut Vec<usize>) -> usize {
        let primary = self.primary(key);
        if !repairing(primary) {
            return primary;
        }
        // In the order writes go (`write_targets`), so `cas` finds the server `gets` read.
        self.write_targets(key, scratch);
        scratch.iter().copied().find(|&s| !repairing(s)).unwrap_or(primary)
    }

    /// The primary alone when there is nothing to copy to.
    fn primary_first(out: &mut RouteBuf) -> Plan {
        if out.targets.len() == 1 {
            Plan::Forward(out.targets[0])
        } else {
            Plan::PrimaryFirst
        }
    }

    /// Turns `key_owner` into a plan: one server for all keys is a plain forward.
    fn split_by_owner(&self, out: &mut RouteBuf) -> Plan {
        let first = out.key_owner[0];
        if out.key_owner.iter().all(|&s| s == first) {
            return Plan::Forward(first);
        }
        for i in 0..out.key_owner.len() {
            out.add_target(out.key_owner[i]);
        }
        Plan::Split
    }
}

/// Puts the first target not being repaired first (where the key's primary must answer first,
/// the replica standing in for it while it is repaired: the same one `gets` reads).
fn lead_with_unrepaired(targets: &mut [usize], repairing: &dyn Fn(usize) -> bool) {
    if let Some(first) = targets.iter().position(|&s| !repairing(s)) {
        targets[..=first].rotate_right(1);
    }
}

/// The bytes a key is placed by: a meta command's base64 key (`b`) by what it decodes to, so
/// that `mg <base64> b` and `get <key>` find the same server. A key that does not decode is
/// placed as written (the server refuses it).
pub fn placement_key<'a>(request: &Request, buf: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
    use base64::Engine;
    let key = request.key(buf);
    if request.meta.base64 {
        if let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(key) {
            return decoded.into();
        }
    }
    key.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use memrelay_protocol::{parse_request, Limits, Parse};

    fn router(sharded: bool) -> Router {
        let servers: Vec<Endpoint> = (1..=3).map(Endpoint::local).collect();
        let routing = Routing {
            sharded,
            distribution: Distribution::All,
            hash: ketama::KeyHash::Md5,
            hash_tag: None,
            replication: 1,
            read_from: ReadFrom::Primary,
            failover: false,
            write_policy: WritePolicy::All,
        };
        Router::new(&routing, &servers).unwrap()
    }

    fn route(router: &Router, line: &[u8], rr: usize) -> (Plan, RouteBuf) {
        let Parse::Complete(request) = parse_request(line, &Limits::default()) else { panic!() };
        let mut out = RouteBuf::default();
        let plan = router.route(&request, line, rr, &mut out);
        (plan, out)
    }

    #[test]
    fn reads_round_robin_over_all_servers() {
        let r = router(false);
        let servers: Vec<_> = (0..6).map(|rr| route(&r, b"get k\r\n", rr).0).collect();
        assert_eq!(servers, [0, 1, 2, 0, 1, 2].map(Plan::Forward));
        // Non-sharded multi-get: one server too.
        assert_eq!(route(&r, b"get a b c d\r\n", 4).0, Plan::Forward(1));
    }

    #[test]
    fn writes_go_everywhere_primary_first() {
        let r = router(false);
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
        let r = router(true);
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
        let r = router(false);
        let (Plan::Forward(primary), _) = route(&r, b"gets k\r\n", 0) else { panic!() };
        for rr in 1..5 {
            assert_eq!(route(&r, b"gets k\r\n", rr).0, Plan::Forward(primary));
        }
        let (plan, out) = route(&r, b"cas k 0 0 1 5\r\nx\r\n", 3);
        assert_eq!((plan, out.targets[0], out.targets.len()), (Plan::PrimaryFirst, primary, 3));
    }

    #[test]
    fn local_commands() {
        let r = router(false);
        for line in [&b"version\r\n"[..], b"stats\r\n", b"quit\r\n", b"verbosity 1\r\n"] {
            assert_eq!(route(&r, line, 0).0, Plan::Local);
        }
    }

    #[test]
    fn routes_name_servers_by_their_stable_ids() {
        // The same ring with ids 7, 3, 9 for positions 0, 1, 2: every answer maps through them.
        let servers: Vec<Endpoint> = (1..=3).map(Endpoint::local).collect();
        let routing = Routing {
            sharded: true,
            distribution: Distribution::Ketama,
            hash: ketama::KeyHash::Md5,
            hash_tag: None,
            replication: 2,
            read_from: ReadFrom::Primary,
            failover: false,
            write_policy: WritePolicy::All,
        };
        let by_position = Router::new(&routing, &servers).unwrap();
        let by_id = Router::with_ids(&routing, &servers, vec![7, 3, 9]).unwrap();
        let id = |position: usize| [7, 3, 9][position];
        for key in ["a", "b", "foo", "user:42"] {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            by_position.replicas(key.as_bytes(), &mut a);
            by_id.replicas(key.as_bytes(), &mut b);
            assert_eq!(a.iter().map(|&p| id(p)).collect::<Vec<_>>(), b, "{key}");
            let line = format!("set {key} 0 0 1\r\nx\r\n");
            let ((_, pa), (_, pb)) = (route(&by_position, line.as_bytes(), 0), route(&by_id, line.as_bytes(), 0));
            assert_eq!(pa.targets.iter().map(|&p| id(p)).collect::<Vec<_>>(), pb.targets);
        }
    }

    fn placed(distribution: Distribution, replication: usize) -> Router {
        let servers: Vec<Endpoint> = (1..=4).map(Endpoint::local).collect();
        let routing = Routing {
            sharded: true,
            distribution,
            hash: ketama::KeyHash::Crc32a,
            hash_tag: Some("{}".parse().unwrap()),
            replication,
            read_from: ReadFrom::Primary,
            failover: false,
            write_policy: WritePolicy::All,
        };
        Router::new(&routing, &servers).unwrap()
    }

    #[test]
    fn modula_routes_keys_to_their_replicas_as_ketama_does() {
        let r = placed(Distribution::Modula, 2);
        let mut replicas = Vec::new();
        for key in ["a", "b", "user:{7}:x", "user:{7}:y"] {
            r.replicas(key.as_bytes(), &mut replicas);
            assert_eq!(replicas.len(), 2);
            let (plan, out) = route(&r, format!("set {key} 0 0 1\r\nx\r\n").as_bytes(), 0);
            assert_eq!((plan, &out.targets), (Plan::Replicate, &replicas), "{key}");
            assert_eq!(route(&r, format!("get {key}\r\n").as_bytes(), 3).0, Plan::Forward(replicas[0]));
        }
        // The hash tag: both keys of tag 7 on the same servers.
        let (_, a) = route(&r, b"set user:{7}:x 0 0 1\r\nx\r\n", 0);
        let (_, b) = route(&r, b"set user:{7}:y 0 0 1\r\nx\r\n", 0);
        assert_eq!(a.targets, b.targets);
    }

    #[test]
    fn random_sends_every_request_to_one_server_drawn() {
        let r = placed(Distribution::Random, 1);
        let mut seen = [false; 4];
        for _ in 0..200 {
            for line in [&b"set k 0 0 1\r\nx\r\n"[..], b"get k\r\n", b"gets k\r\n", b"mg k v\r\n", b"delete k\r\n"] {
                let (plan, out) = route(&r, line, 0);
                let server = match plan {
                    Plan::Forward(server) => server,
                    Plan::Replicate => {
                        assert_eq!(out.targets.len(), 1, "{line:?}");
                        out.targets[0]
                    }
                    other => panic!("{line:?}: {other:?}"),
                };
                seen[server] = true;
            }
            let (_, out) = route(&r, b"cas k 0 0 1 5\r\nx\r\n", 0);
            assert_eq!(out.targets.len(), 1);
            // A multi-key gat: each key answered by one server drawn, touched nowhere else.
            let (_, out) = route(&r, b"gat 10 a b c d e\r\n", 0);
            assert!(out.touches.is_empty());
        }
        assert_eq!(seen, [true; 4], "every server is drawn");
    }
}
