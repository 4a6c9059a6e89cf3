//! The net thread of the pool engine: one mio event loop that accepts clients, reads and parses
//! their requests incrementally, stamps arrival and enqueue times and puts jobs on the queue.
//!
//! It keeps at most one request per client in flight, so a pipelining client gets its replies
//! in order. It answers `version`, `verbosity`, `stats` and `quit` itself, and it finishes
//! writing replies a worker could not write at once (a worker never waits on a slow client).

use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use memrelay_protocol::{parse_request, Command, Limits, Parse};
use mio::net::{TcpListener, TcpStream};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Registry, Token};
use slab::Slab;

use crate::client_io::{ClientIo, ReadLimit};
use crate::job::Job;
use crate::local::LocalAnswers;
use crate::metrics::{Kind, Outcome, Recorder, Timestamps};

pub const LISTENER: Token = Token(usize::MAX - 1);
pub const WAKER: Token = Token(usize::MAX - 2);

const READ_CHUNK: usize = 16 * 1024;
/// Bytes a client may have buffered beyond its request in flight before reading pauses.
const MAX_BUFFERED: usize = 4 * 1024 * 1024;

struct Client {
    socket: Arc<TcpStream>,
    /// What was read and not yet parsed, and the replies waiting for the socket. After EOF
    /// the client is answered what it sent, then closed; a broken socket is dropped once
    /// nothing is in flight.
    io: ClientIo,
    /// Bytes still to discard (the data block of a value that was too large).
    skip: usize,
    in_flight: bool,
    /// No more requests: close once the output is written (quit, lost framing, shutdown).
    closing: bool,
    read_paused: bool,
}

impl Client {
    fn pending(&self) -> &[u8] {
        self.io.pending()
    }

    fn consume(&mut self, n: usize) {
        self.io.consume(n);
    }

    fn done(&self) -> bool {
        !self.in_flight && (self.io.broken || ((self.closing || self.io.eof) && self.io.flushed()))
    }
}

pub struct NetThread {
    poll: Poll,
    listener: Option<TcpListener>,
    clients: Slab<Client>,
    queue: Sender<Box<Job>>,
    done: Receiver<Box<Job>>,
    free_jobs: Vec<Box<Job>>,
    limits: Limits,
    max_clients: usize,
    /// The one round-robin counter (seed 000 section 1.3).
    round_robin: usize,
    recorder: Recorder,
    local: LocalAnswers,
    shutdown: Arc<AtomicBool>,
    shutdown_grace: Duration,
}

