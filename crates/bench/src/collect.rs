//! The main thread's side of a phase: merges the threads' per-second [`Stats`] into one time
//! series, prints a progress line per second, and sums the run totals.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::conn::ErrorNote;
use crate::stats::{Stats, Summaries};
use crate::worker::{Done, Ending, PhaseKind};

/// One second of the time series.
#[derive(Debug, Clone, Serialize)]
pub struct Interval {
    /// Seconds since the phase started (the interval is `[second, second + duration_s)`).
    pub second: u64,
    /// 1, or less for the last interval.
    pub duration_s: f64,
    #[serde(flatten)]
    pub summaries: Summaries,
}

pub struct Collector {
    kind: PhaseKind,
    quiet: bool,
    /// Per thread: seconds reported so far (full seconds), and whether it is done.
    reported: Vec<u64>,
    done: Vec<bool>,
    pending: BTreeMap<u64, Stats>,
    next_second: u64,
    pub intervals: Vec<Interval>,
    pub totals: Stats,
    /// Earliest first send over the threads, ns since the phase start.
    pub began_ns: Option<u64>,
    /// Latest end over the threads, ns since the phase start.
    pub end_ns: u64,
    pub endings: Vec<Ending>,
    pub notes: Vec<(usize, ErrorNote)>,
    pub error_events: u64,
    pub backlog: u64,
}

impl Collector {
    pub fn new(kind: PhaseKind, threads: usize, quiet: bool) -> Collector {
        Collector {
            kind,
            quiet,
            reported: vec![0; threads],
            done: vec![false; threads],
            pending: BTreeMap::new(),
            next_second: 0,
            intervals: Vec::new(),
            totals: Stats::default(),
            began_ns: None,
            end_ns: 0,
            endings: Vec::new(),
            notes: Vec::new(),
            error_events: 0,
            backlog: 0,
        }
    }

    pub fn thread_done(&self, thread: usize) -> bool {
        self.done[thread]
    }

    pub fn all_done(&self) -> bool {
        self.done.iter().all(|&d| d)
    }

    pub fn interval(&mut self, thread: usize, second: u64, stats: Stats) {
        self.merge(second, stats);
        self.reported[thread] = self.reported[thread].max(second + 1);
        self.finalize_ready();
    }

    pub fn done(&mut self, done: Done) {
        let Done { thread, second, stats, began_ns, end_ns, ending, notes, error_events, backlog } = done;
        self.merge(second, stats);
        self.done[thread] = true;
        self.began_ns = Some(self.began_ns.map_or(began_ns, |b| b.min(began_ns)));
        self.end_ns = self.end_ns.max(end_ns);
        self.endings.push(ending);
        self.notes.extend(notes.into_iter().map(|n| (thread, n)));
        self.error_events += error_events;
        self.backlog += backlog;
        self.finalize_ready();
    }

    /// Phase length in seconds, from main's start (the intervals' clock).
    pub fn seconds(&self) -> f64 {
        self.end_ns as f64 / 1e9
    }

    /// The span the recorded latencies lie in: from the first request sent to the last reply,
    /// what the run's throughput is over. From main's start instead, the time the threads took
    /// to get the phase's command (tens of milliseconds on a busy machine) would count as time
    /// with no request in flight, and X·R would fall short of the clients.
    pub fn covered_seconds(&self) -> f64 {
        self.end_ns.saturating_sub(self.began_ns.unwrap_or(0)) as f64 / 1e9
    }

    fn merge(&mut self, second: u64, stats: Stats) {
        match self.pending.get_mut(&second) {
            Some(existing) => existing.add(&stats),
            None => {
                self.pending.insert(second, stats);
            }
        }
    }

    /// Closes every second all threads are past, in order.
    fn finalize_ready(&mut self) {
        let all_done = self.all_done();
        loop {
            let k = self.next_second;
            let ready = (0..self.done.len()).all(|t| self.done[t] || self.reported[t] > k);
            if !ready {
                return;
            }
            if all_done && self.pending.range(k..).next().is_none() {
                return;
            }
            let stats = self.pending.remove(&k).unwrap_or_default();
            let duration = if all_done { (self.seconds() - k as f64).clamp(0.0, 1.0) } else { 1.0 };
            self.next_second += 1;
            let empty = stats.types.iter().all(|t| t.count == 0 && t.errors == 0);
            if duration <= 0.0 && empty {
                continue;
            }
            let summaries = stats.summaries(duration.max(1e-9));
            self.totals.add(&stats);
            if !self.quiet && duration >= 1.0 {
                let t = &summaries.totals;
                eprintln!(
                    "[{:<8} {:>4}s] {:>10.0} ops/s  mean {:>9.1} us  p99 {:>8} us  hits {:>8}  misses {:>8}  errors {}  sd {:.1} us",
                    self.kind.name(),
                    k + 1,
                    t.ops_per_sec,
                    t.latency_us.mean.unwrap_or(0.0),
                    t.latency_us.p99.unwrap_or(0.0),
                    t.hits,
                    t.misses,
                    t.errors,
                    t.latency_us.std.unwrap_or(0.0)
                );
            }
            self.intervals.push(Interval { second: k, duration_s: duration, summaries });
        }
    }

    /// The phase ended with every connection lost (in every thread).
    pub fn all_lost(&self) -> bool {
        !self.endings.is_empty() && self.endings.iter().all(|&e| e == Ending::AllLost)
    }

    pub fn interrupted(&self) -> bool {
        self.endings.contains(&Ending::Interrupted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Kind;

    fn one(n: u64) -> Stats {
        let mut s = Stats::default();
        for _ in 0..n {
            s.of(Kind::Get).record(1000, 1, 1, 0, false);
        }
        s
    }

    fn done(thread: usize, second: u64, n: u64, end_ns: u64) -> Done {
        Done {
            thread,
            second,
            stats: one(n),
            began_ns: 0,
            end_ns,
            ending: Ending::Finished,
            notes: vec![],
            error_events: 0,
            backlog: 0,
        }
    }

    #[test]
    fn merges_threads_by_second_and_trims_the_last() {
        let mut c = Collector::new(PhaseKind::Run, 2, true);
        c.interval(0, 0, one(10));
        assert!(c.intervals.is_empty(), "second 0 waits for thread 1");
        c.interval(1, 0, one(20));
        assert_eq!(c.intervals.len(), 1);
        assert_eq!(c.intervals[0].summaries.totals.count, 30);
        c.done(done(0, 1, 5, 1_500_000_000));
        c.done(done(1, 1, 5, 1_250_000_000));
        assert_eq!(c.intervals.len(), 2);
        let last = &c.intervals[1];
        assert_eq!((last.second, last.summaries.totals.count), (1, 10));
        assert!((last.duration_s - 0.5).abs() < 1e-9);
        assert_eq!(last.summaries.totals.ops_per_sec, 20.0);
        assert_eq!(c.totals.total().count, 40);
    }
}
