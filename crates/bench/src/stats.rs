//! Counters and latency histograms per request type, and their summaries.
//!
//! A worker records each reply into the [`Stats`] of the current one-second interval (plain
//! integer adds and one histogram record, no allocation); at each second it hands the interval
//! to the main thread, which merges the threads' intervals, prints progress, and adds them into
//! the run totals. Latency is kept twice: exactly (sum, min, max in nanoseconds, for the mean
//! and the extremes) and in an HdrHistogram of microseconds (for percentiles and merging).

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::workload::Kind;

/// Histogram range: 1 µs to one hour, 3 significant digits.
pub const HIST_LOWEST: u64 = 1;
pub const HIST_HIGHEST: u64 = 3_600_000_000;
pub const HIST_SIGFIG: u8 = 3;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(HIST_LOWEST, HIST_HIGHEST, HIST_SIGFIG).expect("valid histogram bounds")
}

/// One request type's counts over some period.
#[derive(Debug, Clone)]
pub struct TypeStats {
    /// Requests answered (any complete reply, error replies included).
    pub count: u64,
    /// Keys asked by the answered requests.
    pub keys: u64,
    pub hits: u64,
    pub misses: u64,
    /// Error replies plus requests never answered.
    pub errors: u64,
    /// Requests sent but never answered (connection lost, invalid reply, end of run).
    pub unanswered: u64,
    pub sum_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    /// Latency of answered requests, microseconds.
    pub hist: Histogram<u64>,
}

impl Default for TypeStats {
    fn default() -> Self {
        TypeStats {
            count: 0,
            keys: 0,
            hits: 0,
            misses: 0,
            errors: 0,
            unanswered: 0,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            hist: new_histogram(),
        }
    }
}

impl TypeStats {
    /// An answered request.
    #[inline]
    pub fn record(&mut self, latency_ns: u64, keys: u32, hits: u32, misses: u32, error: bool) {
        self.count += 1;
        self.keys += u64::from(keys);
        self.hits += u64::from(hits);
        self.misses += u64::from(misses);
        self.errors += u64::from(error);
        self.sum_ns += latency_ns;
        self.min_ns = self.min_ns.min(latency_ns);
        self.max_ns = self.max_ns.max(latency_ns);
        self.hist.saturating_record((latency_ns + 500) / 1000);
    }

    /// Requests sent and never answered.
    pub fn record_unanswered(&mut self, n: u64) {
        self.errors += n;
        self.unanswered += n;
    }

    pub fn add(&mut self, other: &TypeStats) {
        self.count += other.count;
        self.keys += other.keys;
        self.hits += other.hits;
        self.misses += other.misses;
        self.errors += other.errors;
        self.unanswered += other.unanswered;
        self.sum_ns += other.sum_ns;
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
        self.hist.add(&other.hist).expect("histograms share their bounds");
    }

    pub fn summary(&self, seconds: f64) -> Summary {
        let latency = if self.count == 0 {
            Latency::default()
        } else {
            let (min_us, max_us) = (self.min_ns as f64 / 1000.0, self.max_ns as f64 / 1000.0);
            // The histogram answers with the upper edge of a bucket of whole microseconds (3
            // significant digits), which can lie above the exact maximum kept beside it, or below
            // the exact minimum: a percentile is clamped into the exact range it cannot leave.
            let q = |q: f64| Some((self.hist.value_at_quantile(q) as f64).clamp(min_us, max_us));
            Latency {
                mean: Some(self.sum_ns as f64 / self.count as f64 / 1000.0),
                min: Some(self.min_ns as f64 / 1000.0),
                max: Some(max_us),
                p50: q(0.50),
                p90: q(0.90),
                p99: q(0.99),
                p99_9: q(0.999),
            }
        };
        Summary {
            count: self.count,
            ops_per_sec: if seconds > 0.0 { self.count as f64 / seconds } else { 0.0 },
            keys: self.keys,
            hits: self.hits,
            misses: self.misses,
            errors: self.errors,
            unanswered: self.unanswered,
            latency_us: latency,
        }
    }
}

/// All request types over one period.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Indexed by `Kind as usize`.
    pub types: [TypeStats; 3],
}

