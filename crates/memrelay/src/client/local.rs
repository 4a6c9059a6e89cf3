//! The commands memrelay answers itself (`version`, `verbosity`, `stats`), part of the client
//! side both engines share.
//!
//! `stats` answers in memcached's `STAT <name> <value>` form with memrelay's own counters: the
//! net thread's connection counts plus the request totals the stats thread publishes as windows
//! arrive (so they lag by at most one window).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use memrelay_protocol::{compose, Command, Request};

use crate::access::{self, Access, Reason};
use crate::generation::Current;
use crate::measure::live::LiveTotals;
use crate::measure::metrics::Kind;
use crate::upstream::health::Health;
use crate::upstream::registry::Registry;

/// What `version` answers: the memcached protocol version memrelay speaks and nothing else.
/// Clients parse it differently (libmemcached reads the leading `major.minor.micro` and its
/// conformance suite expects 1.6's answers from a 1.6 server; the Node `memcached` package takes
/// the *last* `x.y.z` of the line, so a suffix such as `-memrelay-0.1.0` read as 0.1.0), so the
/// line carries one version only; memrelay's own is `stats`' `memrelay_version`.
pub(crate) const VERSION_REPLY: &str = "1.6.0";

#[derive(Clone)]
pub struct LocalAnswers {
    live: Arc<LiveTotals>,
    health: Arc<Health>,
    started: Instant,
    registry: Arc<Registry>,
    current: Arc<Current>,
    threads: usize,
    access: Arc<Access>,
}

impl LocalAnswers {
    pub fn new(
        live: Arc<LiveTotals>,
        health: Arc<Health>,
        registry: Arc<Registry>,
        current: Arc<Current>,
        threads: usize,
        access: Arc<Access>,
    ) -> LocalAnswers {
        LocalAnswers { live, health, started: Instant::now(), registry, current, threads, access }
    }

    /// The access policy in force ([`crate::access`]).
    pub fn access(&self) -> &Access {
        &self.access
    }

