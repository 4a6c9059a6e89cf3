//! What one thread measured during one window: counters and HDR histograms per request kind.
//!
//! Every thread that completes requests (pool workers, the net thread for the commands it
//! answers itself, evented loops) owns a [`Recorder`]. Recording is a few additions and three
//! histogram increments: no lock, no allocation, no formatting. At each window boundary the
//! recorder hands its [`Window`] to the stats thread over a channel and takes a cleared one
//! back, so the hot path never waits on the stats thread.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use hdrhistogram::Histogram;
use memrelay_protocol::{Command, Request};

use crate::measure::clock::WindowClock;
use crate::measure::in_system::InSystem;

/// Request kinds, as the seeds count them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Get = 0,
    MultiGet = 1,
    Set = 2,
    Other = 3,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Get, Kind::MultiGet, Kind::Set, Kind::Other];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Get => "get",
            Kind::MultiGet => "multiget",
            Kind::Set => "set",
            Kind::Other => "other",
        }
    }
}

/// The kind a request is counted as.
pub fn kind_of(request: &Request) -> Kind {
    match request.command {
        c if c.is_retrieval() && request.key_count > 1 => Kind::MultiGet,
        c if c.is_retrieval() => Kind::Get,
        Command::MetaGet => Kind::Get,
        c if c.is_storage() || c == Command::MetaSet => Kind::Set,
        _ => Kind::Other,
    }
}

/// The six timestamps of one request, from one monotonic clock.
#[derive(Debug, Clone, Copy)]
pub struct Timestamps {
    /// The read that brought the request's first byte.
    pub arrival: Instant,
    pub enqueue: Instant,
    pub dequeue: Instant,
    /// First byte written to a server.
    pub first_send: Instant,
    /// Last server reply complete.
    pub last_reply: Instant,
    /// Reply handed to the client socket (or the net thread, if the socket was full).
    pub reply_written: Instant,
}

impl Timestamps {
    pub fn at(now: Instant) -> Timestamps {
        Timestamps { arrival: now, enqueue: now, dequeue: now, first_send: now, last_reply: now, reply_written: now }
    }

    pub fn response(&self) -> Duration {
        self.reply_written.saturating_duration_since(self.arrival)
    }
    pub fn queue(&self) -> Duration {
        self.dequeue.saturating_duration_since(self.enqueue)
    }
    pub fn service(&self) -> Duration {
        self.last_reply.saturating_duration_since(self.first_send)
    }
}

/// What a request did, beside its times.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outcome {
    pub keys: u32,
    pub hits: u32,
    pub misses: u32,
    pub error: bool,
}

/// Highest latency a histogram holds (µs); larger values are clamped to it.
const HISTOGRAM_MAX_US: u64 = 60_000_000;

/// A histogram of µs at 3 significant digits that starts small and grows to the highest value
/// recorded into it or added to it (at most [`HISTOGRAM_MAX_US`]): sized for the whole range
/// from the start it would take 139 KiB of touched memory; empty it takes 16 KiB, with
/// sub-millisecond times in it 16 KiB, with times of up to 8 ms 32 KiB.
pub fn new_histogram() -> Histogram<u64> {
    let mut histogram = Histogram::new_with_bounds(1, 2, 3).expect("static histogram bounds are valid");
    histogram.auto(true);
    histogram
}

/// Response times of one kind (or one server) in a window: a histogram of [`new_histogram`]
/// made at the first value. Every thread's windows hold 13 (3 per request kind, 1 per server)
/// and most stay empty (kinds and servers the thread did not see this second): they cost nothing.
#[derive(Debug, Clone, Default)]
pub struct Latencies(Option<Histogram<u64>>);

impl Latencies {
    /// Records `us`, clamped to 1 µs (the resolution floor) and [`HISTOGRAM_MAX_US`].
    #[inline]
    pub fn record(&mut self, us: u64) {
        let histogram = self.0.get_or_insert_with(new_histogram);
        // Cannot fail: it grows to hold any value up to the clamp.
        let _ = histogram.record(us.clamp(1, HISTOGRAM_MAX_US));
    }

    /// Adds `other`'s values (an empty one costs nothing: adding walks every bucket).
    pub fn add(&mut self, other: &Latencies) {
        if let Some(theirs) = other.0.as_ref().filter(|h| !h.is_empty()) {
            // Same layout everywhere, growing as needed: adding cannot fail.
            let _ = self.0.get_or_insert_with(new_histogram).add(theirs);
        }
    }

