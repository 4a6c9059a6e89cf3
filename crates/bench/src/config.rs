//! The command line and the validated run configuration.
//!
//! Option names follow memtier_benchmark where the idea is the same (`--server`, `--threads`,
//! `--clients`, `--test-time`, `--requests`, `--ratio`, `--pipeline`, `--data-size`,
//! `--key-*`), so a seed's memtier command line translates one to one. The one deliberate
//! difference: `--ratio SETS:GETS` counts *requests*, not keys (memtier counts keys, so its
//! multi-get sizes drift when the ratio does not divide evenly; seed 000 section 5).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use serde::Serialize;

use crate::keys::Pattern;
use crate::tls::{TlsClient, TlsOptions};

/// Largest multi-get accepted (memcached has no limit of its own; this only catches typos).
pub const MAX_MULTIGET: u32 = 10_000;
/// Largest pipeline depth accepted.
pub const MAX_PIPELINE: usize = 100_000;
/// `--start-at` may lie at most this far ahead (a typo, or a clock far off, would otherwise
/// leave the bench waiting for hours).
pub const START_AT_MAX_AHEAD_S: f64 = 60.0;
/// `--start-at` may lie at most this far in the past when the bench starts. A bench that starts
/// late begins its load at once and says so; how well its load overlaps the other instances' is
/// the caller's to measure (the lab's `loaders_overlap`). A busy machine starts a process seconds
/// late (2.2 s beside `make test`'s other suites); past this, the instant was surely wrong (a
/// clock off, or seconds and milliseconds mixed up).
pub const START_AT_MAX_LATE_S: f64 = 10.0;
/// memcached's key length limit.
const MAX_KEY_LEN: usize = memrelay_protocol::limits::MAX_KEY_LEN;

#[derive(Parser, Debug, Clone)]
#[command(
    name = "memrelay-bench",
    version,
    about = "Closed- and open-loop memcached load generator (memtier_benchmark's model, exact multi-get sizes, HDR histograms)",
    after_help = "Without --test-time or --requests the run sends 10000 requests per client \
                  (memtier's default), or, with --populate, only populates. \
                  Output format: crates/bench/README.md."
)]
pub struct Args {
    /// Server to connect to (repeatable; connections are spread round robin over the servers)
    #[arg(short = 's', long = "server", value_name = "HOST:PORT", default_value = "127.0.0.1:11211")]
    pub servers: Vec<String>,

    /// Worker threads (each runs one event loop)
    #[arg(short = 't', long, default_value_t = 4, value_name = "T")]
    pub threads: usize,

    /// Virtual clients (connections) per thread
    #[arg(short = 'c', long, default_value_t = 50, value_name = "C")]
    pub clients: usize,

    /// Run for this many seconds (fractions allowed)
    #[arg(long, value_name = "SECS", conflicts_with = "requests")]
    pub test_time: Option<f64>,

    /// Requests per client, then stop
    #[arg(short = 'n', long, value_name = "N")]
    pub requests: Option<u64>,

    /// Sets to gets, counted in requests (a multi-get is one request)
    #[arg(long, default_value = "1:10", value_name = "SETS:GETS")]
    pub ratio: String,

    /// Keys per get request: every get asks exactly K keys (1 = plain get)
    #[arg(long, alias = "multi-key-get", default_value_t = 1, value_name = "K")]
    pub multiget: u32,

    /// Protocol: `text` (get/set) or `meta` (mg/ms; a multi-get is K quiet `mg`s and `mn`)
    #[arg(long, value_enum, default_value_t = Protocol::Text)]
    pub protocol: Protocol,

    /// Value size of sets, in bytes
    #[arg(short = 'd', long, default_value_t = 32, value_name = "BYTES")]
    pub data_size: usize,

    /// Prefix of every key
    #[arg(long, default_value = "memtier-", value_name = "PREFIX")]
    pub key_prefix: String,

    /// Smallest key id
    #[arg(long, default_value_t = 0, value_name = "ID")]
    pub key_minimum: u64,

    /// Largest key id (inclusive)
    #[arg(long, default_value_t = 10_000_000, value_name = "ID")]
    pub key_maximum: u64,

    /// Key choice: R uniform, S sequential, G gaussian, Z zipf; `X:Y` gives sets and gets their own
    #[arg(long, default_value = "R", value_name = "R|S|G|Z[:R|S|G|Z]")]
    pub key_pattern: String,

