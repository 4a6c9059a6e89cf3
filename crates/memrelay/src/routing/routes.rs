//! Pools and routes: which pool a key belongs to, and so which [`ServerPool`] places it.
//!
//! The default pool (the top-level servers) takes every key no route names; a route sends the
//! keys that start with its prefix to its pool (the longest matching prefix wins) under its
//! write policy (else the pool's). A request of one key is its pool's to route. A multi-key read
//! whose keys live in several pools is split key by key, each key to the server its pool would
//! read it from, and answered in key order as any split read is ([`crate::relay::merge`]). The
//! commands memrelay gathers from every server (`stats` groups, `flush_all`) go to every pool.
//!
//! mcrouter's `PrefixSelectorRoute` and memcached's proxy's `routes{ map = ... }` route by the
//! longest matching prefix the same way.
//!
//! A key may have a **gutter** ([`Gutter`]): [`Router::divert`] sends what would go to a server
//! that is down to the gutter pool's server for the key instead (the primary of a write or a
//! touching read, a read's server, each key of a split read on its own), and
//! [`Router::gutter_server`] is where a request that failed on its server is asked again. One
//! level only: what the gutter fails is the client's `SERVER_ERROR`.

use std::collections::HashMap;

use memrelay_protocol::{Command, Request};

use super::{local, placement_key, Plan, RouteBuf, ServerPool};
use crate::settings::{
    Endpoint, GutterSettings, NamedPool, PrefixRoute, Routing, Settings, WritePolicy, DEFAULT_GUTTER_TTL, DEFAULT_POOL,
};

/// A key's gutter: the pool that stands in for its server while that is down or failing, and
/// the longest expiry of what is written there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gutter {
    pub pool: usize,
    pub ttl: u32,
}

#[derive(Debug)]
pub struct Router {
    /// The default pool first, then the named pools in the settings' order.
    pools: Vec<ServerPool>,
    names: Vec<String>,
    routes: Vec<Route>,
    /// The route of a key in a few hash lookups ([`PrefixIndex`]).
    index: PrefixIndex,
    /// The routes as configured, in their order, as `stats` shows them.
    described: Vec<String>,
    /// Every server of every pool, by id.
    all: Vec<usize>,
    repairs: bool,
    /// The gutter of the default pool's keys (`--gutter`).
    default_gutter: Option<Gutter>,
    /// Whether any key has a gutter (else [`Router::divert`] has nothing to do).
    gutters: bool,
}

#[derive(Debug)]
struct Route {
    prefix: Vec<u8>,
    pool: usize,
    write_policy: WritePolicy,
    gutter: Option<Gutter>,
}

impl Router {
    /// One pool of `servers`, numbered 0, 1, ... in their order, and no routes.
    pub fn new(routing: &Routing, servers: &[Endpoint]) -> Result<Router, String> {
        Router::with_ids(routing, servers, (0..servers.len()).collect())
    }

    /// One pool of `servers`, whose stable ids are `ids`, and no routes.
    pub fn with_ids(routing: &Routing, servers: &[Endpoint], ids: Vec<usize>) -> Result<Router, String> {
        let pool = ServerPool::new(routing, servers, ids.clone())?;
        Ok(Router {
            repairs: pool.write_policy().repairs(),
            pools: vec![pool],
            names: vec![DEFAULT_POOL.into()],
            routes: Vec::new(),
            index: PrefixIndex::default(),
            described: Vec::new(),
            all: ids,
            default_gutter: None,
            gutters: false,
        })
    }

    /// The pools and routes of `settings`; `ids` are the stable ids of
    /// [`Settings::all_servers`], in that order. The error names the pool or route at fault.
    pub fn build(settings: &Settings, ids: &[usize]) -> Result<Router, String> {
        Router::of_pools(
            (&settings.routing, &settings.servers),
            &settings.pools,
            (&settings.routes, settings.gutter.as_ref()),
            ids,
        )
    }

