//! A worker thread: one mio event loop driving its share of the virtual clients.
//!
//! ```text
//!  main ──Command::Phase──▶ worker 1..T  (connect all, then per phase: fill, poll, read, parse,
//!   ▲                         │            record, refill, write; every second hand over the
//!   └──Report::Interval/Done──┘            interval's Stats)
//! ```
//!
//! Closed loop (default): each client keeps exactly `--pipeline` requests in flight and sends
//! the next one when a reply arrives. Open loop (`--rate`): each client sends on its schedule
//! (see [`Schedule`]), still at most `--pipeline` in flight; a send that has to wait keeps its
//! scheduled time as the latency start, so queueing anywhere shows in the latency.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Registry, Token};

use crate::config::{Config, Stop};
use crate::conn::{Conn, ErrorNote, Gate, Notes, Schedule, SLACK_NS};
use crate::keys::share_start;
use crate::stats::Stats;
use crate::sys::Timer;
use crate::workload::{ClientWorkload, Templates};

const SECOND: u64 = 1_000_000_000;
/// Longest sleep in poll, so a signal is noticed quickly even when idle.
const MAX_POLL: Duration = Duration::from_millis(100);
/// Token of the open-loop timer (connections use their index).
const TIMER: Token = Token(usize::MAX);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhaseKind {
    Populate,
    Run,
}

impl PhaseKind {
    pub fn name(self) -> &'static str {
        match self {
            PhaseKind::Populate => "populate",
            PhaseKind::Run => "run",
        }
    }
}

pub enum Command {
    Phase { kind: PhaseKind, start: Instant },
    Exit,
}

/// How a thread's phase ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Test time over, or every client sent its requests, and the replies are in.
    Finished,
    /// SIGINT/SIGTERM.
    Interrupted,
    /// Every connection of the thread was lost.
    AllLost,
}

pub enum Report {
    Connected {
        thread: usize,
        result: Result<(), String>,
    },
    /// A full second of the phase (`second` counts from 0).
    Interval {
        thread: usize,
        second: u64,
        stats: Box<Stats>,
    },
    /// The end of the thread's phase, with its last (partial) second.
    Done(Box<Done>),
}

pub struct Done {
    pub thread: usize,
    pub second: u64,
    pub stats: Stats,
    /// When the thread sent its first requests, ns since the phase start (the thread may get the
    /// phase's command some time after main started its clock).
    pub began_ns: u64,
    /// When the thread's phase ended, ns since the phase start.
    pub end_ns: u64,
    pub ending: Ending,
    pub notes: Vec<ErrorNote>,
    pub error_events: u64,
    /// Open loop: scheduled sends before the end that were never sent.
    pub backlog: u64,
}

pub struct Worker {
    thread: usize,
    cfg: Arc<Config>,
    templates: Templates,
    poll: Poll,
    events: Events,
    timer: Timer,
    conns: Vec<Conn>,
    stop: Arc<AtomicBool>,
    tx: Sender<Report>,
}

impl Worker {
    pub fn new(thread: usize, cfg: Arc<Config>, stop: Arc<AtomicBool>, tx: Sender<Report>) -> std::io::Result<Worker> {
        let templates = Templates::new(cfg.protocol, &cfg.key_prefix, cfg.data_size);
        let poll = Poll::new()?;
        let timer = Timer::new()?;
        poll.registry().register(&mut mio::unix::SourceFd(&timer.raw_fd()), TIMER, Interest::READABLE)?;
        Ok(Worker {
            thread,
            poll,
            timer,
            events: Events::with_capacity(1024),
            conns: Vec::with_capacity(cfg.clients),
            templates,
            cfg,
            stop,
            tx,
        })
    }

    /// Connects, reports, then runs the phases main asks for.
    pub fn run(mut self, rx: Receiver<Command>) {
        let result = self.connect_all();
        let failed = result.is_err();
        if self.tx.send(Report::Connected { thread: self.thread, result }).is_err() || failed {
            return;
        }
        while let Ok(command) = rx.recv() {
            match command {
                Command::Phase { kind, start } => {
                    let done = self.run_phase(kind, start);
                    if self.tx.send(Report::Done(Box::new(done))).is_err() {
                        return;
                    }
                }
                Command::Exit => return,
            }
        }
    }

