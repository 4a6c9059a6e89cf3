//! The pool engine, the seeds' design: one net thread (the shared client side on a mio loop), a
//! FIFO queue, W workers each with one blocking connection to every server.
//!
//! ```text
//!  clients ──TCP──▶ net thread ──▶ request queue ──▶ worker 1..W ──TCP (one blocking conn per server)──▶ memcached 1..S
//!     ▲            (mio, parses,     (MPMC, FIFO)      (route, send, wait,
//!     └────────────  stamps times) ◀── done/leftover ── merge, reply to client)
//! ```
//!
//! Stopping goes in order: the net thread first (nothing new is queued), then the workers drain
//! the queue, then the stats thread writes the summary once every recorder is gone.

mod client_stream;
mod job;
mod net;
mod queue;
mod worker;

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memrelay_protocol::Limits;
use mio::{Poll, Waker};

use crate::client::budget::Budget;
use crate::client::{ClientSide, WAKER};
use crate::engine::event_loop;
use crate::reload::Source;
use crate::settings::Settings;
use crate::startup::{self, Error, Runtime};
use job::Job;
use net::NetThread;
use queue::Queue;
use worker::Worker;

/// How long stopping waits for workers after the net thread returned (the queue is drained by
/// then unless a worker is stuck in an exchange with a slow server).
const WORKER_DRAIN: Duration = Duration::from_millis(200);

/// Runs until SIGINT/SIGTERM (or `shutdown` is set), then returns after a clean stop.
pub(crate) fn run(settings: Settings, shutdown: Arc<AtomicBool>, reload: Option<Source>) -> Result<(), Error> {
    let workers = settings.engine.workers;
    let runtime = Runtime::start(settings, workers + 1, shutdown, reload)?;
    let settings = Arc::clone(&runtime.settings);
    // The pool takes no TLS listener, so it always has the plain one (the options say so).
    let addr = settings.listen.as_ref().map_or_else(|| ([127, 0, 0, 1], 11212).into(), |l| l.addr);
    let listener = startup::listen(addr, 1)?.remove(0);
    let poll = Poll::new().map_err(Error::EventLoopSetup)?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(Error::EventLoopSetup)?);
    {
        let waker = Arc::clone(&waker);
        runtime.on_signal(move || {
            let _ = waker.wake();
        })?;
    }

    let (queue_in, queue_out) = crossbeam_channel::unbounded::<Box<Job>>();
    let (done_in, done_out) = crossbeam_channel::unbounded::<Box<Job>>();
    let mut worker_threads = Vec::with_capacity(workers);
    let idle = Arc::new(AtomicUsize::new(0));
    for id in 0..workers {
        let worker = Worker::new(&settings, &runtime, runtime.recorder(id + 1));
        let queue = Queue::new(queue_out.clone(), Arc::clone(&idle));
        let (done, waker) = (done_in.clone(), Arc::clone(&waker));
        worker_threads.push(startup::spawn(&format!("worker-{id}"), move || {
            worker.run(queue, done, move || {
                let _ = waker.wake();
            })
        })?);
    }
    drop((queue_out, done_in));

    let limits = Limits { max_value_len: settings.limits.max_value_size, ..Limits::default() };
    let budget = Budget::new(settings.limits.client_budget, settings.limits.max_value_size);
    let local = runtime.local_answers(workers);
    let clients = ClientSide::new(poll.registry(), Some(listener), limits, budget, settings.limits.max_clients, local)
        .map_err(Error::EventLoopSetup)?;
    let mut net = NetThread::new(poll, clients, queue_in, done_out, runtime.recorder(0));
    // The net thread runs here; when it returns (and is dropped), its queue sender is gone and
    // the workers drain the queue.
    let net_result = event_loop::run(&mut net, &runtime.shutdown, settings.shutdown_grace);
    drop(net);
    // The net thread waited for requests in flight up to the grace period; a worker still in an
    // exchange now (a server slower than the grace) is not waited for: its client is closed as
    // the process exits.
    let by = Instant::now() + WORKER_DRAIN;
    let mut panicked = None;
    for handle in worker_threads {
        startup::wait_until_finished(&handle, by);
        if handle.is_finished() && handle.join().is_err() {
            panicked = Some(Error::Panicked("worker".into()));
        }
    }
    let stats_result = runtime.finish(Instant::now() + WORKER_DRAIN);
    net_result.map_err(Error::EventLoop)?;
    panicked.map_or(Ok(()), Err)?;
    stats_result
}
