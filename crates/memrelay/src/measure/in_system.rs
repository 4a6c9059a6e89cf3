//! The sampler thread. It reads memrelay's CPU time by thread role as each measurement window
//! begins (so each window has the processor time its threads spent in it), and samples the
//! requests inside memrelay (from the read of a request's first byte until its reply is written)
//! at a fixed rate, so that Little's law can be checked inside the process: the mean count
//! sampled against X·R. The two share the instants a request begins and ends, not their
//! bookkeeping: the count is what the threads hold, moved by their own code, and a request
//! counted twice or never, or a count moved at other events than the stamps, shows.
//!
//! The samples are taken at random instants, a Poisson process of rate 1000/s (exponential gaps):
//! a fixed period can beat with the scheduler's own periods (its tick, the slices of the threads
//! on a saturated machine) and then sees the same phase of them every time. Poisson sampling sees
//! time averages (PASTA) only if the instants do not depend on the system, and the instant the
//! sampler gets to run does: waking it takes a processor from one of memrelay's threads for tens
//! of microseconds while the others run on. With the pool's net thread on the sampler's processor
//! the workers kept answering while nothing arrived, and the count read at wake-up was 30% below
//! the count at the instant the sampler was due (measured against the request log: the count at
//! the due instants matched the time average, the count at wake-up did not), and up to 17% above
//! it with a worker there. So each sample is the count *as of its due instant*, read a
//! millisecond later from the counters' recent history ([`SETTLE`]): whatever the sampler's
//! waking disturbs happens after the instant it samples. The history also lets one wake read
//! all the instants that came due since the last (about ten): a thousand samples a second (a
//! window's mean within about 1.5% of the time average where a hundred left 5%) for a hundred
//! wake-ups.
//!
//! Each recording thread has its own counter, written by that thread alone (no contended cache
//! line on the hot path), with the history of its changes: when each happened and the value it
//! took. A request counts from the read that brought its first byte, as its response time does,
//! and until its reply is written, so that the samples and X·R cover the same interval: while
//! its bytes wait unparsed it is counted by its client's thread
//! (the client side's `ClientSide::arriving`), then by the thread that took it. The pool's net
//! thread sets its counter to the requests it queued plus those arriving, and the worker that
//! writes a reply counts it out at the instant its response time ends (so single counters go
//! negative; their sum is the count); an event loop sets its count to its requests in flight plus
//! those arriving.
//!
//! The sampler asks for real-time scheduling (`SCHED_FIFO`; root can have it), so that it reads
//! well within the history a counter keeps ([`HISTORY`] changes); a sample whose due instant
//! some counter's history no longer reaches is dropped and counted (`missed`). Without the
//! privilege it samples as an ordinary thread and says so once.

use std::collections::VecDeque;
use std::sync::atomic::{fence, AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};

use crate::measure::clock::WindowClock;
use crate::measure::cpu;

/// The mean gap between two samples of the requests inside memrelay (the gaps are exponential).
pub const SAMPLE_EVERY: Duration = Duration::from_millis(1);
/// How often the sampler wakes to read the samples that came due (each [`SETTLE`] after its
/// instant): the instants come from the history, so a wake reads ten of them on average.
const WAKE_EVERY: Duration = Duration::from_millis(10);
/// How long after its due instant a sample is read: a thread publishes a change a few
/// microseconds after the instant it stamps (one system call), at most this long unless it is
/// preempted in between.
pub const SETTLE: Duration = Duration::from_millis(1);
/// Changes each counter remembers: at two per request, 10 ms of a thread serving 200,000
/// requests a second, beyond [`SETTLE`] plus [`WAKE_EVERY`] and the sampler's own delays.
pub const HISTORY: usize = 4096;
/// Windows whose samples are kept until the stats thread takes them.
const SLOTS: usize = 64;

/// One change of a counter: when (nanoseconds since the origin) and the value it took.
#[derive(Debug, Default)]
struct Change {
    at: AtomicU64,
    value: AtomicI64,
}

/// One thread's counter, on its own cache lines: its value and the history of its changes.
#[repr(align(64))]
#[derive(Debug)]
struct Counter {
    /// Changes written so far; the next goes to `history[written % HISTORY]`.
    written: AtomicU64,
    /// The current value and the instant of the last change (only the writer uses them).
    value: AtomicI64,
    last_at: AtomicU64,
    history: Box<[Change]>,
}

impl Counter {
    fn new() -> Counter {
        Counter {
            written: AtomicU64::new(0),
            value: AtomicI64::new(0),
            last_at: AtomicU64::new(0),
            history: (0..HISTORY).map(|_| Change::default()).collect(),
        }
    }

