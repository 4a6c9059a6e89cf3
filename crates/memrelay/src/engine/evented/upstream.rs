//! A non-blocking connection from one event loop to one memcached server, shared by all the
//! loop's clients.
//!
//! Requests are appended to one output buffer and written in a batch once per loop turn;
//! memcached answers in order, so replies are matched to the [`Outstanding`] queue front to
//! back. A failure (refused, reset, timeout, a reply that makes no sense) fails every request
//! outstanding on the connection (their replies can no longer be matched), drops it, and the
//! next request reconnects after a backoff that doubles up to a ceiling.
//!
//! With TLS to the servers ([`crate::upstream::tls`]) the bytes go through the connection's
//! [`Pump`] instead of straight to the socket: `written` then counts what the session took, and a
//! TLS failure (the handshake's included) fails the connection like any other.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use memrelay_protocol::{Expect, Parse, Reply, ReplyParser};
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

use crate::buffer::{Filled, ReadBuffer};
use crate::upstream::backoff::{self, Backoff};
use crate::upstream::failure::Failure;
use crate::upstream::tls::pump::{Pump, Round};

const READ_CHUNK: usize = 64 * 1024;

/// A request written (or about to be) on the connection, waiting for its reply.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outstanding {
    /// The in-flight request this reply belongs to, and which of its targets this is.
    pub request: usize,
    pub generation: u32,
    pub target: u16,
    pub expect: Expect,
    pub deadline: Instant,
    /// When it was queued on the connection: its reply's latency counts from here.
    pub queued: Instant,
}

pub(crate) struct Upstream {
    pub addr: SocketAddr,
    token: Token,
    stream: Option<TcpStream>,
    connected: bool,
    backoff: Backoff,
    output: Vec<u8>,
    written: usize,
    outstanding: VecDeque<Outstanding>,
    /// How many entries at the back of `outstanding` have not been flushed yet.
    unsent: usize,
    input: ReadBuffer,
    parser: ReplyParser,
    parser_primed: bool,
    wants_writable: bool,
    /// Last time a request was queued or a reply read: an idle connection is checked before
    /// reuse, since the server may have closed it (a restart) without a request noticing.
    last_used: Instant,
    /// TLS to the server, when it is on.
    tls: Option<Pump>,
}

/// Idle time after which a connection is checked (one non-blocking peek) before reuse.
const IDLE_CHECK: Duration = Duration::from_millis(10);

impl Upstream {
    /// A connection to `addr` (through `tls` when given); a reply value longer than
    /// `max_value_len` fails it.
    pub fn new(addr: SocketAddr, token: Token, max_value_len: usize, tls: Option<Pump>) -> Upstream {
        Upstream {
            addr,
            token,
            stream: None,
            connected: false,
            backoff: Backoff::new(backoff::RECONNECT),
            output: Vec::with_capacity(READ_CHUNK),
            written: 0,
            outstanding: VecDeque::with_capacity(256),
            unsent: 0,
            input: ReadBuffer::new(READ_CHUNK),
            parser: ReplyParser::new(Expect::Line).with_max_value_len(max_value_len),
            parser_primed: false,
            wants_writable: false,
            last_used: Instant::now(),
            tls,
        }
    }

    /// The server's count of downs ([`Backoff::note_downs`]).
    pub fn note_downs(&mut self, downs: u64) {
        self.backoff.note_downs(downs);
    }

