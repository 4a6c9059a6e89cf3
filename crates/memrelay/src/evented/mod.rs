//! The evented engine: K event-loop threads, each owning its clients and one non-blocking
//! connection to every server, shared by all of its clients.
//!
//! ```text
//!  clients ──TCP──▶ loop 1..K (mio; accept via SO_REUSEPORT, parse, route) ──batched writes──▶ memcached 1..S
//!     ▲                 │  replies matched to requests in order per server connection
//!     └── replies in ◀──┘  request order per client (a pipelining client may have many in flight)
//! ```
//!
//! Same protocol crate, routing, reply rules and measurement as the pool engine; only the I/O
//! scheduling differs. Times: enqueue = parsed, dequeue = first_send = written to a server
//! connection (so queue time is the wait for the loop's batched write), last_reply = the last
//! target's reply parsed, reply_written = handed to the client socket.

mod inflight;
mod upstream;

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use memrelay_protocol::{compose, parse_request, Command, Expect, Limits, Parse, Request, Status};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use slab::Slab;
use socket2::{Domain, Socket, Type};

use crate::client_io::{ClientIo, ReadLimit};
use crate::config::{Config, Distribution};
use crate::local::{LiveTotals, LocalAnswers};
use crate::metrics::{kind_of, Outcome, Recorder, Timestamps, WindowClock};
use crate::routing::{expect_for, Plan, RouteBuf, Router};
use crate::stats::StatsThread;
use inflight::{Pool, TargetResult};
use upstream::{Outstanding, Upstream};

const LISTENER: Token = Token(usize::MAX - 1);
const WAKER: Token = Token(usize::MAX - 2);
/// Upstream tokens count down from here; client tokens are slab slots counting up.
const UPSTREAM_BASE: usize = usize::MAX - 16;
const READ_CHUNK: usize = 16 * 1024;
/// Requests one client may have in flight before memrelay stops reading its pipeline.
const MAX_IN_FLIGHT_PER_CLIENT: usize = 256;

/// Runs the evented engine until SIGINT/SIGTERM (or `shutdown`), then stops cleanly.
pub fn run(config: Config, shutdown: Arc<AtomicBool>) -> Result<(), String> {
    let config = Arc::new(config);
    let router = Arc::new(Router::new(&config)?);
    let threads = config.event_threads();
    let servers = config.servers.len();
    let clock = WindowClock { start: Instant::now(), length: config.stats_window };
    let (to_stats, stats_in) = crossbeam_channel::unbounded();
    let (recycle_out, recycle_in) = crossbeam_channel::unbounded();
    let live = LiveTotals::new(servers);
    let local = LocalAnswers::new(Arc::clone(&live), config.server_names.clone(), threads);
    let stats = StatsThread::new(Arc::clone(&config), clock, threads, stats_in, recycle_out, live)
        .map_err(|e| format!("cannot write statistics: {e}"))?;
    let stats = thread::Builder::new().name("stats".into()).spawn(move || stats.run()).map_err(|e| e.to_string())?;

    let mut loops = Vec::with_capacity(threads);
    let mut wakers = Vec::with_capacity(threads);
    for id in 0..threads {
        let poll = Poll::new().map_err(|e| e.to_string())?;
        wakers.push(Arc::new(Waker::new(poll.registry(), WAKER).map_err(|e| e.to_string())?));
        let listener =
            reuse_port_listener(config.listen).map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
        let recorder = Recorder::new(
            id as u16,
            clock,
            servers,
            config.args.request_log_sample,
            to_stats.clone(),
            recycle_in.clone(),
        );
        loops.push(EventLoop::new(
            poll,
            listener,
            &config,
            Arc::clone(&router),
            recorder,
            local.clone(),
            Arc::clone(&shutdown),
        )?);
    }
    drop((to_stats, recycle_in));
    {
        let wakers = wakers.clone();
        crate::shutdown::on_signal(Arc::clone(&shutdown), move || {
            for waker in &wakers {
                let _ = waker.wake();
            }
        })
        .map_err(|e| e.to_string())?;
    }
    let handles: Vec<_> = loops
        .into_iter()
        .enumerate()
        .map(|(id, event_loop)| thread::Builder::new().name(format!("loop-{id}")).spawn(move || event_loop.run()))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let mut first_error = None;
    for handle in handles {
        match handle.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => first_error = first_error.or(Some(format!("event loop failed: {e}"))),
            Err(_) => first_error = first_error.or(Some("an event loop panicked".to_string())),
        }
    }
    let stats_result = stats.join().map_err(|_| "the stats thread panicked".to_string())?;
    if let Some(error) = first_error {
        return Err(error);
    }
    stats_result.map_err(|e| format!("cannot write statistics: {e}"))
}

