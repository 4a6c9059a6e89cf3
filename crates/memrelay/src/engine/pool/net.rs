//! The net thread of the pool engine: the shared client side on one event loop, which stamps
//! arrival and enqueue times and puts each parsed request on the queue as a job.
//!
//! It keeps at most one request per client in flight, so a pipelining client gets its replies
//! in order. It answers `version`, `verbosity`, `stats` and `quit` itself, and it finishes
//! writing replies a worker could not write at once (a worker never waits on a slow client).

use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use memrelay_protocol::{Command, Request};
use mio::event::Event;
use mio::{Poll, Token};

use super::job::Job;
use crate::client::io::ReadLimit;
use crate::client::{ClientSide, Next};
use crate::engine::event_loop::Scheduler;
use crate::measure::metrics::{Kind, Outcome, Recorder, Timestamps};
use crate::routing::local::is_local;

/// Bytes a client may have buffered beyond its request in flight before reading pauses.
const MAX_BUFFERED: usize = 4 * 1024 * 1024;

/// What the net thread keeps per client.
#[derive(Default)]
pub(crate) struct InFlight {
    /// The client's request is with a worker.
    busy: bool,
    read_paused: bool,
}

pub(crate) struct NetThread {
    poll: Poll,
    clients: ClientSide<InFlight>,
    queue: Sender<Box<Job>>,
    done: Receiver<Box<Job>>,
    /// Jobs travel through the channels boxed; the free list keeps the boxes, so recycling a job
    /// moves a pointer and never reallocates.
    #[allow(clippy::vec_box)]
    free_jobs: Vec<Box<Job>>,
    /// The one round-robin counter (seed 000 section 1.3).
    round_robin: usize,
    /// Requests queued since the start; the workers count the ones they answered out on their
    /// own counters ([`crate::measure::in_system`]).
    queued: usize,
    recorder: Recorder,
}

impl NetThread {
    pub fn new(
        poll: Poll,
        clients: ClientSide<InFlight>,
        queue: Sender<Box<Job>>,
        done: Receiver<Box<Job>>,
        recorder: Recorder,
    ) -> NetThread {
        NetThread { poll, clients, queue, done, free_jobs: Vec::new(), round_robin: 0, queued: 0, recorder }
    }

    /// Answers a command memrelay answers itself, at once (nothing else of the client is in flight).
    fn answer_locally(&mut self, slot: usize, request: &Request) {
        let session = &mut self.clients.sessions[slot];
        let arrival = session.io.arrival();
        let quit = request.command == Command::Quit;
        if !request.noreply && !quit {
            let queue_len = self.queue.len();
            let (pending, output) = session.io.pending_and_output();
            self.clients.local.answer(request, pending, queue_len, output);
        }
        session.consume(request.consumed);
        session.closing |= quit;
        let mut times = Timestamps::at(arrival);
        times.reply_written = Instant::now();
        self.recorder.record(Kind::Other, &times, &Outcome::default(), 0);
    }

    /// Hands the request to the workers; false when they are gone (shutting down).
    fn enqueue(&mut self, slot: usize, request: Request) -> bool {
        let session = &mut self.clients.sessions[slot];
        let mut job = self.free_jobs.pop().unwrap_or_else(Job::new);
        job.client = slot;
        job.socket = Some(Arc::clone(&session.socket));
        job.input.extend_from_slice(&session.pending()[..request.consumed]);
        job.rr = self.round_robin;
        job.room = self.clients.budget.room(session.held());
        if request.command.is_read() {
            self.round_robin = self.round_robin.wrapping_add(1);
        }
        job.times = Timestamps::at(session.io.arrival());
        session.consume(request.consumed);
        job.request = Some(request);
        session.engine.busy = true;
        job.times.enqueue = Instant::now();
        // Counted before the send, which wakes a worker that may take this thread's processor.
        self.clients.note_arriving(slot);
        self.queued += 1;
        self.count_inside(job.times.enqueue);
        // Sampled as this request finds the queue (what waits ahead of it).
        self.recorder.queue_length(job.times.enqueue, self.queue.len());
        if self.queue.send(job).is_err() {
            let session = &mut self.clients.sessions[slot];
            session.io.broken = true;
            session.engine.busy = false;
            return false;
        }
        true
    }

