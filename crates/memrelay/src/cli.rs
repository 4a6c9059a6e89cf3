//! The command line (binary side only): the clap definition of every option and its conversion,
//! validated once, into the library's typed [`Settings`]. Nothing in the library sees clap.

use memrelay::access::Policy;
use memrelay::settings::access_rules::Rule;
use memrelay::settings::AccessSettings;
use memrelay::settings::HealthSettings;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use memrelay::settings::{
    ClientLimits, Distribution, Endpoint, Engine, EngineSettings, GutterSettings, HashTag, Measurement, NamedPool,
    PrefixRoute, ReadFrom, Replication, Routing, Settings, WritePolicy, DEFAULT_POOL,
};
use memrelay::KeyHash;

/// memcached middleware: replicates writes, balances reads, shards multi-gets, measures every
/// request.
#[derive(Parser, Debug, Clone)]
#[command(name = "memrelay", version, about, long_about = None, args_override_self = true)]
pub struct Args {
    /// Read options from a TOML file first (keys are the long options: `server_timeout_ms = 500`,
    /// `servers = ["host:port", ...]`); options on the command line override it
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Validate the configuration (file and command line) and exit: 0 valid, 2 not
    #[arg(long, value_name = "FILE")]
    pub check_config: Option<PathBuf>,

    /// Address to accept memcached clients on; `none`: no plain listener, clients come through
    /// --tls-listen only (so none can skip the TLS client certificate).
    #[arg(long, default_value = "127.0.0.1:11212", value_name = "HOST:PORT|none")]
    pub listen: String,

    /// A memcached server (repeat for several), `HOST:PORT[:WEIGHT] [NAME]` as in twemproxy: the
    /// weight is its share of the keys with ketama and modula, the name is what the ring hashes (so a server
    /// can move to another address and keep its keys) and what logs and metrics call it.
    #[arg(long = "server", required = true, value_name = "HOST:PORT[:WEIGHT] [NAME]")]
    pub servers: Vec<String>,

    /// Scheduler: `evented` runs event-loop threads sharing non-blocking server connections
    /// (the faster one, see `make bench`); `pool` is the seeds' design (net thread, queue,
    /// blocking worker pool), the one the lab's experiments and queueing models study.
    #[arg(long, value_enum, default_value_t = EngineArg::Evented)]
    pub engine: EngineArg,

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
    /// consistent-hash ring and `modula` on `hash % total weight` (both as twemproxy does) with
    /// `--replication` copies; `random` sends every request to a server drawn at random (as
    /// twemproxy does: weights ignored, one copy).
    #[arg(long, value_enum, default_value_t = DistributionArg::All)]
    pub distribution: DistributionArg,

    /// Key hash of ketama and modula (twemproxy's `hash:`, computed as nutcracker does): md5,
    /// one_at_a_time, crc16, crc32, crc32a, fnv1_64, fnv1a_64, fnv1_32, fnv1a_32, hsieh, murmur,
    /// jenkins.
    #[arg(long, default_value = "md5", value_name = "NAME")]
    pub hash: KeyHash,

    /// Two characters around the part of a key that is hashed (twemproxy's `hash_tag:`): with
    /// `{}`, `user:{42}:name` is placed by `42`; a key without a non-empty tag by all of it.
    #[arg(long, value_name = "XY")]
    pub hash_tag: Option<HashTag>,

    /// Copies of each key with ketama or modula: a number from 1 to the number of servers, `half` or `all`.
    #[arg(long, default_value = "1", value_name = "R|half|all")]
    pub replication: Replication,

    /// Which replica serves a read with ketama or modula.
    #[arg(long, value_enum, default_value_t = ReadFromArg::Primary)]
    pub read_from: ReadFromArg,

    /// With ketama or modula: retry a failed read on the key's next replica before answering SERVER_ERROR.
    #[arg(long)]
    pub failover: bool,

    /// When a keyed write succeeds: every replica (`all`), more than half of them (`majority`), or
    /// the key's primary or a majority (`primary`); replicas that missed it are repaired.
    #[arg(long, value_enum, default_value_t = WritePolicyArg::All)]
    pub write_policy: WritePolicyArg,

    /// Where the keys starting with PREFIX go (repeatable; the longest matching prefix wins,
    /// other keys go to the default pool under --write-policy): `PREFIX=all|majority|primary`
    /// (a write policy, default pool), or a TOML inline table `{ prefix = "hot:", pool = "hot",
    /// write_policy = "majority" }` (pool and write policy each optional). In the file:
    /// `[[routes]]` tables
    #[arg(long = "route", value_name = "PREFIX=POLICY|{ prefix, pool, write_policy }")]
    pub routes: Vec<PrefixRoute>,

    /// The pool that stands in for a down or failing server of the default pool (mcrouter's
    /// FailoverWithExptimeRoute): its requests go to this pool's server for the key instead, and
    /// what is written there expires within --gutter-ttl. A route's `gutter` replaces it for the
    /// route's keys
    #[arg(long, value_name = "POOL")]
    pub gutter: Option<String>,