    /// [`Router::build`] from the parts of the settings it reads: the default pool, the named
    /// pools, the routes and the default pool's gutter.
    pub fn of_pools(
        (routing, servers): (&Routing, &[Endpoint]),
        named: &[NamedPool],
        (settings_routes, default_gutter): (&[PrefixRoute], Option<&GutterSettings>),
        ids: &[usize],
    ) -> Result<Router, String> {
        let count = servers.len() + named.iter().map(|p| p.servers.len()).sum::<usize>();
        assert_eq!(ids.len(), count, "one id per server");
        let mut pools = Vec::with_capacity(1 + named.len());
        let mut names = vec![DEFAULT_POOL.to_string()];
        let (default_ids, mut rest) = ids.split_at(servers.len());
        pools.push(ServerPool::new(routing, servers, default_ids.to_vec())?);
        for pool in named {
            let (mine, after) = rest.split_at(pool.servers.len());
            rest = after;
            let built = ServerPool::new(&pool.routing, &pool.servers, mine.to_vec())
                .map_err(|e| format!("pool `{}`: {e}", pool.name))?;
            pools.push(built);
            names.push(pool.name.clone());
        }
        let mut routes = Vec::with_capacity(settings_routes.len());
        for route in settings_routes {
            let name = route.pool.as_deref().unwrap_or(DEFAULT_POOL);
            let pool = names.iter().position(|n| n == name).ok_or_else(|| {
                format!(
                    "the route `{}` names the pool `{name}`, which is not configured (pools: {})",
                    String::from_utf8_lossy(&route.prefix),
                    names.join(", ")
                )
            })?;
            if routes.iter().any(|r: &Route| r.prefix == route.prefix) {
                return Err(format!("two routes have the prefix `{}`", String::from_utf8_lossy(&route.prefix)));
            }
            let write_policy = route.write_policy.unwrap_or(pools[pool].write_policy());
            let prefix = String::from_utf8_lossy(&route.prefix);
            let gutter = match &route.gutter {
                Some(name) => {
                    let ttl = route.gutter_ttl.or(default_gutter.map(|g| g.ttl)).unwrap_or(DEFAULT_GUTTER_TTL);
                    Some(gutter(&names, name, ttl, pool).map_err(|e| format!("the route `{prefix}`: {e}"))?)
                }
                None => None,
            };
            routes.push(Route { prefix: route.prefix.clone(), pool, write_policy, gutter });
        }
        let index = PrefixIndex::new(routes.iter().map(|r| r.prefix.as_slice()));
        let default_gutter = match default_gutter {
            Some(settings) => {
                Some(gutter(&names, &settings.pool, settings.ttl, 0).map_err(|e| format!("--gutter: {e}"))?)
            }
            None => None,
        };
        // One level of gutter: a key sent to a gutter is never sent on to another.
        if let (Some(_), Some(route)) = (default_gutter, routes.iter().find(|r| r.gutter.is_some_and(|g| g.pool == 0)))
        {
            return Err(format!(
                "the route `{}` has the default pool as its gutter, which has a gutter itself (--gutter): a gutter is one level",
                String::from_utf8_lossy(&route.prefix)
            ));
        }
        let gutters = default_gutter.is_some() || routes.iter().any(|r| r.gutter.is_some());
        let repairs =
            pools.iter().any(|p| p.write_policy().repairs()) || routes.iter().any(|r| r.write_policy.repairs());
        let described = settings_routes.iter().map(PrefixRoute::describe).collect();
        Ok(Router { pools, names, routes, index, described, all: ids.to_vec(), repairs, default_gutter, gutters })
    }

    /// Whether any key's write policy repairs replicas: then reads avoid the servers being
    /// repaired ([`Router::route_avoiding`]).
    pub fn repairs(&self) -> bool {
        self.repairs
    }

    /// The pools' names, the default pool first; [`Router::pool_of`] indexes them.
    pub fn pool_names(&self) -> &[String] {
        &self.names
    }

    /// The routes as configured, each as `PREFIX -> POOL (POLICY)`.
    pub fn routes_described(&self) -> &[String] {
        &self.described
    }

    /// The default pool's write policy (of keys no route names).
    pub fn default_write_policy(&self) -> WritePolicy {
        self.pools[0].write_policy()
    }

    /// The servers (ids) of pool `index`.
    pub fn pool_servers(&self, index: usize) -> &[usize] {
        self.pools[index].ids()
    }

    /// The pool of `key` (its index in [`Router::pool_names`]) and its write policy.
    pub fn pool_of(&self, key: &[u8]) -> (usize, WritePolicy) {
        match self.route_of(key) {
            Some(route) => (route.pool, route.write_policy),
            None => (0, self.pools[0].write_policy()),
        }
    }

    fn route_of(&self, key: &[u8]) -> Option<&Route> {
        self.index.longest(key).map(|i| &self.routes[i])
    }

    /// Whether any key has a gutter.
    pub fn has_gutters(&self) -> bool {
        self.gutters
    }

