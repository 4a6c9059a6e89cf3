//! One virtual client: a non-blocking connection, its buffers, and the requests it has in flight.
//!
//! Buffers are allocated when the connection is made and reused for the whole run (they only
//! grow if a reply is larger than anything seen before). Replies are parsed as bytes arrive, in
//! order, each matched with the oldest request in flight.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::ops::Range;

use mio::net::TcpStream;

use memrelay_protocol::{Parse, Reply, ReplyParser, Status};

use crate::config::Protocol;
use crate::stats::Stats;
use crate::tls::TlsSession;
use crate::workload::{ClientWorkload, Kind, Templates};

/// Initial read buffer size; grows (doubling) for larger replies.
const READ_BUF: usize = 16 * 1024;
/// Largest output buffer allocated up front; it grows (once) if a burst needs more.
const WRITE_BUF_MAX_START: usize = 64 * 1024;

/// First few error messages of a thread, and how many errors there were.
#[derive(Debug, Default)]
pub struct Notes {
    pub list: Vec<ErrorNote>,
    pub count: u64,
}

/// Messages kept per thread per phase.
pub const MAX_NOTES: usize = 10;

#[derive(Debug, Clone)]
pub struct ErrorNote {
    /// Seconds since the phase started.
    pub time_s: f64,
    /// Index into the configured servers.
    pub server: usize,
    pub message: String,
}

impl Notes {
    /// Counts an error event; keeps its message (built only then) if it is one of the first.
    pub fn add(&mut self, now_ns: u64, server: usize, message: impl FnOnce() -> String) {
        self.count += 1;
        if self.list.len() < MAX_NOTES {
            self.list.push(ErrorNote { time_s: now_ns as f64 / 1e9, server, message: message() });
        }
    }
}

/// A request in flight.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    pub kind: Kind,
    pub keys: u32,
    /// When it was sent (closed loop) or scheduled (open loop), ns since the phase start.
    pub start_ns: u64,
}

/// What may be sent now; the same for every connection of a thread at a given moment.
#[derive(Debug, Clone, Copy)]
pub struct Gate {
    pub depth: usize,
    pub stopping: bool,
    /// No request is sent at or after this time (ns since the phase start).
    pub end_ns: Option<u64>,
    pub schedule: Option<Schedule>,
    /// Populate phase: sets of the connection's share of the key range.
    pub populate: bool,
}

/// Open loop: a send due this close to now goes out now rather than after another wake-up.
pub const SLACK_NS: u64 = 10_000;

/// Open-loop schedule: connection `g` sends its k-th request at `g*step + k*period` ns, where
/// `step = 1/rate` and `period = connections/rate`, so the connections' sends interleave evenly
/// and the total is `rate` per second.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub step_ns: f64,
    pub period_ns: f64,
}

impl Schedule {
    pub fn new(rate: f64, connections: usize) -> Schedule {
        let step_ns = 1e9 / rate;
        Schedule { step_ns, period_ns: step_ns * connections as f64 }
    }

    #[inline]
    pub fn due(&self, global: u64, slot: u64) -> u64 {
        (global as f64 * self.step_ns + slot as f64 * self.period_ns) as u64
    }

    /// Slots of connection `global` due strictly before `end_ns`.
    pub fn slots_before(&self, global: u64, end_ns: u64) -> u64 {
        let first = global as f64 * self.step_ns;
        let end = end_ns as f64;
        if end <= first {
            0
        } else {
            ((end - first) / self.period_ns).ceil() as u64
        }
    }
}

pub struct Conn {
    pub stream: Option<TcpStream>,
    /// With `--tls-ca`: the session every byte goes through (boxed: the plain path's `Conn`
    /// stays small, and pays one branch).
    pub tls: Option<Box<TlsSession>>,
    /// Global client index (thread * clients + local index).
    pub global: u64,
    pub server: usize,
    /// The TCP connection is established (TLS: the handshake may still be under way).
    pub tcp_up: bool,
    /// Ready for requests.
    pub connected: bool,
    rbuf: Vec<u8>,
    rpos: usize,
    rlen: usize,
    wbuf: Vec<u8>,
    wpos: usize,
    parser: ReplyParser,
    protocol: Protocol,
    /// A meta multi-get under way.
    batch: Batch,
    pub inflight: VecDeque<Pending>,
    workload: ClientWorkload,
    /// Populate phase: key ids still to set.
    pub populate: Range<u64>,
    /// Requests sent in this phase, and how many may be.
    pub sent: u64,
    pub quota: u64,
    /// Open loop: the next schedule slot to send.
    pub next_slot: u64,
    /// Last time bytes arrived (or a request went out on an idle connection).
    pub last_rx_ns: u64,
    /// Sent its quota and got every reply, or dead.
    pub finished: bool,
}

