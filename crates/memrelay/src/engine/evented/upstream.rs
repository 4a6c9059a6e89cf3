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

use crate::relay::stream::{
    Move, Streaming, CLIENT_PATIENCE, HOLD_LIMIT, PROGRESS_BYTES, STREAM_AFTER, TOO_LARGE_LINE,
};
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

use crate::buffer::{Filled, ReadBuffer};
use crate::upstream::backoff::{self, Backoff};
use crate::upstream::failure::Failure;
use crate::upstream::tls::pump::{Pump, Round};

const READ_CHUNK: usize = 64 * 1024;
/// The most of a written batch's buffer a connection keeps for the next one, until it has been
/// idle for [`IDLE_SHRINK`] (what it holds is bounded by the requests in flight).
const BUSY_OUTPUT: usize = 8 * 1024 * 1024;
const IDLE_SHRINK: Duration = Duration::from_secs(1);

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
    /// The server this connection goes to (its id in the registry).
    pub server: usize,
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
    max_value_len: usize,
    /// The server timeout: no reply byte for this long while a request is outstanding fails the
    /// connection (a long reply still arriving is not late).
    timeout: Duration,
    /// When the reply bytes last made progress ([`PROGRESS_BYTES`] more arrived, a reply ended,
    /// or reading resumed).
    progress: Instant,
    /// Reply bytes read since `progress` was last stamped.
    since_progress: usize,
    /// The head request's reply is streaming to its client ([`crate::relay::stream`]).
    streaming: Option<Streaming>,
    /// Its client went away or stopped reading: the rest of the reply is read and dropped.
    discarding: bool,
    /// Reading waits for the streaming reply's client to take what it has (since then).
    paused: Option<Instant>,
}

/// Where the replies read on a connection go: the event loop's side of [`Upstream::on_readable`].
pub(crate) trait Downstream {
    /// A reply, whole (with its bytes) or streamed (its bytes went to the client already).
    fn deliver(&mut self, head: Outstanding, reply: Reply, bytes: &[u8]);
    /// Whether `head`'s reply, too long to hold, may go on as it arrives (now): to its client,
    /// or into its part of a merged reply. `Some(limit)`: the most it may send (the
    /// `--max-reply-bytes` of a reply the client gets as it is; a part's is the merge's).
    /// `whole`: the reply is in already, this long; it streams only straight to its client and
    /// within the limit (otherwise it is handled whole, as it would have been).
    fn may_stream(&mut self, head: &Outstanding, whole: Option<usize>) -> Option<usize>;
    /// Bytes of `head`'s streaming reply for its client, and what reading does next; `queue` is
    /// what is outstanding on the connection, `head` first (who would wait if it paused).
    fn forward(&mut self, head: &Outstanding, bytes: &[u8], queue: &VecDeque<Outstanding>) -> Flow;
}

/// What reading a streaming reply does after bytes were forwarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    Go,
    /// The client has enough waiting: read again once it took some.
    Pause,
    /// The client is gone: drop the rest of the reply.
    Discard,
}

/// A reply that arrived whole and is at least this long goes to its client from the
/// connection's buffer when it may ([`Downstream::may_stream`]), rather than copied into its entry.
const RELAY_IN_PLACE: usize = 64 * 1024;

/// Idle time after which a connection is checked (one non-blocking peek) before reuse.
const IDLE_CHECK: Duration = Duration::from_millis(10);

impl Upstream {
    /// A connection to `addr` (through `tls` when given); a reply value longer than
    /// `max_value_len` fails it.
    pub fn new(server: usize, addr: SocketAddr, token: Token, max_value_len: usize, tls: Option<Pump>) -> Upstream {
        Upstream {
            server,
            addr,
            token,
            stream: None,
            connected: false,
            backoff: Backoff::new(backoff::RECONNECT),
            output: Vec::new(),
            written: 0,
            outstanding: VecDeque::with_capacity(256),
            unsent: 0,
            input: ReadBuffer::new(READ_CHUNK),
            parser: ReplyParser::new(Expect::Line).with_max_value_len(max_value_len),
            parser_primed: false,
            wants_writable: false,
            last_used: Instant::now(),
            tls,
            max_value_len,
            timeout: Duration::from_secs(1),
            progress: Instant::now(),
            since_progress: 0,
            streaming: None,
            discarding: false,
            paused: None,
        }
    }

