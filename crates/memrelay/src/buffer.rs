//! A read buffer for sockets: `data[start..end]` holds bytes read and not yet consumed.
//!
//! The room after `end` stays allocated between reads and is never zeroed again (a plain
//! `Vec::resize` before each read would memset the whole read chunk every time); consumed bytes
//! are reclaimed by moving the unread tail to the front only when room runs out.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::time::Instant;

/// Spare buffers per thread: what idle connections' read buffers and finished requests' large
/// buffers gave back, for the next ones to use (memcached keeps its read buffers in a
/// per-thread cache the same way). Reusing them spares the allocator's fresh pages (a page
/// fault and zeroing per 4 KiB) and a cold cache for every large value. Two sizes, so that
/// small read buffers never push the large ones out: at most 8 of up to 16 KiB and 8 of up to
/// 1 MiB per thread (8.1 MiB); an event loop gives its large ones back once idle
/// ([`release_large_spares`]).
const SMALL: Spares = Spares { min_len: 256, max_len: 16 * 1024, count: 8 };
const LARGE: Spares = Spares { min_len: 16 * 1024 + 1, max_len: 1024 * 1024, count: 8 };

struct Spares {
    min_len: usize,
    max_len: usize,
    count: usize,
}

thread_local! {
    /// Each keeps its length: the bytes it had initialized (a read buffer's are all of it).
    static SPARE: std::cell::RefCell<[Vec<Vec<u8>>; 2]> = const { std::cell::RefCell::new([Vec::new(), Vec::new()]) };
    /// Only an event loop keeps large spares (it frees them once idle); a pool worker does not.
    static KEEPS_LARGE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// This thread (an event loop) keeps large spares until [`release_large_spares`].
pub fn keep_large_spares() {
    KEEPS_LARGE.with(|keeps| keeps.set(true));
}

/// Keeps `buffer`'s memory among this thread's spares, or frees it (too small, too large, or
/// the spares of its size are full).
pub fn recycle(buffer: Vec<u8>) {
    let capacity = buffer.capacity();
    for (class, limits) in [SMALL, LARGE].iter().enumerate() {
        if class == 1 && !KEEPS_LARGE.with(std::cell::Cell::get) {
            return;
        }
        if (limits.min_len..=limits.max_len).contains(&capacity) {
            SPARE.with(|spare| {
                let spare = &mut spare.borrow_mut()[class];
                if spare.len() < limits.count {
                    spare.push(buffer);
                }
            });
            return;
        }
    }
}

/// Frees this thread's large spares (its loop went idle: a burst of large values does not keep
/// their memory).
pub fn release_large_spares() {
    SPARE.with(|spare| spare.borrow_mut()[1] = Vec::new());
}

/// A spare of this thread with room for `len` bytes (as it was given back), if there is one.
fn spare(len: usize) -> Option<Vec<u8>> {
    SPARE.with(|spare| {
        let spare = &mut spare.borrow_mut()[usize::from(len > SMALL.max_len)];
        let at = spare.iter().position(|b| b.capacity() >= len)?;
        Some(spare.swap_remove(at))
    })
}

/// An empty buffer with room for `len` bytes: a spare when this thread has one, else new.
pub fn with_capacity(len: usize) -> Vec<u8> {
    if len < SMALL.min_len {
        return Vec::with_capacity(len);
    }
    match spare(len) {
        Some(mut buffer) => {
            buffer.clear();
            buffer
        }
        None => Vec::with_capacity(len),
    }
}

/// Makes room in `buffer` for `more` bytes after what it holds; a buffer that must grow moves to
/// a spare (or new) one of the size needed at once, not doubling through the allocator's copies.
pub fn reserve(buffer: &mut Vec<u8>, more: usize) {
    let needed = buffer.len() + more;
    if needed <= buffer.capacity() {
        return;
    }
    let mut grown = with_capacity(needed.max(buffer.capacity() * 2));
    grown.extend_from_slice(buffer);
    recycle(std::mem::replace(buffer, grown));
}

/// A message at least this long is taken out of a buffer whole ([`ReadBuffer::take`]).
const TAKE_WHOLE: usize = 64 * 1024;

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

    /// Free room after the pending bytes.
    pub fn room(&self) -> usize {
        self.data.len() - self.end
    }

    /// The least room offered to a read.
    pub fn chunk(&self) -> usize {
        self.chunk
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

    /// Moves the first `n` pending bytes into `into` (replacing what it held) and consumes
    /// them. A long message at the front of the buffer is not copied: the buffer itself becomes
    /// `into`, and what followed the message moves to a fresh (or spare) one.
    pub fn take(&mut self, n: usize, into: &mut Vec<u8>) {
        debug_assert!(n <= self.len());
        if n < TAKE_WHOLE || self.start != 0 {
            into.clear();
            reserve(into, n);
            into.extend_from_slice(&self.pending()[..n]);
            self.consume(n);
            return;
        }
        let rest = self.len() - n;
        let mut data = Self::take_spare(self.chunk.max(rest));
        data[..rest].copy_from_slice(&self.data[n..self.end]);
        let mut message = std::mem::replace(&mut self.data, data);
        message.truncate(n);
        recycle(std::mem::replace(into, message));
        self.start = 0;
        self.end = rest;
    }

    pub fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }

    /// Makes room for a message of `total` bytes starting at the first pending byte, at once
    /// (rather than doubling read by read).
    pub fn reserve(&mut self, total: usize) {
        // With a chunk of room after it: the read that finds the socket empty once the message
        // is in needs no larger buffer.
        let total = total.saturating_add(self.chunk);
        if self.data.len() - self.start >= total {
            return;
        }
        self.move_to(total);
    }

    /// Gives the memory of an empty buffer back if a long message grew it past its chunk.
    pub fn trim(&mut self) {
        if self.is_empty() && self.data.len() > self.chunk {
            recycle(std::mem::take(&mut self.data));
        }
    }

    /// Gives all the memory of an empty buffer back (an idle connection holds none): to this
    /// thread's few spare buffers ([`SPARE`]), where the next connection to read takes it
    /// without allocating or zeroing again, or to the allocator.
    pub fn release(&mut self) {
        if !self.is_empty() || self.data.is_empty() {
            return;
        }
        recycle(std::mem::take(&mut self.data));
    }

    /// A spare buffer of at least `len` bytes if this thread has one, else a new one; all of it
    /// initialized (a spare's tail only if it had not been).
    fn take_spare(len: usize) -> Vec<u8> {
        match spare(len) {
            Some(mut data) => {
                let initialized = data.len().max(len);
                data.resize(initialized, 0);
                data
            }
            None => vec![0; len],
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
            self.move_to((self.data.len() * 2).max(self.end + self.chunk));
        }
    }

    /// Moves the pending bytes to the front of a buffer of at least `len` bytes (a spare when
    /// this thread has one: no fresh pages), giving the old one back.
    fn move_to(&mut self, len: usize) {
        let mut data = Self::take_spare(len);
        let pending = self.len();
        data[..pending].copy_from_slice(self.pending());
        recycle(std::mem::replace(&mut self.data, data));
        self.start = 0;
        self.end = pending;
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

/// As [`clear_and_trim`], giving the memory to this thread's spares ([`recycle`]): for an event
/// loop, whose next large value likely needs as much.
pub fn clear_and_recycle(buffer: &mut Vec<u8>, keep: usize) {
    if buffer.capacity() > keep {
        recycle(std::mem::take(buffer));
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
    fn a_long_message_is_taken_without_a_copy_and_what_follows_stays() {
        let message: Vec<u8> = (0..TAKE_WHOLE + 10).map(|i| i as u8).collect();
        let mut source = message.clone();
        source.extend_from_slice(b"get k\r\n");
        let mut buffer = ReadBuffer::new(16);
        buffer.reserve(source.len());
        let mut reader: &[u8] = &source;
        while buffer.len() < source.len() {
            buffer.read_from(&mut reader).unwrap();
        }
        let memory = buffer.data.as_ptr();
        let mut into = b"old".to_vec();
        buffer.take(message.len(), &mut into);
        assert_eq!(into, message);
        assert_eq!(into.as_ptr(), memory, "the buffer became the message");
        assert_eq!(buffer.pending(), b"get k\r\n");
        // A short one is copied.
        buffer.take(3, &mut into);
        assert_eq!(into, b"get");
        assert_eq!(buffer.pending(), b" k\r\n");
    }

    #[test]
    fn large_spares_are_kept_by_an_event_loop_only_and_go_when_it_is_idle() {
        let large = |n: usize| -> Vec<u8> { Vec::with_capacity(n) };
        std::thread::spawn(move || {
            recycle(large(100_000));
            assert!(spare(100_000).is_none(), "a thread that is no loop keeps no large spare");
            keep_large_spares();
            for _ in 0..LARGE.count + 3 {
                recycle(large(100_000));
            }
            recycle(large(LARGE.max_len + 1));
            let kept = SPARE.with(|spare| spare.borrow()[1].len());
            assert_eq!(kept, LARGE.count, "at most this many, none over the longest kept");
            assert!(with_capacity(50_000).capacity() >= 100_000, "a spare serves a smaller need");
            release_large_spares();
            assert!(SPARE.with(|spare| spare.borrow()[1].is_empty()));
        })
        .join()
        .unwrap();
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
