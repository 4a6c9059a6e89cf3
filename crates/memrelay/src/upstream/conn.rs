//! One blocking TCP connection from a pool worker to one memcached server (TLS inside it with
//! `--server-tls-ca`: the handshake is part of connecting, [`crate::upstream::tls::blocking`]).
//!
//! Sends a request and reads one reply, each bounded by a deadline. Any failure (refused, reset,
//! timeout, a reply that makes no sense) drops the connection, since its state is unknown, and
//! the next use reconnects after a backoff that doubles up to a ceiling; while a server is in
//! backoff, requests for it fail at once instead of waiting (without pushing the retry later).
//!
//! A connection left idle may have been closed by the server meanwhile (a restarted memcached):
//! before reusing one idle for a while, a non-blocking peek checks it, and a closed one is
//! replaced at once rather than failing the request.

use std::io::{self, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use memrelay_protocol::{Expect, Parse, Reply, ReplyParser};

use crate::buffer::{Filled, ReadBuffer};
use crate::relay::stream::PROGRESS_BYTES;
use crate::upstream::backoff::{self, Backoff};
use crate::upstream::failure::Failure;
use crate::upstream::tls::blocking::{self, ServerStream};
use crate::upstream::tls::Peer;

const READ_CHUNK: usize = 16 * 1024;
/// The read timeout of the one read allowed past a request's deadline.
const LAST_TRY: Duration = Duration::from_micros(200);
/// A connection unused for longer than this is checked before it is used again.
const IDLE_CHECK: Duration = Duration::from_millis(10);

/// What [`ServerConn::receive`] got.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Received {
    /// A whole reply.
    Whole(Reply),
    /// The start of a reply too long to hold whole: it is in `input`, the rest to be streamed.
    Long,
}

pub(crate) struct ServerConn {
    pub addr: SocketAddr,
    /// TLS to the server, when it is on.
    tls: Option<Peer>,
    stream: Option<ServerStream>,
    timeout: Duration,
    backoff: Backoff,
    /// Reply bytes; after [`ServerConn::receive`] the reply is `input.pending()[..reply.consumed]`.
    pub input: ReadBuffer,
    /// The longest value a reply may carry.
    pub max_value_len: usize,
    parser: ReplyParser,
    /// The reply the last successful `receive` parsed.
    reply: Option<Reply>,
    /// When the connection last completed an exchange (or was opened).
    last_used: Instant,
    /// Reply bytes read since the deadline last moved ([`PROGRESS_BYTES`]).
    since_progress: usize,
}

impl ServerConn {
    /// A connection to `addr` (through `tls` when given); a reply value longer than
    /// `max_value_len` fails it.
    pub fn new(addr: SocketAddr, timeout: Duration, max_value_len: usize, tls: Option<Peer>) -> ServerConn {
        ServerConn {
            addr,
            tls,
            stream: None,
            timeout,
            backoff: Backoff::new(backoff::RECONNECT),
            input: ReadBuffer::new(READ_CHUNK),
            max_value_len,
            since_progress: 0,
            parser: ReplyParser::new(Expect::Line).with_max_value_len(max_value_len),
            reply: None,
            last_used: Instant::now(),
        }
    }

    /// A reload changed the server timeout (the connect timeout's ceiling).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Closes the connection (a reload retired the server); a later use would reconnect.
    pub fn close(&mut self) {
        self.stream = None;
        self.input.clear();
    }

    /// The server's count of downs ([`Backoff::note_downs`]).
    pub fn note_downs(&mut self, downs: u64) {
        self.backoff.note_downs(downs);
    }

    /// Writes all of `bytes`, connecting first if needed.
    pub fn send(&mut self, bytes: &[u8], deadline: Instant) -> Result<(), Failure> {
        self.input.clear();
        self.reply = None;
        if self.stream.is_none() && self.backoff.waiting(Instant::now()) {
            // Still backing off from an earlier failure: fail at once. This is not a new failure,
            // so neither the retry time nor the backoff moves (a steady stream of requests must
            // not keep a recovered server from being retried).
            return Err(Failure::Unavailable);
        }
        if self.stream.is_some() && self.last_used.elapsed() > IDLE_CHECK && !self.still_open() {
            self.stream = None;
        }
        let result = self.connected(deadline).and_then(|stream| write_all(stream, bytes, deadline));
        result.map_err(|failure| self.fail(failure))
    }

    /// Reads one reply of the expected shape; it is `self.input[..reply.consumed]`. A reply
    /// whose buffered part reaches `stream_after` before it is complete is handed back as
    /// [`Received::Long`] (the caller streams the rest, [`ServerConn::read_more`]); one that
    /// grows past `hold` fails ([`Failure::TooLarge`]). The deadline moves while bytes arrive:
    /// a reply times out when the server stalls, not when it is long.
    pub fn receive(
        &mut self,
        expect: Expect,
        mut deadline: Instant,
        stream_after: usize,
        hold: usize,
    ) -> Result<Received, Failure> {
        self.parser.reset(expect);
        self.since_progress = 0;
        let result = self.read_reply(&mut deadline, stream_after, hold);
        self.reply = match result {
            Ok(Received::Whole(reply)) => Some(reply),
            _ => None,
        };
        if matches!(result, Ok(Received::Whole(_))) {
            self.last_used = Instant::now();
        }
        result.map_err(|failure| self.fail(failure))
    }

