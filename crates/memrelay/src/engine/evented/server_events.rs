//! The events of an event loop's server connections: a batch written, replies read and matched
//! to their requests, a connection failed (every request outstanding on it fails) or past its
//! deadline. What a read completes is put on the turn's lists ([`Turn`]) for the loop's dispatch;
//! nothing here calls back into the loop.
//!
//! The no-pause rule is decided here, where a reply's bytes arrive for a client ([`Down::forward`]):
//! within its budget the client gets them and reading goes on; past its budget the connection
//! pauses only if nobody else's request waits on it (and then takes no new requests); otherwise
//! the client may hold one value more, and past that it is cut off and the rest of its reply is
//! dropped. A shared connection never waits for one client.

use std::collections::VecDeque;
use std::time::Instant;

use memrelay_protocol::Reply;
use mio::Registry;

use super::clients::{self, Clients};
use super::requests::{Requests, TargetResult};
use super::thread::{EventLoop, Turn};
use super::upstream::{Downstream, Flow, Outstanding};
use crate::client::budget::Budget;
use crate::measure::metrics::Recorder;
use crate::relay::stream::CLIENT_BACKLOG;
use crate::upstream::failure::Failure;

impl EventLoop {
    /// Writes connection `conn`'s batch and stamps the send time of what went out.
    pub(super) fn flush_server(&mut self, conn: usize) {
        let now = Instant::now();
        match self.servers.get_mut(conn).flush(self.poll.registry()) {
            Ok(sent) => {
                for outstanding in self.servers.get(conn).last_sent(sent) {
                    let entry = self.inflight.get_mut(outstanding.request);
                    if entry.generation == outstanding.generation && !entry.sent {
                        entry.sent = true;
                        entry.times.dequeue = now;
                        entry.times.first_send = now;
                    }
                }
            }
            Err(failure) => self.fail_connection(conn, failure),
        }
    }

    pub(super) fn server_writable(&mut self, conn: usize) {
        match self.servers.get_mut(conn).on_writable() {
            Ok(()) => self.flush_server(conn),
            Err(failure) => self.fail_connection(conn, failure),
        }
    }

    /// Reads what connection `conn`'s server sent: replies into their entries (or on to their
    /// clients), what completed onto the turn's lists.
    pub(super) fn read_server(&mut self, conn: usize, to_eof: bool) {
        let server = self.servers.get(conn).server;
        let mut down = Down {
            conn,
            server,
            now: Instant::now(),
            replies: 0,
            inflight: &mut self.inflight,
            budget: self.clients.budget,
            clients: &mut self.clients,
            registry: self.poll.registry(),
            recorder: &mut self.recorder,
            turn: &mut self.turn,
            max_value_len: self.max_value_len,
            may_pause: self.servers.may_pause(server),
        };
        let result = self.servers.get_mut(conn).on_readable(to_eof, &mut down);
        if down.replies > 0 {
            self.health.answered(server);
        }
        if let Err(failure) = result {
            self.fail_connection(conn, failure);
        } else if self.servers.get(conn).wants_flush() {
            self.servers.mark_dirty(conn);
        }
    }

    /// The client of the reply streaming on connection `conn`, if it has one.
    fn streaming_client(&self, conn: usize) -> Option<usize> {
        let head = self.servers.get(conn).streaming_head()?;
        let entry = self.inflight.get(head.request);
        (entry.generation == head.generation).then_some(entry.client).flatten()
    }

    /// Drops connection `conn`: every request outstanding on it fails with `failure`.
    pub(super) fn fail_connection(&mut self, conn: usize, failure: Failure) {
        // A reply cut off after part of it reached the client: only closing tells the client.
        if let Some(slot) = self.streaming_client(conn) {
            if let Some(session) = self.clients.sessions.get_mut(slot) {
                session.io.broken = true;
                self.turn.ready.push(slot);
            }
        }
        let mut failed = std::mem::take(&mut self.failed);
        failed.clear();
        let server = self.servers.get(conn).server;
        self.servers.get_mut(conn).fail(self.poll.registry(), Instant::now(), failure, &mut failed);
        if failure.is_the_servers() {
            self.recorder.server_failure(server);
        }
        self.health.failed(server, failure);
        for outstanding in &failed {
            if self.inflight.get(outstanding.request).generation == outstanding.generation {
                let target = usize::from(outstanding.target);
                self.target_done(outstanding.request, target, TargetResult::Failed(failure), &[]);
            }
        }
        self.failed = failed;
    }