    /// Standard deviation of the gaussian pattern [default: (max-min)/6]
    #[arg(long, value_name = "KEYS")]
    pub key_stddev: Option<f64>,

    /// Centre of the gaussian pattern [default: (min+max)/2]
    #[arg(long, value_name = "ID")]
    pub key_median: Option<f64>,

    /// Exponent of the zipf pattern (key-minimum is the most popular key)
    #[arg(long, default_value_t = 1.0, value_name = "S")]
    pub key_zipf_exp: f64,

    /// Seed of the key choice (each connection derives its own generator from it)
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Set every key of the range once before the run (alone: populate, then stop)
    #[arg(long)]
    pub populate: bool,

    /// Open loop: send this many requests per second in total, on a fixed schedule; latency
    /// counts from the scheduled send time
    #[arg(long, value_name = "OPS")]
    pub rate: Option<f64>,

    /// Requests in flight per connection
    #[arg(long, default_value_t = 1, value_name = "D")]
    pub pipeline: usize,

    /// Start the load at this wall-clock time (Unix seconds, fractions allowed): connect every
    /// client first, then wait, so that instances started one after the other (on several
    /// hosts) load together. At most 60 s ahead, at most 10 s past
    #[arg(long, value_name = "UNIX_SECS", conflicts_with = "populate")]
    pub start_at: Option<f64>,

    /// Write the results as JSON to FILE (`-` for stdout)
    #[arg(long, value_name = "FILE")]
    pub json_out: Option<PathBuf>,

    /// No progress lines on stderr
    #[arg(short = 'q', long)]
    pub quiet: bool,

    /// After the test time (or a signal), wait this long for replies still outstanding
    #[arg(long, default_value_t = 2.0, value_name = "SECS")]
    pub grace: f64,

    /// A connection with requests outstanding and nothing received for this long is closed
    #[arg(long, default_value_t = 10.0, value_name = "SECS")]
    pub timeout: f64,

    /// Time allowed to establish all connections at the start
    #[arg(long, default_value_t = 5.0, value_name = "SECS")]
    pub connect_timeout: f64,

    /// Speak TLS to the servers, verifying their certificates against this PEM CA bundle (the
    /// handshake is part of connecting, not of the measured requests)
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,

    /// Name the servers' certificates must hold [default: the host of each --server]
    #[arg(long, value_name = "NAME", requires = "tls_ca")]
    pub tls_name: Option<String>,

    /// PEM client certificate chain, for servers that ask for one (with --tls-key)
    #[arg(long, value_name = "FILE", requires_all = ["tls_ca", "tls_key"])]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key of --tls-cert
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Measure a link instead of loading a server: answer one --link-probe on HOST:PORT
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "link_probe")]
    pub link_listen: Option<String>,

    /// Measure the link to a --link-listen: round trips, then a bulk transfer; JSON on stdout
    #[arg(long, value_name = "HOST:PORT")]
    pub link_probe: Option<String>,

    /// Seconds of bulk transfer of --link-probe
    #[arg(long, default_value_t = 1.0, value_name = "SECS")]
    pub link_seconds: f64,
}

/// What the run does after the connections are up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// Run for a fixed time.
    Time,
    /// Send a fixed number of requests per client.
    Requests,
    /// No workload phase (populate only).
    None,
}

/// The memcached protocol the clients speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// `set`, `get <key>…`.
    Text,
    /// `ms`, `mg`; a multi-get of K keys is K pipelined `mg <key> v f q k` and `mn`.
    Meta,
}

/// The validated configuration; echoed into the JSON output.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    pub servers: Vec<String>,
    #[serde(skip)]
    pub addrs: Vec<SocketAddr>,
    pub threads: usize,
    pub clients: usize,
    pub connections: usize,
    pub stop: Stop,
    pub test_time_s: Option<f64>,
    pub requests: Option<u64>,
    pub ratio: String,
    pub ratio_sets: u32,
    pub ratio_gets: u32,
    pub multiget: u32,
    pub protocol: Protocol,
    pub data_size: usize,
    pub key_prefix: String,
    pub key_minimum: u64,
    pub key_maximum: u64,
    pub key_pattern_set: Pattern,
    pub key_pattern_get: Pattern,
    pub key_stddev: f64,
    pub key_median: f64,
    pub key_zipf_exp: f64,
    pub seed: u64,
    pub populate: bool,
    pub rate: Option<f64>,
    pub pipeline: usize,
    pub grace_s: f64,
    pub timeout_s: f64,
    pub connect_timeout_s: f64,
    /// `--start-at`: when the workload phase was asked to begin (Unix seconds).
    pub start_at_unix_s: Option<f64>,
    /// `--tls-ca` given: every connection speaks TLS.
    pub tls: bool,
    #[serde(skip)]
    pub tls_client: Option<TlsClient>,
    #[serde(skip)]
    pub json_out: Option<PathBuf>,
    #[serde(skip)]
    pub quiet: bool,
}