    /// The writer's side: the counter takes `value` at `at` (kept in order: an instant earlier
    /// than the last change counts as the last change's).
    fn change(&self, value: i64, at: u64) {
        if value == self.value.load(Ordering::Relaxed) {
            return;
        }
        let at = at.max(self.last_at.load(Ordering::Relaxed));
        let n = self.written.load(Ordering::Relaxed);
        // Everything before (the count of `n` written) is visible to a reader that sees the
        // entry being overwritten below, so it can tell the entry changed under it.
        fence(Ordering::Release);
        let entry = &self.history[(n % HISTORY as u64) as usize];
        entry.at.store(at, Ordering::Relaxed);
        entry.value.store(value, Ordering::Relaxed);
        self.written.store(n + 1, Ordering::Release);
        self.value.store(value, Ordering::Relaxed);
        self.last_at.store(at, Ordering::Relaxed);
    }

    /// The reader's side: the value the counter had at `at`, if its history reaches back there.
    fn as_of(&self, at: u64) -> Option<i64> {
        let written = self.written.load(Ordering::Acquire);
        let oldest = written.saturating_sub(HISTORY as u64);
        let entry = |n: u64| &self.history[(n % HISTORY as u64) as usize];
        // Binary search for the last change at or before `at` (the changes are in time order).
        // An entry overwritten meanwhile reads later than `at`, which only sends the search to
        // older entries, overwritten as well: the check below then refuses the answer.
        let (mut low, mut high) = (oldest, written);
        while low < high {
            let middle = low + (high - low) / 2;
            if entry(middle).at.load(Ordering::Relaxed) <= at {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        let found = (low > oldest).then(|| (low - 1, entry(low - 1).value.load(Ordering::Relaxed)));
        fence(Ordering::Acquire);
        let now_written = self.written.load(Ordering::Relaxed);
        match found {
            // The entry read was not overwritten meanwhile.
            Some((n, value)) if now_written - n < HISTORY as u64 => Some(value),
            Some(_) => None,
            // Every change is later: the counter was still at its start (unless history was lost).
            None if oldest == 0 && now_written < HISTORY as u64 => Some(0),
            None => None,
        }
    }
}

/// The samples of one window: which window, their sum and their number.
#[derive(Debug, Default)]
struct Samples {
    window: AtomicU64,
    sum: AtomicU64,
    count: AtomicU64,
}

#[derive(Debug)]
pub struct InSystem {
    /// The instant the counters' history counts from.
    origin: Instant,
    counters: Box<[Counter]>,
    /// Samples by window index modulo `SLOTS`.
    samples: Box<[Samples]>,
    /// Every sample since start: sum and number (a window in which no thread recorded anything
    /// is not written, but its samples count here).
    all_sum: AtomicU64,
    all_count: AtomicU64,
    /// Samples dropped: some counter's history no longer reached back to their instant.
    missed: AtomicU64,
    /// memrelay's CPU seconds by thread role as each window began (by window index, the last
    /// `SLOTS`), read by the sampler: a window's CPU is the difference to the next one.
    cpu_at_start: Mutex<VecDeque<(u64, cpu::ByRole)>>,
}

impl InSystem {
    /// Counters for `threads` recording threads, their changes timed from `origin`.
    pub fn new(threads: usize, origin: Instant) -> Arc<InSystem> {
        Arc::new(InSystem {
            origin,
            counters: (0..threads.max(1)).map(|_| Counter::new()).collect(),
            samples: (0..SLOTS).map(|_| Samples::default()).collect(),
            all_sum: AtomicU64::new(0),
            all_count: AtomicU64::new(0),
            missed: AtomicU64::new(0),
            cpu_at_start: Mutex::new(VecDeque::with_capacity(SLOTS)),
        })
    }

    /// memrelay's CPU seconds by thread role spent in window `index`, once the next one began.
    pub fn cpu_of(&self, index: u64) -> Option<cpu::ByRole> {
        let readings = self.cpu_at_start.lock().ok()?;
        let at = |i: u64| readings.iter().find(|(w, _)| *w == i).map(|(_, r)| r);
        Some(cpu::difference(at(index)?, at(index + 1)?))
    }

    fn cpu_reading(&self, index: u64) {
        let reading = cpu::seconds_by_role();
        if let Ok(mut readings) = self.cpu_at_start.lock() {
            if readings.len() == SLOTS {
                readings.pop_front();
            }
            readings.push_back((index, reading));
        }
    }

    /// The sum and number of the samples taken in window `index` (zeros once it is too old).
    pub fn samples_of(&self, index: u64) -> (u64, u64) {
        let slot = &self.samples[(index % SLOTS as u64) as usize];
        if slot.window.load(Ordering::Acquire) != index {
            return (0, 0);
        }
        (slot.sum.load(Ordering::Relaxed), slot.count.load(Ordering::Relaxed))
    }

    fn record_sample(&self, index: u64, count: u64) {
        let slot = &self.samples[(index % SLOTS as u64) as usize];
        if slot.window.load(Ordering::Relaxed) != index {
            slot.sum.store(0, Ordering::Relaxed);
            slot.count.store(0, Ordering::Relaxed);
            slot.window.store(index, Ordering::Release);
        }
        slot.sum.fetch_add(count, Ordering::Relaxed);
        slot.count.fetch_add(1, Ordering::Relaxed);
        self.all_sum.fetch_add(count, Ordering::Relaxed);
        self.all_count.fetch_add(1, Ordering::Relaxed);
    }

    /// The sum and number of every sample since start.
    pub fn all_samples(&self) -> (u64, u64) {
        (self.all_sum.load(Ordering::Relaxed), self.all_count.load(Ordering::Relaxed))
    }

    /// Samples dropped because a counter's history no longer reached back to their instant.
    pub fn missed(&self) -> u64 {
        self.missed.load(Ordering::Relaxed)
    }

    /// Requests inside memrelay at `at` (an instant at least [`SETTLE`] ago), from every
    /// counter's history; `None` if some history no longer reaches back there.
    pub fn as_of(&self, at: Instant) -> Option<u64> {
        let at = self.nanos(at);
        let mut sum = 0i64;
        for counter in self.counters.iter() {
            sum += counter.as_of(at)?;
        }
        Some(sum.max(0) as u64)
    }

    /// Thread `thread`'s counter: -1 at `at` (it wrote a request's reply then).
    #[inline]
    pub fn departed(&self, thread: usize, at: Instant) {
        if let Some(counter) = self.counters.get(thread) {
            counter.change(counter.value.load(Ordering::Relaxed) - 1, self.nanos(at));
        }
    }

    /// Sets thread `thread`'s counter at `at` (a thread that knows its own count).
    #[inline]
    pub fn set(&self, thread: usize, count: usize, at: Instant) {
        if let Some(counter) = self.counters.get(thread) {
            counter.change(count as i64, self.nanos(at));
        }
    }

    #[inline]
    fn nanos(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.origin).as_nanos().min(u128::from(u64::MAX)) as u64
    }
}

/// Starts the sampler thread; it stops with `shutdown`.
pub(crate) fn spawn_sampler(
    in_system: Arc<InSystem>,
    clock: WindowClock,
    shutdown: Arc<AtomicBool>,
) -> std::io::Result<thread::JoinHandle<()>> {
    thread::Builder::new().name("sampler".into()).spawn(move || {
        if !real_time() {
            eprintln!(
                "memrelay: the in-system sampler runs without real-time priority (not root?): it may miss samples"
            );
        }
        let mut rng = SmallRng::from_entropy();
        let gaps = Exp::new(1.0 / SAMPLE_EVERY.as_secs_f64()).expect("a positive sampling rate");
        // The next sample's due instant; it is read SETTLE later.
        let mut due = Instant::now();
        let mut window = None;
        while !shutdown.load(Ordering::Acquire) {
            thread::sleep(WAKE_EVERY);
            let now = Instant::now();
            let index = clock.index(now);
            if window != Some(index) {
                in_system.cpu_reading(index);
                window = Some(index);
            }
            // The instants are a Poisson process whatever the sampler's own delays: every one
            // that came due is read from the history (or counted missed).
            while due + SETTLE <= now {
                match in_system.as_of(due) {
                    Some(count) => in_system.record_sample(clock.index(due), count),
                    None => {
                        in_system.missed.fetch_add(1, Ordering::Relaxed);
                    }
                }
                due += Duration::from_secs_f64(gaps.sample(&mut rng));
            }
        }
    })
}

/// Asks for `SCHED_FIFO` at the lowest real-time priority for the calling thread.
fn real_time() -> bool {
    // SAFETY: sched_param is plain data; sched_setscheduler(0, ...) affects the calling thread.
    unsafe {
        let param = libc::sched_param { sched_priority: 1 };
        libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(origin: Instant, micros: u64) -> Instant {
        origin + Duration::from_micros(micros)
    }

    #[test]
    fn counts_in_on_one_thread_and_out_on_another() {
        let origin = Instant::now();
        let in_system = InSystem::new(3, origin);
        in_system.set(0, 5, at(origin, 10));
        in_system.departed(1, at(origin, 11));
        in_system.departed(2, at(origin, 12));
        assert_eq!(in_system.as_of(at(origin, 20)), Some(3));
        in_system.set(2, 4, at(origin, 30));
        assert_eq!(in_system.as_of(at(origin, 30)), Some(8));
    }

    /// The sample is the count at its due instant: what the threads did after it (while the
    /// sampler was waking up) does not change it.
    #[test]
    fn a_sample_reads_the_count_at_its_instant_not_at_its_reading() {
        let origin = Instant::now();
        let in_system = InSystem::new(2, origin);
        assert_eq!(in_system.as_of(at(origin, 5)), Some(0), "nothing counted yet");
        in_system.set(0, 6, at(origin, 10)); // six requests arrived at 10 µs
        in_system.departed(1, at(origin, 40)); // answered after the due instant 30 µs
        in_system.departed(1, at(origin, 45));
        in_system.departed(1, at(origin, 50));
        assert_eq!(in_system.as_of(at(origin, 30)), Some(6));
        assert_eq!(in_system.as_of(at(origin, 45)), Some(4), "a change at the instant counts");
        assert_eq!(in_system.as_of(at(origin, 60)), Some(3));
    }

    /// A request counts from the instant its response time starts until the instant it ends:
    /// in the count just before either stamp as it was, just after as it is.
    #[test]
    fn the_count_moves_at_the_response_times_stamps() {
        let origin = Instant::now();
        let in_system = InSystem::new(2, origin);
        let (arrival, written) = (at(origin, 100), at(origin, 350));
        in_system.set(0, 1, arrival);
        in_system.departed(1, written);
        let just = Duration::from_nanos(1);
        assert_eq!(in_system.as_of(arrival - just), Some(0));
        assert_eq!(in_system.as_of(arrival), Some(1));
        assert_eq!(in_system.as_of(written - just), Some(1));
        assert_eq!(in_system.as_of(written), Some(0));
    }

    #[test]
    fn an_unchanged_value_takes_no_history_and_earlier_instants_keep_order() {
        let origin = Instant::now();
        let in_system = InSystem::new(1, origin);
        in_system.set(0, 2, at(origin, 10));
        in_system.set(0, 2, at(origin, 20));
        assert_eq!(in_system.counters[0].written.load(Ordering::Relaxed), 1);
        // Stamped before the last change, published after it: counted at the last change.
        in_system.set(0, 3, at(origin, 5));
        assert_eq!(in_system.as_of(at(origin, 9)), Some(0));
        assert_eq!(in_system.as_of(at(origin, 10)), Some(3));
    }

    #[test]
    fn an_instant_older_than_the_history_is_missed() {
        let origin = Instant::now();
        let in_system = InSystem::new(1, origin);
        for i in 0..HISTORY as u64 + 10 {
            in_system.set(0, (i % 2) as usize + 1, at(origin, 100 + i));
        }
        assert_eq!(in_system.as_of(at(origin, 50)), None, "before the oldest change kept");
        // The last change (an odd one: HISTORY is even) set 2.
        assert_eq!(in_system.as_of(at(origin, 100 + HISTORY as u64 + 9)), Some(2));
        assert_eq!(in_system.as_of(at(origin, 100 + 20)), Some(1));
    }

    /// The binary search finds what a walk through every change finds.
    #[test]
    fn the_count_at_any_instant_matches_a_walk_through_the_changes() {
        let origin = Instant::now();
        let in_system = InSystem::new(1, origin);
        let mut changes = Vec::new();
        let mut value = 0usize;
        for i in 0..1000u64 {
            value = (value * 7 + 3) % 11 + usize::from(i % 3 == 0);
            let micros = 10 + i * 3 + i % 5;
            in_system.set(0, value, at(origin, micros));
            if changes.last().map(|&(_, v)| v) != Some(value) {
                changes.push((micros, value));
            }
        }
        for micros in 0..3100u64 {
            let walked = changes.iter().take_while(|&&(t, _)| t <= micros).last().map_or(0, |&(_, v)| v);
            assert_eq!(in_system.as_of(at(origin, micros)), Some(walked as u64), "at {micros} µs");
        }
    }

    #[test]
    fn samples_are_kept_per_window_until_the_slot_is_reused() {
        let in_system = InSystem::new(1, Instant::now());
        in_system.record_sample(3, 2);
        in_system.record_sample(3, 4);
        assert_eq!(in_system.samples_of(3), (6, 2));
        in_system.record_sample(3 + SLOTS as u64, 1);
        assert_eq!(in_system.samples_of(3), (0, 0));
    }
}