impl NetThread {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        poll: Poll,
        mut listener: TcpListener,
        queue: Sender<Box<Job>>,
        done: Receiver<Box<Job>>,
        limits: Limits,
        max_clients: usize,
        recorder: Recorder,
        local: LocalAnswers,
        shutdown: Arc<AtomicBool>,
        shutdown_grace: Duration,
    ) -> io::Result<NetThread> {
        poll.registry().register(&mut listener, LISTENER, Interest::READABLE)?;
        Ok(NetThread {
            poll,
            listener: Some(listener),
            clients: Slab::with_capacity(1024),
            queue,
            done,
            free_jobs: Vec::new(),
            limits,
            max_clients,
            round_robin: 0,
            recorder,
            local,
            shutdown,
            shutdown_grace,
        })
    }

    /// Runs until shutdown is asked for and the requests in flight are finished (or the grace
    /// period is over).
    pub fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        let clock = self.recorder.clock();
        let mut stop_by: Option<Instant> = None;
        loop {
            let now = Instant::now();
            self.recorder.roll(now);
            let mut timeout = clock.end_of(clock.index(now)).saturating_duration_since(now);
            if self.shutdown.load(Ordering::Acquire) {
                let deadline = *stop_by.get_or_insert_with(|| self.begin_shutdown(now));
                if self.clients.iter().all(|(_, c)| !c.in_flight) || now >= deadline {
                    break;
                }
                timeout = timeout.min(Duration::from_millis(10));
            }
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept(),
                    WAKER => {}
                    Token(slot) => {
                        if event.is_readable() || event.is_read_closed() || event.is_error() {
                            self.read(slot, event.is_read_closed() || event.is_error());
                        }
                        if event.is_writable() {
                            self.flush(slot);
                        }
                        self.pump(slot);
                    }
                }
            }
            self.finish_jobs();
        }
        self.recorder.flush();
        Ok(())
    }

    fn begin_shutdown(&mut self, now: Instant) -> Instant {
        if let Some(mut listener) = self.listener.take() {
            let _ = self.poll.registry().deregister(&mut listener);
        }
        for (_, client) in self.clients.iter_mut() {
            client.closing = true;
        }
        now + self.shutdown_grace
    }

    fn accept(&mut self) {
        let Some(listener) = self.listener.as_ref() else { return };
        loop {
            match listener.accept() {
                Ok((stream, _)) => {
                    if self.clients.len() >= self.max_clients {
                        let _ = (&stream).write(b"SERVER_ERROR too many connections\r\n");
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    let entry = self.clients.vacant_entry();
                    let slot = entry.key();
                    let fd = stream.as_raw_fd();
                    if self.poll.registry().register(&mut SourceFd(&fd), Token(slot), Interest::READABLE).is_err() {
                        continue;
                    }
                    entry.insert(Client {
                        socket: Arc::new(stream),
                        io: ClientIo::new(READ_CHUNK),
                        skip: 0,
                        in_flight: false,
                        closing: false,
                        read_paused: false,
                    });
                    self.local.connection_opened();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Out of descriptors and the like: try again on the next event.
                Err(_) => break,
            }
        }
    }

    /// Reads what the client sent (see [`ClientIo::read`]).
    fn read(&mut self, slot: usize, to_eof: bool) {
        let Some(client) = self.clients.get_mut(slot) else { return };
        if client.io.read(&*client.socket, to_eof, ReadLimit::Bytes(MAX_BUFFERED)) {
            client.read_paused = true;
        }
    }

    /// Parses and dispatches the client's next requests while none is in flight, then closes the
    /// client if it is finished.
    fn pump(&mut self, slot: usize) {
        loop {
            self.flush(slot);
            let Some(client) = self.clients.get_mut(slot) else { return };
            if client.in_flight || client.closing || client.io.broken || !client.io.flushed() {
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
                    invalid.reply.write_to(client.io.output());
                    let n = invalid.skip.min(client.pending().len());
                    client.consume(n);
                    client.skip = invalid.skip - n;
                    client.closing |= invalid.close;
                    self.local.client_error();
                }
                Parse::Complete(request) => {
                    let consumed = request.consumed;
                    if matches!(request.command, Command::Version | Command::Verbosity | Command::Stats | Command::Quit)
                    {
                        let arrival = client.io.arrival();
                        let quit = request.command == Command::Quit;
                        if !request.noreply && !quit {
                            let queue_len = self.queue.len();
                            let (pending, output) = client.io.pending_and_output();
                            self.local.answer(&request, pending, queue_len, output);
                        }
                        client.consume(consumed);
                        client.closing |= quit;
                        let mut times = Timestamps::at(arrival);
                        times.reply_written = Instant::now();
                        self.recorder.record(Kind::Other, &times, &Outcome::default(), 0);
                        continue;
                    }
                    let mut job = self.free_jobs.pop().unwrap_or_else(Job::new);
                    job.client = slot;
                    job.socket = Some(Arc::clone(&client.socket));
                    job.input.extend_from_slice(&client.pending()[..consumed]);
                    job.request = Some(request);
                    job.rr = self.round_robin;
                    if job.request.as_ref().is_some_and(|r| r.command.is_retrieval()) {
                        self.round_robin = self.round_robin.wrapping_add(1);
                    }
                    job.times = Timestamps::at(client.io.arrival());
                    client.consume(consumed);
                    client.in_flight = true;
                    job.times.enqueue = Instant::now();
                    // Sampled as this request finds the queue (what waits ahead of it).
                    self.recorder.queue_length(job.times.enqueue, self.queue.len());
                    if self.queue.send(job).is_err() {
                        // Workers are gone: we are shutting down.
                        client.io.broken = true;
                        client.in_flight = false;
                        break;
                    }
                }
            }
        }
        self.resume_reading(slot);
        self.close_if_done(slot);
    }

    /// Reading pauses while a client has too much buffered; it resumes once that is parsed.
    fn resume_reading(&mut self, slot: usize) {
        let Some(client) = self.clients.get_mut(slot) else { return };
        if client.read_paused && client.pending().len() <= MAX_BUFFERED {
            client.read_paused = false;
            self.read(slot, false);
        }
    }

    /// Writes what the socket takes of the client's output; asks for writable events otherwise.
    fn flush(&mut self, slot: usize) {
        let Some(client) = self.clients.get_mut(slot) else { return };
        if let Some(want) = client.io.flush(&*client.socket) {
            let interest = if want { Interest::READABLE | Interest::WRITABLE } else { Interest::READABLE };
            let fd = client.socket.as_raw_fd();
            let _ = self.poll.registry().reregister(&mut SourceFd(&fd), Token(slot), interest);
        }
    }

    /// Takes back the jobs the workers finished and moves each client on.
    fn finish_jobs(&mut self) {
        while let Ok(mut job) = self.done.try_recv() {
            let slot = job.client;
            if let Some(client) = self.clients.get_mut(slot) {
                client.in_flight = false;
                if job.written < job.reply.len() {
                    client.io.output().extend_from_slice(&job.reply[job.written..]);
                }
            }
            job.recycle();
            self.free_jobs.push(job);
            self.pump(slot);
        }
    }

    fn close_if_done(&mut self, slot: usize) {
        if self.clients.get(slot).is_some_and(Client::done) {
            let client = self.clients.remove(slot);
            close(self.poll.registry(), &client);
            self.local.connection_closed();
        }
    }
}

fn close(registry: &Registry, client: &Client) {
    let fd = client.socket.as_raw_fd();
    let _ = registry.deregister(&mut SourceFd(&fd));
    // Workers hold no reference once the job is back, so dropping the last Arc closes the socket.
    let _ = client.socket.shutdown(std::net::Shutdown::Both);
}
