//! Counters and latency histograms per request type, and their summaries.
//!
//! A worker records each reply into the [`Stats`] of the current one-second interval (plain
//! integer adds and one histogram record, no allocation); at each second it hands the interval
//! to the main thread, which merges the threads' intervals, prints progress, and adds them into
//! the run totals. Latency is kept twice: exactly (sum, sum of squares, min, max in
//! nanoseconds, for the mean, the standard deviation and the extremes) and in an HdrHistogram of
//! microseconds (for percentiles and merging).

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
    /// Sum of the squared latencies (ns²): with `sum_ns` and `count`, the exact standard
    /// deviation of any period (an interval, the run), merged by adding.
    pub sum_sq_ns2: u128,
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
            sum_sq_ns2: 0,
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
        self.sum_sq_ns2 += u128::from(latency_ns) * u128::from(latency_ns);
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
        self.sum_sq_ns2 += other.sum_sq_ns2;
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
        self.hist.add(&other.hist).expect("histograms share their bounds");
    }

    /// The standard deviation of the answered requests' latencies (ns; population: over n, as
    /// HdrHistogram's and memrelay's windows), 0 for fewer than two. Exact in integers while
    /// n Σx² and (Σx)² fit in 128 bits (a million requests of up to 10 s each), else in f64.
    pub fn std_ns(&self) -> f64 {
        if self.count < 2 {
            return 0.0;
        }
        let n = u128::from(self.count);
        let sum = u128::from(self.sum_ns);
        let spread = n.checked_mul(self.sum_sq_ns2).zip(sum.checked_mul(sum)).map(|(a, b)| a.saturating_sub(b));
        let variance = match spread {
            // n Σx² − (Σx)² = n² σ²: no cancellation.
            Some(spread) => spread as f64 / (n as f64 * n as f64),
            None => {
                let mean = self.sum_ns as f64 / self.count as f64;
                (self.sum_sq_ns2 as f64 / self.count as f64 - mean * mean).max(0.0)
            }
        };
        variance.sqrt()
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
                std: Some(self.std_ns() / 1000.0),
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
    /// Standard deviation (exact, over n); added after the percentiles, so readers of the
    /// older output find every field where it was.
    pub std: Option<f64>,
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
    fn standard_deviation_matches_a_two_pass_computation() {
        // Latencies of an interval, spread over four orders of magnitude, plus a large constant
        // offset (where the naive Σx²/n − mean² in f64 would lose digits).
        let latencies_ns: Vec<u64> = (0..5_000u64).map(|i| 3_000_000_000 + (i * i * 7919) % 9_999_991).collect();
        let mut t = TypeStats::default();
        let (mut a, mut b) = (TypeStats::default(), TypeStats::default());
        for (i, &ns) in latencies_ns.iter().enumerate() {
            t.record(ns, 1, 1, 0, false);
            if i % 3 == 0 {
                a.record(ns, 1, 1, 0, false)
            } else {
                b.record(ns, 1, 1, 0, false)
            }
        }
        // Independently: the mean first, then the mean squared deviation from it (two passes).
        let n = latencies_ns.len() as f64;
        let mean = latencies_ns.iter().map(|&x| x as f64).sum::<f64>() / n;
        let want_ns = (latencies_ns.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n).sqrt();
        assert!((t.std_ns() - want_ns).abs() <= want_ns * 1e-9, "{} vs {want_ns}", t.std_ns());
        let std_us = t.summary(1.0).latency_us.std.unwrap();
        assert!((std_us - want_ns / 1000.0).abs() <= want_ns * 1e-12);
        // Two threads' intervals merged: the same spread as one.
        a.add(&b);
        assert!((a.std_ns() - want_ns).abs() <= want_ns * 1e-9);
        // By hand: 1, 2, 3, 4 µs have σ = √1.25 µs; one request has none.
        let mut small = TypeStats::default();
        for us in 1..=4u64 {
            small.record(us * 1000, 1, 1, 0, false);
        }
        assert!((small.summary(1.0).latency_us.std.unwrap() - 1.25f64.sqrt()).abs() < 1e-12);
        let mut one = TypeStats::default();
        one.record(5_000, 1, 1, 0, false);
        assert_eq!(one.summary(1.0).latency_us.std, Some(0.0));
    }

    #[test]
    fn standard_deviation_when_the_integers_overflow() {
        // n Σx² above 2^128 (a million requests of mean 1e12 ns and σ = 2e13 ns: n² (mean² + σ²)
        // = 4.01e38): the f64 path, still within 1e-9 of σ.
        let (n, mean, sigma) = (1_000_000u64, 1e12f64, 2e13f64);
        let t = TypeStats {
            count: n,
            sum_ns: (n as f64 * mean) as u64,
            sum_sq_ns2: (n as f64 * (mean * mean + sigma * sigma)) as u128,
            ..TypeStats::default()
        };
        assert!(u128::from(n).checked_mul(t.sum_sq_ns2).is_none());
        assert!((t.std_ns() - sigma).abs() <= sigma * 1e-9, "{}", t.std_ns());
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