/// One listening socket per loop on the same address; the kernel spreads connections.
fn reuse_port_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(TcpListener::from_std(socket.into()))
}

struct Client {
    socket: TcpStream,
    /// What was read and not yet parsed, and the replies waiting for the socket.
    io: ClientIo,
    /// Bytes still to discard (the data block of a value that was too large).
    skip: usize,
    /// In-flight entries, in request order.
    replies: VecDeque<usize>,
    /// No more requests: close once the replies are written (quit, lost framing, shutdown).
    closing: bool,
}

impl Client {
    fn pending(&self) -> &[u8] {
        self.io.pending()
    }

    fn consume(&mut self, n: usize) {
        self.io.consume(n);
    }
}

struct EventLoop {
    poll: Poll,
    listener: Option<TcpListener>,
    clients: Slab<Client>,
    upstreams: Vec<Upstream>,
    addrs: Vec<SocketAddr>,
    inflight: Pool,
    router: Arc<Router>,
    route: RouteBuf,
    /// Scratch: a request rewritten for the servers (noreply removed, a sub-get, a cas copy).
    scratch: Vec<u8>,
    failed: Vec<Outstanding>,
    /// Scratch: entries whose last awaited reply arrived in one read.
    completed: Vec<usize>,
    /// Clients whose head request may have completed.
    ready: Vec<usize>,
    /// Upstreams with a batch to write at the end of the turn.
    dirty: Vec<usize>,
    limits: Limits,
    max_clients: usize,
    timeout: Duration,
    failover: bool,
    round_robin: usize,
    recorder: Recorder,
    local: LocalAnswers,
    shutdown: Arc<AtomicBool>,
    shutdown_grace: Duration,
}

impl EventLoop {
    fn new(
        poll: Poll,
        mut listener: TcpListener,
        config: &Config,
        router: Arc<Router>,
        recorder: Recorder,
        local: LocalAnswers,
        shutdown: Arc<AtomicBool>,
    ) -> Result<EventLoop, String> {
        poll.registry().register(&mut listener, LISTENER, Interest::READABLE).map_err(|e| e.to_string())?;
        let upstreams =
            config.servers.iter().enumerate().map(|(i, &addr)| Upstream::new(addr, Token(UPSTREAM_BASE - i))).collect();
        Ok(EventLoop {
            poll,
            listener: Some(listener),
            clients: Slab::with_capacity(1024),
            upstreams,
            addrs: config.servers.clone(),
            inflight: Pool::default(),
            router,
            route: RouteBuf::default(),
            scratch: Vec::new(),
            failed: Vec::new(),
            completed: Vec::new(),
            ready: Vec::new(),
            dirty: Vec::new(),
            limits: Limits { max_value_len: config.args.max_value_size, ..Limits::default() },
            max_clients: config.args.max_clients,
            timeout: config.server_timeout,
            failover: config.args.failover && config.args.distribution == Distribution::Ketama,
            round_robin: 0,
            recorder,
            local,
            shutdown,
            shutdown_grace: config.shutdown_grace,
        })
    }

    fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        let clock = self.recorder.clock();
        let mut stop_by = None;
        loop {
            let now = Instant::now();
            self.recorder.roll(now);
            self.expire(now);
            let mut wait = clock.end_of(clock.index(now)).saturating_duration_since(now);
            if let Some(deadline) = self.upstreams.iter().filter_map(Upstream::next_deadline).min() {
                wait = wait.min(deadline.saturating_duration_since(now) + Duration::from_millis(1));
            }
            if self.shutdown.load(Ordering::Acquire) {
                let deadline = *stop_by.get_or_insert_with(|| self.begin_shutdown(now));
                if self.inflight.in_use() == 0 || now >= deadline {
                    break;
                }
                wait = wait.min(Duration::from_millis(10));
            }
            if let Err(e) = self.poll.poll(&mut events, Some(wait)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept(),
                    WAKER => {}
                    Token(t) if t > UPSTREAM_BASE - self.upstreams.len() && t <= UPSTREAM_BASE => {
                        let server = UPSTREAM_BASE - t;
                        if event.is_writable() {
                            self.upstream_writable(server);
                        }
                        if event.is_readable() || event.is_read_closed() || event.is_error() {
                            self.upstream_readable(server, event.is_read_closed() || event.is_error());
                        }
                    }
                    Token(slot) => {
                        if event.is_readable() || event.is_read_closed() || event.is_error() {
                            self.read_client(slot, event.is_read_closed() || event.is_error());
                        }
                        if event.is_writable() {
                            self.flush_client(slot);
                        }
                        self.pump(slot);
                    }
                }
            }
            self.end_of_turn();
        }
        self.recorder.flush();
        Ok(())
    }

    fn begin_shutdown(&mut self, now: Instant) -> Instant {
        if let Some(mut listener) = self.listener.take() {
            let _ = self.poll.registry().deregister(&mut listener);
        }
        let slots: Vec<usize> = self.clients.iter().map(|(slot, _)| slot).collect();
        for slot in slots {
            self.clients[slot].closing = true;
            self.close_if_done(slot);
        }
        now + self.shutdown_grace
    }

    /// Writes the batches of the turn and delivers completed replies.
    fn end_of_turn(&mut self) {
        while !self.ready.is_empty() || !self.dirty.is_empty() {
            while let Some(server) = self.dirty.pop() {
                self.flush_upstream(server);
            }
            while let Some(slot) = self.ready.pop() {
                self.deliver(slot);
                self.pump(slot);
            }
        }
    }

    fn accept(&mut self) {
        loop {
            let Some(listener) = self.listener.as_ref() else { return };
            match listener.accept() {
                Ok((mut socket, _)) => {
                    if self.clients.len() >= self.max_clients {
                        let _ = socket.write(b"SERVER_ERROR too many connections\r\n");
                        continue;
                    }
                    let _ = socket.set_nodelay(true);
                    let entry = self.clients.vacant_entry();
                    if self.poll.registry().register(&mut socket, Token(entry.key()), Interest::READABLE).is_err() {
                        continue;
                    }
                    entry.insert(Client {
                        socket,
                        io: ClientIo::new(READ_CHUNK),
                        skip: 0,
                        replies: VecDeque::new(),
                        closing: false,
                    });
                    self.local.connection_opened();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }

    /// Reads what the client sent (see [`ClientIo::read`]); with enough requests in flight,
    /// reading pauses (pump reads again once replies drain).
    fn read_client(&mut self, slot: usize, to_eof: bool) {
        let Some(client) = self.clients.get_mut(slot) else { return };
        let limit = if client.replies.len() >= MAX_IN_FLIGHT_PER_CLIENT {
            ReadLimit::Bytes(READ_CHUNK)
        } else {
            ReadLimit::None
        };
        client.io.read(&client.socket, to_eof, limit);
    }

    /// Parses and starts the client's requests, up to the in-flight limit.
    fn pump(&mut self, slot: usize) {
        loop {
            let Some(client) = self.clients.get_mut(slot) else { return };
            if client.closing || client.io.broken || client.replies.len() >= MAX_IN_FLIGHT_PER_CLIENT {
                break;
            }
            if client.skip > 0 {
                let n = client.skip.min(client.pending().len());
                client.consume(n);
                client.skip -= n;
                if client.skip > 0 {
                    break;
                }
            }
            if client.pending().is_empty() {
                break;
            }
            match parse_request(client.pending(), &self.limits) {
                Parse::Incomplete => break,
                Parse::Invalid(invalid) => {
                    let index = self.inflight.alloc();
                    let entry = self.inflight.get_mut(index);
                    entry.client = Some(slot);
                    invalid.reply.write_to(&mut entry.reply);
                    entry.done = true;
                    entry.request = None;
                    let n = invalid.skip.min(client.pending().len());
                    client.consume(n);
                    client.skip = invalid.skip - n;
                    client.closing |= invalid.close;
                    client.replies.push_back(index);
                    self.local.client_error();
                    self.ready.push(slot);
                }
                Parse::Complete(request) => self.start_request(slot, request),
            }
        }
        if self.clients.get(slot).is_some_and(|c| !c.io.eof && c.replies.len() < MAX_IN_FLIGHT_PER_CLIENT) {
            // Reading may have stopped at the in-flight limit with bytes left in the socket.
            let pending = self.clients[slot].pending().len();
            if pending <= READ_CHUNK {
                self.read_client(slot, false);
                if self.clients[slot].pending().len() > pending {
                    return self.pump(slot);
                }
            }
        }
        self.close_if_done(slot);
    }

    fn start_request(&mut self, slot: usize, request: Request) {
        let now = Instant::now();
        let index = self.inflight.alloc();
        let client = &mut self.clients[slot];
        let entry = self.inflight.get_mut(index);
        entry.client = Some(slot);
        entry.input.extend_from_slice(&client.pending()[..request.consumed]);
        entry.times = Timestamps::at(client.io.arrival());
        entry.times.enqueue = now;
        client.consume(request.consumed);
        client.replies.push_back(index);
        let rr = self.round_robin;
        if request.command.is_retrieval() {
            self.round_robin = self.round_robin.wrapping_add(1);
        }
        let plan = self.router.route(&request, &entry.input, rr, &mut self.route);
        entry.plan = plan;
        entry.targets.clear();
        entry.targets.extend_from_slice(&self.route.targets);
        entry.key_owner.clear();
        entry.key_owner.extend_from_slice(&self.route.key_owner);
        let noreply = request.noreply;
        let quit = request.command == Command::Quit;
        entry.request = Some(request);
        match plan {
            Plan::Local => {
                if !noreply && !quit {
                    let request = entry.request.as_ref().expect("set above");
                    self.local.answer(request, &entry.input, 0, &mut entry.reply);
                }
                entry.outcome = Outcome::default();
                entry.done = true;
                self.clients[slot].closing |= quit;
                self.ready.push(slot);
            }
            Plan::Forward(server) => {
                entry.targets.clear();
                entry.targets.push(server);
                self.send_to_targets(index, now);
            }
            Plan::Replicate | Plan::Split => self.send_to_targets(index, now),
            Plan::Cas => {
                // The cas goes to the primary first; the copies follow once it stored.
                entry.targets.truncate(1);
                self.send_to_targets(index, now);
            }
        }
        self.recorder.queue_length(now, self.upstreams.iter().map(Upstream::unsent).sum());
    }

    /// Queues the entry's request on every one of its targets' connections.
    fn send_to_targets(&mut self, index: usize, now: Instant) {
        let entry = self.inflight.get_mut(index);
        entry.expect_targets();
        let generation = entry.generation;
        let request = entry.request.clone().expect("an in-flight entry carries a request");
        let expect = if entry.copying { Expect::Line } else { expect_for(request.command) };
        for slot in 0..entry.targets.len() {
            let entry = self.inflight.get_mut(index);
            let server = entry.targets[slot];
            // What this target gets: the request as it arrived, or rewritten.
            self.scratch.clear();
            let bytes: &[u8] = if entry.copying {
                let data = &entry.input[request.data.clone()];
                compose::storage(
                    &mut self.scratch,
                    Command::Set,
                    request.key(&entry.input),
                    request.flags,
                    request.exptime,
                    data,
                    0,
                    false,
                );
                &self.scratch
            } else if entry.plan == Plan::Split {
                let keys = request.keys(&entry.input).zip(&entry.key_owner).filter(|(_, &owner)| owner == server);
                compose::retrieval(&mut self.scratch, request.command, keys.map(|(key, _)| key));
                &self.scratch
            } else if request.noreply {
                crate::routing::without_noreply(&request, &entry.input, &mut self.scratch);
                &self.scratch
            } else {
                &entry.input
            };
            let upstream = &mut self.upstreams[server];
            self.recorder.server_request(server);
            if upstream.available(self.poll.registry(), now) {
                let outstanding =
                    Outstanding { request: index, generation, slot: slot as u16, expect, deadline: now + self.timeout };
                upstream.push(bytes, outstanding);
                if !self.dirty.contains(&server) {
                    self.dirty.push(server);
                }
            } else {
                self.recorder.server_failure(server);
                self.target_done(index, slot, TargetResult::Failed(crate::failure::Failure::Unavailable), &[]);
            }
        }
    }

    /// Target `slot` of entry `index` has answered (or failed).
    fn target_done(&mut self, index: usize, slot: usize, result: TargetResult, bytes: &[u8]) {
        if self.inflight.get_mut(index).target_done(slot, result, bytes) {
            self.targets_complete(index);
        }
    }

    /// Every target of entry `index` has answered: retry, copy (cas) or finish.
    fn targets_complete(&mut self, index: usize) {
        let entry = self.inflight.get_mut(index);
        let now = Instant::now();
        entry.times.last_reply = now;
        let request = entry.request.clone().expect("an in-flight entry carries a request");
        // A read with failover: try the key's next replica.
        if self.failover && entry.plan != Plan::Split && request.command.is_retrieval() {
            if let TargetResult::Failed(_) = entry.results[0] {
                let mut replicas = Vec::new();
                self.router.replicas(request.key(&entry.input), &mut replicas);
                entry.attempts += 1;
                let tried = entry.targets[0];
                let position = replicas.iter().position(|&s| s == tried).unwrap_or(0);
                if usize::from(entry.attempts) < replicas.len() {
                    entry.targets[0] = replicas[(position + 1) % replicas.len()];
                    return self.send_to_targets(index, now);
                }
            }
        }
        // A cas the primary stored: copy the value to the other replicas.
        if entry.plan == Plan::Cas && !entry.copying {
            let stored = matches!(entry.results[0], TargetResult::Replied(r) if r.status == Status::Stored);
            self.route.targets.clear();
            self.router.write_targets(request.key(&entry.input), &mut self.route.targets);
            if stored && self.route.targets.len() > 1 {
                entry.copying = true;
                entry.targets.clear();
                entry.targets.extend_from_slice(&self.route.targets[1..]);
                return self.send_to_targets(index, now);
            }
        }
        entry.finish(&self.addrs);
        if let Some(client) = entry.client {
            self.ready.push(client);
        } else {
            self.inflight.release(index);
        }
    }

    fn flush_upstream(&mut self, server: usize) {
        let now = Instant::now();
        match self.upstreams[server].flush(self.poll.registry()) {
            Ok(sent) => {
                for outstanding in self.upstreams[server].last_sent(sent) {
                    let entry = self.inflight.get_mut(outstanding.request);
                    if entry.generation == outstanding.generation && !entry.sent {
                        entry.sent = true;
                        entry.times.dequeue = now;
                        entry.times.first_send = now;
                    }
                }
            }
            Err(failure) => self.fail_upstream(server, failure),
        }
    }

    fn upstream_writable(&mut self, server: usize) {
        match self.upstreams[server].on_writable() {
            Ok(()) => self.flush_upstream(server),
            Err(failure) => self.fail_upstream(server, failure),
        }
    }

    fn upstream_readable(&mut self, server: usize, to_eof: bool) {
        // Replies are recorded into their entries first; entries whose last reply came are
        // completed afterwards, since completing may queue new requests on this connection.
        let mut completed = std::mem::take(&mut self.completed);
        completed.clear();
        let inflight = &mut self.inflight;
        let result = self.upstreams[server].on_readable(to_eof, |outstanding, reply, bytes| {
            let entry = inflight.get_mut(outstanding.request);
            let slot = usize::from(outstanding.slot);
            if entry.generation == outstanding.generation
                && entry.target_done(slot, TargetResult::Replied(reply), bytes)
            {
                completed.push(outstanding.request);
            }
        });
        for &index in &completed {
            self.targets_complete(index);
        }
        self.completed = completed;
        if let Err(failure) = result {
            self.fail_upstream(server, failure);
        }
    }

    fn fail_upstream(&mut self, server: usize, failure: crate::failure::Failure) {
        let mut failed = std::mem::take(&mut self.failed);
        failed.clear();
        self.upstreams[server].fail(self.poll.registry(), Instant::now(), &mut failed);
        self.recorder.server_failure(server);
        for outstanding in &failed {
            if self.inflight.get(outstanding.request).generation == outstanding.generation {
                self.target_done(
                    outstanding.request,
                    usize::from(outstanding.slot),
                    TargetResult::Failed(failure),
                    &[],
                );
            }
        }
        self.failed = failed;
    }

    /// Fails the connections whose oldest request is past its deadline, after taking in the
    /// replies that arrived while the loop was busy elsewhere.
    fn expire(&mut self, now: Instant) {
        for server in 0..self.upstreams.len() {
            if self.upstreams[server].next_deadline().is_some_and(|d| d <= now) {
                self.upstream_readable(server, false);
                if self.upstreams[server].next_deadline().is_some_and(|d| d <= now) {
                    self.fail_upstream(server, crate::failure::Failure::Timeout);
                }
            }
        }
    }

    /// Moves the client's completed head replies, in order, to its socket.
    fn deliver(&mut self, slot: usize) {
        let Some(client) = self.clients.get_mut(slot) else { return };
        while let Some(&index) = client.replies.front() {
            let entry = self.inflight.get_mut(index);
            if !entry.done {
                break;
            }
            client.replies.pop_front();
            client.io.output().extend_from_slice(&entry.reply);
            entry.times.reply_written = Instant::now();
            if let Some(request) = entry.request.as_ref() {
                let kind = kind_of(request);
                let targets = entry.targets.len().max(1) as u16;
                self.recorder.record(kind, &entry.times, &entry.outcome, targets);
            }
            self.inflight.release(index);
        }
        self.flush_client(slot);
        self.close_if_done(slot);
    }

    fn flush_client(&mut self, slot: usize) {
        let Some(client) = self.clients.get_mut(slot) else { return };
        if let Some(want) = client.io.flush(&client.socket) {
            let interest = if want { Interest::READABLE | Interest::WRITABLE } else { Interest::READABLE };
            let _ = self.poll.registry().reregister(&mut client.socket, Token(slot), interest);
        }
    }

    fn close_if_done(&mut self, slot: usize) {
        let Some(client) = self.clients.get(slot) else { return };
        let finished =
            client.io.broken || ((client.closing || client.io.eof) && client.io.flushed() && client.replies.is_empty());
        if !finished {
            return;
        }
        // With EOF but complete requests still buffered, answer them first.
        if client.io.eof && !client.closing && !client.io.broken && !client.pending().is_empty() {
            if let Parse::Complete(_) | Parse::Invalid(_) = parse_request(client.pending(), &self.limits) {
                return;
            }
        }
        let mut client = self.clients.remove(slot);
        for &index in &client.replies {
            let entry = self.inflight.get_mut(index);
            entry.client = None;
            if entry.done {
                self.inflight.release(index);
            }
        }
        let _ = self.poll.registry().deregister(&mut client.socket);
        self.local.connection_closed();
    }
}