/// Why the configuration was refused: a bad option (exit 2) or a server name that does not
/// resolve (exit 1, the run cannot start).
#[derive(Debug)]
pub enum ConfigError {
    Usage(String),
    Resolve(String),
}

impl Config {
    pub fn from_args(args: Args) -> Result<Config, ConfigError> {
        let usage = |m: String| Err(ConfigError::Usage(m));
        if args.threads == 0 {
            return usage("--threads must be at least 1".into());
        }
        if args.clients == 0 {
            return usage("--clients must be at least 1".into());
        }
        let connections = match args.threads.checked_mul(args.clients) {
            Some(n) if n <= 1_000_000 => n,
            _ => return usage("--threads x --clients is too large".into()),
        };
        let (ratio_sets, ratio_gets) = parse_ratio(&args.ratio).map_err(ConfigError::Usage)?;
        if args.multiget == 0 || args.multiget > MAX_MULTIGET {
            return usage(format!("--multiget must be between 1 and {MAX_MULTIGET}"));
        }
        if args.pipeline == 0 || args.pipeline > MAX_PIPELINE {
            return usage(format!("--pipeline must be between 1 and {MAX_PIPELINE}"));
        }
        if args.data_size > 1 << 30 {
            return usage("--data-size is larger than 1 GiB".into());
        }
        if args.key_prefix.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return usage("--key-prefix must not contain spaces or control characters".into());
        }
        if args.key_prefix.len() + 20 > MAX_KEY_LEN {
            return usage(format!("--key-prefix is too long (keys are limited to {MAX_KEY_LEN} bytes)"));
        }
        if args.key_minimum > args.key_maximum {
            return usage("--key-minimum is larger than --key-maximum".into());
        }
        if args.key_maximum == u64::MAX {
            return usage("--key-maximum is too large".into());
        }
        let (key_pattern_set, key_pattern_get) = parse_pattern(&args.key_pattern).map_err(ConfigError::Usage)?;
        let span = (args.key_maximum - args.key_minimum) as f64;
        let key_stddev = args.key_stddev.unwrap_or(span / 6.0);
        let key_median = args.key_median.unwrap_or((args.key_minimum as f64 + args.key_maximum as f64) / 2.0);
        if !(key_stddev.is_finite() && key_stddev >= 0.0 && key_median.is_finite()) {
            return usage("--key-stddev and --key-median must be finite, the deviation not negative".into());
        }
        if !(args.key_zipf_exp.is_finite() && args.key_zipf_exp > 0.0 && args.key_zipf_exp < 100.0) {
            return usage("--key-zipf-exp must be positive (and below 100)".into());
        }
        for (name, value) in
            [("--grace", args.grace), ("--timeout", args.timeout), ("--connect-timeout", args.connect_timeout)]
        {
            if !(value.is_finite() && value > 0.0 && value <= 86_400.0) {
                return usage(format!("{name} must be a positive number of seconds"));
            }
        }
        if let Some(t) = args.test_time {
            if !(t.is_finite() && t > 0.0 && t <= 30.0 * 86_400.0) {
                return usage("--test-time must be a positive number of seconds".into());
            }
        }
        if args.requests == Some(0) {
            return usage("--requests must be at least 1".into());
        }
        if let Some(rate) = args.rate {
            if !(rate.is_finite() && rate > 0.0 && rate <= 1e9) {
                return usage("--rate must be a positive number of requests per second".into());
            }
        }
        if let Some(at) = args.start_at {
            check_start_at(at, unix_now()).map_err(ConfigError::Usage)?;
        }
        let (stop, requests) = match (args.test_time, args.requests) {
            (Some(_), _) => (Stop::Time, None),
            (None, Some(n)) => (Stop::Requests, Some(n)),
            (None, None) if args.populate => (Stop::None, None),
            (None, None) => (Stop::Requests, Some(10_000)),
        };
        if args.servers.is_empty() {
            return usage("give at least one --server".into());
        }
        let tls_client = match &args.tls_ca {
            Some(ca) => {
                let options = TlsOptions {
                    ca: ca.clone(),
                    name: args.tls_name.clone(),
                    cert: args.tls_cert.clone(),
                    key: args.tls_key.clone(),
                };
                Some(TlsClient::new(&options, &args.servers).map_err(ConfigError::Usage)?)
            }
            None => None,
        };
        let mut addrs = Vec::with_capacity(args.servers.len());
        for server in &args.servers {
            addrs.push(resolve(server)?);
        }
        Ok(Config {
            servers: args.servers,
            addrs,
            threads: args.threads,
            clients: args.clients,
            connections,
            stop,
            test_time_s: args.test_time,
            requests,
            ratio: format!("{ratio_sets}:{ratio_gets}"),
            ratio_sets,
            ratio_gets,
            multiget: args.multiget,
            protocol: args.protocol,
            data_size: args.data_size,
            key_prefix: args.key_prefix,
            key_minimum: args.key_minimum,
            key_maximum: args.key_maximum,
            key_pattern_set,
            key_pattern_get,
            key_stddev,
            key_median,
            key_zipf_exp: args.key_zipf_exp,
            seed: args.seed,
            populate: args.populate,
            rate: args.rate,
            pipeline: args.pipeline,
            grace_s: args.grace,
            timeout_s: args.timeout,
            connect_timeout_s: args.connect_timeout,
            start_at_unix_s: args.start_at,
            tls: tls_client.is_some(),
            tls_client,
            json_out: args.json_out,
            quiet: args.quiet,
        })
    }

    pub fn test_time(&self) -> Option<Duration> {
        self.test_time_s.map(Duration::from_secs_f64)
    }

    /// Number of keys in the range.
    pub fn key_count(&self) -> u64 {
        self.key_maximum - self.key_minimum + 1
    }
}

