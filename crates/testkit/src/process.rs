//! Starting and stopping processes that listen: free ports, readiness seen in /proc, reaping.
//!
//! No fixed ports: a port is found by binding port 0 and releasing it; a process that loses
//! the port to someone else exits and is started again on another one. A process is ready when
//! a socket *it* owns listens on its port (checked in /proc, so a stray connection never counts
//! as a request).

use std::collections::HashSet;
use std::fs;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, ExitStatus};
use std::thread;
use std::time::{Duration, Instant};

/// How long a process may take to listen.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How many free ports to try before giving up on starting a process.
pub const START_ATTEMPTS: usize = 10;

/// A port nothing listens on right now (bound, then released). With `MEMRELAY_PORTS=LOW-HIGH`
/// (`make test` gives the Rust suites a range of their own, as it gives the lab and the bench
/// theirs) the ports come from that range, each handed out once per process in turn: tests
/// running side by side, and the other suites of `make test`, never pick the same port, which
/// the kernel's port 0 can give twice to two tests starting at once on a busy machine.
pub fn free_port() -> u16 {
    match port_range() {
        Some((low, high)) => from_range(low, high),
        None => {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
            listener.local_addr().unwrap().port()
        }
    }
}

/// `MEMRELAY_PORTS` as `(low, high)`, if set and well formed.
fn port_range() -> Option<(u16, u16)> {
    let text = std::env::var("MEMRELAY_PORTS").ok()?;
    let (low, high) = text.split_once('-')?;
    let (low, high) = (low.trim().parse::<u16>().ok()?, high.trim().parse::<u16>().ok()?);
    (low >= 1024 && low < high).then_some((low, high))
}

/// The next port of `low..=high` nothing listens on, from where the last call left off (a
/// process's first call starts at an offset of its pid, so two processes rarely start at the
/// same place).
fn from_range(low: u16, high: u16) -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let span = u32::from(high - low) + 1;
    let _ = NEXT.compare_exchange(u32::MAX, std::process::id() % span, Ordering::AcqRel, Ordering::Acquire);
    for _ in 0..span {
        let port = low + (NEXT.fetch_add(1, Ordering::AcqRel) % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in MEMRELAY_PORTS={low}-{high}");
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Socket inodes in LISTEN state on `port` (any local address), from /proc/net/tcp{,6}.
fn listening_inodes(port: u16) -> HashSet<u64> {
    let mut inodes = HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = fs::read_to_string(table) else { continue };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 10 || fields[3] != "0A" {
                continue;
            }
            let local_port = fields[1].rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok());
            if local_port == Some(port) {
                if let Ok(inode) = fields[9].parse() {
                    inodes.insert(inode);
                }
            }
        }
    }
    inodes
}

/// Whether process `pid` holds a socket listening on `port`.
fn owns_listener(pid: u32, port: u16) -> bool {
    let listening = listening_inodes(port);
    if listening.is_empty() {
        return false;
    }
    let Ok(entries) = fs::read_dir(format!("/proc/{pid}/fd")) else { return false };
    entries.flatten().any(|entry| {
        fs::read_link(entry.path())
            .ok()
            .and_then(|target| {
                let target = target.to_string_lossy().into_owned();
                target.strip_prefix("socket:[")?.strip_suffix(']')?.parse::<u64>().ok()
            })
            .is_some_and(|inode| listening.contains(&inode))
    })
}

pub enum Ready {
    Listening,
    Exited(ExitStatus),
}

/// Waits until `child` listens on `port` and accepts a connection, or exits.
pub fn wait_listening(child: &mut Child, port: u16, what: &str) -> Ready {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Ready::Exited(status);
        }
        if owns_listener(child.id(), port) && TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ready::Listening;
        }
        if Instant::now() >= deadline {
            // Not left running behind the failed test.
            kill_and_reap(child);
            panic!("{what} did not listen on port {port} within {START_TIMEOUT:?}");
        }
        thread::sleep(Duration::from_millis(5));
    }
}

pub fn kill_and_reap(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Polls `condition` every few milliseconds until it holds or `timeout` passes.
pub fn wait_for(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Raises this process's open-file limit (inherited by the processes it starts) to `want`,
/// or the hard limit if lower. Returns the new soft limit.
pub fn raise_nofile(want: libc::rlim_t) -> libc::rlim_t {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a valid pointer.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        if limit.rlim_cur < want {
            limit.rlim_cur = want.min(limit.rlim_max);
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
        }
    }
    limit.rlim_cur
}
