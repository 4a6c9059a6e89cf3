//! Typed settings, built once at start (by the binary from the command line) and read by
//! everything else: where to listen, the servers, the engine, routing, client limits and
//! measurement. No clap here: the library never sees the command line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde_json::{json, Value};

use crate::routing::ketama::KeyHash;

/// An address as given (the ketama ring hashes the name, as twemproxy hashes `host:port`) and
/// as resolved.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub addr: SocketAddr,
    pub name: String,
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: Endpoint,
    /// The servers, numbered by their order.
    pub servers: Vec<Endpoint>,
    pub engine: EngineSettings,
    pub routing: Routing,
    pub limits: ClientLimits,
    pub measurement: Measurement,
    /// How long a server may take (connect, write, reply) before the client gets SERVER_ERROR.
    pub server_timeout: Duration,
    /// When a failing server is taken down, and how it is probed.
    pub health: crate::health::HealthSettings,
    /// Longest a shutdown waits for requests in flight.
    pub shutdown_grace: Duration,
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFrom {
    Primary,
    AnyReplica,
}

/// Where requests go (see [`crate::routing`]).
#[derive(Debug, Clone)]
pub struct Routing {
    pub sharded: bool,
    pub distribution: Distribution,
    pub hash: KeyHash,
    /// Copies of each key with ketama, resolved against the number of servers.
    pub replication: usize,
    pub read_from: ReadFrom,
    /// Retry a failed read on the key's next replica (ketama only).
    pub failover: bool,
}

impl Routing {
    /// Whether a failed read is retried on another replica.
    pub fn fails_over(&self) -> bool {
        self.failover && self.distribution == Distribution::Ketama
    }
}

/// What one client may do.
#[derive(Debug, Clone)]
pub struct ClientLimits {
    /// Most clients connected at once.
    pub max_clients: usize,
    /// Largest value accepted in a storage command.
    pub max_value_size: usize,
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
            "listen": self.listen.name,
            "servers": self.servers.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            "engine": self.engine.kind.name(),
            "workers": self.engine.workers,
            "threads": self.engine.threads,
            "sharded": self.routing.sharded,
            "distribution": match self.routing.distribution {
                Distribution::All => "all",
                Distribution::Ketama => "ketama",
            },
            "hash": self.routing.hash.to_string(),
            "replication": self.routing.replication,
            "read_from": match self.routing.read_from {
                ReadFrom::Primary => "primary",
                ReadFrom::AnyReplica => "any-replica",
            },
            "failover": self.routing.failover,
            "server_timeout_ms": self.server_timeout.as_millis() as u64,
            "down_after": self.health.down_after,
            "stats_window_s": self.measurement.window.as_secs_f64(),
            "request_log_sample": self.measurement.request_log_sample,
        })
    }
}