    /// Counts a new client if fewer than `max` are connected; false (nothing counted) if not.
    pub fn try_connection_opened(&self, max: u64) -> bool {
        let before = self.live.current_connections.fetch_add(1, Ordering::AcqRel);
        if before >= max {
            self.live.current_connections.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        self.live.total_connections.fetch_add(1, Ordering::Relaxed);
        true
    }

    pub fn connection_closed(&self) {
        self.live.current_connections.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn client_error(&self) {
        self.live.client_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Appends the reply to a local command to `out`. `buf` is what the request was parsed from.
    pub fn answer(&self, request: &Request, buf: &[u8], queue_length: usize, out: &mut Vec<u8>) {
        match request.command {
            Command::Version => {
                out.extend_from_slice(b"VERSION ");
                out.extend_from_slice(VERSION_REPLY.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Command::Verbosity => out.extend_from_slice(b"OK\r\n"),
            Command::MetaNoop => out.extend_from_slice(b"MN\r\n"),
            Command::Gat | Command::Gats => out.extend_from_slice(compose::END),
            Command::Get => self.route_query(request.key(buf), out),
            Command::Stats => match &buf[request.keys.clone()] {
                b"" | b"memrelay" => self.stats(queue_length, out),
                b"reset" => out.extend_from_slice(b"RESET\r\n"),
                // memrelay's connections are not memcached's: an empty list.
                b"conns" => out.extend_from_slice(compose::END),
                // Unknown groups, `stats noreply`: what memcached answers.
                _ => out.extend_from_slice(b"ERROR\r\n"),
            },
            _ => out.extend_from_slice(b"ERROR\r\n"),
        }
    }

    /// `get __memrelay__.route(OP,KEY)`: one value, the servers a request of OP for KEY would go
    /// to, one `host:port` per line in the order they would be asked; a query memrelay cannot
    /// answer is a miss with the reason as a `CLIENT_ERROR`-free value (`ERROR: ...`), so that a
    /// client library reads it as any value.
    fn route_query(&self, key: &[u8], out: &mut Vec<u8>) {
        let generation = self.current.get();
        let text = match crate::routing::explain::query(key) {
            Some((op, asked)) => match crate::routing::explain::servers_for(&generation.router, op, asked, &|s| {
                self.health.is_down(s)
            }) {
                Ok(servers) => {
                    let addresses: Vec<String> = servers.iter().map(|&s| self.registry.endpoint(s).address).collect();
                    addresses.join("\r\n")
                }
                Err(why) => format!("ERROR: {why}"),
            },
            None => "ERROR: ask as __memrelay__.route(OP,KEY)".to_string(),
        };
        out.extend_from_slice(b"VALUE ");
        out.extend_from_slice(key);
        out.extend_from_slice(format!(" 0 {}\r\n", text.len()).as_bytes());
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(compose::END);
    }

    fn stats(&self, queue_length: usize, out: &mut Vec<u8>) {
        let unix = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        compose::stat(out, "pid", std::process::id());
        compose::stat(out, "uptime", self.started.elapsed().as_secs());
        compose::stat(out, "time", unix);
        compose::stat(out, "version", VERSION_REPLY);
        compose::stat(out, "memrelay_version", crate::settings::VERSION);
        compose::stat(out, "threads", self.threads);
        compose::stat(out, "curr_connections", self.live.current_connections.load(Ordering::Relaxed));
        compose::stat(out, "total_connections", self.live.total_connections.load(Ordering::Relaxed));
        if let Some(budget) = crate::descriptors::in_force() {
            // memcached's name for the client cap; the descriptor budget it comes from.
            compose::stat(out, "max_connections", budget.clients);
            compose::stat(out, "descriptor_limit", budget.limit);
            compose::stat(out, "descriptors_reserved", budget.reserved);
        }
        compose::stat(out, "queue_length", queue_length);
        // Servers by id: those a reload dropped stay listed, retired.
        let generation = self.current.get();
        let names = self.registry.names();
        compose::stat(out, "config_generation", generation.number);
        let router = &generation.router;
        compose::stat(out, "write_policy", router.default_write_policy().name());
        for (i, route) in router.routes_described().iter().enumerate() {
            compose::stat(out, &format!("route_{i}"), route);
        }
        for (i, pool) in router.pool_names().iter().enumerate() {
            compose::stat(out, &format!("pool_{i}_name"), pool);
            let servers: Vec<String> = router.pool_servers(i).iter().map(|s| s.to_string()).collect();
            compose::stat(out, &format!("pool_{i}_servers"), servers.join(","));
            let up = router.pool_servers(i).iter().filter(|&&s| !self.health.is_down(s)).count();
            compose::stat(out, &format!("pool_{i}_servers_up"), up);
        }
        for i in 0..names.len() {
            let state = if generation.servers.contains(&i) { self.health.state(i) } else { "retired" };
            compose::stat(out, &format!("server_{i}_state"), state);
            compose::stat(out, &format!("server_{i}_downs"), self.health.downs(i));
            compose::stat(out, &format!("server_{i}_restarts"), self.health.restarts(i));
            compose::stat(out, &format!("server_{i}_cold"), u8::from(self.health.is_cold(i)));
            let repair = self.health.repair();
            let counts = repair.counts(i);
            compose::stat(out, &format!("server_{i}_repairing"), u8::from(repair.is_repairing(i)));
            compose::stat(out, &format!("server_{i}_repair_pending"), counts.pending);
            compose::stat(out, &format!("server_{i}_repair_queued"), counts.queued);
            compose::stat(out, &format!("server_{i}_repaired"), counts.repaired);
            compose::stat(out, &format!("server_{i}_repair_dropped"), counts.dropped);
            compose::stat(out, &format!("server_{i}_resyncs"), counts.resyncs);
        }
        let Some(totals) = self.live.totals() else {
            out.extend_from_slice(compose::END);
            return;
        };
        let kind = |k: Kind| &totals.kinds[k as usize];
        let (get, multi, set, other) = (kind(Kind::Get), kind(Kind::MultiGet), kind(Kind::Set), kind(Kind::Other));
        // memcached's names where they mean the same (cmd_get counts keys, as memcached does).
        compose::stat(out, "cmd_get", get.keys + multi.keys);
        compose::stat(out, "cmd_set", set.count);
        compose::stat(out, "get_hits", get.hits + multi.hits);
        compose::stat(out, "get_misses", get.misses + multi.misses);
        for k in Kind::ALL {
            let s = kind(k);
            compose::stat(out, &format!("requests_{}", k.name()), s.count);
            compose::stat(out, &format!("errors_{}", k.name()), s.errors);
        }
        compose::stat(out, "requests_total", get.count + multi.count + set.count + other.count);
        compose::stat(out, "client_errors", self.live.client_errors.load(Ordering::Relaxed));
        // memcached's names for logins; memrelay's refusals by reason.
        let failed = access::denied(Reason::AuthFailure);
        compose::stat(out, "auth_cmds", access::logins() + failed);
        compose::stat(out, "auth_errors", failed);
        for reason in Reason::ALL {
            compose::stat(out, &format!("access_denied_{}", reason.name()), access::denied(reason));
        }
        // Failed logins by peer address (bounded: see access::throttle), and those refused
        // unchecked.
        compose::stat(out, "login_throttled", access::throttle::LOGINS.throttled());
        for (peer, failures) in access::throttle::LOGINS.failures_by_peer() {
            compose::stat(out, &format!("login_failures:{peer}"), failures);
        }
        compose::stat(out, "conn_yields", access::yields());
        // The byte budget per client (crate::client::budget).
        compose::stat(out, "gutter_requests", crate::relay::gutter::diverted());
        compose::stat(out, "client_budget_pauses", crate::client::budget::pauses());
        compose::stat(out, "clients_cut_off", crate::client::budget::cut_off());
        compose::stat(out, "client_bytes_held", crate::client::budget::held());
        for i in 0..router.pool_names().len() {
            let sum =
                |per: &[u64]| router.pool_servers(i).iter().map(|&s| per.get(s).copied().unwrap_or(0)).sum::<u64>();
            compose::stat(out, &format!("pool_{i}_requests"), sum(&totals.per_server));
            compose::stat(out, &format!("pool_{i}_failures"), sum(&totals.per_server_failures));
        }
        for (i, name) in names.iter().enumerate() {
            compose::stat(out, &format!("server_{i}_address"), name);
            compose::stat(out, &format!("server_{i}_requests"), totals.per_server.get(i).copied().unwrap_or(0));
            compose::stat(
                out,
                &format!("server_{i}_failures"),
                totals.per_server_failures.get(i).copied().unwrap_or(0),
            );
        }
        out.extend_from_slice(compose::END);
    }
}
