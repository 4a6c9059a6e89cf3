//! Typed settings, built once at start (by the binary from the command line) and read by
//! everything else: where to listen, the servers, the engine, routing, client limits and
//! measurement. No clap here: the library never sees the command line.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde_json::{json, Value};

use access_rules::Rule;

pub mod access_rules;
pub mod hash_tag;
pub mod key_hash;
pub mod tls;

pub use hash_tag::HashTag;
pub use key_hash::KeyHash;

/// memrelay's version, as `stats` reports it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub use tls::{MetricsTls, ServerTlsSettings, TlsSettings};

/// An address as given and as resolved, with what the ketama ring needs of a server: its
/// weight, and the string hashed for its points (twemproxy's: the name when one is given, else
/// `host:port` as written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub addr: SocketAddr,
    /// How memrelay names the server (logs, `stats`, metrics): its name, or `host:port`.
    pub name: String,
    /// `host:port` as written.
    pub address: String,
    /// The name given after the address, which the ring hashes instead of the address.
    pub label: Option<String>,
    /// Relative share of the keys on the ketama ring (1 unless given).
    pub weight: u32,
    /// TLS to this server: its pool's `server_tls_*`, else `--server-tls-*`, else none.
    pub tls: Option<ServerTlsSettings>,
}

/// The longest `--server` value taken (a name the ketama ring can hash is far shorter).
pub const MAX_SERVER_SPEC: usize = 1024;

impl Endpoint {
    /// `host:port`, resolved; weight 1, no name.
    pub fn resolve(address: &str) -> Result<Endpoint, String> {
        let addr = address
            .to_socket_addrs()
            .map_err(|e| e.to_string())?
            .next()
            .ok_or_else(|| "resolves to no address".to_string())?;
        Ok(Endpoint {
            addr,
            name: address.to_string(),
            address: address.to_string(),
            label: None,
            weight: 1,
            tls: None,
        })
    }

    /// A server as `--server` takes it, twemproxy's form with both parts optional:
    /// `HOST:PORT[:WEIGHT] [NAME]` (an IPv6 host in brackets).
    pub fn server(spec: &str) -> Result<Endpoint, String> {
        // Logged and shown in `stats` and the metrics: no control character may forge a line.
        if spec.contains(char::is_control) {
            return Err("a server may not hold control characters (newline, tab, ESC, ...)".into());
        }
        if spec.len() > MAX_SERVER_SPEC {
            return Err(format!("a server is at most {MAX_SERVER_SPEC} bytes, address and name"));
        }
        let spec = spec.trim();
        let (address, label) = match spec.split_once(' ') {
            Some((address, label)) => (address, Some(label.trim())),
            None => (spec, None),
        };
        let (address, weight) = match address.rsplit_once(':') {
            // A third field: `host:port:weight` (not the port of `[v6]:port` or `host:port`).
            Some((host_port, weight)) if host_port.contains(':') && !host_port.ends_with(']') => {
                let weight = weight
                    .parse::<u32>()
                    .ok()
                    .filter(|&w| w >= 1 && w <= i32::MAX as u32)
                    .ok_or_else(|| format!("weight `{weight}` must be a whole number >= 1"))?;
                (host_port, weight)
            }
            _ => (address, 1),
        };
        if label.is_some_and(|l| l.is_empty() || l.contains(char::is_whitespace)) {
            return Err("the name after the address must be one word".into());
        }
        let mut endpoint = Endpoint::resolve(address)?;
        if endpoint.addr.port() == 0 {
            return Err("port 0 is no server's port".into());
        }
        endpoint.weight = weight;
        if let Some(label) = label {
            endpoint.name = label.to_string();
            endpoint.label = Some(label.to_string());
        }
        Ok(endpoint)
    }

