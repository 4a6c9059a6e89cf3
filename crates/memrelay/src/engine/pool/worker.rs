//! A pool worker: takes a job from the queue, routes it, talks to the servers over its own
//! blocking connections (writes to every target first, then reads every reply), builds the
//! client's reply with the shared reply rules, writes it to the client socket directly and hands
//! the job back to the net thread, with whatever the socket could not take at once.

use std::io::{self, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use memrelay_protocol::{Expect, Request};

use super::job::Job;
use super::server::ServerConn;
use crate::generation::{Current, Generation};
use crate::health::Health;
use crate::measure::metrics::{kind_of, Recorder};
use crate::relay::failure::Failure;
use crate::relay::next_failover;
use crate::relay::reply::{primary_took, Answer, Finished};
use crate::relay::rewrite::{Outgoing, Stage};
use crate::relay::warm::{self, Budget};
use crate::relay::win;
use crate::routing::{placement_key, Plan, RouteBuf};
use crate::servers::Registry;
use crate::settings::Settings;
use crate::startup::Runtime;
use crate::upstream_tls::ServerTls;

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
    route: RouteBuf,
    /// A split read routed again without the servers that failed it ([`Worker::reroute_split`]).
    reroute: RouteBuf,
    /// The bytes a target gets, composed from the parsed request.
    scratch: Vec<u8>,
    /// Per-target result of the current exchange.
    results: Vec<Result<(), Failure>>,
    cursors: Vec<usize>,
    replicas: Vec<usize>,
    recorder: Recorder,
}

