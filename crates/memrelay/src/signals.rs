//! Signals, from before `main` to the end.
//!
//! [`catch_from_start`] runs before `main` (the binary calls it from a constructor in
//! `.init_array`, which the loader runs before Rust's runtime starts, and again first thing in
//! `main`): it replaces the default action of SIGINT, SIGTERM and SIGHUP (which ends the
//! process) with a handler that only notes the signal (an atomic store: nothing else is safe in a
//! handler, or in a constructor). Once the engine runs, [`on_signal`] takes over SIGINT and
//! SIGTERM (a stop noted before is acted on at once) and the reload thread SIGHUP
//! ([`redeliver_early_hangup`]: one noted before is delivered again, so the configuration is read
//! again after the moment it was asked for). signal-hook keeps the noting handler chained behind
//! its own, so it never falls back to the default. Without a configuration to read again, SIGHUP
//! stays noted and ignored: a hangup never ends memrelay.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// SIGINT or SIGTERM came before [`on_signal`] was in place.
static EARLY_STOP: AtomicBool = AtomicBool::new(false);
/// SIGHUP came before the reload thread listened.
static EARLY_HANGUP: AtomicBool = AtomicBool::new(false);
static CATCHING: AtomicBool = AtomicBool::new(false);

/// The handler: notes the signal (async-signal-safe: one atomic store).
extern "C" fn note(signal: libc::c_int) {
    match signal {
        SIGHUP => EARLY_HANGUP.store(true, Ordering::Release),
        _ => EARLY_STOP.store(true, Ordering::Release),
    }
}

/// Notes SIGINT, SIGTERM and SIGHUP instead of dying of them, until [`on_signal`] and the reload
/// thread handle them. No allocation, no lock: it may run in a constructor before `main`. A
/// second call does nothing.
pub fn catch_from_start() -> io::Result<()> {
    if CATCHING.swap(true, Ordering::AcqRel) {
        return Ok(());
    }
    for signal in [SIGHUP, SIGINT, SIGTERM] {
        // SAFETY: a zeroed sigaction is valid; `note` is async-signal-safe and lives forever.
        let rc = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = note as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut())
        };
        if rc != 0 {
            CATCHING.store(false, Ordering::Release);
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Starts a thread that, on the first SIGINT or SIGTERM (or at once, when one came before it was
/// started), sets `flag` and calls `wake`.
pub fn on_signal(flag: Arc<AtomicBool>, wake: impl Fn() + Send + 'static) -> io::Result<()> {
    // The handler first, then the note: a signal in between is seen by one or the other.
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    let noted = EARLY_STOP.load(Ordering::Acquire);
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
    if EARLY_HANGUP.swap(false, Ordering::AcqRel) {
        let _ = signal_hook::low_level::raise(SIGHUP);
    }
}