    /// Loopback `127.0.0.1:port`, weight 1 (tests).
    pub fn local(port: u16) -> Endpoint {
        let address = format!("127.0.0.1:{port}");
        Endpoint {
            addr: ([127, 0, 0, 1], port).into(),
            name: address.clone(),
            address,
            label: None,
            weight: 1,
            tls: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Settings {
    /// The plain listener; `None` (`--listen none`): clients come through the TLS listener only.
    pub listen: Option<Endpoint>,
    /// The default pool's servers, in their order (which breaks ties on the ring and numbers
    /// them in `stats`).
    pub servers: Vec<Endpoint>,
    pub engine: EngineSettings,
    /// The default pool's routing.
    pub routing: Routing,
    /// The other pools (`[pools.NAME]`), in the order of their names.
    pub pools: Vec<NamedPool>,
    /// Key prefixes to pools and write policies (`[[routes]]`).
    pub routes: Vec<PrefixRoute>,
    /// The gutter of the default pool's keys (`--gutter`, `--gutter-ttl`); a route's own
    /// `gutter` replaces it for its keys.
    pub gutter: Option<GutterSettings>,
    pub limits: ClientLimits,
    pub measurement: Measurement,
    /// How long a server may take (connect, write, reply) before the client gets SERVER_ERROR.
    pub server_timeout: Duration,
    /// When a failing server is taken down, and how it is probed.
    pub health: HealthSettings,
    /// Longest a shutdown waits for requests in flight.
    pub shutdown_grace: Duration,
    /// Where the repair sets are spooled (the spool, `upkeep::spool`), if anywhere.
    pub repair_spool: Option<PathBuf>,
    /// Authentication, access rules, request limits ([`crate::access`]).
    pub access: AccessSettings,
    /// A TLS listener for clients beside the plain one (evented engine).
    pub tls: Option<TlsSettings>,
    /// TLS to every server ([`crate::upstream::tls`]).
    pub server_tls: Option<ServerTlsSettings>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// The seeds' design: net thread, queue, blocking worker pool.
    Pool,
    /// Event-loop threads sharing non-blocking server connections.
    Evented,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Pool => "pool",
            Engine::Evented => "evented",
        }
    }
}

#[derive(Debug, Clone)]
pub struct EngineSettings {
    pub kind: Engine,
    /// Worker threads of the pool engine.
    pub workers: usize,
    /// Event-loop threads of the evented engine.
    pub threads: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// Every key on every server.
    All,
    /// Keys on a consistent-hash ring with `replication` copies.
    Ketama,
    /// Keys on `hash % total weight` (twemproxy's `modula`) with `replication` copies.
    Modula,
    /// Every request to a server drawn at random (twemproxy's `random`), one copy.
    Random,
}

impl Distribution {
    /// The name the command line and twemproxy use.
    pub fn name(self) -> &'static str {
        match self {
            Distribution::All => "all",
            Distribution::Ketama => "ketama",
            Distribution::Modula => "modula",
            Distribution::Random => "random",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFrom {
    Primary,
    AnyReplica,
}

impl ReadFrom {
    pub fn name(self) -> &'static str {
        match self {
            ReadFrom::Primary => "primary",
            ReadFrom::AnyReplica => "any-replica",
        }
    }
}

/// When a keyed write counts as done ([`crate::upstream::repair_set`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WritePolicy {
    /// Every replica must succeed (a server that cannot be reached fails the write).
    #[default]
    All,
    /// More than half of the key's replicas answered; the others are repaired.
    Majority,
    /// The key's primary (or a majority) answered; the others are repaired.
    Primary,
}

impl WritePolicy {
    pub fn name(self) -> &'static str {
        match self {
            WritePolicy::All => "all",
            WritePolicy::Majority => "majority",
            WritePolicy::Primary => "primary",
        }
    }

    /// Whether replicas that missed a write are repaired (and avoided by reads until then).
    pub fn repairs(self) -> bool {
        self != WritePolicy::All
    }
}

impl FromStr for WritePolicy {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "all" => Ok(WritePolicy::All),
            "majority" => Ok(WritePolicy::Majority),
            "primary" => Ok(WritePolicy::Primary),
            _ => Err(format!("write policy must be `all`, `majority` or `primary`, not `{text}`")),
        }
    }
}

