//! Failed password checks, counted per peer address and slowed down: logins on the memcached
//! port ([`LOGINS`]; memcached answers every guess at once: 20,000 wrong passwords on one
//! connection took 0.04 s) and basic credentials on `/metrics` ([`SCRAPES`]). One [`Throttle`]
//! each, the same rules:
//!
//! - Each peer address that failed has a bucket of [`BURST`] password checks, refilled at one
//!   per [`REFILL`]; a failed check takes one. An attempt from an address with none left is not
//!   checked at all: it is refused (a correct password too). So an address gets at most
//!   [`BURST`] guesses at once and one a second after that, whatever the number of connections,
//!   and nothing waits: the engines never sleep, other clients are never held up.
//! - An address is only ever refused for its own failures: one without a bucket (it never
//!   failed, or its bucket refilled and was forgotten) is always checked.
//! - A success takes nothing; an attempt that checks no password (a malformed token, no
//!   credentials) takes nothing.
//!
//! The table holds the addresses failing now, at most [`MAX_PEERS`]: a bucket that has refilled
//! is the same as none, so when the table is full those are forgotten first; if that frees less
//! than [`ROOM`], the buckets nearest to refilled are forgotten too (an attacker with more
//! addresses failing at once than the table holds is slowed down less, never an honest client
//! more). Reports name the [`LISTED`] addresses with the most failures, and count the rest,
//! forgotten ones included, as `other` (so the sum over addresses never decreases).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Password checks an address may fail at once.
pub const BURST: u32 = 5;
/// One more check is allowed per this much time.
pub const REFILL: Duration = Duration::from_secs(1);
/// Failed checks after which a connection is closed (memcached port).
pub const MAX_PER_CONNECTION: u32 = 5;
/// Addresses with a bucket at most (a bound on memory: some 64 bytes each).
pub const MAX_PEERS: usize = 4096;
/// Slots a full table frees at least, so that its sweep is paid once per this many addresses.
pub const ROOM: usize = MAX_PEERS / 8;
/// Addresses named one by one in `stats` and the metrics (a bound on the label set).
pub const LISTED: usize = 256;

/// Failed logins on the memcached port.
pub static LOGINS: Throttle = Throttle::new();
/// Failed basic credentials on `/metrics`.
pub static SCRAPES: Throttle = Throttle::new();

/// One address's failed checks.
#[derive(Debug, Clone, Copy)]
struct Peer {
    /// Failures since the address entered the table.
    failures: u64,
    /// Checks left, and when the bucket was last refilled.
    tokens: u32,
    refilled: Instant,
}

impl Peer {
    fn new(now: Instant) -> Peer {
        Peer { failures: 0, tokens: BURST, refilled: now }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled);
        let earned = (elapsed.as_nanos() / REFILL.as_nanos()).min(u128::from(BURST)) as u32;
        if earned > 0 {
            self.tokens = (self.tokens + earned).min(BURST);
            self.refilled = if self.tokens == BURST { now } else { self.refilled + REFILL * earned };
        }
    }

    /// Time until the bucket is full again (zero: it is, and the entry means nothing).
    fn until_full(&mut self, now: Instant) -> Duration {
        self.refill(now);
        (REFILL * (BURST - self.tokens)).saturating_sub(now.saturating_duration_since(self.refilled))
    }
}

/// The table behind a [`Throttle`]; `None` is a client whose address could not be read.
#[derive(Debug, Default)]
struct Peers {
    by_address: HashMap<Option<IpAddr>, Peer>,
    /// Failures of the addresses forgotten since start.
    forgotten: u64,
}

impl Peers {
    /// Forgets the refilled buckets and, if that is not [`ROOM`], the nearest to refilled.
    fn make_room(&mut self, now: Instant) {
        let mut waiting: Vec<(Duration, Option<IpAddr>)> =
            self.by_address.iter_mut().map(|(ip, peer)| (peer.until_full(now), *ip)).collect();
        let excess = (waiting.len() + ROOM).saturating_sub(MAX_PEERS);
        let refilled = waiting.iter().filter(|(wait, _)| wait.is_zero()).count();
        let forget = excess.max(refilled).min(waiting.len());
        if forget == 0 {
            return;
        }
        if forget < waiting.len() {
            waiting.select_nth_unstable(forget - 1);
        }
        for (_, ip) in &waiting[..forget] {
            if let Some(peer) = self.by_address.remove(ip) {
                self.forgotten += peer.failures;
            }
        }
    }
}

/// Failed password checks per peer address, and the decision whether the next one is checked.
#[derive(Debug)]
pub struct Throttle {
    peers: Mutex<Option<Peers>>,
    /// Attempts refused unchecked.
    throttled: AtomicU64,
}

impl Default for Throttle {
    fn default() -> Throttle {
        Throttle::new()
    }
}

impl Throttle {
    pub const fn new() -> Throttle {
        Throttle { peers: Mutex::new(None), throttled: AtomicU64::new(0) }
    }

    fn with_peers<T>(&self, f: impl FnOnce(&mut Peers) -> T) -> T {
        let mut guard = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        f(guard.get_or_insert_with(Peers::default))
    }

    /// Whether an attempt from `peer` may have its password checked now; else it is throttled
    /// (counted), to be refused unchecked. Only `peer`'s own failures can say no.
    pub fn may_check(&self, peer: Option<IpAddr>, now: Instant) -> bool {
        let allowed = self.with_peers(|peers| match peers.by_address.get_mut(&peer) {
            None => true,
            Some(entry) => {
                entry.refill(now);
                entry.tokens > 0
            }
        });
        if !allowed {
            self.throttled.fetch_add(1, Ordering::Relaxed);
        }
        allowed
    }

