//! The sampler thread. It reads memrelay's CPU time by thread role as each measurement window
//! begins (so each window has the processor time its threads spent in it), and samples the
//! requests inside memrelay (parsed, reply not yet written) at a fixed rate, so that
//! Little's law can be checked inside the process: the mean count sampled against X·R, two
//! figures that do not come from the same numbers.
//!
//! The sampler is a thread of its own that asks for real-time scheduling (`SCHED_FIFO`; root can
//! have it): an ordinary thread on a saturated machine runs a little more often when fewer
//! requests hold the processors, and its samples read low (35% low was seen with 8 pool workers on
//! two cores). Without the privilege it samples as an ordinary thread and says so once.
//!
//! The samples are taken at random instants, a Poisson process of rate 100/s (exponential gaps):
//! a fixed period can beat with the scheduler's own periods (its tick, the slices of the threads
//! on a saturated machine) and then sees the same phase of them every time; that read a window's
//! mean at half the requests the timestamps say were inside. Poisson sampling sees time averages
//! (PASTA) whatever the load's rhythm.
//!
//! Each recording thread has its own counter, written by that thread alone (no contended cache
//! line on the hot path). A request counts from the read that brought its first byte, as its
//! response time does, so that the samples and X·R cover the same interval: while its bytes wait
//! unparsed it is counted by its client's thread ([`crate::client::ClientSide::arriving`]), then
//! by the thread that took it. The pool's net thread sets its counter to the requests it queued
//! plus those arriving, and the worker that writes a reply counts it out (so single counters go
//! negative; their sum is the count); an event loop sets its count to its requests in flight
//! plus those arriving.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};

use crate::measure::cpu;
use crate::measure::metrics::WindowClock;

/// The mean gap between two samples of the requests inside memrelay (the gaps are exponential).
pub const SAMPLE_EVERY: Duration = Duration::from_millis(10);
/// Windows whose samples are kept until the stats thread takes them.
const SLOTS: usize = 64;

/// One counter on its own cache line.
#[repr(align(64))]
#[derive(Debug, Default)]
struct Counter(AtomicI64);

/// The samples of one window: which window, their sum and their number.
#[derive(Debug, Default)]
struct Samples {
    window: AtomicU64,
    sum: AtomicU64,
    count: AtomicU64,
}

#[derive(Debug)]
pub struct InSystem {
    counters: Box<[Counter]>,
    /// Samples by window index modulo `SLOTS`.
    samples: Box<[Samples]>,
    /// Every sample since start: sum and number (a window in which no thread recorded anything
    /// is not written, but its samples count here).
    all_sum: AtomicU64,
    all_count: AtomicU64,
    /// memrelay's CPU seconds by thread role as each window began (by window index, the last
    /// `SLOTS`), read by the sampler: a window's CPU is the difference to the next one.
    cpu_at_start: Mutex<VecDeque<(u64, cpu::ByRole)>>,
}

impl InSystem {
    pub fn new(threads: usize) -> Arc<InSystem> {
        Arc::new(InSystem {
            counters: (0..threads.max(1)).map(|_| Counter::default()).collect(),
            samples: (0..SLOTS).map(|_| Samples::default()).collect(),
            all_sum: AtomicU64::new(0),
            all_count: AtomicU64::new(0),
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

    /// Requests inside memrelay now.
    ///
    /// The counters are read one after the other, and an interrupt between two reads (the
    /// network's softirq work runs on whichever processor the sampler is on) lets the pool's
    /// workers count requests out that the net thread's counter, read before, counted in: the
    /// sum then reads low by the requests that left meanwhile (40% low was seen with 8 workers on
    /// two saturated cores). So the counters are read until two passes in a row agree (a
    /// consistent snapshot), at most a few times.
    pub fn total(&self) -> u64 {
        const PASSES: usize = 8;
        let sum = || self.counters.iter().map(|c| c.0.load(Ordering::Acquire)).sum::<i64>();
        let mut last = sum();
        for _ in 0..PASSES {
            let again = sum();
            if again == last {
                break;
            }
            last = again;
        }
        last.max(0) as u64
    }

    /// Thread `thread`'s counter: -1 (it wrote a request's reply).
    #[inline]
    pub fn departed(&self, thread: usize) {
        self.add(thread, -1);
    }

    /// Sets thread `thread`'s counter (a thread that knows its own count).
    #[inline]
    pub fn set(&self, thread: usize, count: usize) {
        if let Some(counter) = self.counters.get(thread) {
            counter.0.store(count as i64, Ordering::Relaxed);
        }
    }

    #[inline]
    fn add(&self, thread: usize, delta: i64) {
        // One writer per counter: a load and a store, no read-modify-write.
        if let Some(counter) = self.counters.get(thread) {
            counter.0.store(counter.0.load(Ordering::Relaxed) + delta, Ordering::Relaxed);
        }
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
            eprintln!("memrelay: the in-system sampler runs without real-time priority (not root?): it may read low");
        }
        let mut rng = SmallRng::from_entropy();
        let gaps = Exp::new(1.0 / SAMPLE_EVERY.as_secs_f64()).expect("a positive sampling rate");
        let mut next = Instant::now();
        let mut window = None;
        while !shutdown.load(Ordering::Acquire) {
            let now = Instant::now();
            let index = clock.index(now);
            if window != Some(index) {
                in_system.cpu_reading(index);
                window = Some(index);
            }
            in_system.record_sample(index, in_system.total());
            let gap = Duration::from_secs_f64(gaps.sample(&mut rng));
            next += gap;
            if next < now {
                next = now + gap;
            }
            thread::sleep(next.saturating_duration_since(Instant::now()));
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

    #[test]
    fn counts_in_on_one_thread_and_out_on_another() {
        let in_system = InSystem::new(3);
        in_system.set(0, 5);
        in_system.departed(1);
        in_system.departed(2);
        assert_eq!(in_system.total(), 3);
        in_system.set(2, 4);
        assert_eq!(in_system.total(), 8);
    }

    #[test]
    fn samples_are_kept_per_window_until_the_slot_is_reused() {
        let in_system = InSystem::new(1);
        in_system.record_sample(3, 2);
        in_system.record_sample(3, 4);
        assert_eq!(in_system.samples_of(3), (6, 2));
        in_system.record_sample(3 + SLOTS as u64, 1);
        assert_eq!(in_system.samples_of(3), (0, 0));
    }
}