    /// The gutter of `key`: its route's, else (its route keeps it in the default pool, or it
    /// has none) the default pool's.
    pub fn gutter_of(&self, key: &[u8]) -> Option<Gutter> {
        match self.route_of(key) {
            Some(route) if route.gutter.is_some() => route.gutter,
            Some(route) if route.pool != 0 => None,
            _ => self.default_gutter,
        }
    }

    /// The gutter pool's server for `key`: its primary there (the one every memrelay with the
    /// same configuration picks, so a read finds what a write left).
    pub fn gutter_server(&self, gutter: Gutter, key: &[u8], repairing: &dyn Fn(usize) -> bool) -> usize {
        let mut scratch = Vec::new();
        self.pools[gutter.pool].primary_avoiding(key, repairing, &mut scratch)
    }

    /// Sends to the gutter what `plan` would send to a server `down` names, for keys that have
    /// one: a forward's server, a write's replicas that are down (each once), the primary of a
    /// request it must answer first (copies to a down replica stay, and fail at the gate), the
    /// keys of a split read whose server is down (the touches of a down server dropped). The
    /// gutter servers used go to `diverted`; returns the shortest `gutter_ttl` among the keys
    /// diverted, None when nothing was.
    pub fn divert(
        &self,
        request: &Request,
        buf: &[u8],
        (plan, out): (&mut Plan, &mut RouteBuf),
        down: &dyn Fn(usize) -> bool,
        repairing: &dyn Fn(usize) -> bool,
        diverted: &mut Vec<usize>,
    ) -> Option<u32> {
        diverted.clear();
        let mut ttl: Option<u32> = None;
        let mut take = |gutter: Gutter, key: &[u8], diverted: &mut Vec<usize>| {
            ttl = Some(ttl.map_or(gutter.ttl, |t| t.min(gutter.ttl)));
            let server = self.gutter_server(gutter, key, repairing);
            if !diverted.contains(&server) {
                diverted.push(server);
            }
            server
        };
        match plan {
            Plan::Local => {}
            Plan::Forward(server) => {
                let key = placement_key(request, buf);
                if let Some(gutter) = self.gutter_of(&key).filter(|_| down(*server)) {
                    *plan = Plan::Forward(take(gutter, &key, diverted));
                }
            }
            Plan::Replicate if request.key_count > 0 && request.command != Command::Stats => {
                let key = placement_key(request, buf);
                if let Some(gutter) = self.gutter_of(&key).filter(|_| out.targets.iter().any(|&s| down(s))) {
                    let standing_in = take(gutter, &key, diverted);
                    for target in out.targets.iter_mut().filter(|s| down(**s)) {
                        *target = standing_in;
                    }
                    dedup_in_order(&mut out.targets);
                }
            }
            Plan::Replicate => {}
            Plan::PrimaryFirst => {
                let key = placement_key(request, buf);
                if let Some(gutter) = self.gutter_of(&key).filter(|_| down(out.targets[0])) {
                    out.targets[0] = take(gutter, &key, diverted);
                    dedup_in_order(&mut out.targets);
                }
            }
            Plan::Split => {
                let mut changed = false;
                for (i, key) in request.keys(buf).enumerate() {
                    let owner = out.key_owner[i];
                    if let Some(gutter) = self.gutter_of(key).filter(|_| down(owner)) {
                        out.key_owner[i] = take(gutter, key, diverted);
                        changed = true;
                    }
                }
                if changed {
                    out.touches.retain(|&(_, s)| !down(s));
                    out.targets.clear();
                    for i in 0..out.key_owner.len() {
                        out.add_target(out.key_owner[i]);
                    }
                    for i in 0..out.touches.len() {
                        out.add_target(out.touches[i].1);
                    }
                    let first = out.key_owner[0];
                    if out.touches.is_empty() && out.key_owner.iter().all(|&s| s == first) {
                        *plan = Plan::Forward(first);
                    }
                }
            }
        }
        ttl
    }

    fn pool(&self, key: &[u8]) -> &ServerPool {
        &self.pools[self.pool_of(key).0]
    }

    /// The write policy of `request`: its key's route's (else its pool's) for a keyed write,
    /// the default pool's otherwise.
    pub fn write_policy_of(&self, request: &Request, buf: &[u8]) -> WritePolicy {
        if self.routes.is_empty() || !request.command.is_keyed_write() {
            return self.pools[0].write_policy();
        }
        self.pool_of(&placement_key(request, buf)).1
    }

