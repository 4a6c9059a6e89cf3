//! A pool worker: takes a job from the queue, routes it, talks to the servers over its own
//! blocking connections (writes to every target first, then reads every reply), builds the
//! client's reply, writes it to the client socket directly and hands the job back to the net
//! thread, with whatever the socket could not take at once.

use std::io::{self, Write};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use memrelay_protocol::{compose, Command, Expect, Request, Status};

use crate::config::{Config, Distribution};
use crate::failure::{pick_reply, Failure};
use crate::job::Job;
use crate::metrics::{kind_of, Outcome, Recorder};
use crate::routing::{coalesce, expect_for, without_noreply, Plan, RouteBuf, Router};
use crate::server::ServerConn;

pub struct Worker {
    router: Arc<Router>,
    servers: Vec<ServerConn>,
    route: RouteBuf,
    /// A request rewritten for the servers (noreply removed, cas copied as set).
    rewritten: Vec<u8>,
    /// Per-target result of the current exchange.
    results: Vec<Result<(), Failure>>,
    cursors: Vec<usize>,
    /// The replicas a successful cas is copied to.
    copies: Vec<usize>,
    failover: bool,
    recorder: Recorder,
    config: Arc<Config>,
}

/// Where the bytes sent to a server come from.
#[derive(Clone, Copy)]
enum Outgoing {
    /// The request as the client sent it.
    AsArrived,
    /// `Worker::rewritten`.
    Rewritten,
    /// The server's own `output` buffer (a sub-get).
    PerServer,
}

