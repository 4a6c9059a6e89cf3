//! Recording, shared by both engines: every thread records into its own [`metrics::Recorder`]
//! (counters and HdrHistograms per request type, no lock or allocation per request) and ships a
//! window at each boundary ([`clock`]) to the stats thread (`export::stats`), which merges them;
//! running totals ([`live`]), the requests inside memrelay ([`in_system`]) and CPU time
//! ([`cpu`]). What leaves the process (files, `/metrics`) is `export`'s.

pub mod clock;
pub mod cpu;
pub mod in_system;
pub(crate) mod live;
pub mod metrics;
