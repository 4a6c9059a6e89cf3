//! Signals, from the first instruction of `main` to the end.
//!
//! [`catch_from_start`] runs before anything else in `main` (before the command line is read):
//! it replaces the default action of SIGINT, SIGTERM and SIGHUP (which ends the process) with a
//! handler that only notes the signal. Once the engine runs, [`on_signal`] takes over SIGINT and
//! SIGTERM (a stop noted before is acted on at once) and the reload thread SIGHUP
//! ([`redeliver_early_hangup`]: one noted before is delivered again, so the configuration is
//! read again after the moment it was asked for). Without a configuration to read again, SIGHUP
//! stays noted and ignored: a hangup never ends memrelay.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// The signals noted before their real handlers were in place.
struct Early {
    stop: Arc<AtomicBool>,
    hangup: Arc<AtomicBool>,
}

static EARLY: OnceLock<Early> = OnceLock::new();

/// Notes SIGINT, SIGTERM and SIGHUP instead of dying of them, until [`on_signal`] and the reload
/// thread handle them (call it first thing in `main`; a second call does nothing).
pub fn catch_from_start() -> io::Result<()> {
    if EARLY.get().is_some() {
        return Ok(());
    }
    let early = Early { stop: Arc::new(AtomicBool::new(false)), hangup: Arc::new(AtomicBool::new(false)) };
    signal_hook::flag::register(SIGHUP, Arc::clone(&early.hangup))?;
    signal_hook::flag::register(SIGINT, Arc::clone(&early.stop))?;
    signal_hook::flag::register(SIGTERM, Arc::clone(&early.stop))?;
    let _ = EARLY.set(early);
    Ok(())
}

/// Starts a thread that, on the first SIGINT or SIGTERM (or at once, when one came before it was
/// started), sets `flag` and calls `wake`.
pub fn on_signal(flag: Arc<AtomicBool>, wake: impl Fn() + Send + 'static) -> io::Result<()> {
    // The handler first, then the note: a signal in between is seen by one or the other.
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    let noted = EARLY.get().is_some_and(|early| early.stop.load(Ordering::Acquire));
    thread::Builder::new().name("signals".into()).spawn(move || {
        if noted || signals.forever().next().is_some() {
            flag.store(true, Ordering::Release);
            wake();
        }
    })?;
    Ok(())
}

/// Once the reload thread listens: a SIGHUP that came before is sent again, for it.
pub(crate) fn redeliver_early_hangup() {
    if EARLY.get().is_some_and(|early| early.hangup.swap(false, Ordering::AcqRel)) {
        let _ = signal_hook::low_level::raise(SIGHUP);
    }
}
