//! The test kit shared by memrelay's crates (not published): what a black-box test needs to run
//! real memcached servers beside the program under test and speak raw protocol bytes to either.
//!
//! - [`process`]: free ports, readiness seen in /proc, reaping, bounded waits, descriptor limit.
//! - [`memcached`]: one real memcached on a free port, killed when dropped.
//! - [`client`]: a blocking raw-bytes client and reply helpers.
//! - [`counters`]: a server's own `stats` counters and their deltas.
//! - [`fake`]: fake servers for failure tests.
//! - [`tls`]: test certificates (the `openssl` command) and a memcached speaking TLS.

pub mod client;
pub mod counters;
pub mod fake;
pub mod memcached;
pub mod process;
pub mod tls;

pub use client::{find, parse_values, show, Client, IO_TIMEOUT};
pub use counters::{delta, parse_stats};
pub use fake::slow_server;
pub use memcached::{Memcached, MEMCACHED};
pub use process::{
    free_port, kill_and_reap, raise_nofile, wait_for, wait_listening, Ready, START_ATTEMPTS, START_TIMEOUT,
};
pub use tls::{make_certificate, Ca, Issued, TlsMemcached};
