//! The event loop both engines' mio threads run (the pool engine's net thread, each evented
//! loop): roll the measurement window, run the engine's timers, poll, dispatch the listener, the
//! clients and the engine's own sockets, end the turn; on shutdown stop accepting and wait for
//! what is in flight, at most the grace period.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mio::event::Event;
use mio::{Events, Poll, Token};

use crate::client::{CLIENT_TOKENS, LISTENER, TLS_LISTENER, WAKER};
use crate::measure::metrics::Recorder;

/// What an engine does at each point of the loop.
pub(crate) trait Scheduler {
    /// The engine's `Poll` (it owns its sockets' registrations).
    fn poll(&mut self) -> &mut Poll;
    fn recorder(&mut self) -> &mut Recorder;
    /// Runs what is due at `now` (and finishes what that completed); returns when the engine next
    /// needs to run without an event.
    fn timers(&mut self, _now: Instant) -> Option<Instant> {
        None
    }
    fn accept(&mut self);
    /// When accepting must be tried again without an event (descriptors ran out).
    fn accept_retry_at(&self) -> Option<Instant>;
    /// Reads a client's bytes; `to_eof` when the poller saw the peer close.
    fn read_client(&mut self, slot: usize, to_eof: bool);
    fn flush_client(&mut self, slot: usize);
    /// Parses and dispatches what the client sent, and closes it when it is done.
    fn pump(&mut self, slot: usize);
    /// An event on one of the engine's own sockets (server connections).
    fn engine_event(&mut self, token: Token, event: &Event);
    /// After every event of a turn was dispatched (batched writes, finished jobs).
    fn end_of_turn(&mut self);
    /// Stops accepting and marks clients closing.
    fn begin_shutdown(&mut self);
    /// Nothing in flight: a shutdown may finish.
    fn idle(&self) -> bool;
}

/// Runs `engine` until `shutdown` is set and what was in flight is finished (or `grace` is over).
pub(crate) fn run<S: Scheduler>(engine: &mut S, shutdown: &AtomicBool, grace: Duration) -> io::Result<()> {
    let mut events = Events::with_capacity(1024);
    let clock = engine.recorder().clock();
    let mut stop_by: Option<Instant> = None;
    loop {
        let now = Instant::now();
        engine.recorder().roll(now);
        let mut wait = clock.end_of(clock.index(now)).saturating_duration_since(now);
        if engine.accept_retry_at().is_some_and(|at| at <= now) {
            engine.accept();
        }
        for due in [engine.timers(now), engine.accept_retry_at()].into_iter().flatten() {
            wait = wait.min(due.saturating_duration_since(now) + Duration::from_millis(1));
        }
        if shutdown.load(Ordering::Acquire) {
            let deadline = *stop_by.get_or_insert_with(|| {
                engine.begin_shutdown();
                now + grace
            });
            if engine.idle() || now >= deadline {
                break;
            }
            wait = wait.min(Duration::from_millis(10));
        }
        if let Err(e) = engine.poll().poll(&mut events, Some(wait)) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        for event in events.iter() {
            match event.token() {
                LISTENER | TLS_LISTENER => engine.accept(),
                WAKER => {}
                Token(slot) if slot < CLIENT_TOKENS => {
                    let closed = event.is_read_closed() || event.is_error();
                    if event.is_readable() || closed {
                        engine.read_client(slot, closed);
                    }
                    if event.is_writable() {
                        engine.flush_client(slot);
                    }
                    engine.pump(slot);
                }
                token => engine.engine_event(token, event),
            }
        }
        engine.end_of_turn();
    }
    engine.recorder().flush();
    Ok(())
}