/// The wall clock in Unix seconds.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// `--start-at AT` at wall-clock time `now`: not more than [`START_AT_MAX_AHEAD_S`] ahead, not
/// more than [`START_AT_MAX_LATE_S`] past.
pub fn check_start_at(at: f64, now: f64) -> Result<(), String> {
    if !at.is_finite() || at <= 0.0 {
        return Err(format!("--start-at must be a Unix time in seconds, got {at}"));
    }
    if at > now + START_AT_MAX_AHEAD_S {
        return Err(format!(
            "--start-at {at:.3} is {:.1} s ahead of this host's clock ({now:.3}); at most {START_AT_MAX_AHEAD_S:.0} s \
             are allowed (a clock off, or seconds and milliseconds mixed up?)",
            at - now
        ));
    }
    if at < now - START_AT_MAX_LATE_S {
        return Err(format!(
            "--start-at {at:.3} is already {:.3} s past on this host's clock ({now:.3}); at most \
             {START_AT_MAX_LATE_S:.0} s late is allowed (start the instances earlier or give a later time)",
            now - at
        ));
    }
    Ok(())
}

/// `SETS:GETS`, both counts of requests, not both zero.
pub fn parse_ratio(text: &str) -> Result<(u32, u32), String> {
    let bad = || format!("--ratio must look like SETS:GETS (e.g. 1:10), got {text:?}");
    let (a, b) = text.split_once(':').ok_or_else(bad)?;
    let sets: u32 = a.trim().parse().map_err(|_| bad())?;
    let gets: u32 = b.trim().parse().map_err(|_| bad())?;
    if sets == 0 && gets == 0 {
        return Err("--ratio 0:0 sends nothing".into());
    }
    if u64::from(sets) + u64::from(gets) > u64::from(u32::MAX) {
        return Err(bad());
    }
    Ok((sets, gets))
}

/// `P` for both, or `P:Q` for sets and gets.
pub fn parse_pattern(text: &str) -> Result<(Pattern, Pattern), String> {
    let one = |t: &str| {
        Pattern::from_letter(t.trim())
            .ok_or_else(|| format!("--key-pattern takes R, S, G or Z (or SET:GET, e.g. S:R), got {text:?}"))
    };
    match text.split_once(':') {
        Some((a, b)) => Ok((one(a)?, one(b)?)),
        None => {
            let p = one(text)?;
            Ok((p, p))
        }
    }
}

