//! The main thread: parse options, start the workers, drive the phases (populate, run),
//! watch that the workers stay alive, write the results, choose the exit code.
//!
//! Exit codes: 0 for a run that ended (test time over, requests sent, or interrupted by
//! SIGINT/SIGTERM), even with counted errors; 1 when it could not run (a server unreachable at
//! the start, too few file descriptors) or every connection was lost; 2 for bad options.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use clap::Parser;

use crate::collect::Collector;
use crate::config::{unix_now, Args, Config, ConfigError, Stop};
use crate::report::{error_entries, write_table, Errors, Output, Phase};
use crate::sys;
use crate::worker::{Command, PhaseKind, Report, Worker};

/// A worker that sends nothing for this long (it reports every second) is considered stuck.
const SILENCE: Duration = Duration::from_secs(6);
/// A load that begins this much after `--start-at` is said so on stderr.
const LATE_WARNING_S: f64 = 0.05;
/// Error messages repeated on stderr at the end.
const SHOWN_ERRORS: usize = 3;

pub fn main() -> i32 {
    let args = Args::parse();
    if args.link_listen.is_some() || args.link_probe.is_some() {
        return link_main(&args);
    }
    let cfg = match Config::from_args(args) {
        Ok(cfg) => cfg,
        Err(ConfigError::Usage(m)) => {
            eprintln!("memrelay-bench: error: {m}");
            return 2;
        }
        Err(ConfigError::Resolve(m)) => {
            eprintln!("memrelay-bench: {m}");
            return 1;
        }
    };
    if let Err(m) = sys::raise_nofile(cfg.connections as u64 + 64) {
        eprintln!("memrelay-bench: {m}");
        return 1;
    }
    let stop = Arc::new(AtomicBool::new(false));
    if let Err(e) = sys::on_signals(&stop) {
        eprintln!("memrelay-bench: cannot install signal handlers: {e}");
        return 1;
    }
    Bench::start(cfg, stop).map_or(1, Bench::run)
}

/// `--link-listen` / `--link-probe` (see [`crate::link`]): 0 measured, 1 failed.
fn link_main(args: &Args) -> i32 {
    let wait = Duration::from_secs_f64(args.connect_timeout.max(0.1));
    let result = if let Some(listen) = &args.link_listen {
        crate::link::listen(listen, wait.max(Duration::from_secs(30)))
    } else {
        let target = args.link_probe.as_deref().unwrap_or_default();
        crate::link::probe(target, args.link_seconds, wait)
            .and_then(|m| serde_json::to_writer(std::io::stdout(), &m).map_err(std::io::Error::other))
            .map(|()| println!())
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("memrelay-bench: link: {e}");
            1
        }
    }
}

struct Bench {
    cfg: Arc<Config>,
    stop: Arc<AtomicBool>,
    reports: Receiver<Report>,
    commands: Vec<Sender<Command>>,
    handles: Vec<JoinHandle<()>>,
}

/// How driving a phase went, from the main thread's view.
enum Driven {
    Ended(Collector),
    /// A worker stopped reporting; partial results.
    Stalled(Collector, String),
}

impl Bench {
    /// Starts the workers and waits until every connection is up. `None` (after saying why in
    /// one line) if that fails.
    fn start(cfg: Config, stop: Arc<AtomicBool>) -> Option<Bench> {
        let cfg = Arc::new(cfg);
        let (tx, reports) = mpsc::channel();
        let mut bench =
            Bench { cfg: Arc::clone(&cfg), stop: Arc::clone(&stop), reports, commands: vec![], handles: vec![] };
        for thread in 0..cfg.threads {
            let (ctx, crx) = mpsc::channel();
            let worker = match Worker::new(thread, Arc::clone(&cfg), Arc::clone(&stop), tx.clone()) {
                Ok(w) => w,
                Err(e) => {
                    eprintln!("memrelay-bench: cannot create an event loop: {e}");
                    bench.shutdown();
                    return None;
                }
            };
            let handle = std::thread::Builder::new()
                .name(format!("bench-{thread}"))
                .spawn(move || worker.run(crx))
                .expect("spawning a worker thread");
            bench.commands.push(ctx);
            bench.handles.push(handle);
        }
        drop(tx);
        let deadline = Instant::now() + Duration::from_secs_f64(cfg.connect_timeout_s) + Duration::from_secs(5);
        let mut failure = None;
        for _ in 0..cfg.threads {
            let wait = deadline.saturating_duration_since(Instant::now());
            match bench.reports.recv_timeout(wait) {
                Ok(Report::Connected { result: Ok(()), .. }) => {}
                Ok(Report::Connected { result: Err(m), .. }) => {
                    failure.get_or_insert(m);
                }
                Ok(_) => {}
                Err(_) => {
                    failure.get_or_insert("timed out connecting to the servers".into());
                    break;
                }
            }
            if failure.is_some() {
                break;
            }
        }
        if let Some(m) = failure {
            eprintln!("memrelay-bench: {m}");
            bench.shutdown();
            return None;
        }
        Some(bench)
    }