    /// Empties it, keeping its memory for the next window (resetting clears every bucket, so an
    /// empty one is left alone).
    pub fn clear(&mut self) {
        if let Some(histogram) = self.0.as_mut().filter(|h| !h.is_empty()) {
            histogram.reset();
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(Histogram::is_empty)
    }

    /// The values as a histogram (one empty histogram shared by all that have none).
    pub fn histogram(&self) -> &Histogram<u64> {
        static EMPTY: std::sync::OnceLock<Histogram<u64>> = std::sync::OnceLock::new();
        self.0.as_ref().unwrap_or_else(|| EMPTY.get_or_init(new_histogram))
    }
}

/// Counters and histograms of one request kind.
#[derive(Debug, Clone)]
pub struct KindStats {
    pub count: u64,
    pub keys: u64,
    pub hits: u64,
    pub misses: u64,
    pub errors: u64,
    pub response_us_sum: u64,
    pub queue_us_sum: u64,
    pub service_us_sum: u64,
    pub response: Latencies,
    pub queue: Latencies,
    pub service: Latencies,
}

impl KindStats {
    fn new() -> KindStats {
        KindStats {
            count: 0,
            keys: 0,
            hits: 0,
            misses: 0,
            errors: 0,
            response_us_sum: 0,
            queue_us_sum: 0,
            service_us_sum: 0,
            response: Latencies::default(),
            queue: Latencies::default(),
            service: Latencies::default(),
        }
    }

    fn record(&mut self, times: &Timestamps, outcome: &Outcome) {
        let response = micros(times.response());
        let queue = micros(times.queue());
        let service = micros(times.service());
        self.count += 1;
        self.keys += u64::from(outcome.keys);
        self.hits += u64::from(outcome.hits);
        self.misses += u64::from(outcome.misses);
        self.errors += u64::from(outcome.error);
        self.response_us_sum += response;
        self.queue_us_sum += queue;
        self.service_us_sum += service;
        // Zero-length times are recorded as 1 µs: the histogram's resolution floor.
        self.response.record(response);
        self.queue.record(queue);
        self.service.record(service);
    }

    pub fn add(&mut self, other: &KindStats) {
        self.count += other.count;
        self.keys += other.keys;
        self.hits += other.hits;
        self.misses += other.misses;
        self.errors += other.errors;
        self.response_us_sum += other.response_us_sum;
        self.queue_us_sum += other.queue_us_sum;
        self.service_us_sum += other.service_us_sum;
        // Same bounds everywhere, so adding cannot fail.
        self.response.add(&other.response);
        self.queue.add(&other.queue);
        self.service.add(&other.service);
    }

    fn clear(&mut self) {
        self.count = 0;
        self.keys = 0;
        self.hits = 0;
        self.misses = 0;
        self.errors = 0;
        self.response_us_sum = 0;
        self.queue_us_sum = 0;
        self.service_us_sum = 0;
        self.response.clear();
        self.queue.clear();
        self.service.clear();
    }
}

/// One sampled request for requests.csv.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub kind: Kind,
    pub thread: u16,
    pub outcome: Outcome,
    pub servers: u16,
    pub times: Timestamps,
}

/// What one thread measured in one window.
#[derive(Debug, Clone)]
pub struct Window {
    /// Window number: window k covers [start + k·len, start + (k+1)·len).
    pub index: u64,
    /// The recording thread, and the index of the window it records next: every window of
    /// that thread before `next` has been shipped.
    pub thread: u16,
    pub next: u64,
    pub kinds: [KindStats; 4],
    /// Requests sent per server (a replicated write counts once per server).
    pub per_server: Vec<u64>,
    /// Failed exchanges per server (refused, reset, timeout, bad reply).
    pub per_server_failures: Vec<u64>,
    /// Per server: how long its answered exchanges took (request queued on the connection to
    /// reply read), in µs, and their sum.
    pub per_server_latency: Vec<Latencies>,
    pub per_server_latency_us_sum: Vec<u64>,
    /// Queue length samples (one per enqueue): sum, count and max.
    pub queue_len_sum: u64,
    pub queue_len_samples: u64,
    pub queue_len_max: u64,
    pub samples: Vec<Sample>,
}

impl Window {
    pub fn new(servers: usize) -> Window {
        Window {
            index: 0,
            thread: 0,
            next: 0,
            kinds: [KindStats::new(), KindStats::new(), KindStats::new(), KindStats::new()],
            per_server: vec![0; servers],
            per_server_failures: vec![0; servers],
            per_server_latency: vec![Latencies::default(); servers],
            per_server_latency_us_sum: vec![0; servers],
            queue_len_sum: 0,
            queue_len_samples: 0,
            queue_len_max: 0,
            samples: Vec::new(),
        }
    }

