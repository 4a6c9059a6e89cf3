//! Per-server health, shared by every thread of both engines (mcrouter's TKO, without its
//! remapping): after `down_after` consecutive failed exchanges a server is **down**, and requests
//! that need it fail at once with `SERVER_ERROR server down (<server>)` (or fail over to a
//! replica where the read policy allows) instead of each waiting for the server timeout. Keys are
//! never moved to other servers by it. A probe thread ([`probe`]) sends the server `version` on
//! an exponential backoff and brings it back up when it answers. Each change of state is logged
//! once and counted, for `stats`.
//!
//! A server that restarted comes back empty. The probe thread also watches the servers that are
//! up (`stats`: a new `pid` or a smaller `uptime` means a restart) and marks a restarted one
//! **cold** for `warm_for`: while it is cold, a read that misses there is retried on a replica
//! and the value written back to it ([`crate::relay::warm`]).
//!
//! The hot path only loads an atomic per target (`is_down`) and, on a reply, loads the failure
//! count (written only when it is not zero already), so a healthy pool costs no shared writes.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::settings::HealthSettings;
use crate::upstream::failure::Failure;
use crate::upstream::registry::{Registry, MAX_SERVER_IDS};
use crate::upstream::repair_set::Repair;

#[derive(Debug, Default)]
struct ServerHealth {
    consecutive_failures: AtomicU32,
    down: AtomicBool,
    /// Times the server went down.
    downs: AtomicU64,
    /// Until when (ms since `Health::started`) the server is cold; 0: never was.
    cold_until_ms: AtomicU64,
    /// Restarts seen.
    restarts: AtomicU64,
}

/// The health of every server, by id ([`crate::upstream::registry`]).
#[derive(Debug)]
pub struct Health {
    /// One per id a process can hand out, so that the hot path indexes without a lock while
    /// reloads add servers.
    servers: Box<[ServerHealth]>,
    registry: Arc<Registry>,
    settings: HealthSettings,
    started: Instant,
    /// Which servers are being brought up to date, and on what.
    repair: Repair,
}

impl Health {
    pub fn new(registry: Arc<Registry>, settings: HealthSettings) -> Health {
        Health {
            servers: (0..MAX_SERVER_IDS).map(|_| ServerHealth::default()).collect(),
            registry,
            settings,
            started: Instant::now(),
            repair: Repair::new(settings.repair_max_keys),
        }
    }

    /// The servers' repair state (write policies `majority` and `primary`).
    pub fn repair(&self) -> &Repair {
        &self.repair
    }

    pub fn settings(&self) -> HealthSettings {
        self.settings
    }

    /// Whether requests for `server` fail at once.
    #[inline]
    pub fn is_down(&self, server: usize) -> bool {
        self.servers[server].down.load(Ordering::Relaxed)
    }

    /// The server answered an exchange.
    #[inline]
    pub fn answered(&self, server: usize) {
        let s = &self.servers[server];
        if s.consecutive_failures.load(Ordering::Relaxed) != 0 {
            s.consecutive_failures.store(0, Ordering::Relaxed);
        }
    }

    /// An exchange with the server failed; the `down_after`-th in a row takes it down.
    pub fn failed(&self, server: usize, failure: Failure) {
        if self.settings.down_after == 0 || !failure.is_the_servers() {
            return;
        }
        let s = &self.servers[server];
        let failures = s.consecutive_failures.fetch_add(1, Ordering::Relaxed) + 1;
        if failures >= self.settings.down_after && !s.down.swap(true, Ordering::AcqRel) {
            s.downs.fetch_add(1, Ordering::Relaxed);
            eprintln!(
                "memrelay: server {} is down after {failures} consecutive failures (last: {}); requests for it \
                 fail at once until it answers a probe",
                self.registry.name(server),
                failure.reason()
            );
        }
    }

    /// A probe was answered: the server is up again.
    pub fn probe_answered(&self, server: usize, down_for: Duration) {
        let s = &self.servers[server];
        s.consecutive_failures.store(0, Ordering::Relaxed);
        if s.down.swap(false, Ordering::AcqRel) {
            eprintln!(
                "memrelay: server {} is up again (answered a probe after {:.1} s down)",
                self.registry.name(server),
                down_for.as_secs_f64()
            );
        }
    }

    /// `up` or `down`, for `stats`.
    pub fn state(&self, server: usize) -> &'static str {
        if self.is_down(server) {
            "down"
        } else {
            "up"
        }
    }

    pub fn downs(&self, server: usize) -> u64 {
        self.servers[server].downs.load(Ordering::Relaxed)
    }

    /// The server restarted (empty): it is cold for `warm_for` from now.
    pub fn restarted(&self, server: usize) {
        let s = &self.servers[server];
        s.restarts.fetch_add(1, Ordering::Relaxed);
        if self.settings.warm_for.is_zero() {
            eprintln!("memrelay: server {} restarted (warming is off)", self.registry.name(server));
            return;
        }
        let until = self.started.elapsed() + self.settings.warm_for;
        s.cold_until_ms.store(until.as_millis() as u64, Ordering::Relaxed);
        eprintln!(
            "memrelay: server {} restarted; its read misses are retried on a replica and written back for {} s",
            self.registry.name(server),
            self.settings.warm_for.as_secs()
        );
    }

    /// Whether a read miss on `server` is retried on a replica (it restarted a short while ago).
    #[inline]
    pub fn is_cold(&self, server: usize) -> bool {
        let until = self.servers[server].cold_until_ms.load(Ordering::Relaxed);
        until != 0 && (self.started.elapsed().as_millis() as u64) < until
    }

    pub fn restarts(&self, server: usize) -> u64 {
        self.servers[server].restarts.load(Ordering::Relaxed)
    }
}

/// The per-request policy reads the servers' state here.
impl crate::upstream::Servers for Health {
    fn is_down(&self, server: usize) -> bool {
        Health::is_down(self, server)
    }

    fn is_cold(&self, server: usize) -> bool {
        Health::is_cold(self, server)
    }

    fn is_repairing(&self, server: usize) -> bool {
        self.repair.is_repairing(server)
    }

    fn missed(&self, server: usize, key: &[u8]) {
        self.repair.missed(server, key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Endpoint;

    fn health(down_after: u32) -> Health {
        let registry = Arc::new(Registry::new(&[Endpoint::local(1), Endpoint::local(2)]));
        Health::new(registry, HealthSettings { down_after, ..HealthSettings::default() })
    }

    #[test]
    fn consecutive_failures_take_a_server_down_and_an_answer_resets_the_count() {
        let h = health(3);
        h.failed(0, Failure::Timeout);
        h.failed(0, Failure::Timeout);
        h.answered(0);
        h.failed(0, Failure::Reset);
        h.failed(0, Failure::Timeout);
        assert!(!h.is_down(0), "the answer in between reset the count");
        h.failed(0, Failure::Timeout);
        assert!(h.is_down(0) && !h.is_down(1));
        assert_eq!((h.state(0), h.downs(0)), ("down", 1));
        // Failing fast while down does not count again.
        h.failed(0, Failure::Down);
        h.probe_answered(0, Duration::from_secs(1));
        assert_eq!((h.state(0), h.downs(0)), ("up", 1));
    }

    #[test]
    fn zero_never_takes_a_server_down() {
        let h = health(0);
        for _ in 0..100 {
            h.failed(1, Failure::Timeout);
        }
        assert!(!h.is_down(1));
    }
}
