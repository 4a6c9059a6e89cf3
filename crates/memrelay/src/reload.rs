//! SIGHUP: read the configuration again and put it in force without a restart (memcached's proxy
//! does the same; twemproxy never could). The binary supplies how to read it ([`Source`]: the
//! `--config` file under the same command line). A valid configuration becomes a new
//! [`Generation`]: requests routed from then on use it, requests in flight finish under theirs,
//! client connections stay open and servers that stay keep their connections (by address,
//! [`crate::upstream::registry`]). An invalid one is refused with one log line naming the problem, and the
//! generation in force stays.
//!
//! What a reload can change: the servers (addresses, weights, names), the routing (distribution,
//! hash, replication, read policy, failover, sharding), the server timeout, access control (the
//! auth file, read again, the access rules and the request limits of [`crate::access`]) and the
//! TLS listener's certificate, key and client CA (read again). The rest (listen addresses, engine
//! and its threads, client limits, measurement, health thresholds, TLS to the servers) is built
//! into running threads: a change there is logged as needing a restart, and the rest of the file
//! still applies.

use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use signal_hook::consts::SIGHUP;
use signal_hook::iterator::Signals;

use crate::generation::{Current, Generation};
use crate::settings::Settings;
use crate::upstream::registry::Registry;

/// Reads the configuration again: the settings, or the problem with them in one line.
pub type Source = Box<dyn Fn() -> Result<Settings, String> + Send>;

/// What a reload applies to: the settings memrelay started with, the server ids, the generation
/// in force.
pub(crate) struct Target {
    pub started: Arc<Settings>,
    pub registry: Arc<Registry>,
    pub current: Arc<Current>,
    /// The access policy (auth file and rules, read again).
    pub access: Arc<crate::access::Access>,
    /// The TLS listener's configuration (certificate files read again).
    pub tls: Option<Arc<crate::client::tls::SharedConfig>>,
}

/// Starts a thread that reloads on each SIGHUP (until `shutdown`).
pub(crate) fn watch(source: Source, target: Target, shutdown: Arc<AtomicBool>) -> std::io::Result<()> {
    let mut signals = Signals::new([SIGHUP])?;
    std::thread::Builder::new().name("reload".into()).spawn(move || {
        for _ in signals.forever() {
            if shutdown.load(Ordering::Acquire) {
                break;
            }
            match source() {
                Ok(next) => {
                    let _ = apply(&target, &next);
                }
                Err(problem) => refuse(&target, &problem),
            }
        }
    })?;
    Ok(())
}

/// Puts `next` in force as a new generation, or refuses it; logs either way. Returns the new
/// generation's number.
pub(crate) fn apply(target: &Target, next: &Settings) -> Result<u64, String> {
    for (option, was, now) in needs_restart(&target.started, next) {
        let (was, now) = (crate::log_limit::printable(&was), crate::log_limit::printable(&now));
        eprintln!("memrelay: reload: {option} changed ({was} -> {now}) but takes a restart; keeping {was}");
    }
    let before = target.current.get();
    let number = before.number + 1;
    // TLS to the servers is configured at start (its files read then): a server whose pool asks
    // for TLS settings memrelay did not start with would be spoken to in plain text.
    let started_tls = target.started.server_tls_settings();
    if let Some(server) = next.all_servers().find(|s| s.tls.as_ref().is_some_and(|tls| !started_tls.contains(&tls))) {
        let problem = format!("TLS to {} is configured otherwise than at start: that takes a restart", server.name);
        refuse(target, &problem);
        return Err(problem);
    }
    // The auth file and rules first: a problem there refuses the reload before any server id
    // is handed out.
    let policy = match target.access.prepare(&next.access) {
        Ok(policy) => policy,
        Err(problem) => {
            refuse(target, &problem);
            return Err(problem);
        }
    };
    // The TLS certificates (a renewed certificate, a new client CA): read again from the files
    // now named, for connections accepted from now on.
    let tls = match (&target.tls, &next.tls) {
        (Some(_), Some(settings)) => match crate::client::tls::server_config(settings) {
            Ok(config) => Some(config),
            Err(problem) => {
                refuse(target, &problem);
                return Err(problem);
            }
        },
        _ => None,
    };
    let generation = match Generation::build(next, &target.registry, number) {
        Ok(generation) => generation,
        Err(problem) => {
            refuse(target, &problem);
            return Err(problem);
        }
    };
    let names = |ids: &mut dyn Iterator<Item = &usize>| -> String {
        let list: Vec<String> = ids.map(|&id| target.registry.name(id)).collect();
        if list.is_empty() {
            "none".into()
        } else {
            list.join(", ")
        }
    };
    let added = names(&mut generation.servers.iter().filter(|id| !before.servers.contains(id)));
    let removed = names(&mut before.servers.iter().filter(|id| !generation.servers.contains(id)));
    eprintln!(
        "memrelay: reload: generation {number} in force: {} servers ({}); added: {added}; removed: {removed}",
        generation.servers.len(),
        names(&mut generation.servers.iter()),
    );
    eprintln!("memrelay: reload: access: {}", policy.describe());
    target.access.publish(policy);
    if let (Some(shared), Some(config)) = (&target.tls, tls) {
        shared.replace(config);
        eprintln!("memrelay: reload: TLS certificates read again");
    }
    target.current.publish(generation);
    Ok(number)
}

