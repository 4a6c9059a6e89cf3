//! Process setup: the file descriptor limit and the signals that end a run early.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Raises the soft RLIMIT_NOFILE to the hard limit; fails if even that is below `needed`.
pub fn raise_nofile(needed: u64) -> Result<(), String> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed to them.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return Err(format!("getrlimit failed: {}", std::io::Error::last_os_error()));
        }
        if lim.rlim_cur < lim.rlim_max {
            let mut want = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) != 0 && lim.rlim_max == libc::RLIM_INFINITY {
                // Linux refuses an infinite soft limit above fs.nr_open: settle for a large one.
                want.rlim_cur = 1 << 20;
                let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &want);
            }
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        }
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t is not u64 everywhere
    let have = lim.rlim_cur as u64;
    if have < needed {
        return Err(format!(
            "{needed} file descriptors needed but the limit is {have} (raise the hard limit: ulimit -Hn)"
        ));
    }
    Ok(())
}

/// SIGINT/SIGTERM set `stop` (the run ends and still writes its results); a second one exits
/// at once.
pub fn on_signals(stop: &Arc<AtomicBool>) -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    use signal_hook::flag;
    for (signal, code) in [(SIGINT, 130), (SIGTERM, 143)] {
        flag::register_conditional_shutdown(signal, code, Arc::clone(stop))?;
        flag::register(signal, Arc::clone(stop))?;
    }
    Ok(())
}

/// A one-shot timer with nanosecond resolution (timerfd), to wake an event loop for open-loop
/// sends: epoll's own timeout counts in milliseconds, far too coarse for a schedule.
pub struct Timer {
    fd: std::os::fd::OwnedFd,
    /// The deadline it is armed for, in the caller's clock.
    armed: Option<u64>,
}

impl Timer {
    pub fn new() -> std::io::Result<Timer> {
        use std::os::fd::FromRawFd;
        // SAFETY: timerfd_create has no memory preconditions; the fd is owned from here on.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor nobody else owns.
        Ok(Timer { fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }, armed: None })
    }

    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.fd.as_raw_fd()
    }

    /// Fires at `at` (same clock as `now`) unless already due to fire no later than that.
    pub fn arm(&mut self, at: u64, now: u64) {
        if self.armed.is_some_and(|armed| armed <= at) {
            return;
        }
        let wait = at.saturating_sub(now).max(1);
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: (wait / 1_000_000_000) as _, tv_nsec: (wait % 1_000_000_000) as _ },
        };
        // SAFETY: spec is a valid itimerspec; the old value is not asked for.
        unsafe { libc::timerfd_settime(self.raw_fd(), 0, &spec, std::ptr::null_mut()) };
        self.armed = Some(at);
    }

    /// Called on its readiness event: consumes the expiration.
    pub fn fired(&mut self) {
        let mut ticks = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a local buffer.
        unsafe { libc::read(self.raw_fd(), ticks.as_mut_ptr().cast(), ticks.len()) };
        self.armed = None;
    }
}
