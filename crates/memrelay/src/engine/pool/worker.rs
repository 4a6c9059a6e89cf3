//! A pool worker: takes a job from the queue and runs its [`Exchange`] (the shared per-request
//! policy) round by round over its own blocking connections (writes to every target of a round
//! first, then reads every reply), writes the reply to the client socket directly and hands the
//! job back to the net thread, with whatever the socket could not take at once.

use std::io::{self, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{RecvTimeoutError, Sender};
use memrelay_protocol::{parse_request, Limits, Parse, Request, Status};
use mio::net::TcpStream;

use super::client_stream::{self, ClientSink};
use super::job::Job;
use super::queue::Queue;
use crate::generation::{Current, Generation};
use crate::measure::metrics::{kind_of, Recorder};
use crate::relay::exchange::{Exchange, Step};
use crate::relay::merge;
use crate::relay::reply::Answer;
use crate::relay::stream::{HOLD_LIMIT, STREAM_AFTER};
use crate::relay::warm::Budget;
use crate::settings::Settings;
use crate::startup::Runtime;
use crate::upstream::conn::{Received, ServerConn};
use crate::upstream::failure::Failure;
use crate::upstream::health::Health;
use crate::upstream::registry::Registry;
use crate::upstream::tls::ServerTls;

pub(crate) struct Worker {
    /// The configuration in force, checked before each job.
    current: Arc<Current>,
    /// The generation this worker routes under.
    generation: Arc<Generation>,
    registry: Arc<Registry>,
    /// TLS to the servers, when it is on.
    server_tls: Option<Arc<ServerTls>>,
    health: Arc<Health>,
    /// Write-backs to restarted servers this worker may still start.
    warm_budget: Budget,
    /// One connection per server id (those a reload retired are closed).
    servers: Vec<ServerConn>,
    max_value_len: usize,
    /// The current request's way through the servers (the policy), and a write-back's.
    exchange: Exchange,
    write_back: Exchange,
    /// The bytes a target gets, composed from the parsed request.
    scratch: Vec<u8>,
    /// Per-target result of the current round: the server that answered, or why none did.
    results: Vec<Result<usize, Missing>>,
    cursors: Vec<usize>,
    /// A write-back's reply, which nobody reads.
    dropped: Vec<u8>,
    /// Per target of the current round: when its answer was in (since the round began).
    latencies: Vec<Duration>,
    /// How each part of a merged reply ended.
    ends: Vec<Result<(), Failure>>,
    /// The streamed reply's bytes its client's socket did not take (they go with the job).
    held: Vec<u8>,
    /// The queue this worker takes jobs from (once it runs): whether other requests wait for a
    /// worker.
    queue: Option<Queue>,
    recorder: Recorder,
}

impl Worker {
    pub fn new(settings: &Settings, runtime: &Runtime, recorder: Recorder) -> Worker {
        let generation = runtime.current.get();
        let mut worker = Worker {
            servers: Vec::new(),
            max_value_len: settings.limits.max_value_size,
            exchange: Exchange::default(),
            write_back: Exchange::default(),
            scratch: Vec::new(),
            results: Vec::new(),
            cursors: Vec::new(),
            dropped: Vec::new(),
            latencies: Vec::new(),
            ends: Vec::new(),
            held: Vec::new(),
            queue: None,
            current: Arc::clone(&runtime.current),
            registry: Arc::clone(&runtime.registry),
            server_tls: runtime.server_tls.clone(),
            health: Arc::clone(&runtime.health),
            warm_budget: Budget::default(),
            recorder,
            generation,
        };
        worker.adopt_generation();
        worker
    }

    /// Takes up the generation in force if a reload published a new one: connections for the
    /// servers it added, the new timeout, and the retired servers' connections closed (a worker
    /// has nothing in flight between jobs).
    fn refresh(&mut self) {
        if self.current.refresh(&mut self.generation) {
            self.adopt_generation();
        }
    }

    fn adopt_generation(&mut self) {
        let timeout = self.generation.server_timeout;
        for id in self.servers.len()..self.registry.len() {
            let endpoint = self.registry.endpoint(id);
            let tls = self.server_tls.as_ref().and_then(|tls| tls.peer(&endpoint));
            self.servers.push(ServerConn::new(endpoint.addr, timeout, self.max_value_len, tls));
        }
        for (id, conn) in self.servers.iter_mut().enumerate() {
            conn.set_timeout(timeout);
            if !self.generation.servers.contains(&id) {
                conn.close();
            }
        }
    }

    /// Serves jobs until the queue is closed and empty.
    pub fn run(mut self, queue: Queue, done: Sender<Box<Job>>, wake_net: impl Fn()) {
        let clock = self.recorder.clock();
        self.queue = Some(queue);
        loop {
            let now = Instant::now();
            self.recorder.roll(now);
            let until_window_end = clock.end_of(clock.index(now)).saturating_duration_since(now);
            let job = self.queue.as_ref().expect("set above").take(until_window_end);
            match job {
                Ok(mut job) => {
                    self.serve(&mut job);
                    if done.send(job).is_err() {
                        break;
                    }
                    wake_net();
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        self.recorder.flush();
    }

    fn serve(&mut self, job: &mut Job) {
        job.times.dequeue = Instant::now();
        self.refresh();
        let request = job.request.clone().expect("queued jobs carry a parsed request");
        let timeout = self.generation.server_timeout;
        let mut exchange = std::mem::take(&mut self.exchange);
        job.times.first_send = Instant::now();
        let policy = (self.generation.failover, timeout);
        let router = &self.generation.router;
        let mut step = exchange.start(&request, &job.input, job.rr, router, policy, &*self.health, Instant::now());
        while let Step::Send { from, deadline } = step {
            let client = job.socket.as_deref().map(|socket| (socket, job.room));
            if let Some(streamed) = self.round(&exchange, &request, &job.input, from, deadline, client) {
                exchange.note_streamed();
                job.cut = streamed.is_err();
            }
            let (router, answer) = (&self.generation.router, answers(&self.servers, &self.results));
            let (health, now) = (&*self.health, Instant::now());
            step = exchange.next(&request, &job.input, answer, router, health, &mut self.warm_budget, now);
        }
        job.times.last_reply = Instant::now();
        let (servers, results) = (&self.servers, &self.results);
        let (outcome, bytes) = exchange.finish(
            &request,
            &job.input,
            answers(servers, results),
            |s| servers[s].addr,
            &*self.health,
            &mut self.cursors,
            &mut job.reply,
        );
        // A worker writes its replies from the job's buffer, after what a stream left held.
        bytes.copy_into(answers(servers, results), &mut job.reply);
        if !self.held.is_empty() {
            self.held.extend_from_slice(&job.reply);
            std::mem::swap(&mut self.held, &mut job.reply);
            crate::buffer::clear_and_trim(&mut self.held, 64 * 1024);
        }
        write_to_client(job);
        job.times.reply_written = Instant::now();
        // Counted out at the instant its response time ends.
        self.recorder.request_out(job.times.reply_written);
        let targets = exchange.targets().len().max(1) as u16;
        self.recorder.record(kind_of(&request), &job.times, &outcome, targets);
        let mut bytes = std::mem::take(&mut self.scratch);
        let cold = exchange.write_back(answers(&self.servers, &self.results)(0), &mut bytes);
        if let Some(cold) = cold {
            self.write_back(cold, &bytes, timeout);
        }
        self.scratch = bytes;
        self.exchange = exchange;
    }

    /// Writes the value a warm read found (`bytes`, one composed `ms`) back to the cold server;
    /// its reply is read and dropped (the client has had its own).
    fn write_back(&mut self, cold: usize, bytes: &[u8], timeout: Duration) {
        let limits = Limits { max_value_len: bytes.len(), max_line_len: bytes.len(), max_get_line_len: bytes.len() };
        let Parse::Complete(request) = parse_request(bytes, &limits) else { return };
        let mut exchange = std::mem::take(&mut self.write_back);
        let step = exchange.start_to(cold, &request, bytes, &self.generation.router, timeout, Instant::now());
        if let Step::Send { from, deadline } = step {
            self.round(&exchange, &request, bytes, from, deadline, None);
        }
        let (servers, results) = (&self.servers, &self.results);
        let mut dropped = std::mem::take(&mut self.dropped);
        exchange.finish(
            &request,
            bytes,
            answers(servers, results),
            |s| servers[s].addr,
            &*self.health,
            &mut self.cursors,
            &mut dropped,
        );
        self.dropped = dropped;
        self.write_back = exchange;
    }

    /// One round of `exchange`: sends each target in `targets()[from..]` its bytes (unless the
    /// gate fails it at once), then reads every reply; `self.results[i]` says how target i went
    /// (the results before `from` are kept). With `client` (the request [may
    /// stream](Exchange::may_stream)), a reply of a round of one target too long to hold goes to
    /// the client as it arrives (the client's socket, and the room its budget leaves, for what
    /// the socket does not take): then the stream's end (a cut stream is an error) is returned.
    fn round(
        &mut self,
        exchange: &Exchange,
        request: &Request,
        input: &[u8],
        from: usize,
        deadline: Instant,
        client: Option<(&TcpStream, usize)>,
    ) -> Option<Result<(), Failure>> {
        let outgoing = exchange.outgoing(request, input);
        let started = Instant::now();
        self.results.truncate(from);
        for (i, &target) in exchange.targets().iter().enumerate().skip(from) {
            self.recorder.server_request(target);
            let gated = exchange.gate(i, &*self.health);
            if gated == Some(Failure::Down) {
                self.recorder.server_failure(target);
            }
            let result = match gated {
                Some(failure) => Err(Gated(failure)),
                None => {
                    self.scratch.clear();
                    outgoing.compose_for(target, &mut self.scratch);
                    self.servers[target].note_downs(self.health.downs(target));
                    self.servers[target].send(&self.scratch, deadline).map(|()| target).map_err(Sent)
                }
            };
            self.results.push(result);
        }
        let expect = outgoing.expect();
        let targets = exchange.targets();
        // A reply too long to hold goes to the client as it arrives: one server's as it is, a
        // split read's parts merged in key order (when every part was sent).
        let single = client.filter(|_| exchange.may_stream(request) && targets.len() == from + 1);
        let merged = client
            .filter(|_| from == 0 && exchange.may_merge_stream(request))
            .filter(|_| self.results.iter().all(Result::is_ok));
        let stream_after = if single.is_some() || merged.is_some() { STREAM_AFTER } else { usize::MAX };
        let mut streamed = None;
        self.latencies.clear();
        self.latencies.resize(targets.len(), Duration::ZERO);
        for i in from..targets.len() {
            let Ok(server) = self.results[i] else { continue };
            let received = self.servers[server].receive(expect, deadline, stream_after, HOLD_LIMIT);
            let conn = &mut self.servers[server];
            self.results[i] = match received {
                Ok(Received::Whole(_)) => Ok(server),
                Ok(Received::Long) if single.is_some() => {
                    let (socket, room) = single.expect("checked above");
                    let timeout = self.generation.server_timeout;
                    let queue = self.queue.as_ref();
                    let others_wait = || queue.is_some_and(Queue::others_wait);
                    let held = &mut self.held;
                    let mut sink = ClientSink { socket, held, room, others_wait: &others_wait, patience: timeout };
                    let result = client_stream::stream_reply(conn, &mut sink, expect, deadline, timeout);
                    streamed = Some(result.map(|reply| conn.set_reply(reply)));
                    result.map(|_| server).map_err(Sent)
                }
                Ok(Received::Long) => {
                    if self.earlier_parts_are_values(targets, i) {
                        let client = merged.expect("only a single or a merged round streams");
                        streamed = Some(self.stream_merged(exchange, request, input, client));
                        self.latencies[i..].fill(started.elapsed());
                        break;
                    }
                    // An earlier part's error is the reply: this one is held whole, as before.
                    let conn = &mut self.servers[server];
                    conn.receive(expect, deadline, usize::MAX, HOLD_LIMIT).map(|_| server).map_err(Sent)
                }
                Err(failure) => Err(Sent(failure)),
            };
            self.latencies[i] = started.elapsed();
        }
        for (i, &target) in targets.iter().enumerate().skip(from) {
            match self.results[i] {
                Ok(_) => {
                    self.health.answered(target);
                    self.recorder.server_latency(target, self.latencies[i]);
                }
                Err(Sent(failure)) => {
                    if failure.is_the_servers() {
                        self.recorder.server_failure(target);
                    }
                    self.health.failed(target, failure);
                }
                // Not sent: not the server's failure.
                Err(Gated(_)) => {}
            }
        }
        streamed
    }
}

impl Worker {
    /// Whether the parts before part `long` of a split read are replies that are not errors:
    /// the merge may start (the client gets values, not an error line).
    fn earlier_parts_are_values(&self, targets: &[usize], long: usize) -> bool {
        (0..long).all(|p| {
            let replied = self.results[p].is_ok();
            replied && self.servers[targets[p]].last_reply().is_some_and(|r| !r.status.is_error())
        })
    }

    /// Streams this split read's parts to `client` in key order ([`client_stream::stream_merged`]):
    /// every part's result is set, and part 0's reply says what the client got (the merged
    /// reply's end, or a server error when it was cut off).
    fn stream_merged(
        &mut self,
        exchange: &Exchange,
        request: &Request,
        input: &[u8],
        (socket, room): (&TcpStream, usize),
    ) -> Result<(), Failure> {
        let mut merge = exchange.merge(request, input, self.max_value_len);
        let targets = exchange.targets();
        let timeout = self.generation.server_timeout;
        let mut ends = std::mem::take(&mut self.ends);
        let queue = self.queue.as_ref();
        let others_wait = || queue.is_some_and(Queue::others_wait);
        let held = &mut self.held;
        let mut sink = ClientSink { socket, held, room, others_wait: &others_wait, patience: timeout };
        let servers = &mut self.servers;
        let result = client_stream::stream_merged(servers, targets, &mut merge, &mut sink, timeout, &mut ends);
        for (p, &server) in targets.iter().enumerate() {
            self.results[p] = ends[p].map(|()| server).map_err(Sent);
            if ends[p].is_ok() {
                self.servers[server].set_reply(merge::outcome(Status::End, 0));
            }
        }
        self.ends = ends;
        let client_got = match result {
            Ok(reply) => reply,
            Err(_) => merge::outcome(Status::ServerError, merge.hits()),
        };
        if let Ok(server) = self.results[0] {
            self.servers[server].set_reply(client_got);
        }
        result.map(|_| ())
    }
}

/// Why a target has no answer: the exchange with it failed, or the gate kept it from being sent.
#[derive(Debug, Clone, Copy)]
enum Missing {
    Sent(Failure),
    Gated(Failure),
}
use Missing::{Gated, Sent};

/// Target i's answer: its server's last reply, or why there is none.
fn answers<'a>(servers: &'a [ServerConn], results: &'a [Result<usize, Missing>]) -> impl Fn(usize) -> Answer<'a> {
    move |i| match results[i] {
        Ok(server) => {
            let conn = &servers[server];
            Answer::Replied(conn.last_reply().expect("a successful exchange leaves a reply"), conn.input.pending())
        }
        Err(Sent(failure) | Gated(failure)) => Answer::Failed(failure),
    }
}

/// Writes as much of the reply as the client socket takes now; the net thread finishes the rest.
fn write_to_client(job: &mut Job) {
    let Some(socket) = job.socket.as_deref() else { return };
    let mut stream = socket;
    while job.written < job.reply.len() {
        match stream.write(&job.reply[job.written..]) {
            Ok(0) => break,
            Ok(n) => job.written += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(_) => {
                // The client is gone; the net thread sees it on its side and cleans up.
                job.written = job.reply.len();
                break;
            }
        }
    }
}
