//! A read buffer for sockets: `data[start..end]` holds bytes read and not yet consumed.
//!
//! The room after `end` stays allocated between reads and is never zeroed again (a plain
//! `Vec::resize` before each read would memset the whole read chunk every time); consumed bytes
//! are reclaimed by moving the unread tail to the front only when room runs out.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::time::Instant;

pub struct ReadBuffer {
    data: Vec<u8>,
    start: usize,
    end: usize,
    /// Least free room offered to a read.
    chunk: usize,
}

/// What one read did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filled {
    /// Bytes arrived; `drained` when the read did not fill the room offered, so the socket had
    /// nothing more at that moment (an edge-triggered poller reports anything that comes later).
    Bytes { drained: bool },
    /// The peer closed its side.
    Eof,
}

impl ReadBuffer {
    /// A buffer that reads `chunk` bytes at a time; its memory is allocated at the first read.
    pub fn new(chunk: usize) -> ReadBuffer {
        ReadBuffer { data: Vec::new(), start: 0, end: 0, chunk }
    }

    pub fn pending(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    pub fn len(&self) -> usize {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    pub fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.len());
        self.start += n;
        if self.start == self.end {
            self.clear();
        }
    }

    pub fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }

    /// Makes room for a message of `total` bytes starting at the first pending byte, at once
    /// (rather than doubling read by read).
    pub fn reserve(&mut self, total: usize) {
        if self.data.len() - self.start >= total {
            return;
        }
        if self.start > 0 {
            self.data.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        self.data.resize(total.max(self.end + self.chunk), 0);
    }

    /// Gives the memory of an empty buffer back if a long message grew it past its chunk.
    pub fn trim(&mut self) {
        if self.is_empty() && self.data.len() > self.chunk {
            self.data = Vec::new();
        }
    }

    /// Gives all the memory of an empty buffer back (an idle connection holds none; the next
    /// read allocates one chunk again).
    pub fn release(&mut self) {
        if self.is_empty() {
            self.data = Vec::new();
        }
    }

    /// One read from `source` into the free room (made at least one chunk large first).
    pub fn read_from(&mut self, source: &mut impl Read) -> io::Result<Filled> {
        if self.data.len() - self.end < self.chunk {
            self.make_room();
        }
        let room = self.data.len() - self.end;
        let n = source.read(&mut self.data[self.end..])?;
        if n == 0 {
            return Ok(Filled::Eof);
        }
        self.end += n;
        Ok(Filled::Bytes { drained: n < room })
    }

    fn make_room(&mut self) {
        if self.start > 0 {
            self.data.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.data.len() - self.end < self.chunk {
            let grown = (self.data.len() * 2).max(self.end + self.chunk);
            self.data.resize(grown, 0);
        }
    }
}

/// Empties `buffer`, and gives its memory back when it grew past `keep` (a buffer reused from
/// request to request otherwise keeps the largest it ever held).
pub fn clear_and_trim(buffer: &mut Vec<u8>, keep: usize) {
    if buffer.capacity() > keep {
        *buffer = Vec::new();
    } else {
        buffer.clear();
    }
}

/// When the bytes still waiting in a client's [`ReadBuffer`] arrived: per read, how many of its
/// bytes are left and when it happened. A request's arrival is the read that brought its first
/// byte, also when it arrived behind requests still waiting in the buffer.
#[derive(Default)]
pub struct Arrivals {
    reads: VecDeque<(usize, Instant)>,
}

/// Reads remembered per client; beyond this, a read's bytes are counted with the previous
/// read's (their arrival errs early, memory stays bounded).
const MAX_READS: usize = 256;

impl Arrivals {
    /// Notes a read of `n` bytes that just happened.
    pub fn arrived(&mut self, n: usize) {
        if self.reads.len() >= MAX_READS {
            if let Some(last) = self.reads.back_mut() {
                last.0 += n;
            }
        } else {
            self.reads.push_back((n, Instant::now()));
        }
    }

    /// Notes that the first `n` waiting bytes were consumed.
    pub fn consumed(&mut self, n: usize) {
        let mut left = n;
        while left > 0 {
            let Some(read) = self.reads.front_mut() else { break };
            if read.0 > left {
                read.0 -= left;
                break;
            }
            left -= read.0;
            self.reads.pop_front();
        }
    }

    /// Gives the memory of an empty record back (the client is idle).
    pub fn release(&mut self) {
        if self.reads.is_empty() {
            self.reads = VecDeque::new();
        }
    }

    /// When the first waiting byte arrived.
    pub fn first(&self) -> Instant {
        self.reads.front().map_or_else(Instant::now, |read| read.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_consumes_and_reuses_room() {
        let mut buffer = ReadBuffer::new(8);
        let mut source: &[u8] = b"hello world, and more";
        assert_eq!(buffer.read_from(&mut source).unwrap(), Filled::Bytes { drained: false });
        assert_eq!(buffer.pending(), b"hello wo");
        buffer.consume(6);
        assert_eq!(buffer.pending(), b"wo");
        while let Filled::Bytes { .. } = buffer.read_from(&mut source).unwrap() {}
        assert_eq!(buffer.pending(), b"world, and more");
        buffer.consume(buffer.len());
        assert!(buffer.is_empty());
    }

    #[test]
    fn arrivals_follow_the_bytes() {
        let mut arrivals = Arrivals::default();
        arrivals.arrived(10);
        let first = arrivals.first();
        std::thread::sleep(std::time::Duration::from_millis(2));
        arrivals.arrived(5);
        arrivals.consumed(4);
        assert_eq!(arrivals.first(), first, "6 bytes of the first read are left");
        arrivals.consumed(6);
        assert!(arrivals.first() > first, "now the second read's bytes come first");
    }

    #[test]
    fn a_short_read_is_drained() {
        let mut buffer = ReadBuffer::new(64);
        let mut source: &[u8] = b"abc";
        assert_eq!(buffer.read_from(&mut source).unwrap(), Filled::Bytes { drained: true });
        assert_eq!(buffer.read_from(&mut source).unwrap(), Filled::Eof);
    }
}