    /// The server timeout in force (a reload may change it).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// The head request whose reply is streaming to its client, if any.
    pub fn streaming_head(&self) -> Option<Outstanding> {
        self.streaming.as_ref().and(self.outstanding.front().copied())
    }

    /// Reading waits for the streaming reply's client.
    pub fn paused(&self) -> bool {
        self.paused.is_some()
    }

    /// Reading goes on (the client took its backlog, or it is cut off: then `discard`).
    pub fn resume(&mut self, discard: bool) {
        self.paused = None;
        self.discarding |= discard;
        self.made_progress();
    }

    /// New requests may be queued on the connection: it is not paused for one client's reply.
    pub fn takes_requests(&self) -> bool {
        self.paused.is_none()
    }

    fn made_progress(&mut self) {
        self.progress = Instant::now();
        self.since_progress = 0;
    }

    /// `n` more reply bytes arrived: progress once they add up to [`PROGRESS_BYTES`].
    fn arrived(&mut self, n: usize) {
        self.since_progress += n;
        if self.since_progress >= PROGRESS_BYTES {
            self.made_progress();
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
        self.input.trim();
        self.parser_primed = false;
        self.streaming = None;
        self.discarding = false;
        self.paused = None;
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

    /// When an idle connection gives its batch buffer back ([`Upstream::shrink_if_idle`]).
    pub fn shrink_at(&self) -> Option<Instant> {
        (self.outstanding.is_empty() && self.output.capacity() > 0).then(|| self.last_used + IDLE_SHRINK)
    }

    /// Gives the batch buffer back once the connection has been idle for [`IDLE_SHRINK`]; says
    /// whether it did.
    pub fn shrink_if_idle(&mut self, now: Instant) -> bool {
        let idle = self.shrink_at().is_some_and(|at| at <= now) && self.written == self.output.len();
        if idle {
            self.output = Vec::new();
            self.written = 0;
        }
        idle
    }

    /// Since when the connection has been open with nothing outstanding (`None` while it is
    /// closed, busy or paused).
    pub fn idle_since(&self) -> Option<Instant> {
        let idle = self.stream.is_some() && self.outstanding.is_empty() && self.paused.is_none();
        idle.then_some(self.last_used)
    }

    /// Requests are waiting for replies on the connection.
    pub fn busy(&self) -> bool {
        !self.outstanding.is_empty()
    }

    /// Queues a request: `compose` appends its bytes (about `len`) to the connection's batch.
    pub fn push(&mut self, len: usize, compose: impl FnOnce(&mut Vec<u8>), entry: Outstanding) {
        self.last_used = Instant::now();
        crate::buffer::reserve(&mut self.output, len);
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
            crate::buffer::clear_and_recycle(&mut self.output, BUSY_OUTPUT);
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
    pub fn on_readable(&mut self, to_eof: bool, down: &mut impl Downstream) -> Result<(), Failure> {
        // Bytes already read first (reading may have paused with a reply in the buffer).
        self.deliver_complete(down)?;
        if self.tls.is_some() {
            return self.on_readable_tls(down);
        }
        loop {
            if self.paused.is_some() {
                return Ok(());
            }
            let Some(stream) = self.stream.as_mut() else { return Ok(()) };
            let before = self.input.len();
            let drained = match self.input.read_from(stream) {
                Ok(Filled::Eof) => return Err(Failure::Reset),
                Ok(Filled::Bytes { drained }) => drained,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Failure::from_io(&e)),
            };
            self.arrived(self.input.len().saturating_sub(before));
            self.deliver_complete(down)?;
            if drained && !to_eof {
                return Ok(());
            }
        }
    }

    /// [`Upstream::on_readable`] over TLS: rounds of records until the socket would block (the
    /// poller is edge-triggered).
    fn on_readable_tls(&mut self, down: &mut impl Downstream) -> Result<(), Failure> {
        loop {
            if self.paused.is_some() {
                return Ok(());
            }
            let (Some(stream), Some(tls)) = (self.stream.as_ref(), self.tls.as_mut()) else { return Ok(()) };
            let before = self.input.len();
            let round = tls.read(stream, &mut self.input)?;
            self.arrived(self.input.len().saturating_sub(before));
            self.deliver_complete(down)?;
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

    fn deliver_complete(&mut self, down: &mut impl Downstream) -> Result<(), Failure> {
        loop {
            if self.streaming.is_some() {
                if !self.advance_stream(down)? {
                    return Ok(());
                }
                continue;
            }
            if self.input.is_empty() {
                self.input.trim();
                return Ok(());
            }
            let Some(&head) = self.outstanding.front() else {
                // Bytes nobody asked for: the stream cannot be trusted.
                return Err(Failure::BadReply);
            };
            if !self.parser_primed {
                self.parser.reset(head.expect);
                self.parser_primed = true;
            }
            match self.parser.parse(self.input.pending()) {
                Parse::Incomplete if self.input.len() >= STREAM_AFTER => match down.may_stream(&head, None) {
                    Some(limit) => {
                        self.streaming = Some(Streaming::new(head.expect, self.max_value_len, limit));
                        self.discarding = false;
                    }
                    None if self.input.len() > HOLD_LIMIT => return Err(Failure::TooLarge),
                    None => return Ok(()),
                },
                Parse::Incomplete if self.input.len() > HOLD_LIMIT => return Err(Failure::TooLarge),
                Parse::Incomplete => return Ok(()),
                Parse::Invalid(_) => return Err(Failure::BadReply),
                Parse::Complete(reply) => {
                    // A long reply that may go to its client as it is goes from here, not
                    // through the entry (one copy fewer): the stream takes it from the buffer.
                    let relay = if reply.consumed >= RELAY_IN_PLACE {
                        down.may_stream(&head, Some(reply.consumed))
                    } else {
                        None
                    };
                    if let Some(limit) = relay {
                        self.streaming = Some(Streaming::new(head.expect, self.max_value_len, limit));
                        self.discarding = false;
                        continue;
                    }
                    self.last_used = Instant::now();
                    (self.progress, self.since_progress) = (self.last_used, 0);
                    self.outstanding.pop_front();
                    self.unsent = self.unsent.min(self.outstanding.len());
                    self.parser_primed = false;
                    down.deliver(head, reply, &self.input.pending()[..reply.consumed]);
                    self.input.consume(reply.consumed);
                }
            }
        }
    }

    /// Moves the head's streaming reply on with the bytes in hand; true when it is through.
    fn advance_stream(&mut self, down: &mut impl Downstream) -> Result<bool, Failure> {
        let head = *self.outstanding.front().expect("a streaming reply belongs to the head request");
        let streaming = self.streaming.as_mut().expect("called while streaming");
        loop {
            let pending = self.input.pending();
            let flow = match streaming.next(pending) {
                Move::Send(n) => {
                    let flow =
                        if self.discarding { Flow::Go } else { down.forward(&head, &pending[..n], &self.outstanding) };
                    self.input.consume(n);
                    flow
                }
                Move::Refuse(n) => {
                    let flow =
                        if self.discarding { Flow::Go } else { down.forward(&head, TOO_LARGE_LINE, &self.outstanding) };
                    self.input.consume(n);
                    flow
                }
                Move::Drop(n) => {
                    self.input.consume(n);
                    Flow::Go
                }
                Move::Incomplete => return Ok(false),
                Move::Done(reply) => {
                    self.streaming = None;
                    self.discarding = false;
                    self.last_used = Instant::now();
                    (self.progress, self.since_progress) = (self.last_used, 0);
                    self.outstanding.pop_front();
                    self.unsent = self.unsent.min(self.outstanding.len());
                    self.parser_primed = false;
                    down.deliver(head, reply, &[]);
                    return Ok(true);
                }
                Move::Invalid(_) => return Err(Failure::BadReply),
            };
            match flow {
                Flow::Go => {}
                Flow::Discard => self.discarding = true,
                Flow::Pause => {
                    self.paused = Some(Instant::now());
                    return Ok(false);
                }
            }
        }
    }

    /// When the connection is late: its oldest request's deadline, moved on while reply bytes
    /// keep arriving; while reading waits for a streaming reply's client, when that client has
    /// had [`CLIENT_PATIENCE`] to take something ([`Upstream::stalled_client`]).
    pub fn next_deadline(&self) -> Option<Instant> {
        if let Some(since) = self.paused {
            return Some(since + CLIENT_PATIENCE);
        }
        self.outstanding.front().map(|o| o.deadline.max(self.progress + self.timeout))
    }

    /// Reading has waited [`CLIENT_PATIENCE`] for the streaming reply's client.
    pub fn stalled_client(&self, now: Instant) -> bool {
        self.paused.is_some_and(|since| now >= since + CLIENT_PATIENCE)
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
        if !was_idle && failure.is_the_servers() {
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
