//! memrelay-bench: a memcached load generator with memtier_benchmark's model (threads x
//! virtual clients, closed loop, think time 0), made exact where memtier is not (`--ratio`
//! counts requests, every multi-get has exactly `--multiget` keys) and measured well (open loop
//! without coordinated omission, HDR histograms, JSON output).
//!
//! - [`config`]: command line and validation.
//! - [`keys`], [`workload`]: which keys and which requests each virtual client sends.
//! - [`conn`]: one virtual client's connection, buffers and requests in flight.
//! - [`worker`]: a thread's mio event loop.
//! - [`tls`]: `--tls-ca` and co.: a rustls session between a connection's socket and buffers.
//! - [`stats`], [`collect`]: counters and histograms, per-second merge across threads.
//! - [`report`]: JSON and table output.
//! - [`run`]: the main thread: start, phases, exit codes.
//! - [`link`]: `--link-listen` / `--link-probe`, a link's round trip and bandwidth.

pub mod collect;
pub mod config;
pub mod conn;
pub mod keys;
pub mod link;
pub mod report;
pub mod run;
pub mod stats;
pub mod sys;
pub mod tls;
pub mod worker;
pub mod workload;