    fn read_reply(&mut self, deadline: &mut Instant, stream_after: usize, hold: usize) -> Result<Received, Failure> {
        loop {
            match self.parser.parse(self.input.pending()) {
                // One request is outstanding: bytes past its reply were never asked for, and
                // the stream can no longer be trusted to line up with requests.
                Parse::Complete(reply) if self.input.pending().len() > reply.consumed => return Err(Failure::BadReply),
                Parse::Complete(reply) => return Ok(Received::Whole(reply)),
                Parse::Invalid(_) => return Err(Failure::BadReply),
                Parse::Incomplete if self.input.len() >= stream_after => return Ok(Received::Long),
                Parse::Incomplete if self.input.len() > hold => return Err(Failure::TooLarge),
                Parse::Incomplete => {}
            }
            self.fill(deadline)?;
        }
    }

    /// One more read of a reply being streamed ([`Received::Long`]); a failure drops the
    /// connection as [`ServerConn::receive`]'s do.
    pub fn read_more(&mut self, deadline: &mut Instant) -> Result<(), Failure> {
        self.fill(deadline).map_err(|failure| self.fail(failure))
    }

    /// A streamed reply is through: the connection is in step again.
    pub fn streamed(&mut self) {
        self.last_used = Instant::now();
    }

    /// A streamed reply was cut off (by the server, the client or the reply limit): the
    /// connection is out of step and is dropped.
    pub fn abandon(&mut self, failure: Failure) -> Failure {
        self.fail(failure)
    }

    /// Reads what arrives before `deadline`, which moves on by the server timeout each time
    /// [`PROGRESS_BYTES`] more arrived (a reply still arriving is not late; one dribbling in is).
    fn fill(&mut self, deadline: &mut Instant) -> Result<(), Failure> {
        let stream = self.stream.as_mut().ok_or(Failure::Unavailable)?;
        let mut last_try = false;
        loop {
            // Past the deadline (another target of the same request took the time), a reply
            // that has already arrived still counts: one last, nearly non-blocking read.
            let left = match deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) {
                Some(left) => left,
                None if !last_try => {
                    last_try = true;
                    LAST_TRY
                }
                None => return Err(Failure::Timeout),
            };
            stream.set_read_timeout(Some(left)).map_err(|e| Failure::from_io(&e))?;
            let before = self.input.len();
            match self.input.read_from(stream) {
                Ok(Filled::Eof) => return Err(Failure::Reset),
                Ok(Filled::Bytes { .. }) => {
                    self.since_progress += self.input.len().saturating_sub(before);
                    if self.since_progress >= PROGRESS_BYTES {
                        self.since_progress = 0;
                        *deadline = (*deadline).max(Instant::now() + self.timeout);
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if last_try && matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    return Err(Failure::Timeout)
                }
                Err(e) => return Err(stream.failure(&e)),
            }
        }
    }

    fn connected(&mut self, deadline: Instant) -> Result<&mut ServerStream, Failure> {
        if self.stream.is_none() {
            let timeout = deadline.saturating_duration_since(Instant::now()).min(self.timeout);
            if timeout.is_zero() {
                return Err(Failure::Timeout);
            }
            self.stream = Some(blocking::connect(self.addr, self.tls.as_ref(), timeout)?);
            self.backoff.succeeded();
            self.last_used = Instant::now();
        }
        Ok(self.stream.as_mut().expect("connected above"))
    }

    fn fail(&mut self, failure: Failure) -> Failure {
        self.stream = None;
        self.input.clear();
        // memrelay's own lack of descriptors or memory, its refusal to hold a reply, a client
        // that cut a reply off: not the server's, no backoff.
        if failure.is_the_servers() {
            self.backoff.failed(Instant::now());
        }
        failure
    }

    /// Whether the idle connection is still open: memcached sends nothing unasked, so anything
    /// to read (end of stream, an error, stray bytes) means it cannot be used as it is.
    fn still_open(&self) -> bool {
        let Some(stream) = self.stream.as_ref() else { return false };
        let mut byte = [0u8; 1];
        // SAFETY: recv into a valid one-byte buffer on a socket we own; MSG_DONTWAIT never blocks.
        // Over TLS too: memcached's records come only as replies (or as its close_notify).
        let n = unsafe {
            libc::recv(stream.socket().as_raw_fd(), byte.as_mut_ptr().cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT)
        };
        n < 0 && matches!(io::Error::last_os_error().kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted)
    }

    pub fn last_reply(&self) -> Option<Reply> {
        self.reply
    }

    /// What a streamed reply said (its bytes are gone): the exchange's answer from it.
    pub fn set_reply(&mut self, reply: Reply) {
        self.reply = Some(reply);
    }
}

fn write_all(stream: &mut ServerStream, mut bytes: &[u8], deadline: Instant) -> Result<(), Failure> {
    let left = || deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()).ok_or(Failure::Timeout);
    while !bytes.is_empty() {
        stream.set_write_timeout(Some(left()?)).map_err(|e| Failure::from_io(&e))?;
        match stream.write(bytes) {
            Ok(0) => return Err(Failure::Reset),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(stream.failure(&e)),
        }
    }
    // TLS: records the session still holds go out now (a plain socket holds none).
    if let ServerStream::Tls(_) = stream {
        stream.set_write_timeout(Some(left()?)).map_err(|e| Failure::from_io(&e))?;
        stream.flush().map_err(|e| stream.failure(&e))?;
    }
    Ok(())
}