impl Worker {
    pub fn new(settings: &Settings, runtime: &Runtime, recorder: Recorder) -> Worker {
        let generation = runtime.current.get();
        let mut worker = Worker {
            servers: Vec::new(),
            max_value_len: settings.limits.max_value_size,
            route: RouteBuf::default(),
            reroute: RouteBuf::default(),
            scratch: Vec::new(),
            results: Vec::new(),
            cursors: Vec::new(),
            replicas: Vec::new(),
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
            let tls = self.server_tls.as_ref().map(|tls| tls.peer(&endpoint));
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
    pub fn run(mut self, queue: Receiver<Box<Job>>, done: Sender<Box<Job>>, wake_net: impl Fn()) {
        let clock = self.recorder.clock();
        loop {
            let now = Instant::now();
            self.recorder.roll(now);
            let until_window_end = clock.end_of(clock.index(now)).saturating_duration_since(now);
            match queue.recv_timeout(until_window_end) {
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
        let router = &self.generation.router;
        let repair = self.health.repair();
        let mut plan = if router.repairs() {
            router.route_avoiding(&request, &job.input, job.rr, &mut self.route, &|s| repair.is_repairing(s))
        } else {
            router.route(&request, &job.input, job.rr, &mut self.route)
        };
        let timeout = self.generation.server_timeout;
        let deadline = job.times.dequeue + timeout;
        job.times.first_send = Instant::now();
        if let Plan::Forward(server) = plan {
            self.route.targets.clear();
            self.route.targets.push(server);
        }
        if plan == Plan::PrimaryFirst {
            self.route.targets.truncate(1);
        }
        self.exchange(&request, &job.input, plan, Stage::Request, deadline, 0);
        if plan == Plan::Split && self.generation.failover && request.command.is_read() {
            plan = self.reroute_split(&request, &job.input, job.rr, timeout);
        }
        match plan {
            Plan::Forward(first) if self.generation.failover && request.command.is_read() => {
                self.generation.router.replicas(&placement_key(&request, &job.input), &mut self.replicas);
                let mut attempt = 0;
                while self.results[0].is_err() {
                    let repair = self.health.repair();
                    let repairing = |s| repair.is_repairing(s);
                    let Some(next) = next_failover(&self.replicas, first, &mut attempt, repairing) else { break };
                    self.route.targets[0] = next;
                    // Each replica gets its own timeout, as in the evented engine.
                    let deadline = Instant::now() + timeout;
                    self.exchange(&request, &job.input, plan, Stage::Request, deadline, 0);
                }
            }
            Plan::PrimaryFirst if self.primary_took() => {
                // The primary took the request: copy it to the other replicas (the primary stays
                // target 0, with its answer).
                let key = placement_key(&request, &job.input);
                let repair = self.health.repair();
                let repairing = |s| repair.is_repairing(s);
                self.generation.router.write_targets_leading(&key, &mut self.route.targets, &repairing);
                if self.route.targets.len() > 1 {
                    self.exchange(&request, &job.input, plan, Stage::Copies, deadline, 1);
                }
            }
            _ => {}
        }
        self.win_read(&request, &job.input, plan, timeout);
        let warming = self.warm_read(&request, &job.input, plan);
        job.times.last_reply = Instant::now();
        let policy = self.generation.router.write_policy_of(&request, &job.input);
        if policy.repairs() && request.command.is_keyed_write() {
            let key = placement_key(&request, &job.input);
            for (&server, result) in self.route.targets.iter().zip(&self.results) {
                if result.is_err() {
                    self.health.repair().missed(server, &key);
                }
            }
        }
        let finished = Finished {
            request: &request,
            input: &job.input,
            plan,
            targets: &self.route.targets,
            key_owner: &self.route.key_owner,
            warm_read: warming.is_some(),
            policy,
        };
        let (servers, results) = (&self.servers, &self.results);
        let answer = |i: usize| match results[i] {
            Ok(()) => {
                let conn = &servers[finished.targets[i]];
                Answer::Replied(conn.last_reply().expect("a successful exchange leaves a reply"), conn.input.pending())
            }
            Err(failure) => Answer::Failed(failure),
        };
        let outcome = finished.reply(answer, |s| servers[s].addr, &mut self.cursors, &mut job.reply);
        write_to_client(job);
        job.times.reply_written = Instant::now();
        // Counted out at the instant its response time ends.
        self.recorder.request_out(job.times.reply_written);
        let targets = self.route.targets.len().max(1) as u16;
        self.recorder.record(kind_of(&request), &job.times, &outcome, targets);
        if let Some(cold) = warming {
            self.write_back(request.key(&job.input), cold);
        }
    }

    /// A split read that a server answering keys failed is routed again, all of it, without the
    /// servers that failed (at most once per server; not when some key has no other server
    /// left). Returns the plan in force.
    fn reroute_split(&mut self, request: &Request, input: &[u8], rr: usize, timeout: Duration) -> Plan {
        let mut plan = Plan::Split;
        let mut avoided: Vec<usize> = Vec::new();
        loop {
            let before = avoided.len();
            for (i, &server) in self.route.targets.iter().enumerate() {
                let answers_keys = plan != Plan::Split || self.route.key_owner.contains(&server);
                if self.results[i].is_err() && answers_keys && !avoided.contains(&server) {
                    avoided.push(server);
                }
            }
            if avoided.len() == before {
                return plan;
            }
            let repair = self.health.repair();
            let avoid = |s| repair.is_repairing(s) || avoided.contains(&s);
            let next = self.generation.router.route_avoiding(request, input, rr, &mut self.reroute, &avoid);
            if let Plan::Forward(server) = next {
                self.reroute.targets.clear();
                self.reroute.targets.push(server);
            }
            let answering = if next == Plan::Split { &self.reroute.key_owner } else { &self.reroute.targets };
            if answering.iter().any(|s| avoided.contains(s)) {
                return plan;
            }
            std::mem::swap(&mut self.route, &mut self.reroute);
            plan = next;
            self.exchange(request, input, plan, Stage::Request, Instant::now() + timeout, 0);
        }
    }

    /// A balanced mg a replica answered with win/stale flags is asked again of the key's primary,
    /// whose answer counts ([`win`]).
    fn win_read(&mut self, request: &Request, input: &[u8], plan: Plan, timeout: Duration) {
        if !win::applies(request, plan) || self.results[0].is_err() {
            return;
        }
        let server = self.route.targets[0];
        let conn = &self.servers[server];
        if !conn.last_reply().is_some_and(|reply| win::carries_win_flags(&reply, conn.input.pending())) {
            return;
        }
        let repair = self.health.repair();
        let key = placement_key(request, input);
        let primary = self.generation.router.primary_avoiding(&key, &|s| repair.is_repairing(s), &mut self.replicas);
        if primary != server {
            self.route.targets[0] = primary;
            self.exchange(request, input, plan, Stage::Request, Instant::now() + timeout, 0);
        }
    }

    /// A miss on a server that restarted a short while ago: asks a replica that has the key
    /// (`Stage::WarmRead`) and returns the cold server, whose write-back follows the reply.
    fn warm_read(&mut self, request: &Request, input: &[u8], plan: Plan) -> Option<usize> {
        let Plan::Forward(_) = plan else { return None };
        let cold = self.route.targets[0];
        let missed = self.results[0].is_ok() && self.servers[cold].last_reply().is_some_and(|r| warm::missed(&r));
        if !warm::applies(request, plan) || !missed || !self.health.is_cold(cold) {
            return None;
        }
        let other = warm::replica(&self.generation.router, &self.health, request.key(input), cold, &mut self.replicas)?;
        if !self.warm_budget.take(Instant::now()) {
            return None;
        }
        self.route.targets[0] = other;
        self.exchange(request, input, plan, Stage::WarmRead, Instant::now() + self.generation.server_timeout, 0);
        Some(cold)
    }

    /// Writes the value the replica (target 0) answered back to the cold server; its reply is
    /// read and dropped (the client has had its own).
    fn write_back(&mut self, key: &[u8], cold: usize) {
        let replica = self.route.targets[0];
        let Some(reply) = self.results[0].ok().and_then(|()| self.servers[replica].last_reply()) else { return };
        self.scratch.clear();
        if !warm::write_back(key, &reply, self.servers[replica].input.pending(), &mut self.scratch) {
            return;
        }
        let deadline = Instant::now() + self.generation.server_timeout;
        self.recorder.server_request(cold);
        let result = self.servers[cold]
            .send(&self.scratch, deadline)
            .and_then(|()| self.servers[cold].receive(Expect::Meta, deadline));
        match result {
            Ok(_) => self.health.answered(cold),
            Err(failure) => {
                self.recorder.server_failure(cold);
                self.health.failed(cold, failure);
            }
        }
    }

    /// Whether the primary took the request just sent to it alone (see [`primary_took`]).
    fn primary_took(&self) -> bool {
        self.results[0].is_ok() && self.servers[self.route.targets[0]].last_reply().is_some_and(|r| primary_took(&r))
    }

    /// Sends each target in `self.route.targets[from..]` its bytes, then reads every reply;
    /// `self.results[i]` says how target i went (the results before `from` are kept).
    fn exchange(&mut self, request: &Request, input: &[u8], plan: Plan, stage: Stage, deadline: Instant, from: usize) {
        let outgoing =
            Outgoing { request, input, plan, stage, key_owner: &self.route.key_owner, touches: &self.route.touches };
        let started = Instant::now();
        self.results.truncate(from);
        let repairs =
            request.command.is_keyed_write() && self.generation.router.write_policy_of(request, input).repairs();
        for &target in &self.route.targets[from..] {
            self.scratch.clear();
            if repairs && self.health.repair().is_repairing(target) {
                // The repair thread is the only writer there until it is up to date.
                self.results.push(Err(Failure::Repairing));
            } else if self.health.is_down(target) {
                self.results.push(Err(Failure::Down));
            } else {
                outgoing.compose_for(target, &mut self.scratch);
                self.results.push(self.servers[target].send(&self.scratch, deadline));
            }
            self.recorder.server_request(target);
        }
        let expect = outgoing.expect();
        for (i, &target) in self.route.targets.iter().enumerate().skip(from) {
            if self.results[i].is_ok() {
                self.results[i] = self.servers[target].receive(expect, deadline).map(|_| ());
            }
            match self.results[i] {
                Ok(()) => {
                    self.health.answered(target);
                    self.recorder.server_latency(target, started.elapsed());
                }
                Err(failure) => {
                    self.recorder.server_failure(target);
                    self.health.failed(target, failure);
                }
            }
        }
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
