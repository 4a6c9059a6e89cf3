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
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use base64::Engine;
use memrelay_protocol::{compose, Command, Expect, Status};

use crate::generation::{Current, Generation};
use crate::relay::stream::HOLD_LIMIT;
use crate::relay::warm;
use crate::upstream::conn::{Received, ServerConn};
use crate::upstream::failure::Failure;
use crate::upstream::health::Health;
use crate::upstream::registry::{Registry, MAX_SERVER_IDS};
use crate::upstream::repair_set::Work;
use crate::upstream::tls::{blocking, Peer, ServerTls};

/// How long the thread sleeps when there is nothing to repair.
const TICK: Duration = Duration::from_millis(20);
/// Keys (or one resync) per server per turn, so that every server under repair moves on.
const BATCH: usize = 512;
/// The longest line of a metadump accepted (a key of 250 bytes escaped is 750).
const MAX_DUMP_LINE: usize = 4096;

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
            let peer = tls.as_ref().map(|tls| tls.peer(&endpoint));
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
            let peer = self.tls.as_ref().map(|tls| tls.peer(&endpoint));
            let Some(keys) = every_key(endpoint.addr, peer.as_ref(), timeout) else { return false };
            for key in keys {
                if self.shutdown.load(Ordering::Acquire) {
                    return false;
                }
                generation.router.write_targets(&key, &mut replicas);
                if !replicas.contains(&target) {
                    continue;
                }
                if !self.copy(generation, target, &key, source, true) {
                    return false;
                }
                copied += 1;
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

/// How a metadump walks the server's items.
#[derive(Clone, Copy)]
enum Walk {
    /// `lru_crawler metadump hash` (memcached 1.6.9 and later): the hash table, bucket by bucket,
    /// with its expansion held off, so every item present throughout the walk is listed once.
    Hash,
    /// `lru_crawler metadump all`: the LRUs. memcached calls it "(most of)" the items: one that
    /// moves between LRUs during the walk (the LRU maintainer moves the ones being read) can be
    /// missed, and a resync from it left a restarted replica without a key under load. Only for
    /// servers that do not know `hash`.
    Lru,
}

/// Why a metadump gave no keys.
enum Dump {
    /// The server does not know the walk asked for (an older memcached: `BADCLASS`, an error).
    Refused,
    /// Busy crawler, a line too long or malformed, a timeout, a closed connection.
    Failed,
}

/// Every key `addr` holds: from a hash-table walk, or where the server does not know that walk
/// (memcached before 1.6.9), from the LRU walk.
fn every_key(addr: SocketAddr, tls: Option<&Peer>, timeout: Duration) -> Option<Vec<Vec<u8>>> {
    match metadump(addr, tls, timeout, Walk::Hash) {
        Ok(keys) => Some(keys),
        Err(Dump::Refused) => metadump(addr, tls, timeout, Walk::Lru).ok(),
        Err(Dump::Failed) => None,
    }
}

fn failed<E>(_: E) -> Dump {
    Dump::Failed
}

/// Every key `addr` holds, from `lru_crawler metadump hash|all` (`key=<url-escaped> exp=… …`
/// lines, then `END`), over TLS with `tls`.
fn metadump(addr: SocketAddr, tls: Option<&Peer>, timeout: Duration, walk: Walk) -> Result<Vec<Vec<u8>>, Dump> {
    let mut stream = blocking::connect(addr, tls, timeout).map_err(failed)?;
    stream.set_read_timeout(Some(timeout)).map_err(failed)?;
    stream.set_write_timeout(Some(timeout)).map_err(failed)?;
    let command: &[u8] = match walk {
        Walk::Hash => b"lru_crawler metadump hash\r\n",
        Walk::Lru => b"lru_crawler metadump all\r\n",
    };
    stream.write_all(command).map_err(failed)?;
    stream.flush().map_err(failed)?;
    let mut reader = BufReader::new(stream);
    let mut keys = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader.by_ref().take(MAX_DUMP_LINE as u64).read_until(b'\n', &mut line).map_err(failed)?;
        if n == 0 || !line.ends_with(b"\n") {
            return Err(Dump::Failed);
        }
        let text = line.strip_suffix(b"\r\n").or_else(|| line.strip_suffix(b"\n")).unwrap_or(&line);
        if text == b"END" {
            return Ok(keys);
        }
        let Some(rest) = text.strip_prefix(b"key=") else {
            let refused = [&b"BADCLASS"[..], b"CLIENT_ERROR", b"ERROR"].iter().any(|e| text.starts_with(e));
            return Err(if keys.is_empty() && refused { Dump::Refused } else { Dump::Failed });
        };
        let escaped = rest.split(|&b| b == b' ').next().unwrap_or_default();
        keys.push(unescape(escaped).ok_or(Dump::Failed)?);
    }
}

