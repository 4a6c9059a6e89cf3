//! Everything about a server, in one place (as twemproxy's `nc_server.c` owns a server): its
//! identity ([`registry`]: stable ids, names, addresses), why an exchange with it failed
//! ([`failure`]), its health ([`health`]: down, cold, restarts), the keys it missed
//! ([`repair_set`]), the one retry backoff ([`backoff`]), the blocking connection the pool, the
//! repair thread and the probe share ([`conn`]) and TLS to it ([`tls`]). The threads that look
//! after servers (probe, repair, spool) are `upkeep`'s; the engines only use what is here.

pub(crate) mod backoff;
pub(crate) mod conn;
pub(crate) mod failure;
pub mod health;
pub(crate) mod registry;
pub mod repair_set;
pub(crate) mod tls;

/// What the policy reads of the servers' state, and the one thing it writes: a key a server
/// missed, for the repair thread.
pub(crate) trait Servers {
    fn is_down(&self, server: usize) -> bool;
    /// Restarted a short while ago: its misses may be keys it lost ([`warm`]).
    fn is_cold(&self, server: usize) -> bool;
    /// Being repaired: may still hold values acknowledged writes replaced.
    fn is_repairing(&self, server: usize) -> bool;
    /// `server` missed a write of `key`.
    fn missed(&self, server: usize, key: &[u8]);
}
