//! The probe thread: for each server that is down, `version` on its own connection, first after
//! `probe_first`, then on a doubling backoff up to `probe_max`; a `VERSION` line in time brings the
//! server back. Bounded by the server timeout per probe and by the shutdown flag.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::Health;

/// How often the thread looks for servers that went down.
const TICK: Duration = Duration::from_millis(10);

/// Runs until `shutdown` is set.
pub(crate) fn run(health: Arc<Health>, addrs: Vec<SocketAddr>, timeout: Duration, shutdown: Arc<AtomicBool>) {
    let settings = health.settings();
    // Per server: when it was seen down, the next probe, the current backoff.
    let mut seen_down: Vec<Option<Instant>> = vec![None; addrs.len()];
    let mut next_probe = vec![Instant::now(); addrs.len()];
    let mut backoff = vec![settings.probe_first; addrs.len()];
    while !shutdown.load(Ordering::Acquire) {
        let now = Instant::now();
        for server in 0..addrs.len() {
            if !health.is_down(server) {
                seen_down[server] = None;
                continue;
            }
            let since = *seen_down[server].get_or_insert_with(|| {
                next_probe[server] = now + settings.probe_first;
                backoff[server] = settings.probe_first;
                now
            });
            if now < next_probe[server] {
                continue;
            }
            if answers_version(addrs[server], timeout) {
                health.probe_answered(server, since.elapsed());
                seen_down[server] = None;
            } else {
                backoff[server] = (backoff[server] * 2).min(settings.probe_max);
                next_probe[server] = Instant::now() + backoff[server];
            }
        }
        thread::sleep(TICK);
    }
}

/// Whether the server answers `version` with a `VERSION` line within `timeout`.
pub(crate) fn answers_version(addr: SocketAddr, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, timeout) else { return false };
    if stream.write_all(b"version\r\n").is_err() {
        return false;
    }
    let mut reply = Vec::with_capacity(64);
    let mut chunk = [0u8; 64];
    while !reply.ends_with(b"\r\n") && reply.len() < 256 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return false;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return false,
            Ok(n) => reply.extend_from_slice(&chunk[..n]),
        }
    }
    reply.starts_with(b"VERSION ")
}
