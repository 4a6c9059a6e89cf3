//! The byte side of a client connection, shared by both engines: what was read and not yet
//! parsed (with when it arrived), what waits to be written, and whether the socket is done.
//!
//! Sockets are non-blocking and registered edge-triggered, so reads go on until the socket is
//! drained and writes until it is full; what the engines decide (what to parse, when to close)
//! stays with them.

use std::io::{self, IoSlice, Read, Write};
use std::time::Instant;

use crate::buffer::{Arrivals, Filled, ReadBuffer};

/// Pieces of a streaming reply at least this long are written at once rather than appended.
pub(crate) const SEND_DIRECT: usize = 8 * 1024;

/// Replies waiting for a slow client past this size are held in a buffer mapped on its own
/// ([`ClientIo::hold`]).
const HOLD_MAPPED: usize = 256 * 1024;

pub struct ClientIo {
    input: ReadBuffer,
    max_message: usize,
    arrivals: Arrivals,
    output: Vec<u8>,
    written: usize,
    /// The peer closed its side.
    pub eof: bool,
    /// The socket failed.
    pub broken: bool,
    wants_writable: bool,
    /// The last read found the socket empty (or at its end): until the poller reports more,
    /// reading again would only return `WouldBlock`, a wasted system call per request.
    drained: bool,
}

/// How much a client may have buffered before reading pauses (the engine resumes it).
pub enum ReadLimit {
    Bytes(usize),
    None,
}

impl ClientIo {
    /// Reads `read_chunk` bytes at a time; a request of more than `max_message` bytes is not
    /// made room for at once.
    pub fn new(read_chunk: usize, max_message: usize) -> ClientIo {
        ClientIo {
            max_message,
            input: ReadBuffer::new(read_chunk),
            arrivals: Arrivals::default(),
            output: Vec::new(),
            written: 0,
            eof: false,
            broken: false,
            wants_writable: false,
            drained: false,
        }
    }

    /// Bytes read and not yet consumed.
    pub fn pending(&self) -> &[u8] {
        self.input.pending()
    }

    pub fn consume(&mut self, n: usize) {
        self.input.consume(n);
        self.consumed(n);
    }

    /// Moves the first `n` pending bytes into `into` (a long request without copying it) and
    /// consumes them.
    pub fn take(&mut self, n: usize, into: &mut Vec<u8>) {
        self.input.take(n, into);
        self.consumed(n);
    }

    fn consumed(&mut self, n: usize) {
        self.arrivals.consumed(n);
        if self.drained && self.input.is_empty() {
            // Idle until the poller reports more: an idle connection holds no read buffer.
            self.input.release();
            self.arrivals.release();
        }
    }

    /// The pending bytes begin a message of `total` bytes: room for it is made at once.
    pub fn reserve(&mut self, total: usize) {
        self.input.reserve(total);
    }

    /// When the first pending byte arrived.
    pub fn arrival(&self) -> Instant {
        self.arrivals.first()
    }

    /// Before the buffer grows for the next read: a storage request at its front that declares
    /// a long value gets one buffer of its size (up to `max_message`), not one doubling per read.
    fn grow_for_declared(&mut self) {
        if let Some(total) = memrelay_protocol::declared_len(self.input.pending()) {
            self.input.reserve(total.min(self.max_message));
        }
    }

