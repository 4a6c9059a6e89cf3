//! The pool engine: starts the net thread, W workers and the stats thread, and stops them in
//! order (net thread first, so nothing new is queued; then the workers drain the queue; then the
//! stats thread writes the summary once every recorder is gone).

use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use memrelay_protocol::Limits;
use mio::net::TcpListener;
use mio::{Poll, Waker};

use crate::config::Config;
use crate::job::Job;
use crate::local::{LiveTotals, LocalAnswers};
use crate::metrics::{Recorder, WindowClock};
use crate::net::{NetThread, WAKER};
use crate::routing::Router;
use crate::stats::StatsThread;
use crate::worker::Worker;

/// Runs until SIGINT/SIGTERM (or `shutdown` is set), then returns after a clean stop.
pub fn run(config: Config, shutdown: Arc<AtomicBool>) -> Result<(), String> {
    let config = Arc::new(config);
    let router = Arc::new(Router::new(&config)?);
    let listener = TcpListener::bind(config.listen).map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let poll = Poll::new().map_err(|e| e.to_string())?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(|e| e.to_string())?);
    {
        let waker = Arc::clone(&waker);
        crate::shutdown::on_signal(Arc::clone(&shutdown), move || {
            let _ = waker.wake();
        })
        .map_err(|e| e.to_string())?;
    }

    let workers = usize::from(config.args.workers);
    let servers = config.servers.len();
    let clock = WindowClock { start: Instant::now(), length: config.stats_window };
    let (to_stats, stats_in) = crossbeam_channel::unbounded();
    let (recycle_out, recycle_in) = crossbeam_channel::unbounded();
    let recorder = |thread: usize| {
        Recorder::new(
            thread as u16,
            clock,
            servers,
            config.args.request_log_sample,
            to_stats.clone(),
            recycle_in.clone(),
        )
    };
    let live = LiveTotals::new(servers);
    let stats = StatsThread::new(Arc::clone(&config), clock, workers + 1, stats_in, recycle_out, Arc::clone(&live))
        .map_err(|e| format!("cannot write statistics: {e}"))?;
    let stats = spawn("stats", move || stats.run())?;

    let (queue_in, queue_out) = crossbeam_channel::unbounded::<Box<Job>>();
    let (done_in, done_out) = crossbeam_channel::unbounded::<Box<Job>>();
    let mut worker_threads = Vec::with_capacity(workers);
    for id in 0..workers {
        let worker = Worker::new(Arc::clone(&config), Arc::clone(&router), recorder(id + 1));
        let (queue, done, waker) = (queue_out.clone(), done_in.clone(), Arc::clone(&waker));
        worker_threads.push(spawn(&format!("worker-{id}"), move || {
            worker.run(queue, done, move || {
                let _ = waker.wake();
            });
            Ok(())
        })?);
    }
    drop((queue_out, done_in));

    let limits = Limits { max_value_len: config.args.max_value_size, ..Limits::default() };
    let local = LocalAnswers::new(live, config.server_names.clone(), workers);
    let net = NetThread::new(
        poll,
        listener,
        queue_in,
        done_out,
        limits,
        config.args.max_clients,
        recorder(0),
        local,
        shutdown,
        config.shutdown_grace,
    )
    .map_err(|e| e.to_string())?;
    drop((to_stats, recycle_in));
    // The net thread runs here; when it returns, its queue sender is gone and workers drain.
    let net_result = net.run();
    for handle in worker_threads {
        let _ = handle.join();
    }
    let stats_result = stats.join().map_err(|_| "the stats thread panicked".to_string())?;
    net_result.map_err(|e| format!("event loop failed: {e}"))?;
    stats_result.map_err(|e| format!("cannot write statistics: {e}"))
}

fn spawn(
    name: &str,
    body: impl FnOnce() -> io::Result<()> + Send + 'static,
) -> Result<thread::JoinHandle<io::Result<()>>, String> {
    thread::Builder::new().name(name.into()).spawn(body).map_err(|e| format!("cannot start thread {name}: {e}"))
}