    /// Whether a failed read of `key` is retried on another replica (its pool's setting).
    pub fn fails_over(&self, key: &[u8]) -> bool {
        self.pool(key).fails_over()
    }

    /// Whether `key`'s pool draws a server per request (`distribution = "random"`): no server
    /// is the key's own.
    pub fn is_random(&self, key: &[u8]) -> bool {
        self.pool(key).is_random()
    }

    /// Whether reads of `key` rotate over every server of its pool.
    pub fn reads_in_turn(&self, key: &[u8]) -> bool {
        self.pool(key).reads_in_turn()
    }

    /// The route when no server is being repaired.
    pub fn route(&self, request: &Request, buf: &[u8], rr: usize, out: &mut RouteBuf) -> Plan {
        self.route_avoiding(request, buf, rr, out, &|_| false)
    }

    /// The route of `request`, whose reads stay off the servers `repairing` names (unless every
    /// candidate is): its key's pool's ([`ServerPool::route_avoiding`]), a split over pools for
    /// a multi-key read whose keys live in several, every server for what memrelay gathers.
    pub fn route_avoiding(
        &self,
        request: &Request,
        buf: &[u8],
        rr: usize,
        out: &mut RouteBuf,
        repairing: &dyn Fn(usize) -> bool,
    ) -> Plan {
        if self.pools.len() == 1 {
            return self.pools[0].route_avoiding(request, buf, rr, out, repairing);
        }
        match request.command {
            _ if local::is_local(request, buf) => self.pools[0].route_avoiding(request, buf, rr, out, repairing),
            Command::Version | Command::Verbosity | Command::Quit | Command::MetaNoop => Plan::Local,
            Command::Stats | Command::FlushAll | Command::CacheMemlimit => {
                out.clear();
                out.targets.extend(&self.all);
                Plan::Replicate
            }
            Command::Get | Command::Gets | Command::Gat | Command::Gats if request.key_count > 1 => {
                let mut keys = request.keys(buf);
                let first = keys.next().map_or(0, |k| self.pool_of(k).0);
                if keys.all(|k| self.pool_of(k).0 == first) {
                    return self.pools[first].route_avoiding(request, buf, rr, out, repairing);
                }
                self.split_over_pools(request, buf, rr, out, repairing)
            }
            _ => self.pool(&placement_key(request, buf)).route_avoiding(request, buf, rr, out, repairing),
        }
    }

    /// A multi-key read over several pools: each key to the server its pool reads it from
    /// (`gets`, `gat`: its primary, whose cas value and touch count), and for `gat`/`gats` the
    /// key's other replicas touched too.
    fn split_over_pools(
        &self,
        request: &Request,
        buf: &[u8],
        rr: usize,
        out: &mut RouteBuf,
        repairing: &dyn Fn(usize) -> bool,
    ) -> Plan {
        out.clear();
        let touching = matches!(request.command, Command::Gat | Command::Gats);
        for (i, key) in request.keys(buf).enumerate() {
            let pool = self.pool(key);
            let owner = match request.command {
                Command::Get => pool.reader(key, rr.wrapping_add(i), &mut out.replicas, repairing),
                _ => pool.primary_avoiding(key, repairing, &mut out.replicas),
            };
            out.key_owner.push(owner);
            if touching {
                pool.write_targets(key, &mut out.replicas);
                out.touches.extend(out.replicas.iter().filter(|&&s| s != owner).map(|&s| (i, s)));
            }
        }
        for i in 0..out.key_owner.len() {
            out.add_target(out.key_owner[i]);
        }
        for i in 0..out.touches.len() {
            out.add_target(out.touches[i].1);
        }
        Plan::Split
    }

    /// The servers a write of `key` goes to, its primary first ([`ServerPool::write_targets`]).
    pub fn write_targets(&self, key: &[u8], targets: &mut Vec<usize>) {
        self.pool(key).write_targets(key, targets)
    }

    /// [`Router::write_targets`] with the first replica not being repaired moved first.
    pub fn write_targets_leading(&self, key: &[u8], targets: &mut Vec<usize>, repairing: &dyn Fn(usize) -> bool) {
        self.pool(key).write_targets_leading(key, targets, repairing)
    }

    /// The key's replicas in its pool, primary first.
    pub fn replicas(&self, key: &[u8], out: &mut Vec<usize>) {
        self.pool(key).replicas(key, out)
    }

