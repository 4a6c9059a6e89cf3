//! memrelay: a memcached middleware that replicates writes, balances reads, shards multi-gets
//! and measures every request on its way through.
//!
//! The pool engine (the seeds' design, the one the lab's experiments and queueing models study):
//!
//! ```text
//!  clients ──TCP──▶ net thread ──▶ request queue ──▶ worker 1..W ──TCP (one blocking conn per server)──▶ memcached 1..S
//!     ▲            (mio, parses,     (MPMC, FIFO)      (route, send, wait,
//!     └────────────  stamps times) ◀── done/leftover ── merge, reply to client)
//! ```
//!
//! - [`net`]: accepts, reads, parses incrementally, one request per client in flight.
//! - [`worker`]: routes ([`routing`]), talks to the servers ([`server`]), replies to the client.
//! - [`metrics`]: per-thread recorders; [`stats`]: the thread that merges and writes them.
//! - [`pool`]: starts and stops the threads; [`config`]: the command line.
//!
//! Routing, the protocol and the measurement types are shared by every engine: an engine is a
//! scheduler around those pure parts.

pub mod buffer;
pub mod client_io;
pub mod config;
pub mod evented;
pub mod failure;
pub mod job;
pub mod ketama;
pub mod local;
pub mod metrics;
pub mod net;
pub mod pool;
pub mod routing;
pub mod server;
pub mod shutdown;
pub mod stats;
pub mod worker;
