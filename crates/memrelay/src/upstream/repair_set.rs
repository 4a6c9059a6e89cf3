//! Replica repair, for the `majority` and `primary` write policies: which servers missed writes,
//! what each must be brought up to date on, and (in [`worker`]) the thread that does it.
//!
//! A keyed write that a replica could not take (the server was down, refused, timed out, or is
//! being repaired) succeeds for the client when the policy says so, and the key is put in that
//! server's **repair set**. A server whose set is not empty, or that restarted empty while writes
//! were acknowledged without it, is **being repaired** until the repair thread has brought it up
//! to date:
//!
//! - reads avoid it (the next server in turn, or the key's next replica, serves them), so no read
//!   returns a value that a later acknowledged write or delete replaced;
//! - writes are not sent to it but add their key to its set, so the repair thread is the only
//!   writer there and writes land in order: for each key it reads the current value (flags and
//!   remaining TTL) from a replica that is up to date and stores it with a plain set, or deletes
//!   the key when that replica has none. A key written again meanwhile is put back in the set
//!   and copied again, so the last acknowledged write is what stays.
//! - a server that **restarted** (its `pid` changed: [`crate::upstream::health`]) lost everything it had;
//!   a full resync copies every key of an up-to-date replica that the restarted server holds a
//!   copy of (memcached's `lru_crawler metadump hash` lists them) in add mode, then the set.
//!
//! The set is bounded (`--repair-max-keys`): a key beyond the bound is counted as dropped and the
//! server is flushed and fully resynced instead, so nothing stale survives an overflow. Counts
//! per server are in `stats` and the metrics.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::upstream::registry::MAX_SERVER_IDS;

/// What the repair thread does next for a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Work {
    /// Copy every key an up-to-date replica holds (after `flush_all` first when the set overflowed).
    Resync { flush_first: bool },
    /// Bring this key up to date.
    Key(Vec<u8>),
}

#[derive(Debug, Default)]
struct Pending {
    /// Keys in the order they were missed; each once (`members`).
    order: VecDeque<Vec<u8>>,
    members: HashSet<Vec<u8>>,
    resync: bool,
    flush_first: bool,
    /// Work handed to the thread and not yet finished, as the record that brings it back (a
    /// spool rewritten meanwhile keeps it: the work may still fail).
    in_progress: Option<Record>,
    /// What the set gained since the spool last took it ([`spool`]; only when spooling).
    unspooled: Vec<Record>,
}

#[derive(Debug, Default)]
struct ServerRepair {
    /// Read on the hot path: reads avoid the server, writes add to its set.
    repairing: AtomicBool,
    pending: Mutex<Pending>,
    queued: AtomicU64,
    repaired: AtomicU64,
    dropped: AtomicU64,
    resyncs: AtomicU64,
}

/// Counts of one server's repair.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RepairCounts {
    /// Keys waiting.
    pub pending: u64,
    /// Keys ever put in the set.
    pub queued: u64,
    /// Keys brought up to date (copied or deleted), by the set or a resync.
    pub repaired: u64,
    /// Keys beyond the bound (each turned into a flush and full resync).
    pub dropped: u64,
    /// Full resyncs started.
    pub resyncs: u64,
}

#[derive(Debug)]
pub struct Repair {
    servers: Vec<ServerRepair>,
    pub(crate) max_keys: usize,
    /// Whether the sets are spooled to disk (records are kept for [`spool::Spool`]).
    spooling: AtomicBool,
}

impl Repair {
    /// Repair state for every server id; at most `max_keys` keys wait per server.
    pub fn new(max_keys: usize) -> Repair {
        Repair {
            servers: (0..MAX_SERVER_IDS).map(|_| ServerRepair::default()).collect(),
            max_keys: max_keys.max(1),
            spooling: AtomicBool::new(false),
        }
    }

    /// Whether `server` is being repaired: reads avoid it and writes are not sent to it.
    pub fn is_repairing(&self, server: usize) -> bool {
        self.servers[server].repairing.load(Ordering::Acquire)
    }