impl Worker {
    pub fn new(config: Arc<Config>, router: Arc<Router>, recorder: Recorder) -> Worker {
        let servers = config.servers.iter().map(|&addr| ServerConn::new(addr, config.server_timeout)).collect();
        Worker {
            servers,
            route: RouteBuf::default(),
            rewritten: Vec::new(),
            results: Vec::new(),
            cursors: vec![0; config.servers.len()],
            copies: Vec::new(),
            failover: config.args.failover && config.args.distribution == Distribution::Ketama,
            router,
            recorder,
            config,
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
        let request = job.request.clone().expect("queued jobs carry a parsed request");
        let plan = self.router.route(&request, &job.input, job.rr, &mut self.route);
        let deadline = job.times.dequeue + self.config.server_timeout;
        job.reply.clear();
        job.times.first_send = Instant::now();
        let mut outcome = match plan {
            Plan::Forward(server) => self.forward(server, &request, job, deadline),
            Plan::Replicate => self.replicate(&request, job, deadline),
            Plan::Split => self.split(&request, job, deadline),
            Plan::Cas => self.cas(&request, job, deadline),
            Plan::Local => unreachable!("the net thread answers local commands"),
        };
        job.times.last_reply = Instant::now();
        outcome.keys = request.key_count as u32;
        if request.noreply {
            job.reply.clear();
        }
        write_to_client(job);
        job.times.reply_written = Instant::now();
        let targets = self.route.targets.len().max(1) as u16;
        self.recorder.record(kind_of(&request), &job.times, &outcome, targets);
    }

    /// Sends the same bytes to every server in `self.route.targets`, then reads every reply;
    /// `self.results[i]` says how target i went.
    fn exchange(&mut self, job: &Job, outgoing: Outgoing, expect: Expect, deadline: Instant) {
        self.results.clear();
        let bytes = match outgoing {
            Outgoing::AsArrived => &job.input[..],
            Outgoing::Rewritten => &self.rewritten[..],
            Outgoing::PerServer => &[][..],
        };
        for &target in &self.route.targets {
            let server = &mut self.servers[target];
            let sent = match outgoing {
                Outgoing::PerServer => {
                    let output = std::mem::take(&mut server.output);
                    let sent = server.send(&output, deadline);
                    server.output = output;
                    sent
                }
                _ => server.send(bytes, deadline),
            };
            self.recorder.server_request(target);
            self.results.push(sent);
        }
        for (i, &target) in self.route.targets.iter().enumerate() {
            if self.results[i].is_ok() {
                self.results[i] = self.servers[target].receive(expect, deadline).map(|_| ());
            }
            if self.results[i].is_err() {
                self.recorder.server_failure(target);
            }
        }
    }

    fn forward(&mut self, server: usize, request: &Request, job: &mut Job, deadline: Instant) -> Outcome {
        let expect = expect_for(request.command);
        self.route.targets.clear();
        self.route.targets.push(server);
        let outgoing = if request.noreply { self.rewrite(request, &job.input) } else { Outgoing::AsArrived };
        self.exchange(job, outgoing, expect, deadline);
        if self.results[0].is_err() && self.failover && request.command.is_retrieval() {
            // Try the key's other replicas in ring order before giving up.
            let mut replicas = Vec::new();
            self.router.replicas(request.key(&job.input), &mut replicas);
            for next in replicas.into_iter().filter(|&s| s != server) {
                self.route.targets.clear();
                self.route.targets.push(next);
                self.exchange(job, outgoing, expect, deadline);
                if self.results[0].is_ok() {
                    break;
                }
            }
        }
        let target = self.route.targets[0];
        match self.results[0] {
            Ok(()) => self.relay(target, request, job),
            Err(failure) => server_error(job, failure, &self.servers[target]),
        }
    }

    fn replicate(&mut self, request: &Request, job: &mut Job, deadline: Instant) -> Outcome {
        let outgoing = if request.noreply { self.rewrite(request, &job.input) } else { Outgoing::AsArrived };
        self.exchange(job, outgoing, Expect::Line, deadline);
        self.combine(request, job)
    }

    /// The reply to a replicated request (see [`pick_reply`]).
    fn combine(&mut self, request: &Request, job: &mut Job) -> Outcome {
        let servers = &self.servers;
        let statuses = self.route.targets.iter().zip(&self.results).map(|(&t, r)| r.map(|()| status_of(&servers[t])));
        match pick_reply(statuses).expect("a replicated request has targets") {
            (i, Err(failure)) => server_error(job, failure, &self.servers[self.route.targets[i]]),
            (i, Ok(_)) => self.relay(self.route.targets[i], request, job),
        }
    }

    fn split(&mut self, request: &Request, job: &mut Job, deadline: Instant) -> Outcome {
        for &target in &self.route.targets {
            let keys = request.keys(&job.input).zip(&self.route.key_owner).filter(|(_, &owner)| owner == target);
            let output = &mut self.servers[target].output;
            output.clear();
            compose::retrieval(output, request.command, keys.map(|(key, _)| key));
        }
        self.exchange(job, Outgoing::PerServer, Expect::Values, deadline);
        for (i, &target) in self.route.targets.iter().enumerate() {
            if let Err(failure) = self.results[i] {
                return server_error(job, failure, &self.servers[target]);
            }
            if status_of(&self.servers[target]).is_error() {
                return self.relay(target, request, job);
            }
        }
        self.cursors.iter_mut().for_each(|c| *c = 0);
        let servers = &self.servers;
        let body = |s: usize| {
            let reply = last_reply(&servers[s]);
            &servers[s].input.pending()[..reply.body_end]
        };
        let hits = coalesce(request.keys(&job.input), &self.route.key_owner, body, &mut self.cursors, &mut job.reply);
        job.reply.extend_from_slice(compose::END);
        let keys = request.key_count as u32;
        Outcome { keys, hits, misses: keys - hits, error: false }
    }

    fn cas(&mut self, request: &Request, job: &mut Job, deadline: Instant) -> Outcome {
        let primary = self.route.targets[0];
        self.copies.clear();
        self.copies.extend_from_slice(&self.route.targets[1..]);
        self.route.targets.truncate(1);
        let outgoing = if request.noreply { self.rewrite(request, &job.input) } else { Outgoing::AsArrived };
        self.exchange(job, outgoing, Expect::Line, deadline);
        let stored = self.results[0].is_ok() && status_of(&self.servers[primary]) == Status::Stored;
        if !stored || self.copies.is_empty() {
            return self.combine(request, job);
        }
        // The cas token only means something on the primary; the replicas get a plain set.
        self.rewritten.clear();
        let data = &job.input[request.data.clone()];
        compose::storage(
            &mut self.rewritten,
            Command::Set,
            request.key(&job.input),
            request.flags,
            request.exptime,
            data,
            0,
            false,
        );
        self.route.targets.clear();
        self.route.targets.extend_from_slice(&self.copies);
        self.exchange(job, Outgoing::Rewritten, Expect::Line, deadline);
        self.combine(request, job)
    }

    /// Writes the request without `noreply` into `self.rewritten`.
    fn rewrite(&mut self, request: &Request, input: &[u8]) -> Outgoing {
        if without_noreply(request, input, &mut self.rewritten) {
            Outgoing::Rewritten
        } else {
            Outgoing::AsArrived
        }
    }

    /// Copies a server's reply to the client's reply as it is.
    fn relay(&self, server: usize, request: &Request, job: &mut Job) -> Outcome {
        let conn = &self.servers[server];
        let reply = last_reply(conn);
        job.reply.extend_from_slice(&conn.input.pending()[..reply.consumed]);
        let keys = request.key_count as u32;
        let error = reply.status.is_error();
        if request.command.is_retrieval() && reply.status == Status::End {
            Outcome { keys, hits: reply.items, misses: keys.saturating_sub(reply.items), error }
        } else {
            Outcome { keys, hits: 0, misses: 0, error }
        }
    }
}

/// The reply the last `receive` on this connection parsed.
fn last_reply(conn: &ServerConn) -> memrelay_protocol::Reply {
    conn.last_reply().expect("a successful exchange leaves a parsed reply")
}

fn status_of(conn: &ServerConn) -> Status {
    last_reply(conn).status
}

fn server_error(job: &mut Job, failure: Failure, server: &ServerConn) -> Outcome {
    job.reply.clear();
    // Formatting only on the failure path.
    let _ = write!(job.reply, "SERVER_ERROR {} ({})\r\n", failure.reason(), server.addr);
    Outcome { error: true, ..Outcome::default() }
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
