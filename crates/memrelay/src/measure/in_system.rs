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
//! Each recording thread has its own counter, written by that thread alone (no contended cache
//! line on the hot path): the pool's net thread counts a request in when it queues it and the
//! worker that writes the reply counts it out (so single counters go negative; their sum is the
//! count); an event loop sets its count when a request starts and when its reply is written. The
//! pool's count starts at the queue, while the response time starts at the first byte (which may
//! wait in the net thread for the client's previous job to return), so there N reads a little
//! below X·R.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::measure::cpu;
use crate::measure::metrics::WindowClock;

/// How often the requests inside memrelay are sampled.
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
    pub fn total(&self) -> u64 {
        self.counters.iter().map(|c| c.0.load(Ordering::Relaxed)).sum::<i64>().max(0) as u64
    }

    /// Thread `thread`'s counter: +1 (a request came in through it).
    #[inline]
    pub fn arrived(&self, thread: usize) {
        self.add(thread, 1);
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
            next += SAMPLE_EVERY;
            if next < now {
                next = now + SAMPLE_EVERY;
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
        for _ in 0..5 {
            in_system.arrived(0);
        }
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