    fn connect_all(&mut self) -> Result<(), String> {
        let cfg = Arc::clone(&self.cfg);
        let total = cfg.connections as u64;
        let max_request = self.templates.max_request_len(cfg.multiget);
        for local in 0..cfg.clients {
            let global = (self.thread * cfg.clients + local) as u64;
            let server = global as usize % cfg.addrs.len();
            let name = &cfg.servers[server];
            let mut stream =
                TcpStream::connect(cfg.addrs[server]).map_err(|e| format!("cannot connect to {name}: {e}"))?;
            self.poll
                .registry()
                .register(&mut stream, Token(local), Interest::READABLE | Interest::WRITABLE)
                .map_err(|e| format!("cannot register a connection to {name}: {e}"))?;
            let tls = match &cfg.tls_client {
                Some(client) => Some(client.session(server)?),
                None => None,
            };
            let workload = ClientWorkload::new(&cfg, global, total);
            let mut conn = Conn::new(stream, global, server, workload, cfg.pipeline, max_request, cfg.protocol);
            conn.tls = tls.map(Box::new);
            self.conns.push(conn);
        }
        let deadline = Instant::now() + Duration::from_secs_f64(cfg.connect_timeout_s);
        let mut pending = self.conns.len();
        while pending > 0 {
            if self.stop.load(Ordering::Relaxed) {
                return Err("interrupted while connecting".into());
            }
            let now = Instant::now();
            if now >= deadline {
                let c = self.conns.iter().find(|c| !c.connected).expect("one is pending");
                let what = if c.tcp_up { "no TLS handshake" } else { "no answer" };
                return Err(format!(
                    "cannot connect to {}: {what} within {} s",
                    cfg.servers[c.server], cfg.connect_timeout_s
                ));
            }
            self.poll
                .poll(&mut self.events, Some((deadline - now).min(MAX_POLL)))
                .map_err(|e| format!("poll failed: {e}"))?;
            for event in self.events.iter() {
                if event.token() == TIMER {
                    continue;
                }
                let conn = &mut self.conns[event.token().0];
                if conn.connected {
                    continue;
                }
                let stream = conn.stream.as_ref().expect("open while connecting");
                let name = &cfg.servers[conn.server];
                match stream.take_error() {
                    Ok(Some(e)) | Err(e) => return Err(format!("cannot connect to {name}: {e}")),
                    Ok(None) => {}
                }
                if !conn.tcp_up {
                    match stream.peer_addr() {
                        Ok(_) => {
                            conn.tcp_up = true;
                            stream.set_nodelay(true).map_err(|e| format!("cannot set TCP_NODELAY: {e}"))?;
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::NotConnected => continue,
                        Err(e) => return Err(format!("cannot connect to {name}: {e}")),
                    }
                }
                // TLS: the handshake is part of connecting (edge-triggered events: each step
                // goes on until the socket would block).
                let ready = match conn.tls.as_mut() {
                    None => true,
                    Some(tls) => tls.handshake(stream).map_err(|e| format!("cannot connect to {name}: {e}"))?,
                };
                if ready {
                    conn.connected = true;
                    pending -= 1;
                }
            }
        }
        Ok(())
    }

    /// One phase: sends and reads until the phase ends, handing main each full second's
    /// statistics on the way; returns the last (partial) second and how it ended.
    fn run_phase(&mut self, kind: PhaseKind, start: Instant) -> Done {
        let clock = || start.elapsed().as_nanos() as u64;
        let mut gate = self.gate(kind);
        let grace_ns = (self.cfg.grace_s * 1e9) as u64;
        let mut tally = self.prepare(gate.populate);
        let mut second = 0u64;
        let mut stopping = Stopping::default();
        let mut ring = Ring::default();

        let began_ns = clock();
        for conn in self.conns.iter_mut().filter(|c| c.is_live()) {
            tally.send(conn, self.poll.registry(), began_ns, &gate, &self.templates);
        }

        let ending = loop {
            let now = clock();
            second = self.hand_over_seconds(now, second, &mut tally);
            let mut wait = boundary(second) - now;
            // Open loop: before the stop check, so what was due before the end still goes out.
            if let Some(next_due) = self.send_due(now, &gate, &mut ring, &mut tally) {
                wait = wait.min(next_due);
            }
            gate.stopping = stopping.check(now, &self.stop, gate.end_ns);
            if let Some(ending) = self.ended(now, &mut tally, &stopping, grace_ns) {
                break ending;
            }

            if let Some(end) = gate.end_ns {
                if now < end {
                    wait = wait.min(end - now);
                }
            }
            if let Some(since) = stopping.since {
                wait = wait.min((since + grace_ns).saturating_sub(now));
            }
            let wait = Duration::from_nanos(wait).min(MAX_POLL);
            if let Err(e) = self.poll.poll(&mut self.events, Some(wait)) {
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                tally.notes.add(clock(), 0, || format!("poll failed: {e}"));
                break Ending::AllLost;
            }
            self.handle_events(&clock, &gate, &mut tally);
        };

        let end = clock();
        let until = gate.end_ns.unwrap_or(u64::MAX).min(stopping.since.unwrap_or(end));
        Done {
            thread: self.thread,
            second,
            stats: tally.stats,
            began_ns,
            end_ns: end,
            ending,
            error_events: tally.notes.count,
            notes: tally.notes.list,
            backlog: self.backlog(gate.schedule.as_ref(), until),
        }
    }

    /// What a phase may send: `--pipeline` in flight, until the test time ends (a timed run),
    /// on the `--rate` schedule (open loop; never for populating).
    fn gate(&self, kind: PhaseKind) -> Gate {
        let cfg = &self.cfg;
        let populate = kind == PhaseKind::Populate;
        let end_ns = match (kind, cfg.stop) {
            (PhaseKind::Run, Stop::Time) => cfg.test_time().map(|t| t.as_nanos() as u64),
            _ => None,
        };
        let schedule = if populate { None } else { cfg.rate.map(|r| Schedule::new(r, cfg.connections)) };
        Gate { depth: cfg.pipeline, stopping: false, end_ns, schedule, populate }
    }

    /// Readies every connection for the phase (its share of the keys to populate, or its
    /// request quota) and counts what is in play.
    fn prepare(&mut self, populate: bool) -> Tally {
        let cfg = &self.cfg;
        let keys = cfg.key_count();
        let total = cfg.connections as u64;
        let mut tally = Tally::default();
        for conn in &mut self.conns {
            conn.sent = 0;
            conn.next_slot = 0;
            conn.populate = cfg.key_minimum + share_start(keys, conn.global, total)
                ..cfg.key_minimum + share_start(keys, conn.global + 1, total);
            conn.quota =
                if populate { conn.populate.end - conn.populate.start } else { cfg.requests.unwrap_or(u64::MAX) };
            conn.finished = !conn.is_live() || conn.quota == 0;
            tally.live += usize::from(conn.is_live());
            tally.unfinished += usize::from(!conn.finished);
        }
        tally
    }

    /// Hands main every second the clock has passed since `second` began (the statistics
    /// counted in it) and, once a second, gives up the connections that waited too long for a
    /// reply; returns the second now being counted.
    fn hand_over_seconds(&mut self, now: u64, mut second: u64, tally: &mut Tally) -> u64 {
        let timeout_ns = (self.cfg.timeout_s * 1e9) as u64;
        let secs = self.cfg.timeout_s;
        while now >= boundary(second) {
            let full = std::mem::take(&mut tally.stats);
            let _ = self.tx.send(Report::Interval { thread: self.thread, second, stats: Box::new(full) });
            second += 1;
            for conn in self.conns.iter_mut() {
                if conn.is_live() && !conn.inflight.is_empty() && now.saturating_sub(conn.last_rx_ns) > timeout_ns {
                    tally.give_up(conn, self.poll.registry(), now, || {
                        format!("no reply for {secs} s; connection closed")
                    });
                }
            }
        }
        second
    }

    /// Open loop: visits the connections whose slot is due, in schedule order, and sends on
    /// them; returns how long until the next slot (the timer armed for it), if one comes before
    /// the end. Nothing once the phase is stopping, nor in a closed loop.
    fn send_due(&mut self, now: u64, gate: &Gate, ring: &mut Ring, tally: &mut Tally) -> Option<u64> {
        let schedule = gate.schedule.as_ref().filter(|_| !gate.stopping)?;
        loop {
            let conn = &mut self.conns[ring.conn];
            let due = schedule.due(conn.global, ring.cycle);
            if gate.end_ns.is_some_and(|end| due >= end) {
                return None;
            }
            if due > now + SLACK_NS {
                self.timer.arm(due - SLACK_NS, now);
                return Some(due - now);
            }
            if conn.is_live() && conn.next_slot <= ring.cycle {
                tally.send(conn, self.poll.registry(), now, gate, &self.templates);
            }
            ring.advance(self.conns.len());
        }
    }

    /// How the phase ends, if it does now: every connection lost, every one done, or (once
    /// stopping) every reply in or the grace time over, the requests still unanswered then
    /// given up.
    fn ended(&mut self, now: u64, tally: &mut Tally, stopping: &Stopping, grace_ns: u64) -> Option<Ending> {
        if tally.live == 0 {
            return Some(Ending::AllLost);
        }
        if tally.unfinished == 0 {
            return Some(Ending::Finished);
        }
        let since = stopping.since?;
        if tally.inflight == 0 {
            return Some(stopping.ending());
        }
        if now < since + grace_ns {
            return None;
        }
        let secs = self.cfg.grace_s;
        for conn in self.conns.iter_mut().filter(|c| c.is_live() && !c.inflight.is_empty()) {
            // The phase ends here, so the tally needs no update.
            let lost = conn.close(self.poll.registry(), &mut tally.stats);
            tally.notes.add(now, conn.server, || format!("{lost} request(s) still unanswered {secs} s after the end"));
        }
        Some(stopping.ending())
    }

    /// The events of the last poll: on each connection, reads the replies, then sends what
    /// the gate allows; a connection that fails either way is given up.
    fn handle_events(&mut self, clock: &impl Fn() -> u64, gate: &Gate, tally: &mut Tally) {
        for event in self.events.iter() {
            if event.token() == TIMER {
                self.timer.fired();
                continue;
            }
            let conn = &mut self.conns[event.token().0];
            if !conn.is_live() {
                continue;
            }
            let now = clock();
            let mut failure = None;
            if event.is_readable() || event.is_read_closed() || event.is_error() {
                let (replies, why) = conn.read(now, &mut tally.stats, &mut tally.notes);
                tally.inflight -= replies;
                failure = why;
            }
            match failure {
                Some(why) => tally.give_up(conn, self.poll.registry(), now, || why),
                None => tally.send(conn, self.poll.registry(), now, gate, &self.templates),
            }
            if !conn.finished && (!conn.is_live() || (conn.sent == conn.quota && conn.inflight.is_empty())) {
                conn.finished = true;
                tally.unfinished -= 1;
            }
        }
    }

    /// Open loop: the sends scheduled before `until` (the end or the stop) that never went out.
    fn backlog(&self, schedule: Option<&Schedule>, until: u64) -> u64 {
        let Some(s) = schedule else { return 0 };
        self.conns
            .iter()
            .map(|conn| s.slots_before(conn.global, until).min(conn.quota).saturating_sub(conn.next_slot))
            .sum()
    }
}

/// The end of `second` (ns since the phase start): when its statistics are handed over.
fn boundary(second: u64) -> u64 {
    (second + 1) * SECOND
}

/// One phase's counts in a worker: the current second's statistics, the errors noted, and
/// how many connections and requests are still in play.
#[derive(Default)]
struct Tally {
    stats: Stats,
    notes: Notes,
    /// Connections still open.
    live: usize,
    /// Connections not done yet: open, with requests left to send or replies to read.
    unfinished: usize,
    /// Requests sent and not answered yet.
    inflight: usize,
}

impl Tally {
    /// Gives `conn` up: closes it (its requests in flight count as unanswered), counts it out
    /// and notes why.
    fn give_up(&mut self, conn: &mut Conn, registry: &Registry, now: u64, why: impl FnOnce() -> String) {
        self.inflight -= conn.close(registry, &mut self.stats);
        self.live -= 1;
        self.unfinished -= usize::from(!conn.finished);
        conn.finished = true;
        self.notes.add(now, conn.server, why);
    }