    /// Fails the connections whose oldest request is past its deadline, after taking in the
    /// replies that arrived while the loop was busy elsewhere; cuts off the clients a paused
    /// connection waited on for their whole patience.
    pub(super) fn expire(&mut self, now: Instant) {
        for conn in self.servers.ids() {
            if self.servers.get(conn).stalled_client(now) {
                // The client of the streaming reply took nothing for its patience: it is cut off
                // (not the server's failure) and the rest of the reply dropped.
                if let Some(slot) = self.streaming_client(conn) {
                    clients::cut_off(&mut self.clients, slot);
                    self.turn.ready.push(slot);
                }
                self.servers.get_mut(conn).resume(true);
                self.read_server(conn, false);
                continue;
            }
            if self.servers.get(conn).next_deadline().is_some_and(|d| d <= now) {
                self.read_server(conn, false);
                if self.servers.get(conn).next_deadline().is_some_and(|d| d <= now) {
                    self.fail_connection(conn, Failure::Timeout);
                }
            }
        }
    }

    /// The client in `slot` took some of its replies: a connection paused for it reads on.
    pub(super) fn resume_for(&mut self, slot: usize) {
        let Some(session) = self.clients.sessions.get(slot) else { return };
        let room = !self.clients.budget.spent(session.held() * 2);
        if let Some(&head) = session.engine.queue.front() {
            if self.inflight.get(head).merge.is_some() {
                self.turn.merging.push((head, self.inflight.get(head).generation));
                return;
            }
        }
        let Some(conn) = session.engine.streaming_from else { return };
        if room && self.servers.get(conn).paused() {
            self.servers.get_mut(conn).resume(false);
            self.turn.readable.push(conn);
        }
    }
}

/// The loop's side of one connection's read: replies into their entries, a streaming reply's
/// bytes into its client's output, what completed onto the turn's lists.
struct Down<'a> {
    conn: usize,
    server: usize,
    now: Instant,
    replies: usize,
    inflight: &'a mut Requests,
    clients: &'a mut Clients,
    budget: Budget,
    registry: &'a Registry,
    recorder: &'a mut Recorder,
    turn: &'a mut Turn,
    max_value_len: usize,
    /// The connection may pause for one client's reply (fewer than the most are paused).
    may_pause: bool,
}

impl Down<'_> {
    /// The slot of `head`'s client, while both are still there.
    fn client_of(&self, head: &Outstanding) -> Option<usize> {
        let entry = self.inflight.get(head.request);
        let slot = entry.client.filter(|_| entry.generation == head.generation)?;
        self.clients.sessions.get(slot).filter(|s| !s.io.broken).map(|_| slot)
    }

    /// Brings entry `index`'s charge to its client up to date; a client past its budget and one
    /// value more is cut off.
    fn charge(&mut self, index: usize) {
        let Some(slot) = self.inflight.get(index).client else { return };
        let Some(session) = self.clients.sessions.get_mut(slot) else { return };
        self.inflight.recharge(index, &mut session.held);
        if self.budget.exceeded(session.held()) && !session.io.broken {
            clients::cut_off(self.clients, slot);
            self.turn.ready.push(slot);
        }
    }

    /// Whether anybody but the client in `slot` has a request waiting behind `queue`'s head.
    fn others_wait(&self, queue: &VecDeque<Outstanding>, slot: usize) -> bool {
        queue.iter().skip(1).any(|o| {
            let entry = self.inflight.get(o.request);
            entry.generation == o.generation && entry.client.is_some_and(|c| c != slot)
        })
    }
}