    /// The key's first replica not being repaired (its primary when none is).
    pub fn primary_avoiding(&self, key: &[u8], repairing: &dyn Fn(usize) -> bool, scratch: &mut Vec<usize>) -> usize {
        self.pool(key).primary_avoiding(key, repairing, scratch)
    }
}

/// Longest-prefix match over the routes' prefixes: one hash lookup per distinct prefix length,
/// longest first (a hundred routes of a few lengths cost a few lookups per request, where a scan
/// would compare a hundred prefixes).
#[derive(Debug, Default)]
struct PrefixIndex {
    /// Prefix length, and the routes (their index) of that length by prefix; longest first.
    by_length: Vec<(usize, HashMap<Vec<u8>, usize>)>,
}

impl PrefixIndex {
    /// The index of `prefixes` (distinct), each answered as its position.
    fn new<'a>(prefixes: impl Iterator<Item = &'a [u8]>) -> PrefixIndex {
        let mut by_length: Vec<(usize, HashMap<Vec<u8>, usize>)> = Vec::new();
        for (i, prefix) in prefixes.enumerate() {
            match by_length.iter_mut().find(|(len, _)| *len == prefix.len()) {
                Some((_, map)) => {
                    map.insert(prefix.to_vec(), i);
                }
                None => by_length.push((prefix.len(), HashMap::from([(prefix.to_vec(), i)]))),
            }
        }
        by_length.sort_by_key(|(len, _)| std::cmp::Reverse(*len));
        PrefixIndex { by_length }
    }

    /// The position of the longest prefix of `key`, if any is one.
    fn longest(&self, key: &[u8]) -> Option<usize> {
        self.by_length.iter().find_map(|(len, map)| key.get(..*len).and_then(|head| map.get(head).copied()))
    }
}

/// Drops the later repeats of each server, keeping the order of first appearance.
fn dedup_in_order(servers: &mut Vec<usize>) {
    let mut seen = Vec::with_capacity(servers.len());
    servers.retain(|&s| {
        let first = !seen.contains(&s);
        seen.push(s);
        first
    });
}

