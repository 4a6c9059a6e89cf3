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

use memrelay_protocol::{Command, Request};

use super::{local, placement_key, Plan, RouteBuf, ServerPool};
use crate::settings::{Endpoint, NamedPool, PrefixRoute, Routing, Settings, WritePolicy, DEFAULT_POOL};

#[derive(Debug)]
pub struct Router {
    /// The default pool first, then the named pools in the settings' order.
    pools: Vec<ServerPool>,
    names: Vec<String>,
    /// Longest prefix first, so the first that matches is the longest.
    routes: Vec<Route>,
    /// The routes as configured, in their order, as `stats` shows them.
    described: Vec<String>,
    /// Every server of every pool, by id.
    all: Vec<usize>,
    repairs: bool,
}

#[derive(Debug)]
struct Route {
    prefix: Vec<u8>,
    pool: usize,
    write_policy: WritePolicy,
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
            described: Vec::new(),
            all: ids,
        })
    }

    /// The pools and routes of `settings`; `ids` are the stable ids of
    /// [`Settings::all_servers`], in that order. The error names the pool or route at fault.
    pub fn build(settings: &Settings, ids: &[usize]) -> Result<Router, String> {
        Router::of_pools((&settings.routing, &settings.servers), &settings.pools, &settings.routes, ids)
    }

    /// [`Router::build`] from the parts of the settings it reads: the default pool, the named
    /// pools, the routes.
    pub fn of_pools(
        (routing, servers): (&Routing, &[Endpoint]),
        named: &[NamedPool],
        settings_routes: &[PrefixRoute],
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
            routes.push(Route { prefix: route.prefix.clone(), pool, write_policy });
        }
        routes.sort_by_key(|r| std::cmp::Reverse(r.prefix.len()));
        let repairs =
            pools.iter().any(|p| p.write_policy().repairs()) || routes.iter().any(|r| r.write_policy.repairs());
        let described = settings_routes.iter().map(PrefixRoute::describe).collect();
        Ok(Router { pools, names, routes, described, all: ids.to_vec(), repairs })
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
        match self.routes.iter().find(|r| key.starts_with(&r.prefix)) {
            Some(route) => (route.pool, route.write_policy),
            None => (0, self.pools[0].write_policy()),
        }
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
                out.targets.clear();
                out.key_owner.clear();
                out.touches.clear();
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
        out.targets.clear();
        out.key_owner.clear();
        out.touches.clear();
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
        for &owner in &out.key_owner {
            if !out.targets.contains(&owner) {
                out.targets.push(owner);
            }
        }
        for &(_, server) in &out.touches {
            if !out.targets.contains(&server) {
                out.targets.push(server);
            }
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
        Router::of_pools((&default, &servers(1..4)), &pools, &settings_routes, &(0..7).collect::<Vec<_>>()).unwrap()
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
        let error = Router::of_pools((&base, &servers), &[], &[unknown], &[0, 1]).unwrap_err();
        assert!(error.contains("`nope`, which is not configured (pools: default)"), "{error}");
        let twice: Vec<PrefixRoute> = vec!["a=all".parse().unwrap(), "a=majority".parse().unwrap()];
        let error = Router::of_pools((&base, &servers), &[], &twice, &[0, 1]).unwrap_err();
        assert!(error.contains("two routes have the prefix `a`"), "{error}");
    }

    fn sorted(servers: &[usize]) -> Vec<usize> {
        let mut servers = servers.to_vec();
        servers.sort_unstable();
        servers
    }
}
