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
        Ok(Endpoint { addr, name: address.to_string(), address: address.to_string(), label: None, weight: 1 })
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
        Endpoint { addr: ([127, 0, 0, 1], port).into(), name: address.clone(), address, label: None, weight: 1 }
    }
}

#[derive(Debug, Clone)]
pub struct Settings {
    /// The plain listener; `None` (`--listen none`): clients come through the TLS listener only.
    pub listen: Option<Endpoint>,
    /// The servers, in their order (which breaks ties on the ring and numbers them in `stats`).
    pub servers: Vec<Endpoint>,
    pub engine: EngineSettings,
    pub routing: Routing,
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

/// The write policy of the keys that start with `prefix` (`--route PREFIX=POLICY`, a
/// `[[routes]]` table in the file): the longest matching prefix wins, and keys no route matches
/// take `--write-policy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixRoute {
    pub prefix: Vec<u8>,
    pub write_policy: WritePolicy,
}

impl FromStr for PrefixRoute {
    type Err = String;
    /// `PREFIX=POLICY`; the prefix may itself hold `=` (the last one separates).
    fn from_str(text: &str) -> Result<Self, String> {
        let (prefix, policy) =
            text.rsplit_once('=').ok_or_else(|| format!("a route is PREFIX=POLICY, not `{text}`"))?;
        if prefix.is_empty() || prefix.len() > 250 || prefix.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(format!(
                "a route's prefix must be 1 to 250 bytes with no spaces or control characters, not `{prefix}`"
            ));
        }
        Ok(PrefixRoute { prefix: prefix.as_bytes().to_vec(), write_policy: policy.parse()? })
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
    pub write_policies: WritePolicies,
}

impl Routing {
    /// Whether a failed read is retried on another replica: asked for with ketama or modula, and
    /// always under a write policy that repairs (a replica that cannot answer is expected there).
    pub fn fails_over(&self) -> bool {
        let replicated = matches!(self.distribution, Distribution::Ketama | Distribution::Modula);
        (self.failover && replicated) || self.write_policies.repair()
    }
}

/// The write policy of every key: per key prefix, and a default for keys no route names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WritePolicies {
    pub default: WritePolicy,
    pub routes: Vec<PrefixRoute>,
}

impl WritePolicies {
    /// One policy for every key.
    pub fn only(policy: WritePolicy) -> WritePolicies {
        WritePolicies { default: policy, routes: Vec::new() }
    }

    /// Whether any key's policy repairs replicas (so the repair machinery is in use).
    pub fn repair(&self) -> bool {
        self.default.repairs() || self.routes.iter().any(|r| r.write_policy.repairs())
    }

    /// The policy of `key`: its longest matching route's, else the default.
    pub fn of(&self, key: &[u8]) -> WritePolicy {
        self.routes
            .iter()
            .filter(|r| key.starts_with(&r.prefix))
            .max_by_key(|r| r.prefix.len())
            .map_or(self.default, |r| r.write_policy)
    }
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
            "read_from": match self.routing.read_from {
                ReadFrom::Primary => "primary",
                ReadFrom::AnyReplica => "any-replica",
            },
            "failover": self.routing.failover,
            "write_policy": self.routing.write_policies.default.name(),
            "routes": self.routing.write_policies.routes.iter().map(|r| json!({
                "prefix": String::from_utf8_lossy(&r.prefix),
                "write_policy": r.write_policy.name(),
            })).collect::<Vec<_>>(),
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
    fn the_longest_matching_route_chooses_the_write_policy() {
        let routes = ["s:=majority", "s:strict:=all", "p=x=primary"].map(|r| r.parse::<PrefixRoute>().unwrap());
        let policies = WritePolicies { default: WritePolicy::All, routes: routes.to_vec() };
        assert_eq!(policies.of(b"s:1"), WritePolicy::Majority);
        assert_eq!(policies.of(b"s:strict:1"), WritePolicy::All);
        assert_eq!(policies.of(b"p=x1"), WritePolicy::Primary);
        assert_eq!(policies.of(b"other"), WritePolicy::All);
        assert!(policies.repair());
        assert!(!WritePolicies::only(WritePolicy::All).repair());
    }

    #[test]
    fn bad_routes_say_why() {
        for (route, says) in [
            ("nosign", "PREFIX=POLICY"),
            ("=all", "1 to 250 bytes"),
            ("a b=all", "no spaces"),
            ("s:=most", "`all`, `majority` or `primary`"),
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
