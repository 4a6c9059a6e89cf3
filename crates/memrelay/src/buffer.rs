//! A read buffer for sockets: `data[start..end]` holds bytes read and not yet consumed.
//!
//! The room after `end` stays allocated between reads and is never zeroed again (a plain
//! `Vec::resize` before each read would memset the whole read chunk every time); consumed bytes
//! are reclaimed by moving the unread tail to the front only when room runs out.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::time::Instant;

/// Spare read buffers per thread, and the longest kept: what idle connections gave back, for
/// the next ones to read into (memcached keeps its read buffers in a per-thread cache the same
/// way). At most 8 MiB per thread.
const MAX_SPARES: usize = 8;
const MAX_SPARE_LEN: usize = 1024 * 1024;

thread_local! {
    static SPARE: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

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
        let want = total.max(self.end + self.chunk);
        if self.is_empty() {
            self.release();
            self.data = Self::take_spare(want);
            return;
        }
        if self.start > 0 {
            self.data.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        self.data.resize(want, 0);
    }

    /// Gives the memory of an empty buffer back if a long message grew it past its chunk.
    pub fn trim(&mut self) {
        if self.is_empty() && self.data.len() > self.chunk {
            self.data = Vec::new();
        }
    }

    /// Gives all the memory of an empty buffer back (an idle connection holds none): to this
    /// thread's few spare buffers ([`SPARE`]), where the next connection to read takes it
    /// without allocating or zeroing again, or to the allocator.
    pub fn release(&mut self) {
        if !self.is_empty() || self.data.is_empty() {
            return;
        }
        let data = std::mem::take(&mut self.data);
        if data.len() <= MAX_SPARE_LEN {
            SPARE.with(|spare| {
                let mut spare = spare.borrow_mut();
                if spare.len() < MAX_SPARES {
                    spare.push(data);
                }
            });
        }
    }

    /// A spare buffer of at least `len` bytes if this thread has one, else a new one.
    fn take_spare(len: usize) -> Vec<u8> {
        let spare = SPARE.with(|spare| {
            let mut spare = spare.borrow_mut();
            let at = spare.iter().position(|b| b.len() >= len)?;
            Some(spare.swap_remove(at))
        });
        spare.unwrap_or_else(|| vec![0; len])
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
        if self.data.is_empty() {
            self.data = Self::take_spare(self.chunk);
            return;
        }
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
    fn an_idle_buffer_goes_to_the_threads_spares_and_the_next_reader_takes_it() {
        let mut first = ReadBuffer::new(16);
        let mut source: &[u8] = b"set k 0 0 3\r\nabc\r\n";
        first.read_from(&mut source).unwrap();
        first.reserve(1000);
        let memory = first.data.as_ptr();
        first.consume(first.len());
        first.release();
        assert!(first.data.is_empty(), "an idle connection holds no buffer");
        let mut second = ReadBuffer::new(16);
        let mut source: &[u8] = b"get k\r\n";
        second.read_from(&mut source).unwrap();
        assert_eq!(second.data.as_ptr(), memory, "the spare was taken, not a new allocation");
        assert_eq!(second.pending(), b"get k\r\n");
    }

    #[test]
    fn a_short_read_is_drained() {
        let mut buffer = ReadBuffer::new(64);
        let mut source: &[u8] = b"abc";
        assert_eq!(buffer.read_from(&mut source).unwrap(), Filled::Bytes { drained: true });
        assert_eq!(buffer.read_from(&mut source).unwrap(), Filled::Eof);
    }
}