    /// Longest expiry, in seconds, of an item written to a gutter (an expiry of 0, never, gets
    /// this); a route's `gutter_ttl` replaces it for the route's keys
    #[arg(long, default_value_t = memrelay::settings::DEFAULT_GUTTER_TTL, value_name = "SECS",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(memrelay::settings::MAX_GUTTER_TTL)))]
    pub gutter_ttl: u32,

    /// A pool of servers besides the default one (repeatable), a TOML inline table: `{ name =
    /// "hot", servers = ["HOST:PORT", ...], distribution = "ketama", hash = "md5", replication
    /// = 2, read_from = "primary", failover = false, write_policy = "all", sharded = false }`
    /// (all but name and servers optional, defaults as the options of the same names). Routes
    /// send key prefixes to it. In the file: `[pools.NAME]` tables
    #[arg(long = "pool", value_name = "POOL")]
    pub pools: Vec<String>,

    /// How long a server may take to answer (connect, write, reply) before SERVER_ERROR.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub server_timeout_ms: u64,

    /// Consecutive failed exchanges after which a server is down: requests for it then fail at
    /// once (or fail over) until it answers a `version` probe. 0: never
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub down_after: u32,

    /// First probe of a down server after this long; the delay doubles per failed probe
    #[arg(long, default_value_t = 100, value_name = "MS")]
    pub probe_first_ms: u64,

    /// Longest delay between two probes of a down server
    #[arg(long, default_value_t = 5000, value_name = "MS")]
    pub probe_max_ms: u64,

    /// How long a restarted server stays cold: its read misses are retried on a replica and the
    /// value written back (where keys have more than one replica)
    #[arg(long, default_value_t = 60, value_name = "SECS")]
    pub warm_seconds: u64,

    /// Do not warm restarted servers
    #[arg(long)]
    pub no_warm: bool,

    /// How often the servers are asked for their pid and uptime, to notice a restart
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub restart_check_ms: u64,

    /// Most keys waiting for repair per server (majority/primary write policies); beyond it the
    /// server is flushed and fully resynced
    #[arg(long, default_value_t = 100_000, value_name = "KEYS")]
    pub repair_max_keys: usize,

    /// Keep the repair sets in files in DIR too, so that a restarted memrelay still repairs the
    /// replicas that missed writes before it stopped
    #[arg(long, value_name = "DIR")]
    pub repair_spool_dir: Option<PathBuf>,

    /// Most clients connected at once; more are answered SERVER_ERROR and closed.
    #[arg(long, default_value_t = 16384)]
    pub max_clients: usize,

    /// Requests one client may have in flight (evented engine); the rest of its pipeline waits
    /// unread until replies go out (counted as conn_yields)
    #[arg(long, default_value_t = 256, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub max_in_flight: u16,

    /// Bytes memrelay holds for one client (replies waiting, parts of a merge, a request being
    /// read) before it stops reading the client's requests; past this plus one value the client
    /// is cut off (counted as clients_cut_off) rather than a shared server connection paused
    #[arg(long, default_value_t = 4 * 1024 * 1024, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(65536..))]
    pub client_budget_bytes: u64,

    /// Largest value accepted in a storage command (memcached's default item size).
    #[arg(long, default_value_t = 1024 * 1024, value_name = "BYTES")]
    pub max_value_size: usize,

    /// Also accept clients over TLS here (evented engine), with --tls-cert and --tls-key
    #[arg(long, value_name = "HOST:PORT", requires_all = ["tls_cert", "tls_key"])]
    pub tls_listen: Option<String>,

    /// The TLS listener's certificate chain (PEM, leaf first)
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,

    /// The TLS listener's private key (PEM)
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,

    /// Oldest TLS version the listener takes
    #[arg(long, default_value = "1.2", value_parser = ["1.2", "1.3"])]
    pub tls_min_version: String,

    /// Ask TLS clients for a certificate signed by this CA (PEM); its name (subject CN, else the
    /// first DNS/e-mail/URI name) is the client's identity for the access rules
    #[arg(long, value_name = "FILE")]
    pub tls_client_ca: Option<PathBuf>,

    /// With --tls-client-ca: refuse clients without a certificate (required), or take them
    /// without an identity (optional)
    #[arg(long, default_value = "required", value_parser = ["required", "optional"])]
    pub tls_client_auth: String,

    /// A TLS handshake not finished in this time closes the connection
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    pub tls_handshake_timeout_ms: u64,

    /// TLS to every server: their certificates must chain to a CA of this PEM file and carry the
    /// host of the server's address as written (a DNS name or an IP address)
    #[arg(long, value_name = "FILE")]
    pub server_tls_ca: Option<PathBuf>,