    /// Publishes this thread's count of the requests inside memrelay as of `at`: the ones it
    /// queued and those that began to arrive and wait for their client's previous one (the
    /// workers count theirs out), so the count runs from the first byte, as the response time does.
    fn count_inside(&self, at: Instant) {
        self.recorder.requests_in_flight(self.queued + self.clients.arriving(), at);
    }

    /// Reading pauses while a client has too much buffered; it resumes once that is parsed, or
    /// when what is buffered is the start of one long request (`starved`; the parser bounds it).
    fn resume_reading(&mut self, slot: usize, starved: bool) {
        let Some(session) = self.clients.sessions.get_mut(slot) else { return };
        if session.engine.read_paused && (starved || session.pending().len() <= MAX_BUFFERED) {
            session.engine.read_paused = false;
            self.read_client(slot, false);
        }
    }

    fn close_if_done(&mut self, slot: usize) {
        let done = self
            .clients
            .sessions
            .get(slot)
            .is_some_and(|s| !s.engine.busy && (s.io.broken || ((s.closing || s.io.eof) && s.io.flushed())));
        if done {
            self.clients.close(self.poll.registry(), slot);
        }
    }
}

impl Scheduler for NetThread {
    fn poll(&mut self) -> &mut Poll {
        &mut self.poll
    }

    fn recorder(&mut self) -> &mut Recorder {
        &mut self.recorder
    }

    fn accept(&mut self) {
        self.clients.accept(self.poll.registry(), InFlight::default);
    }

    fn accept_retry_at(&self) -> Option<Instant> {
        self.clients.accept_retry_at()
    }

    fn read_client(&mut self, slot: usize, to_eof: bool) {
        let limit = MAX_BUFFERED.max(self.clients.limits.max_request_len());
        if self.clients.read(slot, to_eof, ReadLimit::Bytes(limit)) {
            self.clients.sessions[slot].engine.read_paused = true;
        }
        // A client that begins to arrive counts from the read that brought its first byte.
        self.count_inside(self.clients.arrival(slot));
    }

    fn flush_client(&mut self, slot: usize) {
        self.clients.flush(self.poll.registry(), slot);
    }

    /// Parses and dispatches the client's next requests while none is in flight, then closes the
    /// client if it is finished.
    fn pump(&mut self, slot: usize) {
        // Whether the loop stopped for want of a whole request (reading must go on).
        let starved = loop {
            self.flush_client(slot);
            let Some(session) = self.clients.sessions.get_mut(slot) else { return };
            if session.engine.busy || !session.io.flushed() {
                break false;
            }
            match session.next_request(&self.clients.limits, &self.clients.budget, &self.clients.local) {
                Next::Wait => break true,
                Next::Invalid(reply) => {
                    if let Some(reply) = reply {
                        reply.write_to(session.io.output());
                    }
                }
                Next::Request(request) if is_local(&request, session.pending()) => self.answer_locally(slot, &request),
                Next::Request(request) => {
                    if !self.enqueue(slot, request) {
                        break false;
                    }
                }
            }
        };
        self.resume_reading(slot, starved);
        self.clients.note_arriving(slot);
        self.close_if_done(slot);
        self.count_inside(Instant::now());
    }

    fn engine_event(&mut self, _token: Token, _event: &Event) {}

    /// Takes back the jobs the workers finished and moves each client on.
    fn end_of_turn(&mut self) {
        while let Ok(mut job) = self.done.try_recv() {
            let slot = job.client;
            if let Some(session) = self.clients.sessions.get_mut(slot) {
                session.engine.busy = false;
                // Part of a reply went out and the rest never will: the client can only be told
                // by closing its connection.
                session.io.broken |= job.cut;
                if job.written < job.reply.len() {
                    session.io.output().extend_from_slice(&job.reply[job.written..]);
                }
            }
            job.recycle();
            self.free_jobs.push(job);
            self.pump(slot);
        }
    }

    fn begin_shutdown(&mut self) {
        self.clients.begin_shutdown(self.poll.registry());
    }

    fn idle(&self) -> bool {
        self.clients.sessions.iter().all(|(_, s)| !s.engine.busy)
    }
}