    /// Reads until the socket is drained, the peer closed, the socket failed or `limit` bytes
    /// are pending (then true: reading paused). `to_eof` when the poller saw the peer close: a
    /// short read then does not mean there is nothing more, the EOF is still to be read.
    pub fn read(&mut self, mut socket: impl Read, to_eof: bool, limit: ReadLimit) -> bool {
        if self.eof || self.broken {
            return false;
        }
        self.drained = false;
        loop {
            if let ReadLimit::Bytes(limit) = limit {
                if self.input.len() > limit {
                    return true;
                }
            }
            let before = self.input.len();
            if before > 0 && self.input.room() < self.input.chunk() {
                self.grow_for_declared();
            }
            match self.input.read_from(&mut socket) {
                Ok(Filled::Eof) => {
                    self.eof = true;
                    return false;
                }
                Ok(Filled::Bytes { drained }) => {
                    self.arrivals.arrived(self.input.len() - before);
                    if drained && !to_eof {
                        self.drained = true;
                        return false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.drained = true;
                    return false;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.broken = true;
                    return false;
                }
            }
        }
    }

    /// The last read left nothing in the socket: the next bytes come with a readable event
    /// (edge-triggered), so an engine need not read again before one.
    pub fn drained(&self) -> bool {
        self.drained
    }

    /// The buffer replies are appended to; [`ClientIo::flush`] writes it.
    pub fn output(&mut self) -> &mut Vec<u8> {
        &mut self.output
    }

    /// The pending bytes and the output together (a local answer reads one, writes the other).
    pub fn pending_and_output(&mut self) -> (&[u8], &mut Vec<u8>) {
        (self.input.pending(), &mut self.output)
    }

    /// Reply bytes waiting for the socket.
    pub fn unsent(&self) -> usize {
        self.output.len() - self.written
    }

    pub fn flushed(&self) -> bool {
        self.written == self.output.len()
    }

    /// Sends `bytes` after the output. A chunk of a streaming reply goes to the socket at once,
    /// together with what waits before it (one vectored write, the chunk not copied); what the
    /// socket does not take is appended to the output. Small pieces (a header line, an `END`)
    /// are appended and go with the next chunk or the next flush. Returns what
    /// [`ClientIo::flush`] returns.
    pub fn send(&mut self, mut socket: impl Write, bytes: &[u8]) -> Option<bool> {
        if bytes.len() < SEND_DIRECT {
            self.output.extend_from_slice(bytes);
            return None;
        }
        let mut sent = 0;
        while !self.broken && sent < bytes.len() {
            let waiting = &self.output[self.written..];
            let slices = [IoSlice::new(waiting), IoSlice::new(&bytes[sent..])];
            match socket.write_vectored(&slices) {
                Ok(0) => self.broken = true,
                Ok(n) => {
                    let from_output = n.min(waiting.len());
                    self.written += from_output;
                    sent += n - from_output;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => self.broken = true,
            }
        }
        if !self.broken {
            self.hold(&bytes[sent..]);
        }
        self.flush(socket)
    }

    /// Appends a large reply's bytes the socket did not take. An output that grows past
    /// [`HOLD_MAPPED`] is mapped on its own at once: the copies and the freed smaller buffers
    /// of growing it in the heap would cost a slow client's memory once more.
    fn hold(&mut self, bytes: &[u8]) {
        let len = self.output.len() + bytes.len();
        if len > self.output.capacity() && len > HOLD_MAPPED {
            self.output.reserve(len.max(crate::memory::MAP_THRESHOLD) - self.output.len());
        }
        self.output.extend_from_slice(bytes);
    }

    /// Writes what the socket takes of the output. Returns `Some(want)` when the need for
    /// writable events changed (the caller re-registers the socket), `None` otherwise.
    pub fn flush(&mut self, mut socket: impl Write) -> Option<bool> {
        while self.written < self.output.len() && !self.broken {
            match socket.write(&self.output[self.written..]) {
                Ok(0) => self.broken = true,
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => self.broken = true,
            }
        }
        if self.flushed() {
            // The output's memory is given back once it is written (an idle connection holds
            // none; allocating the next reply's costs less than a cache miss).
            crate::buffer::clear_and_trim(&mut self.output, 0);
            self.written = 0;
        }
        let want = !self.flushed() && !self.broken;
        (want != self.wants_writable).then(|| {
            self.wants_writable = want;
            want
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A socket with `data` waiting, then `WouldBlock`.
    struct Socket<'a> {
        data: &'a [u8],
    }

    impl Read for Socket<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.data.is_empty() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = buf.len().min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    /// A socket that takes `room` bytes, then would block.
    struct Sink {
        taken: Vec<u8>,
        room: usize,
    }

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(self.room - self.taken.len());
            if n == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            self.taken.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn sent_chunks_keep_their_order_with_what_waits_before_them() {
        let mut io = ClientIo::new(64, usize::MAX);
        let mut sink = Sink { taken: Vec::new(), room: 12_000 };
        let chunk: Vec<u8> = (0..SEND_DIRECT as u32 + 1000).map(|i| i as u8).collect();
        // A small piece waits; the chunk after it goes out with it.
        io.send(&mut sink, b"VALUE k 0 9999\r\n");
        assert!(sink.taken.is_empty());
        io.send(&mut sink, &chunk);
        io.send(&mut sink, &chunk);
        let mut expected = b"VALUE k 0 9999\r\n".to_vec();
        expected.extend_from_slice(&chunk);
        expected.extend_from_slice(&chunk);
        assert_eq!(sink.taken[..], expected[..12_000]);
        assert_eq!(io.unsent(), expected.len() - 12_000);
        sink.room = usize::MAX;
        io.flush(&mut sink);
        assert_eq!(sink.taken, expected);
        assert!(io.flushed());
    }

    #[test]
    fn a_short_read_leaves_the_socket_drained() {
        let mut io = ClientIo::new(64, usize::MAX);
        assert!(!io.drained());
        assert!(!io.read(Socket { data: b"get a\r\n" }, false, ReadLimit::None));
        assert!(io.drained());
        assert_eq!(io.pending(), b"get a\r\n");
    }

    #[test]
    fn a_read_to_would_block_leaves_the_socket_drained() {
        // 16 bytes into a 16-byte chunk: a full read, then WouldBlock.
        let mut io = ClientIo::new(16, usize::MAX);
        assert!(!io.read(Socket { data: b"get abcdefghij\r\n" }, false, ReadLimit::None));
        assert!(io.drained());
        assert_eq!(io.pending().len(), 16);
    }

    #[test]
    fn a_read_paused_at_its_limit_is_not_drained() {
        let data = vec![b'x'; 100];
        let mut io = ClientIo::new(8, usize::MAX);
        assert!(io.read(Socket { data: &data }, false, ReadLimit::Bytes(8)));
        assert!(!io.drained());
        assert!(io.pending().len() < data.len());
    }
}
