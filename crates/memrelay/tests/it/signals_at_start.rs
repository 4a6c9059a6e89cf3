//! Signals in the first milliseconds (issue 32, item 7): a SIGHUP sent 1–5 ms after the process
//! starts running its own code, before the engine has its handlers, must not kill it (before:
//! 13 of 20 evented and 17 of 20 pool processes died of the default action), with or without a
//! configuration file to read again; a SIGTERM that early stops it cleanly (exit 0), as a later
//! one does.

use std::fs::{self, File};
use std::process::{Child, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;

engine_matrix!(a_sighup_just_after_start_does_not_kill_memrelay, a_sigterm_just_after_start_stops_memrelay_cleanly,);

/// How many processes each test starts.
const RUNS: u64 = 20;

/// memrelay started in front of `server` (through a `--config` file on even runs, so that a
/// SIGHUP means a reload), sent `signal` `delay` after the spawn; killed when dropped.
struct Early {
    child: Child,
    port: u16,
    stderr: std::path::PathBuf,
}

impl Early {
    fn start(engine: &str, server: &Memcached, dir: &std::path::Path, run: u64, signal: i32) -> Early {
        let port = free_port();
        let stderr = dir.join(format!("stderr-{run}"));
        let mut command = if run.is_multiple_of(2) {
            let config = dir.join(format!("memrelay-{run}.toml"));
            fs::write(&config, format!("servers = [\"{}\"]\n", server.addr())).unwrap();
            memrelay_command(engine, port, &[], &["--config", config.to_str().unwrap()])
        } else {
            memrelay_command(engine, port, &[server.addr()], &[])
        };
        command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(File::create(&stderr).unwrap());
        let delay = Duration::from_micros(1000 + (run % 5) * 1000);
        let child = command.spawn().expect("cannot start memrelay");
        runs_its_own_code(child.id());
        thread::sleep(delay);
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(child.id() as libc::pid_t, signal) };
        Early { child, port, stderr }
    }

    fn stderr(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits for the exit, within 10 s.
    fn exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "memrelay did not exit within 10 s: {}", self.stderr());
            thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Waits until process `pid` runs its own code: Rust's runtime has set SIGPIPE to be ignored,
/// the last step before `main` (std's `Command` resets it to the default in the child before
/// exec). Before that instant the kernel and the dynamic loader run the process, and no program
/// can catch a signal there (on this shared 2-core machine under load, that alone took 1–3 ms);
/// a supervisor that must cover it starts memrelay with SIGHUP ignored, which exec keeps.
fn runs_its_own_code(pid: u32) {
    const SIGPIPE_BIT: u64 = 1 << (libc::SIGPIPE - 1);
    let ignored = || -> Option<u64> {
        let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let mask = status.lines().find_map(|l| l.strip_prefix("SigIgn:"))?;
        u64::from_str_radix(mask.trim(), 16).ok()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while ignored().is_none_or(|mask| mask & SIGPIPE_BIT == 0) && Instant::now() < deadline {
        std::hint::spin_loop();
    }
}

impl Drop for Early {
    fn drop(&mut self) {
        kill_and_reap(&mut self.child);
    }
}

fn a_sighup_just_after_start_does_not_kill_memrelay(engine: &str) {
    let server = Memcached::start();
    let dir = tempfile::tempdir().unwrap();
    let mut died = Vec::new();
    for run in 0..RUNS {
        let mut early = Early::start(engine, &server, dir.path(), run, libc::SIGHUP);
        match wait_listening(&mut early.child, early.port, "memrelay") {
            Ready::Listening => {
                let mut client = Client::connect(&format!("127.0.0.1:{}", early.port));
                assert_eq!(client.set("k", b"v"), "STORED\r\n", "run {run}: {}", early.stderr());
                // SAFETY: kill(2) on our own child.
                unsafe { libc::kill(early.child.id() as libc::pid_t, libc::SIGTERM) };
                let status = early.exit();
                assert!(status.success(), "run {run}: stopped with {status}: {}", early.stderr());
            }
            // Another process took the port: not this test's business, but say so.
            Ready::Exited(status) if early.stderr().contains("cannot listen") => {
                eprintln!("run {run}: lost the port race ({status})");
            }
            Ready::Exited(status) => died.push(format!("run {run}: {status}")),
        }
    }
    assert!(died.is_empty(), "{} of {RUNS} died of an early SIGHUP: {died:?}", died.len());
}

fn a_sigterm_just_after_start_stops_memrelay_cleanly(engine: &str) {
    let server = Memcached::start();
    let dir = tempfile::tempdir().unwrap();
    let mut unclean = Vec::new();
    for run in 0..RUNS {
        let mut early = Early::start(engine, &server, dir.path(), run, libc::SIGTERM);
        let status = early.exit();
        if !status.success() && !early.stderr().contains("cannot listen") {
            unclean.push(format!("run {run}: {status} {}", early.stderr().trim()));
        }
    }
    assert!(unclean.is_empty(), "{} of {RUNS} did not stop cleanly: {unclean:?}", unclean.len());
}
