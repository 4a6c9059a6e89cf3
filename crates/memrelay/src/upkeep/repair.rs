//! The repair thread: brings each server that is being repaired ([`super::Repair`]) up to date,
//! on connections of its own, while the server is up. For each missed key it reads the current
//! value from an up-to-date replica (`mg <key> v f t`) and stores it there with a plain set
//! (`ms <key> <len> F<flags> T<ttl>`), or deletes it (`md <key>`) when the replica has none; for
//! a restarted server it first copies, in add mode (`ME`: a value written since stays), every
//! key that the other servers list in `lru_crawler metadump hash` and that belongs on it.
//! It also turns a restart the health probe noticed into a resync. Bounded per turn
//! ([`BATCH`]) and by the server timeout per exchange; it stops with the shutdown flag. With TLS
//! to the servers its connections are TLS too ([`crate::upstream::tls`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use base64::Engine;
use memrelay_protocol::{compose, Command, Expect, Status};

use super::metadump::{self, Dump};
use crate::generation::{Current, Generation};
use crate::log_limit::OncePerSecond;
use crate::relay::stream::HOLD_LIMIT;
use crate::relay::warm;
use crate::upstream::conn::{Received, ServerConn};
use crate::upstream::failure::Failure;
use crate::upstream::health::Health;
use crate::upstream::registry::{Registry, MAX_SERVER_IDS};
use crate::upstream::repair_set::Work;
use crate::upstream::tls::ServerTls;

/// How long the thread sleeps when there is nothing to repair.
const TICK: Duration = Duration::from_millis(20);
/// Keys (or one resync) per server per turn, so that every server under repair moves on.
const BATCH: usize = 512;

/// Runs until `shutdown` is set, over the servers of the generation in force.
pub(crate) fn run(
    health: Arc<Health>,
    registry: Arc<Registry>,
    current: Arc<Current>,
    tls: Option<Arc<ServerTls>>,
    shutdown: Arc<AtomicBool>,
    max_value_len: usize,
) {
    let mut thread = RepairThread {
        health,
        registry,
        tls,
        conns: HashMap::new(),
        max_value_len,
        scratch: Vec::new(),
        shutdown: Arc::clone(&shutdown),
    };
    let mut restarts_seen = vec![0u64; MAX_SERVER_IDS];
    let mut was_repairing = vec![false; MAX_SERVER_IDS];
    let health = Arc::clone(&thread.health);
    while !shutdown.load(Ordering::Acquire) {
        let generation = current.get();
        let repairs = generation.router.repairs();
        let repair = health.repair();
        let mut busy = false;
        for &server in &generation.servers {
            // Looked at right before the server's work, so that a restart noticed meanwhile is
            // resynced before the missed keys are copied and reads come back to it.
            let restarts = health.restarts(server);
            if restarts != restarts_seen[server] {
                restarts_seen[server] = restarts;
                if repairs {
                    repair.restarted(server);
                }
            }
            let repairing = repair.is_repairing(server);
            if repairing != was_repairing[server] {
                was_repairing[server] = repairing;
                thread.log_transition(server, repairing);
            }
            if !repairs || !repairing || thread.health.is_down(server) {
                continue;
            }
            for _ in 0..BATCH {
                if shutdown.load(Ordering::Acquire) {
                    return;
                }
                let Some(work) = repair.next(server) else { break };
                busy = true;
                let ok = match &work {
                    Work::Key(key) => thread.copy_key(&generation, server, key),
                    Work::Resync { flush_first } => thread.resync(&generation, server, *flush_first),
                };
                let stop = !ok || matches!(work, Work::Resync { .. });
                repair.done(server, work, ok);
                if stop {
                    break;
                }
            }
        }
        if !busy {
            thread::sleep(TICK);
        }
    }
}

struct RepairThread {
    health: Arc<Health>,
    registry: Arc<Registry>,
    /// TLS to the servers, when it is on.
    tls: Option<Arc<ServerTls>>,
    conns: HashMap<usize, ServerConn>,
    max_value_len: usize,
    scratch: Vec<u8>,
    /// A resync stops at its next key once this is set (it is retried at the next start).
    shutdown: Arc<AtomicBool>,
}

impl RepairThread {
    fn log_transition(&self, server: usize, repairing: bool) {
        let name = self.registry.name(server);
        if repairing {
            eprintln!("memrelay: server {name} missed writes or restarted: reads avoid it until it is repaired");
        } else {
            let counts = self.health.repair().counts(server);
            eprintln!(
                "memrelay: server {name} is up to date ({} keys repaired so far, {} resyncs); reads use it again",
                counts.repaired, counts.resyncs
            );
        }
    }

    fn conn(&mut self, server: usize, timeout: Duration) -> &mut ServerConn {
        let (registry, tls, max_value_len) = (&self.registry, &self.tls, self.max_value_len);
        let conn = self.conns.entry(server).or_insert_with(|| {
            let endpoint = registry.endpoint(server);
            let peer = tls.as_ref().and_then(|tls| tls.peer(&endpoint));
            ServerConn::new(endpoint.addr, timeout, max_value_len, peer)
        });
        conn.set_timeout(timeout);
        conn
    }

    /// One exchange: `bytes` to `server`, its reply's status and bytes (in the connection). The
    /// outcome counts for the server's health: once a server is being repaired the engines send
    /// it nothing, so the repair thread's failures are what take a dead one down (and the probe
    /// then checks it for a restart before anything is copied to it again).
    fn exchange(&mut self, server: usize, bytes: &[u8], expect: Expect, timeout: Duration) -> Option<Status> {
        let deadline = Instant::now() + timeout;
        let conn = self.conn(server, timeout);
        // A value is at most the value size limit: held whole, never streamed.
        let whole = |received| match received {
            Received::Whole(reply) => Ok(reply),
            Received::Long => Err(Failure::TooLarge),
        };
        let result = conn.send(bytes, deadline).and_then(|()| conn.receive(expect, deadline, usize::MAX, HOLD_LIMIT));
        match result.and_then(whole) {
            Ok(reply) => {
                self.health.answered(server);
                Some(reply.status)
            }
            Err(failure) => {
                self.health.failed(server, failure);
                None
            }
        }
    }

