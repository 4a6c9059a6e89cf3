//! The byte side of a client connection, shared by both engines: what was read and not yet
//! parsed (with when it arrived), what waits to be written, and whether the socket is done.
//!
//! Sockets are non-blocking and registered edge-triggered, so reads go on until the socket is
//! drained and writes until it is full; what the engines decide (what to parse, when to close)
//! stays with them.

use std::io::{self, Read, Write};
use std::time::Instant;

use crate::buffer::{Arrivals, Filled, ReadBuffer};

pub struct ClientIo {
    input: ReadBuffer,
    arrivals: Arrivals,
    output: Vec<u8>,
    written: usize,
    /// The peer closed its side.
    pub eof: bool,
    /// The socket failed.
    pub broken: bool,
    wants_writable: bool,
}

/// How much a client may have buffered before reading pauses (the engine resumes it).
pub enum ReadLimit {
    Bytes(usize),
    None,
}

impl ClientIo {
    pub fn new(read_chunk: usize) -> ClientIo {
        ClientIo {
            input: ReadBuffer::new(read_chunk),
            arrivals: Arrivals::default(),
            output: Vec::new(),
            written: 0,
            eof: false,
            broken: false,
            wants_writable: false,
        }
    }

    /// Bytes read and not yet consumed.
    pub fn pending(&self) -> &[u8] {
        self.input.pending()
    }

    pub fn consume(&mut self, n: usize) {
        self.input.consume(n);
        self.arrivals.consumed(n);
    }

    /// When the first pending byte arrived.
    pub fn arrival(&self) -> Instant {
        self.arrivals.first()
    }

    /// Reads until the socket is drained, the peer closed, the socket failed or `limit` bytes
    /// are pending (then true: reading paused). `to_eof` when the poller saw the peer close: a
    /// short read then does not mean there is nothing more, the EOF is still to be read.
    pub fn read(&mut self, mut socket: impl Read, to_eof: bool, limit: ReadLimit) -> bool {
        if self.eof || self.broken {
            return false;
        }
        loop {
            if let ReadLimit::Bytes(limit) = limit {
                if self.input.len() > limit {
                    return true;
                }
            }
            let before = self.input.len();
            match self.input.read_from(&mut socket) {
                Ok(Filled::Eof) => {
                    self.eof = true;
                    return false;
                }
                Ok(Filled::Bytes { drained }) => {
                    self.arrivals.arrived(self.input.len() - before);
                    if drained && !to_eof {
                        return false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.broken = true;
                    return false;
                }
            }
        }
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
            self.output.clear();
            self.written = 0;
        }
        let want = !self.flushed() && !self.broken;
        (want != self.wants_writable).then(|| {
            self.wants_writable = want;
            want
        })
    }
}