/// A route (`--route`, a `[[routes]]` table in the file): the keys that start with `prefix` go to
/// `pool` (the default pool when none is named) under `write_policy` (the pool's when none is
/// given). The longest matching prefix wins; keys no route matches go to the default pool under
/// its write policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixRoute {
    pub prefix: Vec<u8>,
    pub pool: Option<String>,
    pub write_policy: Option<WritePolicy>,
    /// The pool that takes the route's requests while the server they would go to is down or
    /// fails them ([`Gutter`]); none: the default pool's keys keep `--gutter`.
    pub gutter: Option<String>,
    /// Longest expiry of an item written to the gutter (else `--gutter-ttl`).
    pub gutter_ttl: Option<u32>,
}

/// A gutter (mcrouter's `FailoverWithExptimeRoute`, the gutter pool of Facebook's memcache
/// paper): while the server a key's request would go to is down, refuses the connection or
/// times out, the request goes to the gutter pool's server for the key instead, and what it
/// writes there expires within `ttl` seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GutterSettings {
    pub pool: String,
    pub ttl: u32,
}

/// `--gutter-ttl`'s default: items written to a gutter live 10 seconds at most.
pub const DEFAULT_GUTTER_TTL: u32 = 10;

/// The longest `gutter_ttl`: 30 days, past which memcached reads an expiry as a point in time.
pub const MAX_GUTTER_TTL: u32 = 30 * 24 * 3600;

/// The longest prefix a route takes (a key is at most 250 bytes).
const MAX_PREFIX: usize = 250;

impl PrefixRoute {
    /// A route from a table `{ prefix = "hot:", pool = "hot", write_policy = "majority" }` (the
    /// `[[routes]]` form; `pool` and `write_policy` are each optional, one of them is needed).
    pub fn from_table(table: &toml::Table) -> Result<PrefixRoute, String> {
        const KEYS: [&str; 5] = ["prefix", "pool", "write_policy", "gutter", "gutter_ttl"];
        if let Some(key) = table.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(format!("a route has an unknown key `{key}` ({})", KEYS.join(", ")));
        }
        let text = |key: &str| match table.get(key) {
            None => Ok(None),
            Some(toml::Value::String(text)) => Ok(Some(text.clone())),
            Some(_) => Err(format!("a route's `{key}` must be a string")),
        };
        let prefix = text("prefix")?.ok_or("a route needs a `prefix`")?;
        let pool = text("pool")?;
        let write_policy = text("write_policy")?.map(|p| p.parse()).transpose()?;
        let gutter = text("gutter")?;
        let gutter_ttl = match table.get("gutter_ttl") {
            None => None,
            Some(toml::Value::Integer(n)) if (1..=MAX_GUTTER_TTL as i64).contains(n) => Some(*n as u32),
            Some(_) => {
                return Err(format!("the route `{prefix}`: `gutter_ttl` is whole seconds from 1 to {MAX_GUTTER_TTL}"))
            }
        };
        if pool.is_none() && write_policy.is_none() && gutter.is_none() {
            return Err(format!("the route `{prefix}` names neither a `pool` nor a `write_policy` nor a `gutter`"));
        }
        if gutter_ttl.is_some() && gutter.is_none() {
            return Err(format!("the route `{prefix}` has a `gutter_ttl` but no `gutter`"));
        }
        for name in pool.iter().chain(&gutter) {
            valid_pool_name(name)?;
        }
        Ok(PrefixRoute { prefix: valid_prefix(&prefix)?, pool, write_policy, gutter, gutter_ttl })
    }

    /// The route as the inline table `--route` takes (what a `[[routes]]` table becomes).
    pub fn to_inline(&self) -> String {
        let mut parts = vec![format!("prefix = {}", toml::Value::from(String::from_utf8_lossy(&self.prefix).as_ref()))];
        if let Some(pool) = &self.pool {
            parts.push(format!("pool = {}", toml::Value::from(pool.as_str())));
        }
        if let Some(policy) = self.write_policy {
            parts.push(format!("write_policy = \"{}\"", policy.name()));
        }
        if let Some(gutter) = &self.gutter {
            parts.push(format!("gutter = {}", toml::Value::from(gutter.as_str())));
        }
        if let Some(ttl) = self.gutter_ttl {
            parts.push(format!("gutter_ttl = {ttl}"));
        }
        format!("{{ {} }}", parts.join(", "))
    }

    /// How `stats` shows the route: `PREFIX -> POOL (POLICY)`.
    pub fn describe(&self) -> String {
        let prefix = String::from_utf8_lossy(&self.prefix);
        let pool = self.pool.as_deref().unwrap_or(DEFAULT_POOL);
        let mut text = format!("{prefix} -> {pool}");
        if let Some(policy) = self.write_policy {
            text.push_str(&format!(" ({})", policy.name()));
        }
        if let Some(gutter) = &self.gutter {
            text.push_str(&format!(", gutter {gutter}"));
            if let Some(ttl) = self.gutter_ttl {
                text.push_str(&format!(" ({ttl} s)"));
            }
        }
        text
    }
}

