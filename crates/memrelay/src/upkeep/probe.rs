//! The probe thread: for each server that is down, `version` on its own connection, first after
//! `probe_first`, then on a doubling backoff up to `probe_max`; a `VERSION` line in time brings the
//! server back. Every `restart_check` it also asks each server that is up for its `pid`, `time`
//! and `uptime` (`stats`): another process than last time is a restart, and the server is marked
//! cold and resynced. With a repair spool the identities are kept on disk ([`super::identities`]),
//! and the first look at start ([`first_look`], before any client is accepted) tells a server
//! that restarted while memrelay was down.
//! Bounded by the server timeout per exchange and by the shutdown flag. With TLS to the servers,
//! each exchange's connection is TLS too ([`crate::upstream::tls`]).

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::identities::{Identity, IdentityFile};
use crate::generation::Current;
use crate::upstream::backoff::Backoff;
use crate::upstream::health::Health;
use crate::upstream::registry::{Registry, MAX_SERVER_IDS};
use crate::upstream::tls::blocking;
use crate::upstream::tls::ServerTls;

/// How the probe reaches one server: its address, and TLS when it is on.
struct Dial {
    addr: std::net::SocketAddr,
    tls: Option<crate::upstream::tls::Peer>,
}

impl Dial {
    fn to(registry: &Registry, tls: Option<&ServerTls>, server: usize) -> Dial {
        let endpoint = registry.endpoint(server);
        Dial { addr: endpoint.addr, tls: tls.and_then(|tls| tls.peer(&endpoint)) }
    }
}

/// The longest the thread sleeps: how soon it notices a server that went down, or shutdown.
const TICK: Duration = Duration::from_millis(50);

/// Runs until `shutdown` is set, over the servers of the generation in force.
pub(crate) fn run(
    health: Arc<Health>,
    registry: Arc<Registry>,
    current: Arc<Current>,
    tls: Option<Arc<ServerTls>>,
    shutdown: Arc<AtomicBool>,
    mut known: Known,
) {
    let dial = |server: usize| Dial::to(&registry, tls.as_deref(), server);
    let settings = health.settings();
    // Per server id: when it was seen down, and when to probe it next.
    let mut seen_down: Vec<Option<Instant>> = vec![None; MAX_SERVER_IDS];
    let mut backoff = vec![Backoff::new((settings.probe_first, settings.probe_max)); MAX_SERVER_IDS];
    let mut next_check = Instant::now();
    while !shutdown.load(Ordering::Acquire) {
        let generation = current.get();
        let (servers, timeout) = (&generation.servers, generation.server_timeout);
        let now = Instant::now();
        if now >= next_check {
            next_check = now + settings.restart_check;
            for &server in servers {
                if health.is_down(server) {
                    continue;
                }
                let Some(seen) = server_identity(&dial(server), timeout) else { continue };
                known.note(&health, &registry, server, seen);
            }
        }
        for &server in servers {
            if !health.is_down(server) {
                seen_down[server] = None;
                continue;
            }
            let since = *seen_down[server].get_or_insert_with(|| {
                // Seen down is the first failure: the first probe waits `probe_first`.
                backoff[server].succeeded();
                backoff[server].failed(now);
                now
            });
            if backoff[server].waiting(now) {
                continue;
            }
            let to = dial(server);
            if answers_version(&to, timeout) {
                // Back from down, perhaps restarted (empty): say so before it is used again, so
                // that a repair resyncs it before reads reach it.
                if let Some(seen) = server_identity(&to, timeout) {
                    known.note(&health, &registry, server, seen);
                }
                health.probe_answered(server, since.elapsed());
                seen_down[server] = None;
            } else {
                backoff[server].failed(Instant::now());
            }
        }
        // Sleep until the next probe or check is due (at most a tick).
        let now = Instant::now();
        let mut wake = (now + TICK).min(next_check);
        for &server in servers {
            if seen_down[server].is_some() {
                wake = wake.min(backoff[server].retry_at().unwrap_or(now));
            }
        }
        drop(generation);
        thread::sleep(wake.saturating_duration_since(now));
    }
}

/// The process each server was when last seen, by server id, and where they are kept.
pub(crate) struct Known {
    identities: Vec<Option<Identity>>,
    file: Option<IdentityFile>,
}

impl Known {
    /// Nothing known yet; with `file`, what it holds for the servers `registry` names.
    pub fn from(file: Option<IdentityFile>, registry: &Registry) -> Known {
        let mut identities = vec![None; MAX_SERVER_IDS];
        if let Some(file) = &file {
            let by_name = file.load();
            for (id, slot) in identities.iter_mut().enumerate().take(registry.len()) {
                *slot = by_name.get(&registry.name(id)).copied();
            }
        }
        Known { identities, file }
    }

    /// Records the process just `seen` as `server`: another one than last time is a restart.
    fn note(&mut self, health: &Health, registry: &Registry, server: usize, seen: Identity) {
        let known = &mut self.identities[server];
        if known.is_some_and(|was| was.restarted_as(&seen)) {
            health.restarted(server);
        }
        if *known == Some(seen) {
            return;
        }
        *known = Some(seen);
        if let Some(file) = &self.file {
            let names: Vec<(String, Identity)> =
                (0..registry.len()).filter_map(|id| Some((registry.name(id), self.identities[id]?))).collect();
            if let Err(error) = file.save(names.iter().map(|(name, identity)| (name.as_str(), *identity))) {
                eprintln!("memrelay: the server identities could not be saved: {error}");
            }
        }
    }
}

/// Looks at every server once, before clients are accepted: one that is another process than
/// the identities file says restarted while memrelay was down, and is resynced before any read
/// reaches it. A server that does not answer is left to the probe.
pub(crate) fn first_look(
    health: &Health,
    registry: &Registry,
    tls: Option<&ServerTls>,
    servers: &[usize],
    timeout: Duration,
    known: &mut Known,
) {
    for &server in servers {
        if let Some(seen) = server_identity(&Dial::to(registry, tls, server), timeout) {
            known.note(health, registry, server, seen);
        }
    }
}

/// The server's process from `stats` (`pid`, `time`, `uptime`), if it answers within `timeout`.
fn server_identity(to: &Dial, timeout: Duration) -> Option<Identity> {
    let reply = exchange(to, b"stats\r\n", b"END\r\n", timeout)?;
    let text = String::from_utf8_lossy(&reply);
    let stat = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|line| line.strip_prefix("STAT ")?.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
    };
    Some(Identity::from_stats(stat("pid")?, stat("time")?, stat("uptime")?))
}

/// Sends `request` on a new connection and reads until the reply ends with `end` (at most
/// 64 KiB), within `timeout`.
fn exchange(to: &Dial, request: &[u8], end: &[u8], timeout: Duration) -> Option<Vec<u8>> {
    let deadline = Instant::now() + timeout;
    let mut stream = blocking::connect(to.addr, to.tls.as_ref(), timeout).ok()?;
    stream.set_write_timeout(Some(timeout)).ok()?;
    stream.write_all(request).ok()?;
    stream.flush().ok()?;
    let mut reply = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    while !reply.ends_with(end) && reply.len() < 64 * 1024 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        stream.set_read_timeout(Some(left)).ok()?;
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => reply.extend_from_slice(&chunk[..n]),
        }
    }
    reply.ends_with(end).then_some(reply)
}

/// Whether the server answers `version` with a `VERSION` line within `timeout`.
fn answers_version(to: &Dial, timeout: Duration) -> bool {
    exchange(to, b"version\r\n", b"\r\n", timeout).is_some_and(|reply| reply.starts_with(b"VERSION "))
}