impl Conn {
    pub fn new(
        stream: TcpStream,
        global: u64,
        server: usize,
        workload: ClientWorkload,
        depth: usize,
        max_request: usize,
        protocol: Protocol,
    ) -> Conn {
        Conn {
            stream: Some(stream),
            tls: None,
            global,
            server,
            tcp_up: false,
            connected: false,
            rbuf: vec![0; READ_BUF],
            rpos: 0,
            rlen: 0,
            wbuf: Vec::with_capacity((depth * max_request).min(WRITE_BUF_MAX_START)),
            wpos: 0,
            parser: ReplyParser::new(Kind::Set.expect(protocol)),
            protocol,
            batch: Batch::default(),
            inflight: VecDeque::with_capacity(depth),
            workload,
            populate: 0..0,
            sent: 0,
            quota: 0,
            next_slot: 0,
            last_rx_ns: 0,
            finished: false,
        }
    }

    pub fn is_live(&self) -> bool {
        self.stream.is_some()
    }

    /// Composes requests while the gate allows; returns how many.
    #[inline]
    pub fn fill(&mut self, now: u64, gate: &Gate, t: &Templates) -> usize {
        let mut sent = 0;
        // Closed loop stops at the end; open loop still sends what was due before it.
        if gate.stopping || (gate.schedule.is_none() && gate.end_ns.is_some_and(|end| now >= end)) {
            return 0;
        }
        while self.inflight.len() < gate.depth && self.sent < self.quota {
            let start_ns = match &gate.schedule {
                Some(s) => {
                    let due = s.due(self.global, self.next_slot);
                    if due > now + SLACK_NS || gate.end_ns.is_some_and(|end| due >= end) {
                        break;
                    }
                    // Late: latency counts from the schedule. A hair early: from the real send.
                    due.min(now)
                }
                None => now,
            };
            let (kind, keys) = if gate.populate {
                let id = self.populate.start;
                self.populate.start += 1;
                t.write_set(&mut self.wbuf, id);
                (Kind::Set, 1)
            } else {
                self.workload.next(&mut self.wbuf, t)
            };
            if self.inflight.is_empty() {
                self.parser.reset(kind.expect(self.protocol));
                self.last_rx_ns = now;
            }
            self.inflight.push_back(Pending { kind, keys, start_ns });
            self.sent += 1;
            self.next_slot += 1;
            sent += 1;
        }
        sent
    }

