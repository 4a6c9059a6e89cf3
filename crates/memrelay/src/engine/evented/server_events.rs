//! The events of an event loop's server connections: a batch written, replies read and matched
//! to their requests, a connection failed (every request outstanding on it fails) or past its
//! deadline.

use std::time::Instant;

use memrelay_protocol::Reply;
use mio::Registry;

use super::merged::PART_HOLD;
use super::requests::{Requests, TargetResult};
use super::thread::{EventLoop, Replies};
use super::upstream::{Downstream, Flow, Outstanding};
use crate::client::ClientSide;
use crate::measure::metrics::Recorder;
use crate::relay::stream::{CLIENT_BACKLOG, HOLD_LIMIT};
use crate::upstream::failure::Failure;

impl EventLoop {
    pub(super) fn flush_upstream(&mut self, server: usize) {
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

    pub(super) fn upstream_writable(&mut self, server: usize) {
        match self.upstreams[server].on_writable() {
            Ok(()) => self.flush_upstream(server),
            Err(failure) => self.fail_upstream(server, failure),
        }
    }

    pub(super) fn upstream_readable(&mut self, server: usize, to_eof: bool) {
        // Replies are recorded into their entries first; entries whose last reply came are
        // completed afterwards, since completing may queue new requests on this connection.
        let mut completed = std::mem::take(&mut self.completed);
        completed.clear();
        let mut merging = std::mem::take(&mut self.merging);
        merging.clear();
        let mut down = Down {
            server,
            now: Instant::now(),
            replies: 0,
            inflight: &mut self.inflight,
            clients: &mut self.clients,
            registry: self.poll.registry(),
            recorder: &mut self.recorder,
            completed: &mut completed,
            merging: &mut merging,
            max_value_len: self.max_value_len,
        };
        let result = self.upstreams[server].on_readable(to_eof, &mut down);
        if down.replies > 0 {
            self.health.answered(server);
        }
        for &index in &merging {
            self.pump_merge(index);
        }
        for &index in &completed {
            self.targets_complete(index);
        }
        self.completed = completed;
        self.merging = merging;
        if let Err(failure) = result {
            self.fail_upstream(server, failure);
        } else if self.upstreams[server].wants_flush() && !self.dirty.contains(&server) {
            self.dirty.push(server);
        }
    }

    /// The client of a reply streaming from `server` took enough of it: reading goes on.
    pub(super) fn resume_stream(&mut self, slot: usize) {
        let Some(session) = self.clients.sessions.get(slot) else { return };
        if let Some(&head) = session.engine.queue.front() {
            if self.inflight.get(head).merge.is_some() {
                return self.pump_merge(head);
            }
        }
        let Some(server) = session.engine.streaming_from else { return };
        if session.io.unsent() <= CLIENT_BACKLOG / 2 && self.upstreams[server].paused() {
            self.upstreams[server].resume(false);
            self.upstream_readable(server, false);
        }
    }

    /// The client of the reply streaming on `server`'s connection, if it has one.
    fn streaming_client(&self, server: usize) -> Option<usize> {
        let head = self.upstreams[server].streaming_head()?;
        let entry = self.inflight.get(head.request);
        (entry.generation == head.generation).then_some(entry.client).flatten()
    }

    pub(super) fn fail_upstream(&mut self, server: usize, failure: Failure) {
        // A reply cut off after part of it reached the client: only closing tells the client.
        if let Some(slot) = self.streaming_client(server) {
            self.clients.sessions[slot].io.broken = true;
        }
        let mut failed = std::mem::take(&mut self.failed);
        failed.clear();
        self.upstreams[server].fail(self.poll.registry(), Instant::now(), failure, &mut failed);
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
    /// replies that arrived while the loop was busy elsewhere.
    pub(super) fn expire(&mut self, now: Instant) {
        for server in 0..self.upstreams.len() {
            if self.upstreams[server].stalled_client(now) {
                // The client of the streaming reply took nothing for the server timeout: it is
                // cut off (not the server's failure) and the rest of the reply dropped.
                if let Some(slot) = self.streaming_client(server) {
                    self.clients.sessions[slot].io.broken = true;
                    self.ready.push(slot);
                }
                self.upstreams[server].resume(true);
                self.upstream_readable(server, false);
                continue;
            }
            if self.upstreams[server].next_deadline().is_some_and(|d| d <= now) {
                self.upstream_readable(server, false);
                if self.upstreams[server].next_deadline().is_some_and(|d| d <= now) {
                    self.fail_upstream(server, Failure::Timeout);
                }
            }
        }
    }
}

/// The loop's side of one connection's read: replies into their entries, a streaming reply's
/// bytes into its client's output.
struct Down<'a> {
    server: usize,
    now: Instant,
    replies: usize,
    inflight: &'a mut Requests,
    clients: &'a mut ClientSide<Replies>,
    registry: &'a Registry,
    recorder: &'a mut Recorder,
    /// Entries whose last awaited reply arrived.
    completed: &'a mut Vec<usize>,
    /// Entries with a merged reply whose parts got bytes.
    merging: &'a mut Vec<usize>,
    max_value_len: usize,
}

impl Down<'_> {
    /// The slot of `head`'s client, while both are still there.
    fn client_of(&self, head: &Outstanding) -> Option<usize> {
        let entry = self.inflight.get(head.request);
        let slot = entry.client.filter(|_| entry.generation == head.generation)?;
        self.clients.sessions.get(slot).filter(|s| !s.io.broken).map(|_| slot)
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
        if entry.merge.is_some() && !self.merging.contains(&head.request) {
            self.merging.push(head.request);
        }
        if entry.target_done(usize::from(head.target), TargetResult::Replied(reply), bytes) {
            self.completed.push(head.request);
        }
    }