    fn run(mut self) -> i32 {
        let cfg = Arc::clone(&self.cfg);
        if let Some(at) = cfg.start_at_unix_s {
            // Connected; the load begins at the agreed time (`--start-at` excludes `--populate`,
            // so the phase that follows is the workload's).
            wait_until(at, &self.stop);
        }
        let start_unix_s = unix_now();
        if let Some(at) = cfg.start_at_unix_s {
            let late = start_unix_s - at;
            if late > LATE_WARNING_S && !self.stop.load(Ordering::Relaxed) {
                eprintln!(
                    "memrelay-bench: warning: the load began {late:.3} s after --start-at (connecting took that long)"
                );
            }
        }
        let mut populate = None;
        let mut run = None;
        let mut stalled = None;
        let mut phases = Vec::new();
        if cfg.populate {
            phases.push(PhaseKind::Populate);
        }
        if cfg.stop != Stop::None {
            phases.push(PhaseKind::Run);
        }
        for kind in phases {
            let (collector, stall) = match self.drive(kind) {
                Driven::Ended(c) => (c, None),
                Driven::Stalled(c, why) => (c, Some(why)),
            };
            let go_on = stall.is_none() && !collector.interrupted() && !collector.all_lost();
            match kind {
                PhaseKind::Populate => populate = Some(collector),
                PhaseKind::Run => run = Some(collector),
            }
            stalled = stall;
            if !go_on {
                break;
            }
        }
        let last = run.as_ref().or(populate.as_ref()).expect("at least one phase ran");

        let mut entries = Vec::new();
        let mut events = 0;
        for (name, c) in [("populate", &populate), ("run", &run)] {
            if let Some(c) = c {
                entries.extend(error_entries(&cfg, name, c));
                events += c.error_events;
            }
        }
        let (status, exit_code, message) = if let Some(why) = &stalled {
            ("stalled", 1, Some(why.clone()))
        } else if last.all_lost() {
            let first = entries.last().map_or(String::new(), |e| format!(" (last error: {}: {})", e.server, e.message));
            ("connections_lost", 1, Some(format!("every connection was lost after {:.1} s{first}", last.seconds())))
        } else if last.interrupted() {
            ("interrupted", 0, Some(format!("interrupted after {:.1} s", last.seconds())))
        } else {
            ("completed", 0, None)
        };
        let open_loop = cfg.rate.is_some();
        let output = Output {
            tool: "memrelay-bench",
            version: env!("CARGO_PKG_VERSION"),
            config: &cfg,
            status,
            exit_code,
            message: message.clone(),
            start_unix_s,
            run: run.as_ref().map_or_else(Phase::empty, |c| Phase::from_collector(c, open_loop)),
            populate: populate.as_ref().map(|c| Phase::from_collector(c, false)),
            errors: Errors { events, first: entries },
        };

        if stalled.is_none() {
            self.shutdown();
        }
        let json_to_stdout = cfg.json_out.as_ref().is_some_and(|p| p.as_os_str() == "-");
        let mut code = exit_code;
        if let Some(path) = &cfg.json_out {
            if let Err(e) = write_json(path, &output) {
                eprintln!("memrelay-bench: cannot write {}: {e}", path.display());
                code = 1;
            }
        }
        let mut table = Vec::new();
        let protocol = match cfg.protocol {
            crate::config::Protocol::Text => "text",
            crate::config::Protocol::Meta => "meta",
        };
        let _ = writeln!(table, "protocol: {protocol}");
        if let Some(p) = &output.populate {
            let _ = write_table(&mut table, "populate", p);
        }
        if run.is_some() {
            let _ = write_table(&mut table, "run", &output.run);
        }
        if json_to_stdout {
            let _ = std::io::stderr().write_all(&table);
        } else {
            let _ = std::io::stdout().write_all(&table);
        }
        if output.errors.events > 0 {
            eprintln!("memrelay-bench: {} error event(s); the first:", output.errors.events);
            for e in output.errors.first.iter().take(SHOWN_ERRORS) {
                eprintln!("  [{} {:.3}s] {}: {}", e.phase, e.time_s, e.server, e.message);
            }
        }
        if let Some(m) = &message {
            eprintln!("memrelay-bench: {m}");
        }
        if stalled.is_some() {
            // Some worker is stuck: do not wait for it.
            let _ = std::io::stdout().flush();
            std::process::exit(code);
        }
        code
    }