    /// A check from `peer` failed: counted, and a check taken from its bucket. Returns the
    /// address's failures since it entered the table.
    pub fn failed(&self, peer: Option<IpAddr>, now: Instant) -> u64 {
        self.with_peers(|peers| {
            if !peers.by_address.contains_key(&peer) && peers.by_address.len() >= MAX_PEERS {
                peers.make_room(now);
            }
            let entry = peers.by_address.entry(peer).or_insert_with(|| Peer::new(now));
            entry.refill(now);
            entry.tokens = entry.tokens.saturating_sub(1);
            entry.failures += 1;
            entry.failures
        })
    }

    /// Attempts refused unchecked since start.
    pub fn throttled(&self) -> u64 {
        self.throttled.load(Ordering::Relaxed)
    }

    /// Failures by address, sorted by address: the [`LISTED`] with the most, then `other` (the
    /// rest and the forgotten, when there are any); `unknown`: clients whose address could not be
    /// read.
    pub fn failures_by_peer(&self) -> Vec<(String, u64)> {
        self.with_peers(|peers| {
            let mut list: Vec<(Option<IpAddr>, u64)> =
                peers.by_address.iter().map(|(ip, p)| (*ip, p.failures)).collect();
            let mut other = peers.forgotten;
            if list.len() > LISTED {
                list.select_nth_unstable_by_key(LISTED - 1, |&(ip, n)| (std::cmp::Reverse(n), ip));
                other += list.drain(LISTED..).map(|(_, n)| n).sum::<u64>();
            }
            list.sort_unstable();
            let mut named: Vec<(String, u64)> =
                list.into_iter().map(|(ip, n)| (ip.map_or_else(|| "unknown".into(), |ip| ip.to_string()), n)).collect();
            if other > 0 {
                named.push(("other".to_string(), other));
            }
            named
        })
    }

    /// Addresses with a bucket now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.with_peers(|peers| peers.by_address.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(i: u32) -> Option<IpAddr> {
        Some(IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i)))
    }

    #[test]
    fn a_bucket_allows_a_burst_then_one_check_per_refill() {
        let now = Instant::now();
        let mut peer = Peer::new(now);
        peer.tokens = 0;
        peer.refill(now + REFILL / 2);
        assert_eq!(peer.tokens, 0);
        assert_eq!(peer.until_full(now + REFILL / 2), REFILL * BURST - REFILL / 2);
        peer.refill(now + REFILL);
        assert_eq!(peer.tokens, 1);
        peer.refill(now + REFILL * 100);
        assert_eq!(peer.tokens, BURST);
        assert!(peer.until_full(now + REFILL * 100).is_zero());
    }

    #[test]
    fn failures_are_throttled_per_address() {
        let throttle = Throttle::new();
        let now = Instant::now();
        let a = address(1);
        for _ in 0..BURST {
            assert!(throttle.may_check(a, now));
            throttle.failed(a, now);
        }
        assert!(!throttle.may_check(a, now), "a sixth guess at once is throttled");
        assert_eq!(throttle.throttled(), 1);
        assert!(throttle.may_check(a, now + REFILL), "one more a second later");
        assert!(throttle.may_check(address(2), now), "another address is not held up");
        assert!(throttle.may_check(None, now), "nor a client without an address");
        assert_eq!(throttle.failures_by_peer(), vec![("10.0.0.1".to_string(), u64::from(BURST))]);
    }

    /// The lockout of issue 43: once 256 addresses had failed once, every further address shared
    /// one bucket, which one client kept empty: an address that never failed was refused.
    #[test]
    fn a_full_table_never_refuses_an_address_without_failures() {
        let throttle = Throttle::new();
        let now = Instant::now();
        // Every slot taken by an address out of checks, then a flood from further addresses.
        for i in 0..MAX_PEERS as u32 {
            for _ in 0..BURST {
                throttle.failed(address(i), now);
            }
        }
        for i in MAX_PEERS as u32..MAX_PEERS as u32 * 3 {
            for _ in 0..BURST {
                assert!(throttle.may_check(address(i), now), "{i}: refused for others' failures");
                throttle.failed(address(i), now);
            }
        }
        assert!(throttle.len() <= MAX_PEERS, "bounded: {}", throttle.len());
        let honest: IpAddr = "192.0.2.1".parse().unwrap();
        assert!(throttle.may_check(Some(honest), now));
        // The flooding addresses still in the table are still held to their own buckets.
        let last = address(MAX_PEERS as u32 * 3 - 1);
        assert!(!throttle.may_check(last, now), "the newest failing address keeps its bucket");
        // Reports: the listed addresses and `other`, which sums everything else (none lost).
        let report = throttle.failures_by_peer();
        assert_eq!(report.len(), LISTED + 1);
        assert_eq!(report.last().unwrap().0, "other");
        assert_eq!(report.iter().map(|(_, n)| n).sum::<u64>(), MAX_PEERS as u64 * 3 * u64::from(BURST));
    }

    #[test]
    fn refilled_buckets_are_forgotten_first_when_the_table_is_full() {
        let throttle = Throttle::new();
        let start = Instant::now();
        for i in 0..MAX_PEERS as u32 {
            throttle.failed(address(i), start);
        }
        // One address keeps failing; a bucket that lost one check is full a second later.
        let busy = address(0);
        for _ in 0..BURST - 1 {
            throttle.failed(busy, start);
        }
        let later = start + REFILL;
        throttle.failed(address(MAX_PEERS as u32), later);
        assert_eq!(throttle.len(), 2, "the refilled were forgotten, the busy one kept");
        let report = throttle.failures_by_peer();
        assert!(report.contains(&("10.0.0.0".to_string(), u64::from(BURST))), "{report:?}");
        assert!(report.contains(&("other".to_string(), MAX_PEERS as u64 - 1)), "{report:?}");
    }
}