/// Undoes memcached's URL escaping of a key (`%XX`).
fn unescape(escaped: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(escaped.len());
    let mut i = 0;
    while i < escaped.len() {
        if escaped[i] == b'%' {
            let hex = std::str::from_utf8(escaped.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(escaped[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_keys_are_unescaped_and_odd_keys_travel_as_base64() {
        assert_eq!(unescape(b"user%3A42%20x").unwrap(), b"user:42 x");
        assert_eq!(unescape(b"plain").unwrap(), b"plain");
        assert_eq!(unescape(b"bad%4"), None);
        assert_eq!(wire_key(b"k"), (b"k".to_vec(), false));
        assert_eq!(wire_key(b"a b"), (b"YSBi".to_vec(), true));
    }

    /// A server that answers each metadump command its own way, one connection per command
    /// (an older memcached refusing `hash`, a busy crawler, a dump cut off): what no memcached
    /// installed here says.
    fn server(answers: &'static [(&'static str, &'static str)]) -> SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        thread::spawn(move || {
            for stream in listener.incoming().take(answers.len()) {
                let mut stream = stream.unwrap();
                let mut line = String::new();
                BufReader::new(&stream).read_line(&mut line).unwrap();
                let answer =
                    answers.iter().find(|(command, _)| line.trim_end() == *command).map_or("ERROR\r\n", |a| a.1);
                stream.write_all(answer.as_bytes()).unwrap();
            }
        });
        addr
    }

    const TIMEOUT: Duration = Duration::from_secs(5);
    const KEYS: &str =
        "key=a exp=-1 la=1 cas=1 fetch=no cls=1 size=61\nkey=b%20c exp=-1 la=1 cas=2 fetch=no cls=1 size=61\nEND\r\n";

    #[test]
    fn the_hash_walk_is_asked_first_and_the_lru_walk_only_where_it_is_refused() {
        // memcached 1.6.9 and later: the hash walk answers, the LRU walk is never asked.
        let addr = server(&[("lru_crawler metadump hash", KEYS)]);
        assert_eq!(every_key(addr, None, TIMEOUT), Some(vec![b"a".to_vec(), b"b c".to_vec()]));
        // Older: `hash` read as a class id list.
        let addr = server(&[
            ("lru_crawler metadump hash", "BADCLASS invalid class id\r\n"),
            ("lru_crawler metadump all", KEYS),
        ]);
        assert_eq!(every_key(addr, None, TIMEOUT), Some(vec![b"a".to_vec(), b"b c".to_vec()]));
        // A busy crawler or a dump cut off is a failure (the resync is tried again), not a refusal.
        let addr = server(&[
            ("lru_crawler metadump hash", "BUSY currently processing crawler request\r\n"),
            ("lru_crawler metadump all", KEYS),
        ]);
        assert_eq!(every_key(addr, None, TIMEOUT), None);
        let addr = server(&[
            ("lru_crawler metadump hash", "key=a exp=-1 la=1\nERROR\r\n"),
            ("lru_crawler metadump all", KEYS),
        ]);
        assert_eq!(every_key(addr, None, TIMEOUT), None);
    }
}
