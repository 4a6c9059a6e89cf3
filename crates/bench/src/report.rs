//! The results: the JSON document (`--json-out`, every field described in README.md) and the
//! human summary table.

use std::io::Write;

use base64::Engine;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::collect::{Collector, Interval};
use crate::config::Config;
use crate::stats::{Stats, Summaries, HIST_HIGHEST, HIST_LOWEST, HIST_SIGFIG};
use crate::workload::Kind;

pub const HISTOGRAM_ENCODING: &str = "hdrhistogram-v2-deflate-base64";

#[derive(Debug, Serialize)]
pub struct Output<'a> {
    pub tool: &'static str,
    pub version: &'static str,
    pub config: &'a Config,
    /// `completed`, `interrupted`, `connections_lost` or `stalled`.
    pub status: &'static str,
    pub exit_code: i32,
    /// One line saying why, when the status is not `completed`.
    pub message: Option<String>,
    /// Wall clock when the connections were up and the first phase started (with
    /// `--start-at`: when the wait for that time ended and the workload phase started).
    pub start_unix_s: f64,
    /// The workload phase (all zero when only populating).
    #[serde(flatten)]
    pub run: Phase,
    /// The populate phase, when `--populate` was given.
    pub populate: Option<Phase>,
    pub errors: Errors,
}

#[derive(Debug, Serialize)]
pub struct Phase {
    pub duration_s: f64,
    /// When the first request was sent, seconds after the phase started; the totals' rates are
    /// over `duration_s - began_s`.
    pub began_s: f64,
    #[serde(flatten)]
    pub summaries: Summaries,
    /// Open loop only: scheduled requests that were due before the end but never sent.
    pub backlog: Option<u64>,
    pub intervals: Vec<Interval>,
    pub histograms: Histograms,
}

#[derive(Debug, Serialize)]
pub struct Histograms {
    pub encoding: &'static str,
    pub unit: &'static str,
    pub lowest: u64,
    pub highest: u64,
    pub significant_digits: u8,
    pub totals: String,
    pub set: String,
    pub get: String,
    pub multiget: String,
}

#[derive(Debug, Serialize)]
pub struct Errors {
    /// Error events: error replies, lost connections, invalid replies, timeouts.
    pub events: u64,
    /// The first few, in time order.
    pub first: Vec<ErrorEntry>,
}

#[derive(Debug, Serialize)]
pub struct ErrorEntry {
    pub phase: &'static str,
    pub time_s: f64,
    pub thread: usize,
    pub server: String,
    pub message: String,
}

impl Phase {
    pub fn empty() -> Phase {
        Phase::from_stats(&Stats::default(), 0.0, None, Vec::new())
    }

    pub fn from_collector(c: &Collector, open_loop: bool) -> Phase {
        let mut phase = Phase::from_stats(&c.totals, c.seconds(), open_loop.then_some(c.backlog), c.intervals.clone());
        // The rates over the span the latencies lie in (from the first request sent).
        phase.began_s = c.seconds() - c.covered_seconds();
        phase.summaries = c.totals.summaries(c.covered_seconds());
        phase
    }

    fn from_stats(stats: &Stats, seconds: f64, backlog: Option<u64>, intervals: Vec<Interval>) -> Phase {
        let total = stats.total();
        Phase {
            duration_s: seconds,
            began_s: 0.0,
            summaries: stats.summaries(seconds),
            backlog,
            intervals,
            histograms: Histograms {
                encoding: HISTOGRAM_ENCODING,
                unit: "us",
                lowest: HIST_LOWEST,
                highest: HIST_HIGHEST,
                significant_digits: HIST_SIGFIG,
                totals: encode(&total.hist),
                set: encode(&stats.types[Kind::Set as usize].hist),
                get: encode(&stats.types[Kind::Get as usize].hist),
                multiget: encode(&stats.types[Kind::MultiGet as usize].hist),
            },
        }
    }
}

/// HdrHistogram's standard compressed form (V2 + deflate), base64: what `HISTFAAA…` strings in
/// HdrHistogram logs are, decodable by every HdrHistogram implementation.
pub fn encode(hist: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new().serialize(hist, &mut bytes).expect("serializing into memory");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub fn error_entries(cfg: &Config, phase: &'static str, c: &Collector) -> Vec<ErrorEntry> {
    let mut list: Vec<ErrorEntry> = c
        .notes
        .iter()
        .map(|(thread, n)| ErrorEntry {
            phase,
            time_s: n.time_s,
            thread: *thread,
            server: cfg.servers[n.server].clone(),
            message: n.message.clone(),
        })
        .collect();
    list.sort_by(|a, b| a.time_s.total_cmp(&b.time_s));
    list
}

/// The table printed at the end (stdout, or stderr when the JSON goes to stdout).
pub fn write_table(out: &mut dyn Write, title: &str, phase: &Phase) -> std::io::Result<()> {
    writeln!(out, "{title}: {:.2} s", phase.duration_s)?;
    writeln!(
        out,
        "{:<9} {:>12} {:>11} {:>11} {:>11} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}",
        "Type", "Ops/sec", "Count", "Hits", "Misses", "Avg(us)", "p50(us)", "p90(us)", "p99(us)", "p99.9(us)", "Errors"
    )?;
    let s = &phase.summaries;
    for (name, sum) in [("Sets", &s.set), ("Gets", &s.get), ("MultiGets", &s.multiget), ("Totals", &s.totals)] {
        let l = &sum.latency_us;
        let f = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.1}"));
        writeln!(
            out,
            "{:<9} {:>12.1} {:>11} {:>11} {:>11} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}",
            name,
            sum.ops_per_sec,
            sum.count,
            sum.hits,
            sum.misses,
            f(l.mean),
            f(l.p50),
            f(l.p90),
            f(l.p99),
            f(l.p99_9),
            sum.errors
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::Deserializer;

    #[test]
    fn histogram_round_trips_through_the_standard_encoding() {
        let mut h = crate::stats::new_histogram();
        for v in [1u64, 10, 100, 1000, 12345, 60_000_000] {
            h.record_n(v, v % 7 + 1).unwrap();
        }
        let text = encode(&h);
        assert!(text.starts_with("HISTF"), "{text}");
        let bytes = base64::engine::general_purpose::STANDARD.decode(text).unwrap();
        let back: Histogram<u64> = Deserializer::new().deserialize(&mut &bytes[..]).unwrap();
        assert_eq!(back, h);
    }
}
