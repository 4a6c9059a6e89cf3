//! SIGINT/SIGTERM: set a flag and wake the event loop(s), which stop accepting, finish what is
//! in flight and return.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Starts a thread that, on the first SIGINT or SIGTERM, sets `flag` and calls `wake`.
pub fn on_signal(flag: Arc<AtomicBool>, wake: impl Fn() + Send + 'static) -> io::Result<()> {
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    thread::Builder::new().name("signals".into()).spawn(move || {
        if signals.forever().next().is_some() {
            flag.store(true, Ordering::Release);
            wake();
        }
    })?;
    Ok(())
}