    /// Whether a request can be queued now: connected, or connecting, or a connect could be
    /// started (not in backoff after a failure); else why not. memrelay's own lack of
    /// descriptors or memory ([`Failure::Local`]) starts no backoff: it is not the server's.
    pub fn available(&mut self, registry: &Registry, now: Instant) -> Result<(), Failure> {
        if self.stream.is_some()
            && self.outstanding.is_empty()
            && now.duration_since(self.last_used) > IDLE_CHECK
            && !self.alive()
        {
            // Closed while idle: reconnect at once, no request failed.
            self.drop_stream(registry);
        }
        if self.stream.is_some() {
            return Ok(());
        }
        if self.backoff.waiting(now) {
            return Err(Failure::Unavailable);
        }
        if let Some(tls) = self.tls.as_mut() {
            if tls.start().is_err() {
                self.back_off(now);
                return Err(Failure::Unavailable);
            }
        }
        let connected = TcpStream::connect(self.addr).and_then(|mut stream| {
            let interest = Interest::READABLE | Interest::WRITABLE;
            registry.register(&mut stream, self.token, interest)?;
            Ok(stream)
        });
        match connected {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                self.stream = Some(stream);
                self.connected = false;
                self.wants_writable = true;
                Ok(())
            }
            Err(error) if Failure::from_io(&error) == Failure::Local => Err(Failure::Local),
            Err(_) => {
                self.back_off(now);
                Err(Failure::Unavailable)
            }
        }
    }

    /// An idle connection's peer has not closed it (a peek finds no EOF and no error).
    fn alive(&self) -> bool {
        let Some(stream) = self.stream.as_ref() else { return false };
        if !self.connected {
            return true;
        }
        let mut byte = [0u8; 1];
        match stream.peek(&mut byte) {
            Ok(0) => false,
            // Over TLS, records on an idle connection are the server's goodbye (close_notify).
            Ok(_) => self.tls.is_none(),
            Err(e) => e.kind() == io::ErrorKind::WouldBlock,
        }
    }

    fn drop_stream(&mut self, registry: &Registry) {
        if let Some(mut stream) = self.stream.take() {
            let _ = registry.deregister(&mut stream);
        }
        if let Some(tls) = self.tls.as_mut() {
            tls.end();
        }
        self.connected = false;
        self.output.clear();
        self.written = 0;
        self.unsent = 0;
        self.input.clear();
        self.parser_primed = false;
    }

    /// Closes the connection if nothing is outstanding on it (a reload retired its server);
    /// says whether it is closed.
    pub fn close_if_idle(&mut self, registry: &Registry) -> bool {
        if !self.outstanding.is_empty() {
            return false;
        }
        self.drop_stream(registry);
        true
    }

    /// Queues a request: `compose` appends its bytes to the connection's batch.
    pub fn push(&mut self, compose: impl FnOnce(&mut Vec<u8>), entry: Outstanding) {
        self.last_used = Instant::now();
        compose(&mut self.output);
        self.outstanding.push_back(entry);
        self.unsent += 1;
    }

    /// Requests queued since the last flush (a gauge of the batch waiting to be written).
    pub fn unsent(&self) -> usize {
        self.unsent
    }

    /// Writes the batch. Returns the entries that went out with it (the last `n`), so their
    /// send time can be stamped.
    pub fn flush(&mut self, registry: &Registry) -> Result<usize, Failure> {
        if !self.connected {
            return Ok(0);
        }
        let stream = self.stream.as_mut().expect("connected implies a stream");
        if let Some(tls) = self.tls.as_mut() {
            self.written += tls.write(stream, &self.output[self.written..])?;
        } else {
            while self.written < self.output.len() {
                match stream.write(&self.output[self.written..]) {
                    Ok(0) => return Err(Failure::Reset),
                    Ok(n) => self.written += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(Failure::from_io(&e)),
                }
            }
        }
        if self.written == self.output.len() {
            self.output.clear();
            self.written = 0;
        }
        let want = self.written < self.output.len() || self.tls.as_ref().is_some_and(Pump::wants_write);
        if want != self.wants_writable {
            self.wants_writable = want;
            let interest = if want { Interest::READABLE | Interest::WRITABLE } else { Interest::READABLE };
            let stream = self.stream.as_mut().expect("connected implies a stream");
            registry.reregister(stream, self.token, interest).map_err(|e| Failure::from_io(&e))?;
        }
        let sent = self.unsent;
        self.unsent = 0;
        Ok(sent)
    }

    /// The connection became writable: finishes a pending connect.
    pub fn on_writable(&mut self) -> Result<(), Failure> {
        if self.connected {
            return Ok(());
        }
        let Some(stream) = self.stream.as_ref() else { return Ok(()) };
        match stream.take_error() {
            Ok(Some(e)) | Err(e) => return Err(Failure::from_io(&e)),
            Ok(None) => {}
        }
        match stream.peer_addr() {
            Ok(_) => {
                self.connected = true;
                self.backoff.succeeded();
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
            Err(e) => Err(Failure::from_io(&e)),
        }
    }

    /// Reads what the server sent and hands every complete reply, with its bytes, to `deliver`.
    pub fn on_readable(
        &mut self,
        to_eof: bool,
        mut deliver: impl FnMut(Outstanding, Reply, &[u8]),
    ) -> Result<(), Failure> {
        if self.tls.is_some() {
            return self.on_readable_tls(&mut deliver);
        }
        loop {
            let Some(stream) = self.stream.as_mut() else { return Ok(()) };
            let drained = match self.input.read_from(stream) {
                Ok(Filled::Eof) => return Err(Failure::Reset),
                Ok(Filled::Bytes { drained }) => drained,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Failure::from_io(&e)),
            };
            self.deliver_complete(&mut deliver)?;
            if drained && !to_eof {
                return Ok(());
            }
        }
    }

    /// [`Upstream::on_readable`] over TLS: rounds of records until the socket would block (the
    /// poller is edge-triggered).
    fn on_readable_tls(&mut self, deliver: &mut impl FnMut(Outstanding, Reply, &[u8])) -> Result<(), Failure> {
        loop {
            let (Some(stream), Some(tls)) = (self.stream.as_ref(), self.tls.as_mut()) else { return Ok(()) };
            let round = tls.read(stream, &mut self.input)?;
            self.deliver_complete(deliver)?;
            match round {
                Round::Records => {}
                Round::Blocked => return Ok(()),
                Round::Closed => return Err(Failure::Reset),
            }
        }
    }

    /// Over TLS, something is left to write after a read (the handshake finished with requests
    /// waiting, or records the socket did not take): the connection wants a flush.
    pub fn wants_flush(&self) -> bool {
        self.tls.as_ref().is_some_and(|tls| self.connected && (tls.wants_write() || self.written < self.output.len()))
    }

    fn deliver_complete(&mut self, deliver: &mut impl FnMut(Outstanding, Reply, &[u8])) -> Result<(), Failure> {
        while !self.input.is_empty() {
            let Some(&head) = self.outstanding.front() else {
                // Bytes nobody asked for: the stream cannot be trusted.
                return Err(Failure::BadReply);
            };
            if !self.parser_primed {
                self.parser.reset(head.expect);
                self.parser_primed = true;
            }
            match self.parser.parse(self.input.pending()) {
                Parse::Incomplete => return Ok(()),
                Parse::Invalid(_) => return Err(Failure::BadReply),
                Parse::Complete(reply) => {
                    self.last_used = Instant::now();
                    self.outstanding.pop_front();
                    self.unsent = self.unsent.min(self.outstanding.len());
                    self.parser_primed = false;
                    deliver(head, reply, &self.input.pending()[..reply.consumed]);
                    self.input.consume(reply.consumed);
                }
            }
        }
        Ok(())
    }

    /// The oldest outstanding request's deadline.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.outstanding.front().map(|o| o.deadline)
    }

    /// Drops the connection; returns what was outstanding on it (each fails with `failure`).
    /// A connection closed while idle failed no request: the next one reconnects at once.
    pub fn fail(&mut self, registry: &Registry, now: Instant, failure: Failure, failed: &mut Vec<Outstanding>) {
        if let Some(tls) = self.tls.as_ref().filter(|_| self.connected) {
            tls.failing(failure);
        }
        let was_idle = self.outstanding.is_empty() && self.connected;
        self.drop_stream(registry);
        failed.extend(self.outstanding.drain(..));
        if !was_idle {
            self.back_off(now);
        }
    }

    fn back_off(&mut self, now: Instant) {
        self.backoff.failed(now);
    }

    /// The entries of the last flush (for stamping their send time).
    pub fn last_sent(&self, count: usize) -> impl Iterator<Item = &Outstanding> {
        let len = self.outstanding.len();
        self.outstanding.range(len.saturating_sub(count)..)
    }
}