impl Downstream for Down<'_> {
    fn deliver(&mut self, head: Outstanding, reply: Reply, bytes: &[u8]) {
        self.replies += 1;
        self.recorder.server_latency(self.server, self.now.saturating_duration_since(head.queued));
        let entry = self.inflight.get_mut(head.request);
        if entry.generation != head.generation {
            return;
        }
        if entry.exchange.streamed() {
            if let Some(session) = entry.client.and_then(|slot| self.clients.sessions.get_mut(slot)) {
                session.engine.streaming_from = None;
            }
        }
        let work = (head.request, head.generation);
        if entry.merge.is_some() && !self.turn.merging.contains(&work) {
            self.turn.merging.push(work);
        }
        if entry.target_done(usize::from(head.target), TargetResult::Replied(reply), bytes) {
            self.turn.completed.push(work);
        }
        self.charge(head.request);
    }

    /// Only the head of its client's replies streams (what goes before it is written), and
    /// only a request whose policy lets its one answer pass as it is, or a split read's part
    /// (merged in key order: [`crate::relay::merge`]).
    fn may_stream(&mut self, head: &Outstanding, whole: Option<usize>) -> Option<usize> {
        let Some(slot) = self.client_of(head) else {
            // Nobody takes this reply (its client left or was cut off): it streams into nothing,
            // neither held nor copied, and no other round follows.
            let entry = self.inflight.get_mut(head.request);
            if entry.generation == head.generation && entry.merge.is_none() {
                entry.exchange.note_streamed();
            }
            return Some(usize::MAX);
        };
        let session = &mut self.clients.sessions[slot];
        let entry = self.inflight.get_mut(head.request);
        let request = entry.request.as_ref().expect("an in-flight entry carries a request");
        if session.engine.queue.front() != Some(&head.request) {
            return None;
        }
        if let Some(len) = whole {
            // In already: straight to the client only, only what it would get whole, and only
            // what the client has room for (beyond this it is held in its entry, as before).
            let straight = entry.merge.is_none()
                && !entry.exchange.may_merge_stream(request)
                && session.io.unsent() + len <= CLIENT_BACKLOG
                && len <= crate::access::max_reply_bytes();
            if !straight {
                return None;
            }
        }
        if entry.merge.is_none() && session.engine.streaming_from.is_none() && entry.exchange.may_merge_stream(request)
        {
            let merge = entry.exchange.merge(request, &entry.input, self.max_value_len);
            entry.merge = Some(super::merged::MergedReply::new(merge, entry.exchange.targets().len()));
            entry.exchange.note_streamed();
        }
        if entry.merge.is_some() {
            // The merge enforces the reply limit across the parts.
            return Some(usize::MAX);
        }
        // A client already behind on its replies gets no new stream: its reply is held whole,
        // charged to its budget.
        let streams = session.engine.streaming_from.is_none()
            && session.io.unsent() <= CLIENT_BACKLOG
            && entry.exchange.targets().len() == 1
            && entry.exchange.may_stream(request);
        if streams {
            entry.exchange.note_streamed();
            session.engine.streaming_from = Some(self.conn);
        }
        streams.then(crate::access::max_reply_bytes)
    }

    fn forward(&mut self, head: &Outstanding, bytes: &[u8], queue: &VecDeque<Outstanding>) -> Flow {
        let Some(slot) = self.client_of(head) else { return Flow::Discard };
        let entry = self.inflight.get_mut(head.request);
        if entry.merge_ended() {
            // The merge is over (cut off): the rest of the part is dropped.
            return Flow::Discard;
        }
        if entry.merge.is_some() {
            // A part: held for the merge, which the loop moves on after this read.
            entry.bodies[usize::from(head.target)].extend_from_slice(bytes);
            let work = (head.request, head.generation);
            if !self.turn.merging.contains(&work) {
                self.turn.merging.push(work);
            }
            self.charge(head.request);
        } else {
            self.clients.send(self.registry, slot, bytes);
            entry.streamed += bytes.len();
        }
        let Some(session) = self.clients.sessions.get(slot).filter(|s| !s.io.broken) else { return Flow::Discard };
        let held = session.held();
        if !self.budget.spent(held) {
            return Flow::Go;
        }
        if self.budget.exceeded(held) {
            clients::cut_off(self.clients, slot);
            self.turn.ready.push(slot);
            return Flow::Discard;
        }
        // Past its budget: the connection waits for this client only if nobody else does.
        if self.may_pause && !self.others_wait(queue, slot) {
            crate::client::budget::count_pause();
            return Flow::Pause;
        }
        Flow::Go
    }
}