    /// A client certificate chain (PEM, leaf first) for servers that ask for one (memcached
    /// `ssl_verify_mode=2`), with --server-tls-key
    #[arg(long, value_name = "FILE", requires = "server_tls_ca")]
    pub server_tls_cert: Option<PathBuf>,

    /// The client certificate's private key (PEM), with --server-tls-cert
    #[arg(long, value_name = "FILE", requires = "server_tls_ca")]
    pub server_tls_key: Option<PathBuf>,

    /// Oldest TLS version spoken to the servers: 12 (TLS 1.2) or 13 (TLS 1.3)
    #[arg(long, default_value = "12", value_parser = ["12", "13", "1.2", "1.3"], requires = "server_tls_ca")]
    pub server_tls_min_version: String,

    /// Clients must log in as a user of this file (memcached `-Y` format, `user:password` lines)
    /// with memcached's ASCII authentication; read again on SIGHUP
    #[arg(long, value_name = "FILE")]
    pub auth_file: Option<PathBuf>,

    /// An access rule (repeat; `[[access]]` tables in the file), a TOML inline table:
    /// `{ identity = "tenant-a", prefixes = ["a:"], read_only = false, admin = ["flush_all"] }`
    #[arg(long = "access", value_name = "RULE")]
    pub access: Vec<String>,

    /// Most keys in one get/gets/gat/gats; more are refused with CLIENT_ERROR too many keys
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_keys_per_get: Option<u64>,

    /// Most bytes of one reply to a client (a multi-get's values over every server); a larger
    /// one is answered SERVER_ERROR reply too large
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_reply_bytes: Option<u64>,

    /// /metrics asks for HTTP basic authentication (Prometheus' basic_auth) as a user of this
    /// file (`user:password` lines, the auth file's format); wrong credentials are throttled per
    /// peer address as failed logins are (429 past 5 at once, then one a second); read again on
    /// SIGHUP
    #[arg(long, value_name = "FILE")]
    pub metrics_auth_file: Option<PathBuf>,

    /// Write measurements here: windows.jsonl, summary.json, requests.csv.
    #[arg(long, value_name = "DIR")]
    pub stats_dir: Option<PathBuf>,

    /// Serve Prometheus metrics (OpenMetrics text) at http://HOST:PORT/metrics
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_listen: Option<String>,

    /// Serve /metrics over HTTPS (https://HOST:PORT/metrics) with this certificate chain (PEM),
    /// with --metrics-tls-key
    #[arg(long, value_name = "FILE")]
    pub metrics_tls_cert: Option<PathBuf>,

    /// The private key (PEM) of --metrics-tls-cert
    #[arg(long, value_name = "FILE")]
    pub metrics_tls_key: Option<PathBuf>,

