//! What leaves the process: the [`stats`] thread merges the threads' windows and writes
//! `windows.jsonl`, `requests.csv` and `summary.json` and publishes running totals for the
//! `stats` command; `/metrics` renders them as OpenMetrics text ([`prometheus`]), answered by
//! [`endpoint`] and served over HTTP or HTTPS ([`https`]: its rustls configuration) by
//! [`server`] (hyper on a runtime of its own, every connection bounded).

pub(crate) mod endpoint;
pub mod https;
pub(crate) mod prometheus;
pub(crate) mod server;
pub(crate) mod stats;