fn valid_prefix(prefix: &str) -> Result<Vec<u8>, String> {
    if prefix.is_empty() || prefix.len() > MAX_PREFIX || prefix.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(format!(
            "a route's prefix must be 1 to {MAX_PREFIX} bytes with no spaces or control characters, not `{prefix}`"
        ));
    }
    Ok(prefix.as_bytes().to_vec())
}

/// What the pool of the top-level `servers` is called (in routes, `stats` and metrics).
pub const DEFAULT_POOL: &str = "default";

/// A pool's name: a word of letters, digits, `_` and `-`, at most 64 bytes.
pub fn valid_pool_name(name: &str) -> Result<(), String> {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    if name.is_empty() || name.len() > 64 || !name.bytes().all(word) {
        return Err(format!("a pool's name is 1 to 64 letters, digits, `_` or `-`, not `{name}`"));
    }
    Ok(())
}

impl FromStr for PrefixRoute {
    type Err = String;
    /// `PREFIX=POLICY` (the prefix may itself hold `=`: the last one separates), or an inline
    /// table `{ prefix = "hot:", pool = "hot" }`.
    fn from_str(text: &str) -> Result<Self, String> {
        if text.trim_start().starts_with('{') {
            let table: toml::Table = format!("route = {text}")
                .parse::<toml::Table>()
                .ok()
                .and_then(|mut t| match t.remove("route") {
                    Some(toml::Value::Table(table)) => Some(table),
                    _ => None,
                })
                .ok_or_else(|| format!("a route table must be a TOML inline table, not `{text}`"))?;
            return PrefixRoute::from_table(&table);
        }
        let (prefix, policy) =
            text.rsplit_once('=').ok_or_else(|| format!("a route is PREFIX=POLICY, not `{text}`"))?;
        Ok(PrefixRoute {
            prefix: valid_prefix(prefix)?,
            pool: None,
            write_policy: Some(policy.parse()?),
            gutter: None,
            gutter_ttl: None,
        })
    }
}

/// Where requests go (see [`crate::routing`]).
#[derive(Debug, Clone)]
pub struct Routing {
    pub sharded: bool,
    pub distribution: Distribution,
    pub hash: KeyHash,
    /// The part of a key that is hashed (twemproxy's `hash_tag`); none: the whole key.
    pub hash_tag: Option<HashTag>,
    /// Copies of each key with ketama, resolved against the number of servers.
    pub replication: usize,
    pub read_from: ReadFrom,
    /// Retry a failed read on the key's next replica (ketama and modula only).
    pub failover: bool,
    /// When a keyed write of the pool counts as done, unless its route says otherwise.
    pub write_policy: WritePolicy,
}

impl Routing {
    /// Whether a failed read is retried on another replica: asked for with ketama or modula, and
    /// always under a write policy that repairs (a replica that cannot answer is expected there).
    pub fn fails_over(&self) -> bool {
        let replicated = matches!(self.distribution, Distribution::Ketama | Distribution::Modula);
        (self.failover && replicated) || self.write_policy.repairs()
    }
}

/// A pool of servers besides the default one (`[pools.NAME]` in the file, `--pool`): its own
/// servers and its own placement, replication and write policy. Routes send key prefixes to it.
#[derive(Debug, Clone)]
pub struct NamedPool {
    pub name: String,
    pub servers: Vec<Endpoint>,
    pub routing: Routing,
}

