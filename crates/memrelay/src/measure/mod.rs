//! Measurement, shared by both engines: every thread records into its own [`metrics::Recorder`]
//! (counters and HdrHistograms per request type, no lock or allocation per request) and ships a
//! window at each boundary to the [`stats`] thread, which merges them, writes `windows.jsonl`,
//! `requests.csv` and `summary.json`, and publishes running totals ([`live`]) for the `stats`
//! command and the Prometheus endpoint ([`prometheus`]). The stats thread also samples the
//! requests inside memrelay ([`in_system`]). `/metrics` is served over HTTP ([`endpoint`]) or HTTPS
//! ([`https`]).

pub mod cpu;
pub(crate) mod endpoint;
pub mod https;
pub mod in_system;
pub(crate) mod live;
pub mod metrics;
pub(crate) mod prometheus;
pub(crate) mod stats;