/// The gutter named `name` for the keys of pool `own`, with `ttl`; the error says why not.
fn gutter(names: &[String], name: &str, ttl: u32, own: usize) -> Result<Gutter, String> {
    let pool = names
        .iter()
        .position(|n| n == name)
        .ok_or_else(|| format!("the gutter `{name}` is not a configured pool (pools: {})", names.join(", ")))?;
    if pool == own {
        return Err(format!("the gutter `{name}` is the pool the keys live in: a gutter must be another pool"));
    }
    Ok(Gutter { pool, ttl })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{Distribution, ReadFrom};
    use crate::KeyHash;
    use memrelay_protocol::{parse_request, Limits, Parse};

    fn routing(distribution: Distribution, replication: usize, write_policy: WritePolicy) -> Routing {
        Routing {
            sharded: true,
            distribution,
            hash: KeyHash::Md5,
            hash_tag: None,
            replication,
            read_from: ReadFrom::Primary,
            failover: false,
            write_policy,
        }
    }

    /// The default pool: 3 servers on ketama (ids 0-2); `hot`: 2 servers holding every key
    /// (ids 3, 4); `sessions`: 2 on ketama, 2 copies, majority (ids 5, 6).
    fn router(routes: &[&str]) -> Router {
        let servers = |ports: std::ops::Range<u16>| ports.map(Endpoint::local).collect::<Vec<_>>();
        let settings_routes: Vec<PrefixRoute> = routes.iter().map(|r| r.parse().unwrap()).collect();
        let pools = vec![
            NamedPool {
                name: "hot".into(),
                servers: servers(4..6),
                routing: routing(Distribution::All, 1, WritePolicy::All),
            },
            NamedPool {
                name: "sessions".into(),
                servers: servers(6..8),
                routing: routing(Distribution::Ketama, 2, WritePolicy::Majority),
            },
        ];
        let default = routing(Distribution::Ketama, 1, WritePolicy::All);
        Router::of_pools((&default, &servers(1..4)), &pools, (&settings_routes, None), &(0..7).collect::<Vec<_>>())
            .unwrap()
    }

    fn route(router: &Router, line: &str, rr: usize) -> (Plan, RouteBuf) {
        let line = line.as_bytes();
        let Parse::Complete(request) = parse_request(line, &Limits::default()) else { panic!("{line:?}") };
        let mut out = RouteBuf::default();
        (router.route(&request, line, rr, &mut out), out)
    }

    const ROUTES: [&str; 4] = [
        r#"{ prefix = "hot:", pool = "hot" }"#,
        r#"{ prefix = "s:", pool = "sessions" }"#,
        r#"{ prefix = "s:strict:", pool = "sessions", write_policy = "all" }"#,
        "hot:local:=majority",
    ];

    #[test]
    fn the_longest_matching_prefix_chooses_the_pool_and_the_write_policy() {
        let r = router(&ROUTES);
        assert_eq!(r.pool_of(b"hot:1"), (1, WritePolicy::All));
        assert_eq!(r.pool_of(b"s:1"), (2, WritePolicy::Majority)); // the pool's policy
        assert_eq!(r.pool_of(b"s:strict:1"), (2, WritePolicy::All)); // the route's
        assert_eq!(r.pool_of(b"hot:local:1"), (0, WritePolicy::Majority)); // no pool: the default's
        assert_eq!(r.pool_of(b"other"), (0, WritePolicy::All));
        assert_eq!(r.pool_of(b"ho"), (0, WritePolicy::All));
        assert!(r.repairs());
        assert_eq!(r.pool_names(), ["default", "hot", "sessions"]);
    }

    #[test]
    fn keys_go_to_their_pools_servers_only() {
        let r = router(&ROUTES);
        for i in 0..200 {
            let (key_hot, key_s, key_other) = (format!("hot:{i}"), format!("s:{i}"), format!("k{i}"));
            let (plan, out) = route(&r, &format!("set {key_hot} 0 0 1\r\nx\r\n"), i);
            assert_eq!((plan, sorted(&out.targets)), (Plan::Replicate, vec![3, 4]), "{key_hot}");
            let (plan, out) = route(&r, &format!("set {key_s} 0 0 1\r\nx\r\n"), i);
            assert_eq!((plan, sorted(&out.targets)), (Plan::Replicate, vec![5, 6]), "{key_s}");
            let (plan, out) = route(&r, &format!("set {key_other} 0 0 1\r\nx\r\n"), i);
            assert!(plan == Plan::Replicate && out.targets.len() == 1 && out.targets[0] < 3, "{key_other}");
            // Reads, meta commands, deletes, arithmetic: the same pool.
            for line in [format!("get {key_hot}\r\n"), format!("mg {key_hot} v\r\n"), format!("touch {key_hot} 1\r\n")]
            {
                let (plan, out) = route(&r, &line, i);
                let servers = match plan {
                    Plan::Forward(s) => vec![s],
                    _ => out.targets.clone(),
                };
                assert!(servers.iter().all(|s| [3, 4].contains(s)), "{line}: {servers:?}");
            }
            let (plan, _) = route(&r, &format!("get {key_other}\r\n"), i);
            assert!(matches!(plan, Plan::Forward(s) if s < 3));
        }
    }

    #[test]
    fn a_multiget_over_pools_is_split_key_by_key_in_key_order() {
        let r = router(&ROUTES);
        let (plan, out) = route(&r, "get hot:1 a s:1 b hot:2\r\n", 0);
        assert_eq!(plan, Plan::Split);
        assert_eq!(out.key_owner.len(), 5);
        let pool_of = |s: usize| {
            if s < 3 {
                0
            } else if s < 5 {
                1
            } else {
                2
            }
        };
        assert_eq!(out.key_owner.iter().map(|&s| pool_of(s)).collect::<Vec<_>>(), [1, 0, 2, 0, 1]);
        // Each key on the server its own pool would read it from.
        for (i, key) in ["hot:1", "a", "s:1", "b", "hot:2"].iter().enumerate() {
            let (single, _) = route(&r, &format!("get {key}\r\n"), i);
            assert_eq!(single, Plan::Forward(out.key_owner[i]), "{key}");
        }
        // Keys of one pool: that pool's own route.
        let (plan, out) = route(&r, "get s:1 s:2 s:3\r\n", 0);
        assert!(matches!(plan, Plan::Split | Plan::Forward(_)));
        assert!(out.key_owner.iter().chain(&out.targets).all(|&s| s == 5 || s == 6));
        // gat touches every replica of its key, in its own pool.
        let (plan, out) = route(&r, "gat 10 s:1 a\r\n", 0);
        assert_eq!(plan, Plan::Split);
        assert_eq!(out.touches.len(), 1);
        assert!([5, 6].contains(&out.touches[0].1) && out.touches[0].0 == 0);
    }

    #[test]
    fn what_memrelay_gathers_goes_to_every_pool() {
        let r = router(&ROUTES);
        for line in ["flush_all\r\n", "stats items\r\n"] {
            let (plan, out) = route(&r, line, 0);
            assert_eq!((plan, sorted(&out.targets)), (Plan::Replicate, (0..7).collect::<Vec<_>>()), "{line}");
        }
        assert_eq!(route(&r, "version\r\n", 0).0, Plan::Local);
        assert_eq!(route(&r, "stats\r\n", 0).0, Plan::Local);
    }

    #[test]
    fn a_route_to_an_unknown_pool_or_a_prefix_twice_is_refused() {
        let servers: Vec<Endpoint> = (1..3).map(Endpoint::local).collect();
        let base = routing(Distribution::Ketama, 1, WritePolicy::All);
        let unknown: PrefixRoute = r#"{ prefix = "a", pool = "nope" }"#.parse().unwrap();
        let error = Router::of_pools((&base, &servers), &[], (&[unknown], None), &[0, 1]).unwrap_err();
        assert!(error.contains("`nope`, which is not configured (pools: default)"), "{error}");
        let twice: Vec<PrefixRoute> = vec!["a=all".parse().unwrap(), "a=majority".parse().unwrap()];
        let error = Router::of_pools((&base, &servers), &[], (&twice, None), &[0, 1]).unwrap_err();
        assert!(error.contains("two routes have the prefix `a`"), "{error}");
    }

    /// [`router`]'s pools with `hot` as the default pool's gutter (TTL 5 s); `s:` has none.
    fn guttered() -> Router {
        let servers = |ports: std::ops::Range<u16>| ports.map(Endpoint::local).collect::<Vec<_>>();
        let pools = vec![
            NamedPool {
                name: "hot".into(),
                servers: servers(4..6),
                routing: routing(Distribution::All, 1, WritePolicy::All),
            },
            NamedPool {
                name: "sessions".into(),
                servers: servers(6..8),
                routing: routing(Distribution::Ketama, 1, WritePolicy::All),
            },
        ];
        let routes: Vec<PrefixRoute> = vec![r#"{ prefix = "s:", pool = "sessions" }"#.parse().unwrap()];
        let gutter = GutterSettings { pool: "hot".into(), ttl: 5 };
        let default = routing(Distribution::Ketama, 1, WritePolicy::All);
        Router::of_pools((&default, &servers(1..4)), &pools, (&routes, Some(&gutter)), &(0..7).collect::<Vec<_>>())
            .unwrap()
    }

    fn diverted(router: &Router, line: &str, down: &[usize]) -> (Plan, RouteBuf, Option<u32>, Vec<usize>) {
        let (mut plan, mut out) = route(router, line, 0);
        let mut standing_in = Vec::new();
        let bytes = line.as_bytes();
        let Parse::Complete(request) = parse_request(bytes, &Limits::default()) else { panic!() };
        let ttl =
            router.divert(&request, bytes, (&mut plan, &mut out), &|s| down.contains(&s), &|_| false, &mut standing_in);
        (plan, out, ttl, standing_in)
    }

    #[test]
    fn a_down_servers_requests_go_to_the_gutter_server_of_their_key() {
        let r = guttered();
        assert_eq!(r.gutter_of(b"k"), Some(Gutter { pool: 1, ttl: 5 }));
        assert_eq!(r.gutter_of(b"s:1"), None);
        for i in 0..50 {
            let key = format!("k{i}");
            let (Plan::Replicate, out) = route(&r, &format!("set {key} 0 0 1\r\nx\r\n"), 0) else { panic!() };
            let server = out.targets[0];
            // Up: nothing moves.
            let (_, out, ttl, _) = diverted(&r, &format!("set {key} 0 0 1\r\nx\r\n"), &[]);
            assert_eq!((out.targets.clone(), ttl), (vec![server], None));
            // Down: the write, the read, the delete and the touch all go to one gutter server.
            let (plan, out, ttl, standing_in) = diverted(&r, &format!("set {key} 0 0 1\r\nx\r\n"), &[server]);
            assert_eq!((plan, ttl), (Plan::Replicate, Some(5)));
            let gutter = out.targets[0];
            assert!(out.targets == [gutter] && standing_in == [gutter] && [3, 4].contains(&gutter));
            assert_eq!(gutter, r.gutter_server(Gutter { pool: 1, ttl: 5 }, key.as_bytes(), &|_| false));
            for line in [format!("get {key}\r\n"), format!("mg {key} v\r\n")] {
                assert_eq!(diverted(&r, &line, &[server]).0, Plan::Forward(gutter), "{line}");
            }
            for line in [format!("delete {key}\r\n"), format!("touch {key} 9\r\n")] {
                assert_eq!(diverted(&r, &line, &[server]).1.targets, [gutter], "{line}");
            }
        }
        // A key without a gutter stays where it is, down or not.
        let (Plan::Forward(s), _) = route(&r, "get s:1\r\n", 0) else { panic!() };
        assert_eq!(diverted(&r, "get s:1\r\n", &[s]).0, Plan::Forward(s));
    }

    #[test]
    fn a_split_read_sends_only_the_down_servers_keys_to_the_gutter() {
        let r = guttered();
        let keys: Vec<String> = (0..12).map(|i| format!("k{i}")).collect();
        let line = format!("get {}\r\n", keys.join(" "));
        let (_, before) = route(&r, &line, 0);
        let down = before.key_owner[0];
        let (plan, after, ttl, _) = diverted(&r, &line, &[down]);
        assert_eq!((plan, ttl), (Plan::Split, Some(5)));
        for (i, key) in keys.iter().enumerate() {
            if before.key_owner[i] == down {
                let gutter = r.gutter_server(Gutter { pool: 1, ttl: 5 }, key.as_bytes(), &|_| false);
                assert_eq!(after.key_owner[i], gutter, "{key}");
            } else {
                assert_eq!(after.key_owner[i], before.key_owner[i], "{key}");
            }
        }
        assert!(!after.targets.contains(&down));
    }

    #[test]
    fn a_gutter_must_be_another_pool_and_one_level() {
        let servers = |ports: std::ops::Range<u16>| ports.map(Endpoint::local).collect::<Vec<_>>();
        let base = routing(Distribution::Ketama, 1, WritePolicy::All);
        let pools = vec![NamedPool { name: "g".into(), servers: servers(4..5), routing: base.clone() }];
        let build = |routes: &[&str], gutter: Option<&str>| {
            let routes: Vec<PrefixRoute> = routes.iter().map(|r| r.parse().unwrap()).collect();
            let gutter = gutter.map(|pool| GutterSettings { pool: pool.into(), ttl: 5 });
            Router::of_pools((&base, &servers(1..3)), &pools, (&routes, gutter.as_ref()), &[0, 1, 2]).map(|_| ())
        };
        assert!(build(&[], Some("g")).is_ok());
        assert!(build(&[], Some("default"))
            .unwrap_err()
            .contains("--gutter: the gutter `default` is the pool the keys live in"));
        assert!(build(&[], Some("nope")).unwrap_err().contains("the gutter `nope` is not a configured pool"));
        let own = build(&[r#"{ prefix = "x", pool = "g", gutter = "g" }"#], None).unwrap_err();
        assert!(own.contains("the route `x`: the gutter `g` is the pool the keys live in"), "{own}");
        let chain = build(&[r#"{ prefix = "x", pool = "g", gutter = "default" }"#], Some("g")).unwrap_err();
        assert!(chain.contains("a gutter is one level"), "{chain}");
    }

    #[test]
    fn the_prefix_index_finds_what_a_scan_for_the_longest_prefix_finds() {
        // Prefixes over a small alphabet, so that many nest; keys from the same alphabet.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let word = |len: u64, next: &mut dyn FnMut(u64) -> u64| {
            (0..len).map(|_| b"ab:"[next(3) as usize]).collect::<Vec<u8>>()
        };
        let mut prefixes: Vec<Vec<u8>> = Vec::new();
        while prefixes.len() < 100 {
            let len = 1 + next(6);
            let prefix = word(len, &mut next);
            if !prefixes.contains(&prefix) {
                prefixes.push(prefix);
            }
        }
        let index = PrefixIndex::new(prefixes.iter().map(Vec::as_slice));
        for _ in 0..5_000 {
            let len = next(9);
            let key = word(len, &mut next);
            let scanned =
                (0..prefixes.len()).filter(|&i| key.starts_with(&prefixes[i])).max_by_key(|&i| prefixes[i].len());
            assert_eq!(index.longest(&key), scanned, "{key:?}");
        }
    }

    fn sorted(servers: &[usize]) -> Vec<usize> {
        let mut servers = servers.to_vec();
        servers.sort_unstable();
        servers
    }
}