/// What one client may do.
#[derive(Debug, Clone)]
pub struct ClientLimits {
    /// Most clients connected at once.
    pub max_clients: usize,
    /// Largest value accepted in a storage command.
    pub max_value_size: usize,
    /// Requests one client may have in flight (evented engine; the pool serves one at a time):
    /// beyond it the rest of its pipeline waits unread.
    pub max_in_flight: usize,
    /// Bytes held for one client before its requests are no longer read ([`crate::client::budget`]).
    pub client_budget: usize,
}

#[derive(Debug, Clone)]
pub struct Measurement {
    /// Where windows.jsonl, summary.json and requests.csv go.
    pub stats_dir: Option<PathBuf>,
    pub window: Duration,
    /// Log every N-th request with all its timestamps.
    pub request_log_sample: Option<u64>,
    /// One line per window on stderr.
    pub verbose: bool,
    /// Where Prometheus scrapes `/metrics`.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// `/metrics` over HTTPS with this certificate.
    pub metrics_tls: Option<MetricsTls>,
    /// The longest a connection to `/metrics` stays open, from accept to close (the TLS
    /// handshake included).
    pub metrics_timeout: Duration,
}

/// A replication factor, resolved against the number of servers at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    Count(usize),
    Half,
    All,
}

impl FromStr for Replication {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "half" => Ok(Replication::Half),
            "all" | "full" => Ok(Replication::All),
            "none" => Ok(Replication::Count(1)),
            _ => match text.parse::<usize>() {
                Ok(n) if n >= 1 => Ok(Replication::Count(n)),
                _ => Err(format!("replication must be a number >= 1, `half` or `all`, not `{text}`")),
            },
        }
    }
}

impl Replication {
    /// Copies per key with `servers` servers: half is ⌈S/2⌉ as in seed 001.
    pub fn resolve(self, servers: usize) -> Result<usize, String> {
        match self {
            Replication::Half => Ok(servers.div_ceil(2)),
            Replication::All => Ok(servers),
            Replication::Count(n) if n <= servers => Ok(n),
            Replication::Count(n) => Err(format!("--replication {n} is more than the {servers} servers given")),
        }
    }
}

impl Settings {
    /// The distinct TLS settings of the servers (every pool's), in the order first met.
    pub fn server_tls_settings(&self) -> Vec<&ServerTlsSettings> {
        let mut distinct: Vec<&ServerTlsSettings> = Vec::new();
        for tls in self.all_servers().filter_map(|s| s.tls.as_ref()) {
            if !distinct.contains(&tls) {
                distinct.push(tls);
            }
        }
        distinct
    }

    /// Every server of every pool: the default pool's first, then each named pool's in order.
    /// Server ids ([`crate::upstream::registry`]) are handed out in this order.
    pub fn all_servers(&self) -> impl Iterator<Item = &Endpoint> {
        self.servers.iter().chain(self.pools.iter().flat_map(|pool| pool.servers.iter()))
    }