    /// Starts a phase on every worker and collects its reports until all are done.
    fn drive(&mut self, kind: PhaseKind) -> Driven {
        let cfg = Arc::clone(&self.cfg);
        let start = Instant::now();
        for commands in &self.commands {
            let _ = commands.send(Command::Phase { kind, start });
        }
        let mut c = Collector::new(kind, cfg.threads, cfg.quiet);
        let mut heard = vec![Instant::now(); cfg.threads];
        // With a test time, the phase cannot legitimately outlast it by much.
        let hard_end = match (kind, cfg.test_time()) {
            (PhaseKind::Run, Some(t)) if cfg.stop == Stop::Time => {
                Some(start + t + Duration::from_secs_f64(cfg.grace_s) + SILENCE)
            }
            _ => None,
        };
        while !c.all_done() {
            match self.reports.recv_timeout(Duration::from_millis(200)) {
                Ok(Report::Interval { thread, second, stats }) => {
                    heard[thread] = Instant::now();
                    c.interval(thread, second, *stats);
                }
                Ok(Report::Done(done)) => {
                    heard[done.thread] = Instant::now();
                    c.done(*done);
                }
                Ok(Report::Connected { .. }) => {}
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Driven::Stalled(c, "every worker thread ended unexpectedly".into());
                }
            }
            let now = Instant::now();
            if let Some(t) = (0..cfg.threads).find(|&t| !c.thread_done(t) && now - heard[t] > SILENCE) {
                return Driven::Stalled(c, format!("worker thread {t} stopped responding; results are partial"));
            }
            if hard_end.is_some_and(|end| now > end) {
                return Driven::Stalled(c, "the run did not end in time; results are partial".into());
            }
            if self.stop.load(Ordering::Relaxed) && now - start > Duration::from_secs_f64(cfg.grace_s) + SILENCE {
                return Driven::Stalled(c, "interrupted, and the workers did not stop in time".into());
            }
        }
        Driven::Ended(c)
    }

    /// Tells the workers to exit and waits for them.
    fn shutdown(&mut self) {
        for commands in self.commands.drain(..) {
            let _ = commands.send(Command::Exit);
        }
        for handle in self.handles.drain(..) {
            let _ = handle.join();
        }
    }
}

/// Sleeps until the wall clock reads `at` (Unix seconds) or a signal asks to stop. Bounded:
/// `--start-at` lies at most a minute ahead.
fn wait_until(at: f64, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let left = at - unix_now();
        if left <= 0.0 {
            return;
        }
        // Short naps, so that SIGINT/SIGTERM are heeded at once.
        std::thread::sleep(Duration::from_secs_f64(left.min(0.05)));
    }
}

fn write_json(path: &std::path::Path, output: &Output) -> std::io::Result<()> {
    let mut text = serde_json::to_vec_pretty(output).map_err(std::io::Error::other)?;
    text.push(b'\n');
    if path.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        out.write_all(&text)?;
        return out.flush();
    }
    std::fs::write(path, text)
}