    /// Composes on `conn` what the gate allows and writes it; a write that fails gives the
    /// connection up.
    fn send(&mut self, conn: &mut Conn, registry: &Registry, now: u64, gate: &Gate, templates: &Templates) {
        self.inflight += conn.fill(now, gate, templates);
        if let Err(why) = conn.flush() {
            self.give_up(conn, registry, now, || why);
        }
    }
}

/// Whether and since when a phase is stopping (its test time over, or a signal), and whether
/// a signal stopped it.
#[derive(Default)]
struct Stopping {
    since: Option<u64>,
    interrupted: bool,
}

impl Stopping {
    /// Notices a signal or the end of the test time (the first to come); true from then on.
    fn check(&mut self, now: u64, stop: &AtomicBool, end_ns: Option<u64>) -> bool {
        if self.since.is_none() {
            if stop.load(Ordering::Relaxed) {
                self.interrupted = true;
                self.since = Some(now);
            } else if end_ns.is_some_and(|end| now >= end) {
                self.since = Some(now);
            }
        }
        self.since.is_some()
    }

    fn ending(&self) -> Ending {
        if self.interrupted {
            Ending::Interrupted
        } else {
            Ending::Finished
        }
    }
}

/// Open loop: the next (connection, cycle) due, visited in schedule order.
#[derive(Default)]
struct Ring {
    conn: usize,
    cycle: u64,
}

impl Ring {
    fn advance(&mut self, conns: usize) {
        self.conn += 1;
        if self.conn == conns {
            self.conn = 0;
            self.cycle += 1;
        }
    }
}
