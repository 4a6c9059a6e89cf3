//! What leaves the process: the [`stats`] thread merges the threads' windows and writes
//! `windows.jsonl`, `requests.csv` and `summary.json` and publishes running totals for the
//! `stats` command; `/metrics` renders them as OpenMetrics text ([`prometheus`]) over HTTP
//! ([`endpoint`]) or HTTPS ([`https`]).

pub(crate) mod endpoint;
pub mod https;
pub(crate) mod prometheus;
pub(crate) mod stats;