    pub fn clear(&mut self) {
        self.kinds.iter_mut().for_each(KindStats::clear);
        self.per_server.iter_mut().for_each(|c| *c = 0);
        self.per_server_failures.iter_mut().for_each(|c| *c = 0);
        self.per_server_latency.iter_mut().for_each(Latencies::clear);
        self.per_server_latency_us_sum.iter_mut().for_each(|c| *c = 0);
        self.queue_len_sum = 0;
        self.queue_len_samples = 0;
        self.queue_len_max = 0;
        self.samples.clear();
    }

    /// Makes room for server ids below `servers` (a reload added servers).
    pub fn ensure_servers(&mut self, servers: usize) {
        if servers > self.per_server.len() {
            self.per_server.resize(servers, 0);
            self.per_server_failures.resize(servers, 0);
            self.per_server_latency.resize_with(servers, Latencies::default);
            self.per_server_latency_us_sum.resize(servers, 0);
        }
    }

    pub fn add(&mut self, other: &Window) {
        self.ensure_servers(other.per_server.len());
        for (mine, theirs) in self.kinds.iter_mut().zip(&other.kinds) {
            mine.add(theirs);
        }
        for (mine, theirs) in self.per_server.iter_mut().zip(&other.per_server) {
            *mine += theirs;
        }
        for (mine, theirs) in self.per_server_failures.iter_mut().zip(&other.per_server_failures) {
            *mine += theirs;
        }
        for (mine, theirs) in self.per_server_latency.iter_mut().zip(&other.per_server_latency) {
            mine.add(theirs);
        }
        for (mine, theirs) in self.per_server_latency_us_sum.iter_mut().zip(&other.per_server_latency_us_sum) {
            *mine += theirs;
        }
        self.queue_len_sum += other.queue_len_sum;
        self.queue_len_samples += other.queue_len_samples;
        self.queue_len_max = self.queue_len_max.max(other.queue_len_max);
    }
}

/// A thread's measuring end: records into its current window, ships it at the boundary.
pub struct Recorder {
    thread: u16,
    clock: WindowClock,
    window: Box<Window>,
    to_stats: Sender<Box<Window>>,
    recycled: Receiver<Box<Window>>,
    servers: usize,
    sample_every: u64,
    until_sample: u64,
    in_system: Arc<InSystem>,
}

/// Capacity of the sample buffer of a window before further samples of that window are dropped
/// (bounded memory whatever the rate).
const MAX_SAMPLES_PER_WINDOW: usize = 100_000;

impl Recorder {
    pub fn new(
        thread: u16,
        clock: WindowClock,
        servers: usize,
        sample_every: Option<u64>,
        to_stats: Sender<Box<Window>>,
        recycled: Receiver<Box<Window>>,
        in_system: Arc<InSystem>,
    ) -> Recorder {
        let mut window = Box::new(Window::new(servers));
        window.index = clock.index(Instant::now());
        let sample_every = sample_every.unwrap_or(0);
        Recorder {
            thread,
            clock,
            window,
            to_stats,
            recycled,
            servers,
            sample_every,
            until_sample: sample_every,
            in_system,
        }
    }

    /// This thread wrote a request's reply at `at` (a pool worker; its `reply_written`).
    #[inline]
    pub fn request_out(&self, at: Instant) {
        self.in_system.departed(usize::from(self.thread), at);
    }

    /// This thread counts `count` requests in from `at` on (an event loop: those in flight and
    /// those arriving; the pool's net thread: those it queued and those arriving).
    #[inline]
    pub fn requests_in_flight(&self, count: usize, at: Instant) {
        self.in_system.set(usize::from(self.thread), count, at);
    }

    pub fn clock(&self) -> WindowClock {
        self.clock
    }

    /// Ships the current window if `now` lies past its end.
    pub fn roll(&mut self, now: Instant) {
        let index = self.clock.index(now);
        if index > self.window.index {
            self.ship(index);
        }
    }

    /// Ships the current window now (at shutdown).
    pub fn flush(&mut self) {
        let next = self.window.index + 1;
        self.ship(next);
    }

    fn ship(&mut self, next_index: u64) {
        let mut fresh = self.recycled.try_recv().unwrap_or_else(|_| Box::new(Window::new(self.servers)));
        fresh.clear();
        fresh.ensure_servers(self.servers);
        fresh.index = next_index;
        let mut full = std::mem::replace(&mut self.window, fresh);
        full.thread = self.thread;
        full.next = next_index;
        // The stats thread outlives every recorder; if it is gone we are shutting down anyway.
        let _ = self.to_stats.send(full);
    }