    /// Writes what the output buffer holds, as far as the socket takes it.
    #[inline]
    pub fn flush(&mut self) -> Result<(), String> {
        let Some(stream) = self.stream.as_mut() else { return Ok(()) };
        if let Some(tls) = self.tls.as_mut() {
            // rustls takes the whole output; records the socket does not take wait in it for
            // the writable event.
            let result = tls.write(stream, &self.wbuf[self.wpos..]);
            self.wbuf.clear();
            self.wpos = 0;
            return result.map_err(|e| format!("write failed: {e}"));
        }
        while self.wpos < self.wbuf.len() {
            match stream.write(&self.wbuf[self.wpos..]) {
                Ok(0) => return Err("connection closed while writing".into()),
                Ok(n) => {
                    self.wpos += n;
                    if self.wpos < self.wbuf.len() {
                        // Socket buffer full: wait for the writable event.
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("write failed: {e}")),
            }
        }
        self.wbuf.clear();
        self.wpos = 0;
        Ok(())
    }

    /// Reads everything available and handles the complete replies. Returns the number of
    /// replies handled and, if the connection must be closed, why.
    pub fn read(&mut self, now: u64, stats: &mut Stats, notes: &mut Notes) -> (usize, Option<String>) {
        let mut done = 0;
        loop {
            if self.rlen == self.rbuf.len() {
                if self.rpos > 0 {
                    self.rbuf.copy_within(self.rpos..self.rlen, 0);
                    self.rlen -= self.rpos;
                    self.rpos = 0;
                } else {
                    let grown = self.rbuf.len() * 2;
                    self.rbuf.resize(grown, 0);
                }
            }
            let Some(stream) = self.stream.as_mut() else { return (done, None) };
            let result = match self.tls.as_mut() {
                None => stream.read(&mut self.rbuf[self.rlen..]),
                Some(tls) => tls.read(stream, &mut self.rbuf[self.rlen..]),
            };
            match result {
                Ok(0) => {
                    let why = if self.rpos < self.rlen {
                        "server closed the connection in the middle of a reply"
                    } else {
                        "server closed the connection"
                    };
                    return (done, Some(why.into()));
                }
                Ok(n) => {
                    self.rlen += n;
                    self.last_rx_ns = now;
                    match self.parse(now, stats, notes) {
                        Ok(k) => done += k,
                        Err((k, why)) => return (done + k, Some(why)),
                    }
                    if self.rlen < self.rbuf.len() && self.tls.is_none() {
                        // A short read emptied the socket; the next arrival raises a new event.
                        // (Through TLS it only emptied a record: read on until `WouldBlock`.)
                        return (done, None);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return (done, None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return (done, Some(format!("read failed: {e}"))),
            }
        }
    }

    /// Handles the complete replies in the read buffer.
    fn parse(&mut self, now: u64, stats: &mut Stats, notes: &mut Notes) -> Result<usize, (usize, String)> {
        let mut done = 0;
        while self.rpos < self.rlen {
            let Some(&front) = self.inflight.front() else {
                return Err((
                    done,
                    format!("unexpected bytes from the server: {}", snippet(&self.rbuf[self.rpos..self.rlen])),
                ));
            };
            let buf = &self.rbuf[self.rpos..self.rlen];
            match self.parser.parse(buf) {
                Parse::Incomplete => break,
                Parse::Invalid(_) => {
                    return Err((done, format!("invalid reply from the server: {}", snippet(buf))));
                }
                Parse::Complete(reply) => {
                    let Some((hits, misses, error)) = outcome(self.protocol, &mut self.batch, &front, &reply) else {
                        // A hit of a meta multi-get: its batch goes on until `MN`.
                        self.rpos += reply.consumed;
                        self.parser.reset(front.kind.expect(self.protocol));
                        continue;
                    };
                    let latency = now.saturating_sub(front.start_ns);
                    stats.of(front.kind).record(latency, front.keys, hits, misses, error);
                    if error {
                        let line = &buf[..reply.body_end.min(buf.len())];
                        let kind = front.kind.name();
                        notes.add(now, self.server, || format!("{kind} answered {}", snippet(line)));
                    }
                    self.rpos += reply.consumed;
                    self.inflight.pop_front();
                    done += 1;
                    if let Some(next) = self.inflight.front() {
                        self.parser.reset(next.kind.expect(self.protocol));
                    }
                }
            }
        }
        if self.rpos == self.rlen {
            self.rpos = 0;
            self.rlen = 0;
        }
        Ok(done)
    }

    /// Closes the connection; its requests in flight count as unanswered. Returns how many.
    pub fn close(&mut self, registry: &mio::Registry, stats: &mut Stats) -> usize {
        if let Some(mut stream) = self.stream.take() {
            let _ = registry.deregister(&mut stream);
        }
        self.tls = None;
        let lost = self.inflight.len();
        for p in self.inflight.drain(..) {
            stats.of(p.kind).record_unanswered(1);
        }
        self.wbuf.clear();
        self.wpos = 0;
        self.rpos = 0;
        self.rlen = 0;
        lost
    }
}

/// The replies of a meta multi-get so far: the `VA` blocks, and whether an error line came.
#[derive(Debug, Default)]
struct Batch {
    hits: u32,
    error: bool,
}

/// What a complete reply to `front` counted: hits, misses, error; `None` while a meta
/// multi-get's batch is still open (a `VA` block or an error line before `MN`).
fn outcome(protocol: Protocol, batch: &mut Batch, front: &Pending, reply: &Reply) -> Option<(u32, u32, bool)> {
    let status = reply.status;
    Some(match (protocol, front.kind) {
        (Protocol::Text, Kind::Set) => (0, 0, status != Status::Stored),
        (Protocol::Text, Kind::Get | Kind::MultiGet) if status == Status::End => {
            let hits = reply.items.min(front.keys);
            (hits, front.keys - hits, false)
        }
        (Protocol::Text, Kind::Get | Kind::MultiGet) => (0, 0, true),
        (Protocol::Meta, Kind::Set) => (0, 0, status != Status::Done),
        (Protocol::Meta, Kind::Get) => match status {
            Status::Value | Status::Done => (1, 0, false),
            Status::Miss => (0, 1, false),
            _ => (0, 0, true),
        },
        (Protocol::Meta, Kind::MultiGet) => match status {
            Status::Noop => {
                let (hits, error) = (batch.hits.min(front.keys), batch.error);
                *batch = Batch::default();
                (hits, front.keys - hits, error)
            }
            Status::Value => {
                batch.hits += 1;
                return None;
            }
            _ => {
                batch.error = true;
                return None;
            }
        },
    })
}

/// The start of some bytes, printable, for an error message.
fn snippet(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(80)];
    let mut text = cut.escape_ascii().to_string();
    if bytes.len() > cut.len() {
        text.push('…');
    }
    format!("\"{text}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_interleaves_connections() {
        // 4 connections at 1000/s: connection g sends at g ms, g+4 ms, g+8 ms, …
        let s = Schedule::new(1000.0, 4);
        assert_eq!(s.due(0, 0), 0);
        assert_eq!(s.due(1, 0), 1_000_000);
        assert_eq!(s.due(3, 2), 11_000_000);
        let total: u64 = (0..4).map(|g| s.slots_before(g, 1_000_000_000)).sum();
        assert_eq!(total, 1000);
    }

    #[test]
    fn notes_keep_the_first_few() {
        let mut n = Notes::default();
        for i in 0..25 {
            n.add(i, 0, || format!("e{i}"));
        }
        assert_eq!((n.count, n.list.len()), (25, MAX_NOTES));
        assert_eq!(n.list[0].message, "e0");
    }
}
