//! The evented engine: K event-loop threads, each running the shared client side for its own
//! clients and one non-blocking connection to every server, shared by all of its clients.
//!
//! ```text
//!  clients ──TCP──▶ loop 1..K (mio; accept via SO_REUSEPORT, parse, route) ──batched writes──▶ memcached 1..S
//!     ▲                 │  replies matched to requests in order per server connection
//!     └── replies in ◀──┘  request order per client (a pipelining client may have many in flight)
//! ```
//!
//! Times: enqueue = parsed, dequeue = first_send = written to a server connection (so queue time
//! is the wait for the loop's batched write), last_reply = the last target's reply parsed,
//! reply_written = handed to the client socket.
//!
//! - [`thread`]: one loop thread: a request from parsed to delivered, and the dispatch of a
//!   turn's work (its events put what they completed on the turn's lists).
//! - [`clients`]: what the loop keeps per client; [`connections`]: the loop's connections to the
//!   servers (one shared per server, more only while one is paused for a single client).
//! - [`server_events`]: the server connections' events, failures and timeouts, and the no-pause
//!   rule; [`merged`]: a split read's reply merged in key order.
//! - [`requests`]: the in-flight entries; [`upstream`]: one server connection.

mod clients;
mod connections;
mod merged;
mod requests;
mod server_events;
mod thread;
mod upstream;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use mio::{Poll, Waker};

use crate::client::WAKER;
use crate::reload::Source;
use crate::settings::Settings;
use crate::startup::{self, Error, Runtime};
use thread::EventLoop;

/// Runs the evented engine until SIGINT/SIGTERM (or `shutdown`), then stops cleanly.
pub(crate) fn run(settings: Settings, shutdown: Arc<AtomicBool>, reload: Option<Source>) -> Result<(), Error> {
    let threads = settings.engine.threads;
    let runtime = Runtime::start(settings, threads, shutdown, reload)?;
    let settings = Arc::clone(&runtime.settings);
    let local = runtime.local_answers(threads);
    let mut loops = Vec::with_capacity(threads);
    let mut wakers = Vec::with_capacity(threads);
    // One listening socket per loop (SO_REUSEPORT, after checking the port is free).
    // None with `--listen none` (the TLS listener alone).
    let listeners: Vec<Option<mio::net::TcpListener>> = match &settings.listen {
        Some(listen) => startup::listen(listen.addr, threads)?.into_iter().map(Some).collect(),
        None => (0..threads).map(|_| None).collect(),
    };
    // And as many TLS listeners, with the configuration they share.
    let mut tls = match &runtime.tls {
        Some(config) => startup::listen(config.settings().listen, threads)?
            .into_iter()
            .map(|l| Some((l, Arc::clone(config))))
            .collect(),
        None => Vec::new(),
    };
    tls.resize_with(threads, || None);
    for ((id, listener), tls) in listeners.into_iter().enumerate().zip(tls) {
        let poll = Poll::new().map_err(Error::EventLoopSetup)?;
        wakers.push(Waker::new(poll.registry(), WAKER).map_err(Error::EventLoopSetup)?);
        let mut event_loop = EventLoop::new(poll, listener, &settings, &runtime, runtime.recorder(id), local.clone())?;
        if let Some((listener, config)) = tls {
            event_loop.listen_tls(listener, config).map_err(Error::EventLoopSetup)?;
        }
        loops.push(event_loop);
    }
    runtime.on_signal(move || {
        for waker in &wakers {
            let _ = waker.wake();
        }
    })?;
    let mut handles = Vec::with_capacity(threads);
    for (id, mut event_loop) in loops.into_iter().enumerate() {
        let (shutdown, grace) = (Arc::clone(&runtime.shutdown), settings.shutdown_grace);
        handles.push(startup::spawn(&format!("loop-{id}"), move || event_loop.run(&shutdown, grace))?);
    }
    let mut first_error = None;
    for (id, handle) in handles.into_iter().enumerate() {
        if let Err(error) = startup::join(&format!("loop-{id}"), handle) {
            first_error = first_error.or(Some(error));
        }
    }
    let stats_result = runtime.finish(std::time::Instant::now() + std::time::Duration::from_secs(1));
    first_error.map_or(Ok(()), Err)?;
    stats_result
}