    /// The settings as `summary.json` reports them.
    pub fn describe(&self) -> Value {
        json!({
            "listen": self.listen.as_ref().map_or("none", |l| l.name.as_str()),
            "servers": self.servers.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            "engine": self.engine.kind.name(),
            "workers": self.engine.workers,
            "threads": self.engine.threads,
            "sharded": self.routing.sharded,
            "distribution": self.routing.distribution.name(),
            "hash": self.routing.hash.to_string(),
            "hash_tag": self.routing.hash_tag.map(|tag| tag.to_string()),
            "replication": self.routing.replication,
            "read_from": self.routing.read_from.name(),
            "failover": self.routing.failover,
            "write_policy": self.routing.write_policy.name(),
            "pools": self.pools.iter().map(|pool| json!({
                "name": pool.name,
                "servers": pool.servers.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
                "sharded": pool.routing.sharded,
                "distribution": pool.routing.distribution.name(),
                "hash": pool.routing.hash.to_string(),
                "replication": pool.routing.replication,
                "read_from": pool.routing.read_from.name(),
                "failover": pool.routing.failover,
                "write_policy": pool.routing.write_policy.name(),
            })).collect::<Vec<_>>(),
            "routes": self.routes.iter().map(|r| json!({
                "prefix": String::from_utf8_lossy(&r.prefix),
                "pool": r.pool.as_deref().unwrap_or(DEFAULT_POOL),
                "write_policy": r.write_policy.map(WritePolicy::name),
                "gutter": r.gutter,
                "gutter_ttl": r.gutter_ttl,
            })).collect::<Vec<_>>(),
            "gutter": self.gutter.as_ref().map(|g| json!({"pool": g.pool, "ttl": g.ttl})),
            "server_timeout_ms": self.server_timeout.as_millis() as u64,
            "down_after": self.health.down_after,
            "stats_window_s": self.measurement.window.as_secs_f64(),
            "request_log_sample": self.measurement.request_log_sample,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_prefix_equals_policy_or_a_table() {
        let plain: PrefixRoute = "p=x=primary".parse().unwrap();
        assert_eq!(
            (plain.prefix.as_slice(), plain.pool, plain.write_policy),
            (&b"p=x"[..], None, Some(WritePolicy::Primary))
        );
        let table: PrefixRoute = r#"{ prefix = "hot:", pool = "hot" }"#.parse().unwrap();
        assert_eq!(
            (table.prefix.as_slice(), table.pool.as_deref(), table.write_policy),
            (&b"hot:"[..], Some("hot"), None)
        );
        assert_eq!(table.to_inline().parse::<PrefixRoute>().unwrap(), table);
        assert_eq!(table.describe(), "hot: -> hot");
    }

    #[test]
    fn bad_routes_say_why() {
        for (route, says) in [
            ("nosign", "PREFIX=POLICY"),
            ("=all", "1 to 250 bytes"),
            ("a b=all", "no spaces"),
            ("s:=most", "`all`, `majority` or `primary`"),
            (r#"{ prefix = "a" }"#, "neither a `pool` nor a `write_policy` nor a `gutter`"),
            (r#"{ prefix = "a", pool = "p", gutter_ttl = 5 }"#, "a `gutter_ttl` but no `gutter`"),
            (r#"{ prefix = "a", gutter = "g", gutter_ttl = 0 }"#, "whole seconds from 1"),
            (r#"{ prefix = "a", pool = "b c" }"#, "a pool's name"),
            (r#"{ prefix = "a", pol = "b" }"#, "unknown key `pol`"),
            ("{ prefix = ", "inline table"),
        ] {
            let error = route.parse::<PrefixRoute>().unwrap_err();
            assert!(error.contains(says), "{route}: {error}");
        }
    }
}

/// When a server is taken down and how it is probed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthSettings {
    /// Consecutive failures that take a server down; 0 never does.
    pub down_after: u32,
    /// The first probe's delay after a server went down; it doubles per failed probe.
    pub probe_first: Duration,
    /// The longest delay between probes.
    pub probe_max: Duration,
    /// How long a restarted server stays cold (its misses retried on a replica and written
    /// back); zero turns warming off.
    pub warm_for: Duration,
    /// How often the servers that are up are asked for their `pid` and `uptime`.
    pub restart_check: Duration,
    /// Most keys waiting for repair per server ([`crate::upstream::repair_set`]).
    pub repair_max_keys: usize,
}

impl Default for HealthSettings {
    fn default() -> Self {
        HealthSettings {
            down_after: 3,
            probe_first: Duration::from_millis(100),
            probe_max: Duration::from_secs(5),
            warm_for: Duration::from_secs(60),
            restart_check: Duration::from_secs(1),
            repair_max_keys: 100_000,
        }
    }
}

/// Access control and amplification limits as configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessSettings {
    /// `--auth-file`: connections must log in as one of its users (memcached `-Y`).
    pub auth_file: Option<PathBuf>,
    /// `--access` / `[[access]]`.
    pub rules: Vec<Rule>,
    /// `--max-keys-per-get`: keys of one `get`/`gets`/`gat`/`gats`.
    pub max_keys_per_get: Option<usize>,
    /// `--max-reply-bytes`: bytes of one reply to a client.
    pub max_reply_bytes: Option<usize>,
    /// `--metrics-auth-file`: `/metrics` asks for HTTP basic authentication as one of its users
    /// (the auth file's format).
    pub metrics_auth_file: Option<PathBuf>,
    /// Client certificates are verified (`--tls-client-ca`): the names they carry are identities
    /// the rules may name, as the auth file's users are.
    pub certificate_identities: bool,
}
