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
use mio::{Events, Interest, Poll, Token};

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

    fn run_phase(&mut self, kind: PhaseKind, start: Instant) -> Done {
        let cfg = Arc::clone(&self.cfg);
        let clock = || start.elapsed().as_nanos() as u64;
        let populate = kind == PhaseKind::Populate;
        let end_ns = match (kind, cfg.stop) {
            (PhaseKind::Run, Stop::Time) => cfg.test_time().map(|t| t.as_nanos() as u64),
            _ => None,
        };
        let schedule = if populate { None } else { cfg.rate.map(|r| Schedule::new(r, cfg.connections)) };
        let mut gate = Gate { depth: cfg.pipeline, stopping: false, end_ns, schedule, populate };
        let grace_ns = (cfg.grace_s * 1e9) as u64;
        let timeout_ns = (cfg.timeout_s * 1e9) as u64;
        let keys = cfg.key_count();
        let total = cfg.connections as u64;

        let mut stats = Stats::default();
        let mut notes = Notes::default();
        let mut live = 0usize;
        let mut unfinished = 0usize;
        let mut inflight = 0usize;
        for conn in &mut self.conns {
            conn.sent = 0;
            conn.next_slot = 0;
            conn.populate = cfg.key_minimum + share_start(keys, conn.global, total)
                ..cfg.key_minimum + share_start(keys, conn.global + 1, total);
            conn.quota =
                if populate { conn.populate.end - conn.populate.start } else { cfg.requests.unwrap_or(u64::MAX) };
            conn.finished = !conn.is_live() || conn.quota == 0;
            live += usize::from(conn.is_live());
            unfinished += usize::from(!conn.finished);
        }

        let mut second = 0u64;
        let mut next_boundary = SECOND;
        let mut stopping_since: Option<u64> = None;
        let mut interrupted = false;
        // Open loop: the next (connection, cycle) due, visited in schedule order.
        let (mut ring_conn, mut ring_cycle) = (0usize, 0u64);

        let now = clock();
        let began_ns = now;
        for conn in self.conns.iter_mut().filter(|c| c.is_live()) {
            inflight += conn.fill(now, &gate, &self.templates);
            if let Err(why) = conn.flush() {
                inflight -= conn.close(self.poll.registry(), &mut stats);
                live -= 1;
                unfinished -= usize::from(!conn.finished);
                conn.finished = true;
                notes.add(now, conn.server, || why);
            }
        }

        let ending = loop {
            let now = clock();
            while now >= next_boundary {
                let full = std::mem::take(&mut stats);
                let _ = self.tx.send(Report::Interval { thread: self.thread, second, stats: Box::new(full) });
                second += 1;
                next_boundary += SECOND;
                // Once a second: connections waiting too long for a reply are given up.
                for conn in self.conns.iter_mut() {
                    if conn.is_live() && !conn.inflight.is_empty() && now.saturating_sub(conn.last_rx_ns) > timeout_ns {
                        inflight -= conn.close(self.poll.registry(), &mut stats);
                        live -= 1;
                        unfinished -= usize::from(!conn.finished);
                        conn.finished = true;
                        let secs = cfg.timeout_s;
                        notes.add(now, conn.server, || format!("no reply for {secs} s; connection closed"));
                    }
                }
            }
            // Open loop: visit the connections whose slot is due (before the stop check, so
            // what was due before the end still goes out).
            let mut wait = next_boundary - now;
            if let (Some(s), false) = (&gate.schedule, gate.stopping) {
                loop {
                    let conn = &mut self.conns[ring_conn];
                    let due = s.due(conn.global, ring_cycle);
                    if end_ns.is_some_and(|end| due >= end) {
                        break;
                    }
                    if due > now + SLACK_NS {
                        wait = wait.min(due - now);
                        self.timer.arm(due - SLACK_NS, now);
                        break;
                    }
                    if conn.is_live() && conn.next_slot <= ring_cycle {
                        inflight += conn.fill(now, &gate, &self.templates);
                        if let Err(why) = conn.flush() {
                            inflight -= conn.close(self.poll.registry(), &mut stats);
                            live -= 1;
                            unfinished -= usize::from(!conn.finished);
                            conn.finished = true;
                            notes.add(now, conn.server, || why);
                        }
                    }
                    ring_conn += 1;
                    if ring_conn == self.conns.len() {
                        ring_conn = 0;
                        ring_cycle += 1;
                    }
                }
            }
            if stopping_since.is_none() {
                if self.stop.load(Ordering::Relaxed) {
                    interrupted = true;
                    stopping_since = Some(now);
                } else if end_ns.is_some_and(|end| now >= end) {
                    stopping_since = Some(now);
                }
                gate.stopping = stopping_since.is_some();
            }
            if live == 0 {
                break Ending::AllLost;
            }
            if unfinished == 0 {
                break Ending::Finished;
            }
            if let Some(since) = stopping_since {
                if inflight == 0 {
                    break if interrupted { Ending::Interrupted } else { Ending::Finished };
                }
                if now >= since + grace_ns {
                    for conn in self.conns.iter_mut().filter(|c| c.is_live() && !c.inflight.is_empty()) {
                        // The phase ends here, so `inflight` needs no update.
                        let lost = conn.close(self.poll.registry(), &mut stats);
                        let secs = cfg.grace_s;
                        notes.add(now, conn.server, || {
                            format!("{lost} request(s) still unanswered {secs} s after the end")
                        });
                    }
                    break if interrupted { Ending::Interrupted } else { Ending::Finished };
                }
            }

            if let Some(end) = end_ns {
                if now < end {
                    wait = wait.min(end - now);
                }
            }
            if let Some(since) = stopping_since {
                wait = wait.min((since + grace_ns).saturating_sub(now));
            }
            let wait = Duration::from_nanos(wait).min(MAX_POLL);

            if let Err(e) = self.poll.poll(&mut self.events, Some(wait)) {
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                notes.add(clock(), 0, || format!("poll failed: {e}"));
                break Ending::AllLost;
            }
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
                    let (replies, why) = conn.read(now, &mut stats, &mut notes);
                    inflight -= replies;
                    failure = why;
                }
                if failure.is_none() {
                    inflight += conn.fill(now, &gate, &self.templates);
                    failure = conn.flush().err();
                }
                if let Some(why) = failure {
                    inflight -= conn.close(self.poll.registry(), &mut stats);
                    live -= 1;
                    notes.add(now, conn.server, || why);
                }
                if !conn.finished && (!conn.is_live() || (conn.sent == conn.quota && conn.inflight.is_empty())) {
                    conn.finished = true;
                    unfinished -= 1;
                }
            }
        };

        let end = clock();
        let mut backlog = 0;
        if let Some(s) = &schedule {
            let until = end_ns.unwrap_or(u64::MAX).min(stopping_since.unwrap_or(end));
            for conn in &self.conns {
                let due = s.slots_before(conn.global, until).min(conn.quota);
                backlog += due.saturating_sub(conn.next_slot);
            }
        }
        Done {
            thread: self.thread,
            second,
            stats,
            began_ns,
            end_ns: end,
            ending,
            error_events: notes.count,
            notes: notes.list,
            backlog,
        }
    }
}