fn resolve(server: &str) -> Result<SocketAddr, ConfigError> {
    let Some((host, port)) = server.rsplit_once(':') else {
        return Err(ConfigError::Usage(format!("--server must be HOST:PORT, got {server:?}")));
    };
    if host.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0) {
        return Err(ConfigError::Usage(format!("--server must be HOST:PORT with a port in 1..65535, got {server:?}")));
    }
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port: u16 = port.parse().expect("checked above");
    let mut found =
        (host, port).to_socket_addrs().map_err(|e| ConfigError::Resolve(format!("cannot resolve {server}: {e}")))?;
    found.next().ok_or_else(|| ConfigError::Resolve(format!("cannot resolve {server}: no address")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Args {
        let mut argv = vec!["memrelay-bench"];
        argv.extend_from_slice(extra);
        Args::try_parse_from(argv).unwrap()
    }

    #[test]
    fn defaults_are_memtiers() {
        let c = Config::from_args(args(&[])).unwrap();
        assert_eq!((c.threads, c.clients, c.ratio_sets, c.ratio_gets), (4, 50, 1, 10));
        assert_eq!((c.data_size, c.key_minimum, c.key_maximum), (32, 0, 10_000_000));
        assert_eq!(c.key_prefix, "memtier-");
        assert_eq!((c.stop, c.requests), (Stop::Requests, Some(10_000)));
    }

    #[test]
    fn ratio_counts_requests() {
        assert_eq!(parse_ratio("1:6"), Ok((1, 6)));
        assert_eq!(parse_ratio("0:1"), Ok((0, 1)));
        assert!(parse_ratio("0:0").is_err());
        assert!(parse_ratio("1").is_err());
        assert!(parse_ratio("a:b").is_err());
    }

    #[test]
    fn patterns() {
        assert_eq!(parse_pattern("R"), Ok((Pattern::Uniform, Pattern::Uniform)));
        assert_eq!(parse_pattern("S:Z"), Ok((Pattern::Sequential, Pattern::Zipf)));
        assert!(parse_pattern("Q").is_err());
    }

    #[test]
    fn populate_alone_stops_after_populating() {
        let c = Config::from_args(args(&["--populate"])).unwrap();
        assert_eq!(c.stop, Stop::None);
        let c = Config::from_args(args(&["--populate", "--test-time", "1"])).unwrap();
        assert_eq!(c.stop, Stop::Time);
    }

    #[test]
    fn start_at_is_bounded_around_now() {
        let now = 1_700_000_000.0;
        assert!(check_start_at(now + 2.5, now).is_ok());
        assert!(check_start_at(now - 0.5, now).is_ok());
        assert!(check_start_at(now - 2.2, now).is_ok(), "a busy machine's late start");
        assert!(check_start_at(now + START_AT_MAX_AHEAD_S, now).is_ok());
        let ahead = check_start_at(now + 61.0, now).unwrap_err();
        assert!(ahead.contains("61.0 s ahead"), "{ahead}");
        let late = check_start_at(now - 10.5, now).unwrap_err();
        assert!(late.contains("10.500 s past"), "{late}");
        for bad in [f64::NAN, f64::INFINITY, 0.0, -5.0] {
            assert!(check_start_at(bad, now).is_err(), "{bad}");
        }
    }

    #[test]
    fn start_at_is_echoed_and_excludes_populate() {
        let at = unix_now() + 5.0;
        let c = Config::from_args(args(&["--test-time", "1", "--start-at", &format!("{at}")])).unwrap();
        assert_eq!(c.start_at_unix_s, Some(at));
        assert!(Args::try_parse_from(["memrelay-bench", "--populate", "--start-at", "1"]).is_err());
    }

    #[test]
    fn bad_options_are_usage_errors() {
        for bad in [
            &["--threads", "0"][..],
            &["--multiget", "0"],
            &["--ratio", "x"],
            &["--key-minimum", "5", "--key-maximum", "4"],
            &["--server", "nohostport"],
            &["--rate=-1"],
            &["--rate", "0"],
            &["--pipeline", "0"],
            &["--key-prefix", "a b"],
            &["--start-at", "1"],
            &["--start-at", "99999999999"],
            &["--start-at", "nan"],
        ] {
            assert!(matches!(Config::from_args(args(bad)), Err(ConfigError::Usage(_))), "{bad:?}");
        }
        assert!(Args::try_parse_from(["memrelay-bench", "--test-time", "1", "--requests", "5"]).is_err());
    }
}