    /// An up-to-date replica of `key` other than `target`.
    fn source_for(&self, generation: &Generation, key: &[u8], target: usize) -> Option<usize> {
        let mut replicas = Vec::new();
        generation.router.write_targets(key, &mut replicas);
        let repair = self.health.repair();
        replicas.into_iter().find(|&s| s != target && !self.health.is_down(s) && !repair.is_repairing(s))
    }

    /// Brings `key` on `target` to what an up-to-date replica holds (mode `""`: overwrite; `ME`:
    /// only where absent). False when no replica could be asked or an exchange failed.
    fn copy(&mut self, generation: &Generation, target: usize, key: &[u8], source: usize, add: bool) -> bool {
        let timeout = generation.server_timeout;
        let (key, base64) = wire_key(key);
        let key_flag: &[u8] = if base64 { b"b" } else { b"" };
        self.scratch.clear();
        let flags = [&b"v"[..], b"f", b"t", key_flag].into_iter().filter(|f| !f.is_empty());
        compose::meta(&mut self.scratch, Command::MetaGet, &key, None, flags);
        let read = std::mem::take(&mut self.scratch);
        let status = self.exchange(source, &read, Expect::Meta, timeout);
        self.scratch = read;
        let mut write = Vec::new();
        match status {
            Some(Status::Value) => {
                let conn = &self.conns[&source];
                let reply = conn.last_reply().expect("a reply was just read");
                let mode: &[u8] = match (add, base64) {
                    (true, true) => b"ME b",
                    (true, false) => b"ME",
                    (false, true) => b"b",
                    (false, false) => b"",
                };
                if !warm::copy(&key, &reply, conn.input.pending(), mode, &mut write) {
                    return false;
                }
                let stored = self.exchange(target, &write, Expect::Meta, timeout);
                // `NS`: add mode found a newer value there, which stays.
                matches!(stored, Some(Status::Done | Status::NotStored))
            }
            Some(Status::Miss) if add => true,
            Some(Status::Miss) => {
                compose::meta(
                    &mut write,
                    Command::MetaDelete,
                    &key,
                    None,
                    [key_flag].into_iter().filter(|f| !f.is_empty()),
                );
                matches!(self.exchange(target, &write, Expect::Meta, timeout), Some(Status::Done | Status::NotFound))
            }
            _ => false,
        }
    }

    fn copy_key(&mut self, generation: &Generation, target: usize, key: &[u8]) -> bool {
        let Some(source) = self.source_for(generation, key, target) else { return false };
        self.copy(generation, target, key, source, false)
    }

    /// Copies back every key that belongs on `target` from the other servers that are up to
    /// date (after flushing `target` when its repair set overflowed).
    fn resync(&mut self, generation: &Generation, target: usize, flush_first: bool) -> bool {
        let timeout = generation.server_timeout;
        let started = Instant::now();
        if flush_first && self.exchange(target, b"flush_all\r\n", Expect::Line, timeout) != Some(Status::Ok) {
            return false;
        }
        let repair = self.health.repair();
        let sources: Vec<usize> = generation
            .servers
            .iter()
            .copied()
            .filter(|&s| s != target && !self.health.is_down(s) && !repair.is_repairing(s))
            .collect();
        if sources.is_empty() {
            return false;
        }
        let mut copied = 0u64;
        let mut replicas = Vec::new();
        for source in sources {
            let endpoint = self.registry.endpoint(source);
            let peer = self.tls.as_ref().and_then(|tls| tls.peer(&endpoint));
            // Each key is copied as the dump lists it: memory stays bounded whatever it lists.
            let mut on_key = |key: Vec<u8>| {
                if self.shutdown.load(Ordering::Acquire) {
                    return false;
                }
                generation.router.write_targets(&key, &mut replicas);
                if !replicas.contains(&target) {
                    return true;
                }
                let ok = self.copy(generation, target, &key, source, true);
                copied += u64::from(ok);
                ok
            };
            match metadump::each_key(endpoint.addr, peer.as_ref(), timeout, &mut on_key) {
                Ok(_) => {}
                Err(Dump::PastBounds(why)) => {
                    static LOG: OncePerSecond = OncePerSecond::new();
                    if LOG.admit().is_some() {
                        eprintln!(
                            "memrelay: the metadump of server {} went past its bounds, {why}: the resync of \
                             server {} failed and is tried again",
                            self.registry.name(source),
                            self.registry.name(target)
                        );
                    }
                    return false;
                }
                Err(_) => return false,
            }
        }
        self.health.repair().resynced(target, copied);
        eprintln!(
            "memrelay: server {} resynced: {copied} keys copied back from its replicas in {:.1} s",
            self.registry.name(target),
            started.elapsed().as_secs_f64()
        );
        true
    }
}

/// The key as a meta command carries it: as it is when it is a valid text key, else base64.
fn wire_key(key: &[u8]) -> (Vec<u8>, bool) {
    if key.iter().all(|&b| b > b' ' && b < 0x7f) {
        (key.to_vec(), false)
    } else {
        (base64::engine::general_purpose::STANDARD.encode(key).into_bytes(), true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_keys_travel_as_base64() {
        assert_eq!(wire_key(b"k"), (b"k".to_vec(), false));
        assert_eq!(wire_key(b"a b"), (b"YSBi".to_vec(), true));
    }
}
