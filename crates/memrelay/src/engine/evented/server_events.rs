//! The events of an event loop's server connections: a batch written, replies read and matched
//! to their requests, a connection failed (every request outstanding on it fails) or past its
//! deadline.

use std::time::Instant;

use super::requests::TargetResult;
use super::thread::EventLoop;
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
        let (inflight, recorder) = (&mut self.inflight, &mut self.recorder);
        let mut replies = 0;
        let now = Instant::now();
        let result = self.upstreams[server].on_readable(to_eof, |outstanding, reply, bytes| {
            replies += 1;
            recorder.server_latency(server, now.saturating_duration_since(outstanding.queued));
            let entry = inflight.get_mut(outstanding.request);
            let target = usize::from(outstanding.target);
            if entry.generation == outstanding.generation
                && entry.target_done(target, TargetResult::Replied(reply), bytes)
            {
                completed.push(outstanding.request);
            }
        });
        if replies > 0 {
            self.health.answered(server);
        }
        for &index in &completed {
            self.targets_complete(index);
        }
        self.completed = completed;
        if let Err(failure) = result {
            self.fail_upstream(server, failure);
        } else if self.upstreams[server].wants_flush() && !self.dirty.contains(&server) {
            self.dirty.push(server);
        }
    }

    pub(super) fn fail_upstream(&mut self, server: usize, failure: Failure) {
        let mut failed = std::mem::take(&mut self.failed);
        failed.clear();
        self.upstreams[server].fail(self.poll.registry(), Instant::now(), failure, &mut failed);
        self.recorder.server_failure(server);
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
            if self.upstreams[server].next_deadline().is_some_and(|d| d <= now) {
                self.upstream_readable(server, false);
                if self.upstreams[server].next_deadline().is_some_and(|d| d <= now) {
                    self.fail_upstream(server, Failure::Timeout);
                }
            }
        }
    }
}