    /// Only the head of its client's replies streams (what goes before it is written), and
    /// only a request whose policy lets its one answer pass as it is, or a split read's part
    /// (merged in key order: [`crate::relay::merge`]).
    fn may_stream(&mut self, head: &Outstanding, whole: Option<usize>) -> Option<usize> {
        let slot = self.client_of(head)?;
        let session = &mut self.clients.sessions[slot];
        let entry = self.inflight.get_mut(head.request);
        let request = entry.request.as_ref().expect("an in-flight entry carries a request");
        if session.engine.queue.front() != Some(&head.request) {
            return None;
        }
        if let Some(len) = whole {
            // In already: straight to the client only, only what it would get whole, and only
            // what the client has room for (a reply that arrived whole never pauses the server
            // connection for a slow reader: beyond this it is held in its entry, as before).
            // (What any stream needs is checked below.)
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
            entry.merge = Some(entry.exchange.merge(request, &entry.input, self.max_value_len));
            entry.exchange.note_streamed();
        }
        if entry.merge.is_some() {
            // The merge enforces the reply limit across the parts.
            return Some(usize::MAX);
        }
        // A client already behind on its replies gets no new stream: its reply is held whole
        // (as one that arrived whole is), so that the shared server connection is not paused
        // for it and the requests of other clients behind it are not held up.
        let streams = session.engine.streaming_from.is_none()
            && session.io.unsent() <= CLIENT_BACKLOG
            && entry.exchange.targets().len() == 1
            && entry.exchange.may_stream(request);
        if streams {
            entry.exchange.note_streamed();
            session.engine.streaming_from = Some(self.server);
        }
        streams.then(crate::access::max_reply_bytes)
    }

    fn forward(&mut self, head: &Outstanding, bytes: &[u8]) -> Flow {
        let Some(slot) = self.client_of(head) else { return Flow::Discard };
        let entry = self.inflight.get_mut(head.request);
        if entry.merged.is_some() {
            // The merge is over (cut off): the rest of the part is dropped.
            return Flow::Discard;
        }
        if entry.merge.is_some() {
            // A part: held for the merge, which the loop runs after this read.
            let part = usize::from(head.target);
            entry.bodies[part].extend_from_slice(bytes);
            if !self.merging.contains(&head.request) {
                self.merging.push(head.request);
            }
            return if entry.unconsumed(part) > PART_HOLD { Flow::Pause } else { Flow::Go };
        }
        self.clients.send(self.registry, slot, bytes);
        match self.clients.sessions.get(slot) {
            Some(session) if session.io.broken => Flow::Discard,
            // A stream starts only for a client within its backlog (`may_stream`), and pauses
            // only past one value more: a client that stops reading holds up the shared server
            // connection for a reply of many values, never for its first (one value, or the
            // rest of one, is at most what a held reply takes).
            Some(session) if session.io.unsent() > CLIENT_BACKLOG + self.max_value_len.min(HOLD_LIMIT) => Flow::Pause,
            Some(_) => Flow::Go,
            None => Flow::Discard,
        }
    }
}