fn refuse(target: &Target, problem: &str) {
    let problem = crate::log_limit::printable(problem);
    eprintln!("memrelay: reload refused: {problem}; generation {} stays in force", target.current.number());
}

/// The options that differ between `was` and `now` but only take effect at start: name, old
/// value, new value.
fn needs_restart(was: &Settings, now: &Settings) -> Vec<(&'static str, String, String)> {
    let mut changed = Vec::new();
    let mut compare = |option: &'static str, a: &dyn Debug, b: &dyn Debug| {
        let (a, b) = (format!("{a:?}"), format!("{b:?}"));
        if a != b {
            changed.push((option, a, b));
        }
    };
    compare("listen", &was.listen.as_ref().map(|l| l.addr), &now.listen.as_ref().map(|l| l.addr));
    compare("engine", &was.engine.kind.name(), &now.engine.kind.name());
    compare("workers", &was.engine.workers, &now.engine.workers);
    compare("threads", &was.engine.threads, &now.engine.threads);
    // `was` is the cap the descriptor budget fitted at start; `now` is what the file asks.
    compare("max-clients", &was.limits.max_clients, &crate::descriptors::clients_for(now.limits.max_clients));
    compare("max-value-size", &was.limits.max_value_size, &now.limits.max_value_size);
    compare("max-in-flight", &was.limits.max_in_flight, &now.limits.max_in_flight);
    compare("client-budget-bytes", &was.limits.client_budget, &now.limits.client_budget);
    compare("stats-dir", &was.measurement.stats_dir, &now.measurement.stats_dir);
    compare("stats-window", &was.measurement.window, &now.measurement.window);
    compare("request-log-sample", &was.measurement.request_log_sample, &now.measurement.request_log_sample);
    compare("metrics-listen", &was.measurement.metrics_listen, &now.measurement.metrics_listen);
    compare("metrics-tls-cert/key", &was.measurement.metrics_tls, &now.measurement.metrics_tls);
    compare("metrics-timeout-ms", &was.measurement.metrics_timeout, &now.measurement.metrics_timeout);
    compare("health (down-after, probes, warming)", &was.health, &now.health);
    compare("shutdown-grace-ms", &was.shutdown_grace, &now.shutdown_grace);
    compare("repair-spool-dir", &was.repair_spool, &now.repair_spool);
    compare("tls-listen", &was.tls.as_ref().map(|t| t.listen), &now.tls.as_ref().map(|t| t.listen));
    compare("server-tls (ca, cert, key, min version)", &was.server_tls, &now.server_tls);
    changed
}