impl Stats {
    #[inline]
    pub fn of(&mut self, kind: Kind) -> &mut TypeStats {
        &mut self.types[kind as usize]
    }

    pub fn add(&mut self, other: &Stats) {
        for (a, b) in self.types.iter_mut().zip(&other.types) {
            a.add(b);
        }
    }

    /// All types together.
    pub fn total(&self) -> TypeStats {
        let mut total = TypeStats::default();
        for t in &self.types {
            total.add(t);
        }
        total
    }

    pub fn summaries(&self, seconds: f64) -> Summaries {
        Summaries {
            totals: self.total().summary(seconds),
            set: self.types[Kind::Set as usize].summary(seconds),
            get: self.types[Kind::Get as usize].summary(seconds),
            multiget: self.types[Kind::MultiGet as usize].summary(seconds),
        }
    }
}

/// Latency statistics in microseconds; `null` when nothing was answered.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Latency {
    pub mean: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub p99_9: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub ops_per_sec: f64,
    pub keys: u64,
    pub hits: u64,
    pub misses: u64,
    pub errors: u64,
    pub unanswered: u64,
    pub latency_us: Latency,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summaries {
    pub totals: Summary,
    pub set: Summary,
    pub get: Summary,
    pub multiget: Summary,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_latencies() {
        let mut t = TypeStats::default();
        // 1..=1000 µs: mean 500.5, p50 500, p90 900, p99 990, p99.9 999 (within 0.1 %).
        for us in 1..=1000u64 {
            t.record(us * 1000, 2, 1, 1, us % 100 == 0);
        }
        let s = t.summary(2.0);
        assert_eq!((s.count, s.keys, s.hits, s.misses, s.errors), (1000, 2000, 1000, 1000, 10));
        assert_eq!(s.ops_per_sec, 500.0);
        let l = s.latency_us;
        assert_eq!((l.mean, l.min, l.max), (Some(500.5), Some(1.0), Some(1000.0)));
        for (got, want) in [(l.p50, 500.0), (l.p90, 900.0), (l.p99, 990.0), (l.p99_9, 999.0)] {
            let got = got.unwrap();
            assert!((got - want).abs() <= want * 0.001 + 1.0, "{got} vs {want}");
        }
    }

    #[test]
    fn percentiles_stay_within_the_exact_extremes() {
        // 1234.6 µs is recorded as 1235 µs (rounded to whole µs), above the exact max; and above 2048 µs
        // a bucket spans 2 µs. The old cap at max.ceil() let p99.9 exceed max (seen once on a fresh clone).
        for latencies_ns in [vec![1_234_600u64; 3], vec![5_000, 1_234_600], vec![2_047_900, 2_047_900]] {
            let mut t = TypeStats::default();
            for &ns in &latencies_ns {
                t.record(ns, 1, 1, 0, false);
            }
            let l = t.summary(1.0).latency_us;
            let exact_max = *latencies_ns.iter().max().unwrap() as f64 / 1000.0;
            let exact_min = *latencies_ns.iter().min().unwrap() as f64 / 1000.0;
            for p in [l.p50, l.p90, l.p99, l.p99_9] {
                let p = p.unwrap();
                assert!(exact_min <= p && p <= exact_max, "{p} outside [{exact_min}, {exact_max}]");
            }
        }
    }

    #[test]
    fn empty_type_has_null_latency() {
        let s = TypeStats::default().summary(1.0);
        assert_eq!(s.count, 0);
        assert_eq!(s.latency_us, Latency::default());
    }

    #[test]
    fn merging_adds_everything() {
        let mut a = Stats::default();
        let mut b = Stats::default();
        a.of(Kind::Set).record(1_000, 1, 0, 0, false);
        b.of(Kind::Set).record(3_000, 1, 0, 0, true);
        b.of(Kind::MultiGet).record(2_000, 5, 4, 1, false);
        b.of(Kind::MultiGet).record_unanswered(2);
        a.add(&b);
        let t = a.total();
        assert_eq!((t.count, t.keys, t.hits, t.misses, t.errors, t.unanswered), (3, 7, 4, 1, 3, 2));
        assert_eq!((t.min_ns, t.max_ns, t.hist.len()), (1_000, 3_000, 3));
    }
}
