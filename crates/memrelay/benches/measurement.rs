//! What measuring one request costs a thread: the six clock reads and `Recorder::record`
//! (three histogram increments, the counters, the window check). Compare with the CPU time a
//! request costs the proxy (`make bench`: about 10-30 µs) to see the share measurement takes.
//! `cargo bench -p memrelay --bench measurement`

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use memrelay::measure::clock::WindowClock;
use memrelay::measure::metrics::{Kind, Outcome, Recorder, Timestamps};

fn record(c: &mut Criterion) {
    let (to_stats, from_recorders) = crossbeam_channel::unbounded();
    let (_recycle_in, recycled) = crossbeam_channel::unbounded();
    let clock = WindowClock { start: Instant::now(), length: Duration::from_secs(1) };
    let in_system = memrelay::measure::in_system::InSystem::new(1, clock.start);
    let mut recorder = Recorder::new(0, clock, 3, None, to_stats, recycled, in_system);
    let outcome = Outcome { keys: 1, hits: 1, misses: 0, error: false };
    c.bench_function("measure_one_request", |b| {
        b.iter(|| {
            let mut times = Timestamps::at(Instant::now());
            times.enqueue = Instant::now();
            times.dequeue = Instant::now();
            times.first_send = Instant::now();
            times.last_reply = Instant::now();
            times.reply_written = Instant::now();
            recorder.server_request(1);
            recorder.record(Kind::Get, std::hint::black_box(&times), &outcome, 1);
            // Windows shipped at boundaries are dropped here, as the stats thread would take them.
            while from_recorders.try_recv().is_ok() {}
        })
    });
}

criterion_group!(benches, record);
criterion_main!(benches);
