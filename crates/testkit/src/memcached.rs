//! One real memcached on a free 127.0.0.1 port, its own `stats` read directly, killed when
//! dropped (also when a test panics).

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::client::{parse_values, Client};
use crate::counters::parse_stats;
use crate::process::{free_port, is_root, kill_and_reap, wait_listening, Ready, START_ATTEMPTS, START_TIMEOUT};

/// Debian's memcached, installed by `make deps`.
pub const MEMCACHED: &str = "/usr/bin/memcached";

/// One memcached server on 127.0.0.1.
pub struct Memcached {
    pub port: u16,
    child: Option<Child>,
    /// Options beyond the usual ones (`-Y FILE`, `-F`), kept for a restart.
    extra: Vec<String>,
}

impl Memcached {
    pub fn start() -> Memcached {
        Memcached::start_with(&[])
    }

    /// Starts memcached with options of its own added (`-Y FILE` for ASCII authentication, `-F`
    /// to refuse `flush_all`): the reference for how memcached answers what memrelay refuses.
    pub fn start_with(extra: &[&str]) -> Memcached {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            if let Some(child) = Self::spawn(port, &extra) {
                return Memcached { port, child: Some(child), extra };
            }
        }
        panic!("memcached did not start after {START_ATTEMPTS} attempts");
    }

    /// Starts memcached on `port`; `None` if it exited (lost the port).
    fn spawn(port: u16, extra: &[String]) -> Option<Child> {
        let mut command = Command::new(MEMCACHED);
        command.args(["-l", "127.0.0.1", "-p", &port.to_string(), "-U", "0", "-m", "64", "-t", "1"]);
        command.args(extra);
        if is_root() {
            command.args(["-u", "root"]);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {MEMCACHED}: {e} (run `make deps`)"));
        match wait_listening(&mut child, port, "memcached") {
            Ready::Listening => Some(child),
            Ready::Exited(_) => None,
        }
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kills the server (SIGKILL): its clients see resets or refused connections.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill_and_reap(&mut child);
        }
    }

    /// Starts the server again on the same port (empty, as a restarted memcached is).
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(child) = Self::spawn(self.port, &self.extra) {
                self.child = Some(child);
                return;
            }
            assert!(Instant::now() < deadline, "memcached could not listen again on port {}", self.port);
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the server without closing its sockets (SIGSTOP): connections and connects still
    /// succeed in the kernel, nothing is answered. Killing it on drop works while paused.
    /// Returns once every thread is stopped: kill(2) only queues the signal, and a worker thread
    /// already running could still answer the next request (seen once in `write_policy`).
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
        let pid = self.child.as_ref().expect("a running memcached").id();
        let stopped = crate::process::wait_for(Duration::from_secs(10), || all_threads_stopped(pid));
        assert!(stopped, "memcached {pid} did not stop after SIGSTOP");
    }

    /// Lets a paused server run again (SIGCONT).
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    fn signal(&self, signal: libc::c_int) {
        let child = self.child.as_ref().expect("a running memcached");
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        let rc = unsafe { libc::kill(child.id() as libc::pid_t, signal) };
        assert_eq!(rc, 0, "kill({signal}) failed");
    }

    pub fn client(&self) -> Client {
        Client::connect(&self.addr())
    }

    /// The server's own `stats`, numeric values only.
    pub fn stats(&self) -> HashMap<String, u64> {
        let reply = self.client().request(b"stats\r\n", b"END\r\n");
        parse_stats(&String::from_utf8(reply).expect("stats reply is text"))
    }

    /// The value the server itself holds for `key`.
    pub fn get_raw(&self, key: &str) -> Option<Vec<u8>> {
        let reply = self.client().request(format!("get {key}\r\n").as_bytes(), b"END\r\n");
        parse_values(&reply).into_iter().next().map(|(_, value)| value)
    }

    /// Stores `key` on this server only.
    pub fn set_raw(&self, key: &str, value: &[u8]) {
        let mut request = format!("set {key} 0 0 {}\r\n", value.len()).into_bytes();
        request.extend_from_slice(value);
        request.extend_from_slice(b"\r\n");
        assert_eq!(self.client().request(&request, b"\r\n"), b"STORED\r\n");
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether every thread of `pid` is stopped (state `T` or `t` in /proc/<pid>/task/*/stat; the
/// state follows the command name, which is in parentheses and may hold spaces).
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    tasks.flatten().all(|task| {
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
        matches!(state, Some('T' | 't'))
    })
}
