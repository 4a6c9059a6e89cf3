//! The command line: every option of the middleware, validated once at start.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::ketama::KeyHash;

/// memcached middleware: replicates writes, balances reads, shards multi-gets, measures every
/// request.
#[derive(Parser, Debug, Clone)]
#[command(name = "memrelay", version, about, long_about = None)]
pub struct Args {
    /// Address to accept memcached clients on.
    #[arg(long, default_value = "127.0.0.1:11212", value_name = "HOST:PORT")]
    pub listen: String,

    /// A memcached server (repeat for several). Order matters: it numbers the servers.
    #[arg(long = "server", required = true, value_name = "HOST:PORT")]
    pub servers: Vec<String>,

    /// Scheduler: `evented` runs event-loop threads sharing non-blocking server connections
    /// (the faster one, see `make bench`); `pool` is the seeds' design (net thread, queue,
    /// blocking worker pool), the one the lab's experiments and queueing models study.
    #[arg(long, value_enum, default_value_t = Engine::Evented)]
    pub engine: Engine,

    /// Worker threads of the pool engine, each with one connection to every server.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=4096))]
    pub workers: u16,

    /// Event-loop threads of the evented engine (default: the number of cores).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,

    /// Split multi-key gets over the servers (seed 000 section 1.7.3); off: one server answers.
    #[arg(long)]
    pub sharded: bool,

    /// Where keys live: `all` writes every key to every server; `ketama` places keys on a
    /// consistent-hash ring (as twemproxy does) with `--replication` copies.
    #[arg(long, value_enum, default_value_t = Distribution::All)]
    pub distribution: Distribution,

    /// Key hash for the ketama ring (twemproxy's `hash:` setting).
    #[arg(long, default_value = "md5", value_name = "md5|fnv1a_64")]
    pub hash: KeyHash,

    /// Copies of each key with ketama: a number from 1 to the number of servers, `half` or `all`.
    #[arg(long, default_value = "1", value_name = "R|half|all")]
    pub replication: Replication,

    /// Which replica serves a read with ketama.
    #[arg(long, value_enum, default_value_t = ReadFrom::Primary)]
    pub read_from: ReadFrom,

    /// With ketama: retry a failed read on the key's next replica before answering SERVER_ERROR.
    #[arg(long)]
    pub failover: bool,

    /// How long a server may take to answer (connect, write, reply) before SERVER_ERROR.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub server_timeout_ms: u64,

    /// Most clients connected at once; more are answered SERVER_ERROR and closed.
    #[arg(long, default_value_t = 16384)]
    pub max_clients: usize,

    /// Largest value accepted in a storage command (memcached's default item size).
    #[arg(long, default_value_t = 1024 * 1024, value_name = "BYTES")]
    pub max_value_size: usize,

    /// Write measurements here: windows.jsonl, summary.json, requests.csv.
    #[arg(long, value_name = "DIR")]
    pub stats_dir: Option<PathBuf>,

    /// Length of a measurement window in seconds.
    #[arg(long, default_value_t = 1.0, value_name = "SECS")]
    pub stats_window: f64,

    /// Log every N-th request with all its timestamps to requests.csv.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub request_log_sample: Option<u64>,

    /// Print one line per measurement window on stderr.
    #[arg(long)]
    pub verbose: bool,

    /// Longest a shutdown waits for requests in flight.
    #[arg(long, default_value_t = 5000, value_name = "MS")]
    pub shutdown_grace_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    Pool,
    Evented,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Distribution {
    All,
    Ketama,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadFrom {
    Primary,
    AnyReplica,
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

/// The validated configuration the engines run with.
#[derive(Debug, Clone)]
pub struct Config {
    pub args: Args,
    pub listen: SocketAddr,
    pub servers: Vec<SocketAddr>,
    /// Server names as given (the ketama ring hashes these, as twemproxy hashes `host:port`).
    pub server_names: Vec<String>,
    pub replication: usize,
    pub server_timeout: Duration,
    pub stats_window: Duration,
    pub shutdown_grace: Duration,
}

impl Config {
    pub fn from_args(args: Args) -> Result<Config, String> {
        let listen = resolve(&args.listen).map_err(|e| format!("--listen {}: {e}", args.listen))?;
        let mut servers = Vec::with_capacity(args.servers.len());
        for name in &args.servers {
            servers.push(resolve(name).map_err(|e| format!("--server {name}: {e}"))?);
        }
        if args.servers.len() > 1024 {
            return Err("at most 1024 servers".into());
        }
        let replication = args.replication.resolve(servers.len())?;
        if args.distribution == Distribution::All && args.replication != Replication::Count(1) {
            return Err("--replication needs --distribution ketama (with `all`, every server has every key)".into());
        }
        if !(args.stats_window > 0.0 && args.stats_window <= 3600.0) {
            return Err(format!("--stats-window must be between 0 and 3600 seconds, not {}", args.stats_window));
        }
        if args.server_timeout_ms == 0 {
            return Err("--server-timeout-ms must be at least 1".into());
        }
        if args.max_value_size == 0 {
            return Err("--max-value-size must be at least 1".into());
        }
        Ok(Config {
            listen,
            server_names: args.servers.clone(),
            servers,
            replication,
            server_timeout: Duration::from_millis(args.server_timeout_ms),
            stats_window: Duration::from_secs_f64(args.stats_window),
            shutdown_grace: Duration::from_millis(args.shutdown_grace_ms),
            args,
        })
    }

    pub fn event_threads(&self) -> usize {
        self.args
            .threads
            .map(usize::from)
            .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
    }
}

fn resolve(name: &str) -> Result<SocketAddr, String> {
    name.to_socket_addrs().map_err(|e| e.to_string())?.next().ok_or_else(|| "resolves to no address".to_string())
}