    /// `server` missed a write of `key`.
    pub fn missed(&self, server: usize, key: &[u8]) {
        let s = &self.servers[server];
        let mut pending = s.pending.lock().expect("repair state");
        s.repairing.store(true, Ordering::Release);
        if pending.members.contains(key) {
            return;
        }
        if pending.members.len() >= self.max_keys {
            // Too many to track one by one: start over from a flushed server.
            s.dropped.fetch_add(1, Ordering::Relaxed);
            if !pending.flush_first {
                pending.order.clear();
                pending.members.clear();
                pending.resync = true;
                pending.flush_first = true;
                self.spool(&mut pending, Record::FlushAndResync);
            }
            return;
        }
        pending.members.insert(key.to_vec());
        pending.order.push_back(key.to_vec());
        s.queued.fetch_add(1, Ordering::Relaxed);
        self.spool(&mut pending, Record::Key(key.to_vec()));
    }

    fn spool(&self, pending: &mut Pending, record: Record) {
        if self.spooling.load(Ordering::Relaxed) {
            pending.unspooled.push(record);
        }
    }

    /// From now on the sets' changes are kept for the spool.
    pub(crate) fn spool_records(&self) {
        self.spooling.store(true, Ordering::Relaxed);
    }

    /// A record read back from the spool at start.
    pub(crate) fn replay(&self, server: usize, record: Record) {
        match record {
            Record::Key(key) => self.missed(server, &key),
            Record::Resync => self.restarted(server),
            Record::FlushAndResync => {
                let s = &self.servers[server];
                let mut pending = s.pending.lock().expect("repair state");
                s.repairing.store(true, Ordering::Release);
                pending.order.clear();
                pending.members.clear();
                pending.resync = true;
                pending.flush_first = true;
                self.spool(&mut pending, Record::FlushAndResync);
            }
        }
    }

    /// What `server`'s set gained since the last call, and whether it is being repaired (both
    /// read at once: a server not being repaired has nothing that still needs its spool).
    pub(crate) fn take_records(&self, server: usize) -> (Vec<Record>, bool) {
        let s = &self.servers[server];
        let mut pending = s.pending.lock().expect("repair state");
        (std::mem::take(&mut pending.unspooled), s.repairing.load(Ordering::Acquire))
    }

    /// Everything `server` still needs, as records (a spool rewritten without duplicates).
    pub(crate) fn snapshot(&self, server: usize) -> Vec<Record> {
        let s = &self.servers[server];
        let mut pending = s.pending.lock().expect("repair state");
        pending.unspooled.clear();
        let mut records = Vec::with_capacity(pending.order.len() + 2);
        if pending.resync {
            records.push(if pending.flush_first { Record::FlushAndResync } else { Record::Resync });
        }
        records.extend(pending.in_progress.clone());
        records.extend(pending.order.iter().cloned().map(Record::Key));
        records
    }

    /// `server` restarted empty: copy every key it should hold back to it.
    pub fn restarted(&self, server: usize) {
        let s = &self.servers[server];
        let mut pending = s.pending.lock().expect("repair state");
        s.repairing.store(true, Ordering::Release);
        pending.resync = true;
        self.spool(&mut pending, Record::Resync);
    }

    /// The next piece of work for `server`, if any (marked in progress until [`Repair::done`]).
    pub(crate) fn next(&self, server: usize) -> Option<Work> {
        let s = &self.servers[server];
        let mut pending = s.pending.lock().expect("repair state");
        let work = if pending.resync {
            pending.resync = false;
            s.resyncs.fetch_add(1, Ordering::Relaxed);
            Some(Work::Resync { flush_first: std::mem::take(&mut pending.flush_first) })
        } else {
            let key = pending.order.pop_front();
            if let Some(key) = &key {
                // A write of the key from now on puts it back: it is copied again after this.
                pending.members.remove(key);
            }
            key.map(Work::Key)
        };
        pending.in_progress = work.as_ref().map(|work| match work {
            Work::Resync { flush_first: true } => Record::FlushAndResync,
            Work::Resync { flush_first: false } => Record::Resync,
            Work::Key(key) => Record::Key(key.clone()),
        });
        work
    }