    pub fn record(&mut self, kind: Kind, times: &Timestamps, outcome: &Outcome, servers: u16) {
        self.roll(times.reply_written);
        self.window.kinds[kind as usize].record(times, outcome);
        if self.sample_every > 0 {
            self.until_sample -= 1;
            if self.until_sample == 0 {
                self.until_sample = self.sample_every;
                if self.window.samples.len() < MAX_SAMPLES_PER_WINDOW {
                    let sample = Sample { kind, thread: self.thread, outcome: *outcome, servers, times: *times };
                    self.window.samples.push(sample);
                }
            }
        }
    }

    pub fn server_request(&mut self, server: usize) {
        self.make_room(server);
        self.window.per_server[server] += 1;
    }

    pub fn server_failure(&mut self, server: usize) {
        self.make_room(server);
        self.window.per_server_failures[server] += 1;
    }

    /// An exchange with `server` was answered after `took`.
    #[inline]
    pub fn server_latency(&mut self, server: usize, took: Duration) {
        self.make_room(server);
        let us = micros(took);
        self.window.per_server_latency_us_sum[server] += us;
        self.window.per_server_latency[server].record(us);
    }

    /// Grows the per-server counts for a server id a reload added.
    #[inline]
    fn make_room(&mut self, server: usize) {
        if server >= self.window.per_server.len() {
            self.servers = self.servers.max(server + 1);
            self.window.ensure_servers(self.servers);
        }
    }

    pub fn queue_length(&mut self, now: Instant, length: usize) {
        self.roll(now);
        let length = length as u64;
        self.window.queue_len_sum += length;
        self.window.queue_len_samples += 1;
        self.window.queue_len_max = self.window.queue_len_max.max(length);
    }
}

pub fn micros(duration: Duration) -> u64 {
    duration.as_micros().min(u128::from(u64::MAX)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The histogram sized for the whole range from the start, as before: the reference.
    fn whole_range() -> Histogram<u64> {
        Histogram::new_with_bounds(1, HISTOGRAM_MAX_US, 3).unwrap()
    }

    #[test]
    fn latencies_take_memory_at_their_first_value_and_grow_only_as_far_as_their_values() {
        let mut latencies = Latencies::default();
        assert!(latencies.0.is_none() && latencies.is_empty() && latencies.histogram().is_empty());
        // HdrHistogram at 3 significant digits: 2,048 sub-buckets, the first bucket counted whole
        // and each further one half (1,024 more counts per doubling of the range).
        assert_eq!(whole_range().distinct_values(), 17 * 1024);
        latencies.record(900); // under 2,048 µs
        let counts = |l: &Latencies| l.0.as_ref().unwrap().distinct_values();
        assert_eq!(counts(&latencies), 2 * 1024);
        latencies.record(5_000); // 2,048 < 5,000 ≤ 8,191: two doublings
        assert_eq!(counts(&latencies), 4 * 1024);
        latencies.record(3_600_000_000); // an hour: clamped to a minute
        assert_eq!(counts(&latencies), whole_range().distinct_values());
        let histogram = latencies.histogram();
        assert_eq!(histogram.max(), histogram.highest_equivalent(HISTOGRAM_MAX_US));
        latencies.record(0); // the resolution floor
        assert_eq!(latencies.histogram().min(), 1);
        latencies.clear();
        assert!(latencies.is_empty() && latencies.0.is_some(), "cleared, its memory kept");
        // Adding an empty one makes none.
        let mut other = Latencies::default();
        other.add(&Latencies::default());
        assert!(other.0.is_none());
    }

    #[test]
    fn added_latencies_agree_with_whole_range_histograms() {
        let values = [[3_u64, 70, 900, 1_500, 1_999], [12, 40_000, 2_500_000, 59_000_000, 5]];
        let mut grown = [Latencies::default(), Latencies::default()];
        let mut reference = [whole_range(), whole_range()];
        for (i, values) in values.iter().enumerate() {
            for &us in values {
                grown[i].record(us);
                reference[i].record(us).unwrap();
            }
        }
        // The small one into the large one and the other way round: both fit.
        let mut into_none = Latencies::default();
        into_none.add(&grown[0]);
        into_none.add(&grown[1]);
        let mut into_large = grown[1].clone();
        into_large.add(&grown[0]);
        let mut expected = reference[0].clone();
        expected.add(&reference[1]).unwrap();
        for merged in [into_none.histogram(), into_large.histogram()] {
            assert_eq!(merged.len(), 10);
            for q in [0.1, 0.5, 0.7, 0.9, 1.0] {
                assert_eq!(merged.value_at_quantile(q), expected.value_at_quantile(q), "q {q}");
            }
        }
    }
}