    /// The longest a connection to /metrics stays open, from accept to close, the TLS handshake
    /// included (a scrape takes milliseconds; a slow or silent client is cut here)
    #[arg(long, default_value_t = 10_000, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub metrics_timeout_ms: u64,

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    Pool,
    Evented,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DistributionArg {
    All,
    Ketama,
    Modula,
    Random,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WritePolicyArg {
    All,
    Majority,
    Primary,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReadFromArg {
    Primary,
    AnyReplica,
}

impl Args {
    /// Validates the options together and builds the typed settings; the error names the option.
    pub fn into_settings(self) -> Result<Settings, String> {
        let listen = match self.listen.as_str() {
            "none" if self.tls_listen.is_none() => {
                return Err("--listen none needs --tls-listen (clients need a listener)".into());
            }
            "none" => None,
            listen => Some(endpoint(listen).map_err(|e| format!("--listen {listen}: {e}"))?),
        };
        let access = self.access_settings()?;
        let tls = self.tls_settings()?;
        let metrics_tls = self.metrics_tls()?;
        let server_tls = self.server_tls_settings()?;
        let mut taken = Vec::new();
        let servers = server_list(&self.servers, server_tls.as_ref(), &mut taken, "--server")?;
        let write_policy = match self.write_policy {
            WritePolicyArg::All => WritePolicy::All,
            WritePolicyArg::Majority => WritePolicy::Majority,
            WritePolicyArg::Primary => WritePolicy::Primary,
        };
        let read_from = match self.read_from {
            ReadFromArg::Primary => ReadFrom::Primary,
            ReadFromArg::AnyReplica => ReadFrom::AnyReplica,
        };
        let options = RoutingOptions {
            sharded: self.sharded,
            distribution: self.distribution,
            hash: self.hash,
            hash_tag: self.hash_tag,
            replication: self.replication,
            read_from,
            failover: self.failover,
            write_policy,
        };
        let routing = options.resolve(servers.len(), "--")?;
        let mut pools: Vec<NamedPool> = Vec::with_capacity(self.pools.len());
        for text in &self.pools {
            let pool = named_pool(text, server_tls.as_ref(), &mut taken)?;
            if pools.iter().any(|p| p.name == pool.name) {
                return Err(format!("two pools are named `{}`", pool.name));
            }
            pools.push(pool);
        }
        if taken.len() > 1024 {
            return Err("at most 1024 servers, over every pool".into());
        }
        for route in &self.routes {
            for name in route.pool.iter().chain(&route.gutter) {
                if name != DEFAULT_POOL && !pools.iter().any(|p| &p.name == name) {
                    let known: Vec<&str> =
                        std::iter::once(DEFAULT_POOL).chain(pools.iter().map(|p| p.name.as_str())).collect();
                    return Err(format!(
                        "the route `{}` names the pool `{name}`, which is not configured (pools: {})",
                        String::from_utf8_lossy(&route.prefix),
                        known.join(", ")
                    ));
                }
            }
        }
        // One server drawn per request keeps no replica a write policy could repair.
        let random = |name: &str| match pools.iter().find(|p| p.name == name) {
            Some(pool) => pool.routing.distribution == Distribution::Random,
            None => routing.distribution == Distribution::Random,
        };
        for route in &self.routes {
            let pool = route.pool.as_deref().unwrap_or(DEFAULT_POOL);
            if random(pool) && route.write_policy.is_some_and(|p| p != WritePolicy::All) {
                return Err(format!(
                    "the route `{}`: the pool `{pool}` draws a server per request (distribution random) and takes only the write policy `all`",
                    String::from_utf8_lossy(&route.prefix)
                ));
            }
        }
        if !(self.stats_window > 0.0 && self.stats_window <= 3600.0) {
            return Err(format!("--stats-window must be between 0 and 3600 seconds, not {}", self.stats_window));
        }
        if self.server_timeout_ms == 0 {
            return Err("--server-timeout-ms must be at least 1".into());
        }
        if self.probe_first_ms == 0 || self.probe_max_ms < self.probe_first_ms {
            return Err("--probe-first-ms must be at least 1 and at most --probe-max-ms".into());
        }
        if self.max_value_size == 0 {
            return Err("--max-value-size must be at least 1".into());
        }
        let threads = self
            .threads
            .map(usize::from)
            .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
        Ok(Settings {
            listen,
            servers,
            engine: EngineSettings {
                kind: match self.engine {
                    EngineArg::Pool => Engine::Pool,
                    EngineArg::Evented => Engine::Evented,
                },
                workers: usize::from(self.workers),
                threads,
            },
            routing,
            pools,
            routes: self.routes,
            gutter: self.gutter.map(|pool| GutterSettings { pool, ttl: self.gutter_ttl }),
            limits: ClientLimits {
                max_clients: self.max_clients,
                max_value_size: self.max_value_size,
                max_in_flight: usize::from(self.max_in_flight),
                client_budget: usize::try_from(self.client_budget_bytes).unwrap_or(usize::MAX),
            },
            measurement: Measurement {
                stats_dir: self.stats_dir,
                window: Duration::from_secs_f64(self.stats_window),
                request_log_sample: self.request_log_sample,
                verbose: self.verbose,
                metrics_listen: match &self.metrics_listen {
                    Some(name) => Some(endpoint(name).map_err(|e| format!("--metrics-listen {name}: {e}"))?.addr),
                    None => None,
                },
                metrics_tls,
                metrics_timeout: Duration::from_millis(self.metrics_timeout_ms),
            },
            server_timeout: Duration::from_millis(self.server_timeout_ms),
            health: HealthSettings {
                down_after: self.down_after,
                probe_first: Duration::from_millis(self.probe_first_ms),
                probe_max: Duration::from_millis(self.probe_max_ms),
                warm_for: Duration::from_secs(if self.no_warm { 0 } else { self.warm_seconds }),
                restart_check: Duration::from_millis(self.restart_check_ms.max(1)),
                repair_max_keys: self.repair_max_keys.max(1),
            },
            shutdown_grace: Duration::from_millis(self.shutdown_grace_ms),
            repair_spool: self.repair_spool_dir,
            access,
            tls,
            server_tls,
        })
    }
}

impl Args {
    /// The TLS listener, its files read once here so that a bad one is refused at start.
    fn tls_settings(&self) -> Result<Option<memrelay::TlsSettings>, String> {
        let Some(listen) = &self.tls_listen else {
            return match self.tls_client_ca {
                Some(_) => Err("--tls-client-ca needs --tls-listen".into()),
                None => Ok(None),
            };
        };
        if self.engine != EngineArg::Evented {
            return Err(
                "--tls-listen needs --engine evented (the pool's workers write to client sockets themselves)".into()
            );
        }
        let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) else {
            return Err("--tls-listen needs --tls-cert and --tls-key".into());
        };
        let settings = memrelay::TlsSettings {
            listen: endpoint(listen).map_err(|e| format!("--tls-listen {listen}: {e}"))?.addr,
            cert: cert.clone(),
            key: key.clone(),
            min_version: if self.tls_min_version == "1.3" { 13 } else { 12 },
            client_ca: self.tls_client_ca.clone(),
            client_cert_optional: self.tls_client_auth == "optional",
            handshake_timeout: Duration::from_millis(self.tls_handshake_timeout_ms),
        };
        if self.tls_handshake_timeout_ms == 0 {
            return Err("--tls-handshake-timeout-ms must be at least 1".into());
        }
        memrelay::client_tls_config(&settings)?;
        Ok(Some(settings))
    }

    /// `/metrics` over HTTPS, its files read once here so that a bad one is refused at start.
    fn metrics_tls(&self) -> Result<Option<memrelay::MetricsTls>, String> {
        let tls = match (&self.metrics_tls_cert, &self.metrics_tls_key) {
            (None, None) => return Ok(None),
            (Some(cert), Some(key)) => memrelay::MetricsTls { cert: cert.clone(), key: key.clone() },
            _ => return Err("--metrics-tls-cert and --metrics-tls-key go together".into()),
        };
        if self.metrics_listen.is_none() {
            return Err("--metrics-tls-cert needs --metrics-listen".into());
        }
        memrelay::metrics_tls_config(&tls)?;
        Ok(Some(tls))
    }

    /// TLS to the servers, its files read once here so that a bad one is refused at start.
    fn server_tls_settings(&self) -> Result<Option<memrelay::ServerTlsSettings>, String> {
        let Some(ca) = &self.server_tls_ca else { return Ok(None) };
        let settings = memrelay::ServerTlsSettings {
            ca: ca.clone(),
            cert: self.server_tls_cert.clone(),
            key: self.server_tls_key.clone(),
            min_version: if matches!(self.server_tls_min_version.as_str(), "13" | "1.3") { 13 } else { 12 },
        };
        memrelay::server_tls_config(&settings)?;
        Ok(Some(settings))
    }

    /// Authentication, rules and request limits, checked together (the auth file is read once
    /// here so that a bad one is refused at start, with `--check-config` too).
    fn access_settings(&self) -> Result<AccessSettings, String> {
        let mut rules = Vec::with_capacity(self.access.len());
        for text in &self.access {
            rules.push(Rule::parse(text)?);
        }
        let settings = AccessSettings {
            auth_file: self.auth_file.clone(),
            rules,
            max_keys_per_get: self.max_keys_per_get.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            max_reply_bytes: self.max_reply_bytes.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            metrics_auth_file: self.metrics_auth_file.clone(),
            certificate_identities: self.tls_listen.is_some() && self.tls_client_ca.is_some(),
        };
        if settings.metrics_auth_file.is_some() && self.metrics_listen.is_none() {
            return Err("--metrics-auth-file needs --metrics-listen".into());
        }
        Policy::build(&settings, 0)?;
        Ok(settings)
    }
}

/// The options that place keys on a pool's servers, before they are checked against the number
/// of servers (the top level's options, or a `[pools.NAME]` table's keys).
struct RoutingOptions {
    sharded: bool,
    distribution: DistributionArg,
    hash: KeyHash,
    hash_tag: Option<HashTag>,
    replication: Replication,
    read_from: ReadFrom,
    failover: bool,
    write_policy: WritePolicy,
}

impl RoutingOptions {
    /// The routing of a pool of `servers` servers; an error names the option as `{dashes}name`
    /// (`--replication`, or `pool hot: replication`).
    fn resolve(self, servers: usize, dashes: &str) -> Result<Routing, String> {
        let distribution = match self.distribution {
            DistributionArg::All => Distribution::All,
            DistributionArg::Ketama => Distribution::Ketama,
            DistributionArg::Modula => Distribution::Modula,
            DistributionArg::Random => Distribution::Random,
        };
        let one_copy = self.replication == Replication::Count(1);
        let problem = match distribution {
            Distribution::Ketama | Distribution::Modula => None,
            // With `all` a failed read is never retried on another server (only a repairing
            // write policy turns failover on there): the option would be accepted and do nothing.
            Distribution::All if self.failover => Some(format!(
                "{dashes}failover needs {dashes}distribution ketama or modula (with `all` no read is retried on another server; a write policy that repairs fails over by itself)"
            )),
            Distribution::All if !one_copy => Some(format!(
                "{dashes}replication needs {dashes}distribution ketama or modula (with `all`, every server has every key)"
            )),
            Distribution::All => None,
            // A random server per request: a key has no servers of its own, so nothing can be
            // replicated, failed over to, repaired or hashed.
            Distribution::Random if !one_copy => Some(format!(
                "{dashes}replication needs {dashes}distribution ketama or modula (with `random` every request goes to one server drawn at random: a key has no replicas)"
            )),
            Distribution::Random if self.failover => Some(format!(
                "{dashes}failover needs {dashes}distribution ketama or modula (with `random` a key has no next replica to retry on)"
            )),
            Distribution::Random if self.write_policy != WritePolicy::All => Some(format!(
                "{dashes}distribution random takes only the write policy `all` (with one server drawn per request there is no replica to repair)"
            )),
            Distribution::Random if self.hash_tag.is_some() => Some(format!(
                "{dashes}hash-tag needs {dashes}distribution ketama or modula (with `random` no key is hashed)"
            )),
            Distribution::Random => None,
        };
        if let Some(problem) = problem {
            return Err(problem);
        }
        let replication = self.replication.resolve(servers).map_err(|e| e.replace("--", dashes))?;
        Ok(Routing {
            sharded: self.sharded,
            distribution,
            hash: self.hash,
            hash_tag: self.hash_tag,
            replication,
            read_from: self.read_from,
            failover: self.failover,
            write_policy: self.write_policy,
        })
    }
}

/// Parses server specs (`--server`, a pool's `servers`), refusing an address or a name that
/// `taken` (the servers of every pool so far) already holds; adds them to `taken`.
fn server_list(
    specs: &[String],
    tls: Option<&memrelay::ServerTlsSettings>,
    taken: &mut Vec<Endpoint>,
    what: &str,
) -> Result<Vec<Endpoint>, String> {
    if specs.len() > 1024 {
        return Err(format!("{what}: at most 1024 servers"));
    }
    let mut servers = Vec::with_capacity(specs.len());
    for spec in specs {
        let mut server = Endpoint::server(spec).map_err(|e| format!("{what} {}: {e}", memrelay::shown(spec, 120)))?;
        if tls.is_some() {
            memrelay::server_tls_name(&server.address).map_err(|e| format!("{what} {spec}: with TLS, {e}"))?;
        }
        server.tls = tls.cloned();
        if let Some(twin) = taken.iter().find(|s| s.addr == server.addr) {
            return Err(format!("{what} {spec}: {} is already a server ({})", server.addr, twin.address));
        }
        if let Some(label) = &server.label {
            if taken.iter().any(|s| s.label.as_ref() == Some(label)) {
                return Err(format!("{what} {spec}: the name `{label}` is taken"));
            }
        }
        taken.push(server.clone());
        servers.push(server);
    }
    Ok(servers)
}

/// The keys a `[pools.NAME]` table (a `--pool` inline table) takes.
const POOL_KEYS: [&str; 15] = [
    "name",
    "servers",
    "sharded",
    "distribution",
    "hash",
    "hash_tag",
    "replication",
    "read_from",
    "failover",
    "write_policy",
    "server_tls",
    "server_tls_ca",
    "server_tls_cert",
    "server_tls_key",
    "server_tls_min_version",
];

/// A pool from its inline table (`--pool`); its servers are checked against `taken`. Its servers
/// speak TLS with its own `server_tls_*` keys, else with `tls` (`--server-tls-*`), unless
/// `server_tls = false`.
fn named_pool(
    text: &str,
    tls: Option<&memrelay::ServerTlsSettings>,
    taken: &mut Vec<Endpoint>,
) -> Result<NamedPool, String> {
    let table = match format!("pool = {text}").parse::<toml::Table>().map(|mut t| t.remove("pool")) {
        Ok(Some(toml::Value::Table(table))) => table,
        _ => {
            return Err(format!(
                "--pool must be a TOML inline table {{ name = ..., servers = [...] }}, not `{}`",
                memrelay::shown(text, 120)
            ))
        }
    };
    let name = match table.get("name") {
        Some(toml::Value::String(name)) => name.clone(),
        _ => return Err("a pool needs a `name` (in the file: the NAME of [pools.NAME])".into()),
    };
    memrelay::settings::valid_pool_name(&name)?;
    if name == DEFAULT_POOL {
        return Err(format!("`{DEFAULT_POOL}` is the pool of the top-level servers; name the pool otherwise"));
    }
    let bad = |what: String| format!("pool `{name}`: {what}");
    if let Some(key) = table.keys().find(|k| !POOL_KEYS.contains(&k.as_str())) {
        return Err(bad(format!("unknown key `{key}` (the keys: {})", POOL_KEYS[1..].join(", "))));
    }
    let text_of = |key: &str| match table.get(key) {
        None => Ok(None),
        Some(toml::Value::String(text)) => Ok(Some(text.clone())),
        Some(toml::Value::Integer(n)) => Ok(Some(n.to_string())),
        Some(_) => Err(bad(format!("`{key}` must be a string"))),
    };
    let flag = |key: &str| match table.get(key) {
        None => Ok(false),
        Some(toml::Value::Boolean(b)) => Ok(*b),
        Some(_) => Err(bad(format!("`{key}` must be true or false"))),
    };
    let specs: Vec<String> = match table.get("servers") {
        Some(toml::Value::Array(items)) if !items.is_empty() => items
            .iter()
            .map(|item| match item {
                toml::Value::String(spec) => Ok(spec.clone()),
                _ => Err(bad("`servers` must list \"HOST:PORT[:WEIGHT] [NAME]\" strings".into())),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(bad("needs `servers`, a list of at least one \"HOST:PORT[:WEIGHT] [NAME]\"".into())),
    };
    let path = |key: &str| text_of(key).map(|v| v.map(std::path::PathBuf::from));
    let own_tls = match (table.get("server_tls"), path("server_tls_ca")?) {
        (Some(toml::Value::Boolean(false)), None) => None,
        (Some(toml::Value::Boolean(false)), Some(_)) => {
            return Err(bad("`server_tls = false` and `server_tls_ca` contradict each other".into()))
        }
        (Some(toml::Value::Boolean(true)) | None, Some(ca)) => {
            let settings = memrelay::ServerTlsSettings {
                ca,
                cert: path("server_tls_cert")?,
                key: path("server_tls_key")?,
                min_version: match text_of("server_tls_min_version")?.as_deref() {
                    None | Some("12" | "1.2") => 12,
                    Some("13" | "1.3") => 13,
                    Some(other) => return Err(bad(format!("server_tls_min_version must be 12 or 13, not `{other}`"))),
                },
            };
            memrelay::server_tls_config(&settings).map_err(|e| bad(e.replace("--server-tls-", "server_tls_")))?;
            Some(settings)
        }
        (Some(toml::Value::Boolean(true)) | None, None) => {
            if ["server_tls_cert", "server_tls_key", "server_tls_min_version"].iter().any(|k| table.contains_key(*k)) {
                return Err(bad("the `server_tls_*` keys need `server_tls_ca`".into()));
            }
            tls.cloned()
        }
        (Some(_), _) => return Err(bad("`server_tls` must be true or false".into())),
    };
    let servers = server_list(&specs, own_tls.as_ref(), taken, &format!("pool `{name}`: server"))?;
    let parsed = |key: &str, default: &str| text_of(key).map(|v| v.unwrap_or_else(|| default.to_string()));
    let options = RoutingOptions {
        sharded: flag("sharded")?,
        distribution: <DistributionArg as ValueEnum>::from_str(&parsed("distribution", "all")?, false)
            .map_err(|e| bad(format!("distribution: {e}")))?,
        hash: parsed("hash", "md5")?.parse().map_err(|e| bad(format!("{e}")))?,
        hash_tag: text_of("hash_tag")?.map(|t| t.parse()).transpose().map_err(bad)?,
        replication: parsed("replication", "1")?.parse().map_err(|e: String| bad(e))?,
        read_from: match parsed("read_from", "primary")?.as_str() {
            "primary" => ReadFrom::Primary,
            "any-replica" | "any_replica" => ReadFrom::AnyReplica,
            other => return Err(bad(format!("read_from must be `primary` or `any-replica`, not `{other}`"))),
        },
        failover: flag("failover")?,
        write_policy: parsed("write_policy", "all")?.parse().map_err(|e: String| bad(e))?,
    };
    let routing = options.resolve(servers.len(), "").map_err(bad)?;
    Ok(NamedPool { name, servers, routing })
}

fn endpoint(name: &str) -> Result<Endpoint, String> {
    Endpoint::resolve(name)
}

/// clap's error in one line (scripts and the reload log read it), at start and on reload alike:
/// its first line without `error: `, and after "the following required arguments were not
/// provided:" the arguments clap lists on the lines below it.
pub fn error_line(error: &clap::Error) -> String {
    let message = error.to_string();
    let mut lines = message.lines().map(str::trim).skip_while(|l| l.is_empty());
    let first = lines.next().unwrap_or("bad options").trim_start_matches("error: ");
    if !first.ends_with(':') {
        return first.to_string();
    }
    let missing: Vec<&str> = lines.take_while(|l| !l.is_empty() && !l.starts_with("Usage:")).collect();
    let mut line = format!("{first} {}", missing.join(", "));
    if missing.iter().any(|arg| arg.starts_with("--server ")) {
        line.push_str(" (in a configuration file: servers = [\"HOST:PORT\", ...])");
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(argv: &[&str]) -> Result<Settings, String> {
        Args::try_parse_from(std::iter::once("memrelay").chain(argv.iter().copied())).unwrap().into_settings()
    }

    /// Issue 43, item 9: a reload of an empty file was refused with "required arguments were
    /// not provided:" naming none.
    #[test]
    fn a_missing_required_argument_is_named_in_one_line() {
        let error = Args::try_parse_from(["memrelay"]).unwrap_err();
        let line = error_line(&error);
        assert_eq!(
            line,
            "the following required arguments were not provided: --server <HOST:PORT[:WEIGHT] [NAME]> \
             (in a configuration file: servers = [\"HOST:PORT\", ...])"
        );
        let error = Args::try_parse_from(["memrelay", "--server", "a:1", "--no-such-option"]).unwrap_err();
        assert!(
            error_line(&error).starts_with("unexpected argument '--no-such-option' found"),
            "{}",
            error_line(&error)
        );
    }

    #[test]
    fn defaults() {
        let s = settings(&["--server", "127.0.0.1:1"]).unwrap();
        assert_eq!(s.engine.kind, Engine::Evented);
        assert_eq!(s.engine.workers, 8);
        assert_eq!(s.routing.replication, 1);
        assert_eq!(s.limits.max_value_size, 1024 * 1024);
        assert_eq!(s.server_timeout, Duration::from_millis(1000));
    }

    #[test]
    fn servers_take_a_weight_and_a_name_as_in_twemproxy() {
        let s =
            settings(&["--server", "127.0.0.1:1:3 alpha", "--server", "127.0.0.1:2", "--server", "[::1]:3"]).unwrap();
        let [a, b, c] = &s.servers[..] else { panic!() };
        assert_eq!(
            (a.name.as_str(), a.address.as_str(), a.label.as_deref(), a.weight),
            ("alpha", "127.0.0.1:1", Some("alpha"), 3)
        );
        assert_eq!((b.name.as_str(), b.label.as_deref(), b.weight), ("127.0.0.1:2", None, 1));
        assert_eq!((c.addr.port(), c.weight), (3, 1));
        let twice = settings(&["--server", "127.0.0.1:1", "--server", "127.0.0.1:1:2"]).unwrap_err();
        assert!(twice.contains("already a server"), "{twice}");
        let name_taken = settings(&["--server", "127.0.0.1:1 a", "--server", "127.0.0.1:2 a"]).unwrap_err();
        assert!(name_taken.contains("`a` is taken"), "{name_taken}");
        let zero = settings(&["--server", "127.0.0.1:1:0"]).unwrap_err();
        assert!(zero.contains("weight `0`"), "{zero}");
    }

    #[test]
    fn replication_needs_ketama_and_fits_the_servers() {
        let all = ["--server", "127.0.0.1:1", "--server", "127.0.0.1:2", "--replication", "2"];
        assert!(settings(&all).unwrap_err().contains("ketama"));
        let two = ["--server", "127.0.0.1:1", "--server", "127.0.0.1:2", "--distribution", "ketama"];
        let half = settings(&[&two[..], &["--replication", "half"]].concat()).unwrap();
        assert_eq!(half.routing.replication, 1);
        assert!(settings(&[&two[..], &["--replication", "3"]].concat()).unwrap_err().contains("more than"));
    }

    #[test]
    fn every_twemproxy_hash_and_distribution_is_taken() {
        let two = ["--server", "127.0.0.1:1:2", "--server", "127.0.0.1:2"];
        for hash in memrelay::KeyHash::ALL {
            for distribution in ["all", "ketama", "modula", "random"] {
                let args = [&two[..], &["--hash", hash.as_str(), "--distribution", distribution]].concat();
                let s = settings(&args).unwrap();
                assert_eq!((s.routing.hash, s.routing.distribution.name()), (hash, distribution));
            }
        }
        let error = Args::try_parse_from(["memrelay", "--server", "a:1", "--hash", "sha1"]).unwrap_err();
        assert!(error_line(&error).contains("jenkins"), "{}", error_line(&error));
    }

    #[test]
    fn a_hash_tag_is_two_characters() {
        let base = ["--server", "127.0.0.1:1", "--distribution", "modula"];
        let s = settings(&[&base[..], &["--hash-tag", "{}"]].concat()).unwrap();
        assert_eq!(s.routing.hash_tag, Some("{}".parse().unwrap()));
        assert_eq!(settings(&base).unwrap().routing.hash_tag, None);
        for bad in ["{", "{}}", ""] {
            let error = Args::try_parse_from([&["memrelay"], &base[..], &["--hash-tag", bad]].concat()).unwrap_err();
            assert!(error_line(&error).contains("exactly two"), "{bad:?}: {}", error_line(&error));
        }
    }

    #[test]
    fn modula_replicates_as_ketama_does_and_random_refuses_what_it_cannot_do() {
        let three = ["--server", "127.0.0.1:1", "--server", "127.0.0.1:2", "--server", "127.0.0.1:3"];
        let modula = [&three[..], &["--distribution", "modula"]].concat();
        let s = settings(&[&modula[..], &["--replication", "2", "--failover", "--write-policy", "majority"]].concat());
        assert_eq!(s.unwrap().routing.replication, 2);
        let random = [&three[..], &["--distribution", "random"]].concat();
        assert!(settings(&random).is_ok());
        for (extra, says) in [
            (&["--replication", "2"][..], "no replicas"),
            (&["--failover"][..], "no next replica"),
            (&["--write-policy", "primary"][..], "write policy `all`"),
            (&["--route", "s:=majority"][..], "write policy `all`"),
            (&["--hash-tag", "{}"][..], "no key is hashed"),
        ] {
            let error = settings(&[&random[..], extra].concat()).unwrap_err();
            assert!(error.contains(says), "{extra:?}: {error}");
        }
    }
}
