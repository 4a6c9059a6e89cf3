//! Failed logins, counted per peer address and slowed down (beyond memcached, which answers
//! every guess at once: 20,000 wrong passwords on one connection took 0.04 s).
//!
//! - Each peer address has a bucket of [`BURST`] password checks, refilled at one per
//!   [`REFILL`]; a failed check (`CLIENT_ERROR authentication failure`) takes one. A login whose
//!   peer has none left is not checked at all: it is answered `CLIENT_ERROR authentication
//!   failure` (a correct password too) and the connection is closed. So an address gets at most
//!   [`BURST`] guesses at once and one a second after that, whatever the number of connections,
//!   and nothing waits: the engines never sleep, other clients are never held up.
//! - A connection is closed after [`MAX_PER_CONNECTION`] failed checks (answered first).
//! - A successful login takes nothing; malformed tokens check no password and take nothing (they
//!   are answered as memcached answers them).
//!
//! The counts are kept for at most [`MAX_PEERS`] addresses (a bound on memory and on the label
//! set of `memrelay_login_failures_total{peer}`); failures from further addresses are counted,
//! and throttled, together under `other`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Password checks an address may fail at once.
pub const BURST: u32 = 5;
/// One more check is allowed per this much time.
pub const REFILL: Duration = Duration::from_secs(1);
/// Failed checks after which a connection is closed.
pub const MAX_PER_CONNECTION: u32 = 5;
/// Addresses counted one by one (the rest together, as `other`).
pub const MAX_PEERS: usize = 256;

/// One address's failed logins.
#[derive(Debug, Clone, Copy)]
struct Peer {
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
}

#[derive(Debug, Default)]
struct Peers {
    by_address: HashMap<IpAddr, Peer>,
    /// Addresses past [`MAX_PEERS`] (and clients without a known address).
    other: Option<Peer>,
}

impl Peers {
    /// The entry of `peer`, created (with a full bucket) when it has none.
    fn entry(&mut self, peer: Option<IpAddr>, now: Instant) -> &mut Peer {
        match peer {
            Some(ip) if self.by_address.contains_key(&ip) || self.by_address.len() < MAX_PEERS => {
                self.by_address.entry(ip).or_insert_with(|| Peer::new(now))
            }
            _ => self.other.get_or_insert_with(|| Peer::new(now)),
        }
    }

    fn known(&mut self, peer: Option<IpAddr>) -> Option<&mut Peer> {
        match peer {
            Some(ip) if self.by_address.contains_key(&ip) => self.by_address.get_mut(&ip),
            Some(_) if self.by_address.len() < MAX_PEERS => None,
            _ => self.other.as_mut(),
        }
    }
}

static PEERS: Mutex<Option<Peers>> = Mutex::new(None);
/// Logins refused unchecked because their address had no check left.
static THROTTLED: AtomicU64 = AtomicU64::new(0);

fn with_peers<T>(f: impl FnOnce(&mut Peers) -> T) -> T {
    let mut guard = PEERS.lock().unwrap_or_else(|p| p.into_inner());
    f(guard.get_or_insert_with(Peers::default))
}

/// Whether a login from `peer` may have its password checked now (else it is throttled: counted,
/// and to be refused unchecked).
pub fn may_check(peer: Option<IpAddr>, now: Instant) -> bool {
    let allowed = with_peers(|peers| match peers.known(peer) {
        None => true,
        Some(entry) => {
            entry.refill(now);
            entry.tokens > 0
        }
    });
    if !allowed {
        THROTTLED.fetch_add(1, Ordering::Relaxed);
    }
    allowed
}

/// A login from `peer` failed (its password was checked, or it was throttled): counted, and a
/// check taken from its bucket. Returns the address's failures so far.
pub fn failed(peer: Option<IpAddr>, now: Instant) -> u64 {
    with_peers(|peers| {
        let entry = peers.entry(peer, now);
        entry.refill(now);
        entry.tokens = entry.tokens.saturating_sub(1);
        entry.failures += 1;
        entry.failures
    })
}

/// Logins refused unchecked since start.
pub fn throttled() -> u64 {
    THROTTLED.load(Ordering::Relaxed)
}

/// Failed logins by peer address (`other`: past [`MAX_PEERS`]), sorted by address.
pub fn failures_by_peer() -> Vec<(String, u64)> {
    with_peers(|peers| {
        let mut list: Vec<(IpAddr, u64)> = peers.by_address.iter().map(|(ip, p)| (*ip, p.failures)).collect();
        list.sort_unstable();
        let mut named: Vec<(String, u64)> = list.into_iter().map(|(ip, n)| (ip.to_string(), n)).collect();
        if let Some(other) = &peers.other {
            named.push(("other".to_string(), other.failures));
        }
        named
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_a_burst_then_one_check_per_refill() {
        let now = Instant::now();
        let mut peer = Peer::new(now);
        peer.tokens = 0;
        peer.refill(now + REFILL / 2);
        assert_eq!(peer.tokens, 0);
        peer.refill(now + REFILL);
        assert_eq!(peer.tokens, 1);
        peer.refill(now + REFILL * 100);
        assert_eq!(peer.tokens, BURST);
    }

    #[test]
    fn failures_are_counted_per_address_within_a_bound() {
        // The one test touching the process-wide table (addresses of the documentation range).
        let now = Instant::now();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        for _ in 0..BURST {
            assert!(may_check(Some(a), now));
            failed(Some(a), now);
        }
        assert!(!may_check(Some(a), now), "a sixth guess at once is throttled");
        assert!(may_check(Some(a), now + REFILL), "one more a second later");
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        assert!(may_check(Some(b), now), "another address is not held up");
        for i in 0..MAX_PEERS as u32 + 10 {
            failed(Some(IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i))), now);
        }
        let list = failures_by_peer();
        assert_eq!(list.len(), MAX_PEERS + 1, "bounded, plus `other`");
        assert_eq!(list.iter().find(|(name, _)| name == "192.0.2.1").unwrap().1, u64::from(BURST));
        assert!(list.iter().any(|(name, n)| name == "other" && *n >= 10));
    }
}