    /// The work [`Repair::next`] gave is finished (`ok`) or must be retried later.
    pub(crate) fn done(&self, server: usize, work: Work, ok: bool) {
        let s = &self.servers[server];
        let mut pending = s.pending.lock().expect("repair state");
        pending.in_progress = None;
        match (work, ok) {
            (Work::Key(_), true) => {
                s.repaired.fetch_add(1, Ordering::Relaxed);
            }
            (Work::Key(key), false) => {
                if pending.members.insert(key.clone()) {
                    pending.order.push_front(key);
                }
            }
            (Work::Resync { .. }, true) => {}
            (Work::Resync { flush_first }, false) => {
                pending.resync = true;
                pending.flush_first |= flush_first;
            }
        }
        if pending.order.is_empty() && !pending.resync {
            s.repairing.store(false, Ordering::Release);
        }
    }

    /// Keys a resync brought back.
    pub(crate) fn resynced(&self, server: usize, keys: u64) {
        self.servers[server].repaired.fetch_add(keys, Ordering::Relaxed);
    }

    pub fn counts(&self, server: usize) -> RepairCounts {
        let s = &self.servers[server];
        let pending = s.pending.lock().expect("repair state").order.len() as u64;
        RepairCounts {
            pending,
            queued: s.queued.load(Ordering::Relaxed),
            repaired: s.repaired.load(Ordering::Relaxed),
            dropped: s.dropped.load(Ordering::Relaxed),
            resyncs: s.resyncs.load(Ordering::Relaxed),
        }
    }
}

/// One line of a spool file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Record {
    /// The key missed a write on the server.
    Key(Vec<u8>),
    /// The server restarted empty: copy back everything that belongs on it.
    Resync,
    /// The set overflowed: flush the server, then resync it.
    FlushAndResync,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missed_key_is_repaired_once_and_the_server_rejoins() {
        let r = Repair::new(10);
        assert!(!r.is_repairing(1));
        r.missed(1, b"a");
        r.missed(1, b"b");
        r.missed(1, b"a"); // already waiting: once
        assert!(r.is_repairing(1) && !r.is_repairing(0));
        assert_eq!(r.counts(1).pending, 2);
        let work = r.next(1).unwrap();
        assert_eq!(work, Work::Key(b"a".to_vec()));
        // Written again while being copied: copied again afterwards.
        r.missed(1, b"a");
        r.done(1, work, true);
        assert!(r.is_repairing(1));
        let mut order = Vec::new();
        while let Some(work) = r.next(1) {
            if let Work::Key(k) = &work {
                order.push(k.clone());
            }
            r.done(1, work, true);
        }
        assert_eq!(order, [b"b".to_vec(), b"a".to_vec()]);
        assert!(!r.is_repairing(1));
        assert_eq!(r.counts(1), RepairCounts { pending: 0, queued: 3, repaired: 3, dropped: 0, resyncs: 0 });
    }

    #[test]
    fn a_failed_copy_is_retried_first() {
        let r = Repair::new(10);
        r.missed(0, b"a");
        r.missed(0, b"b");
        let work = r.next(0).unwrap();
        r.done(0, work, false);
        assert_eq!(r.next(0), Some(Work::Key(b"a".to_vec())));
    }

    #[test]
    fn overflow_becomes_a_flush_and_resync() {
        let r = Repair::new(2);
        for key in [&b"a"[..], b"b", b"c", b"d"] {
            r.missed(0, key);
        }
        // c overflowed: a and b are forgotten for a flush and resync; d, missed after, waits.
        let counts = r.counts(0);
        assert_eq!((counts.pending, counts.dropped), (1, 1));
        assert_eq!(r.next(0), Some(Work::Resync { flush_first: true }));
        r.done(0, Work::Resync { flush_first: true }, true);
        assert_eq!(r.next(0), Some(Work::Key(b"d".to_vec())));
        r.done(0, Work::Key(b"d".to_vec()), true);
        assert!(!r.is_repairing(0));
    }

    #[test]
    fn a_restart_is_a_resync_before_the_set() {
        let r = Repair::new(10);
        r.missed(2, b"k");
        r.restarted(2);
        assert_eq!(r.next(2), Some(Work::Resync { flush_first: false }));
        r.done(2, Work::Resync { flush_first: false }, true);
        assert!(r.is_repairing(2), "the set is still waiting");
        assert_eq!(r.next(2), Some(Work::Key(b"k".to_vec())));
    }
}
