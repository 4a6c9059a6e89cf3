//! A job: one client request on its way from the net thread through the queue to a worker and
//! back. Jobs are recycled by the net thread, so their buffers are allocated once.

use std::sync::Arc;
use std::time::Instant;

use memrelay_protocol::Request;
use mio::net::TcpStream;

use crate::measure::metrics::Timestamps;

pub(crate) struct Job {
    /// The client's slot in the net thread.
    pub client: usize,
    /// The client's socket, written directly by the worker (non-blocking).
    pub socket: Option<Arc<TcpStream>>,
    /// The request's bytes exactly as they arrived.
    pub input: Vec<u8>,
    /// The parsed request; its ranges index `input`.
    pub request: Option<Request>,
    /// The round-robin number the net thread assigned (seed 000 section 1.3).
    pub rr: usize,
    /// The most of a streamed reply the worker may hold for the client when its socket is full
    /// and others wait: what the client's byte budget leaves ([`crate::client::budget`]).
    pub room: usize,
    /// The reply to the client; `reply[written..]` is what the socket did not take.
    pub reply: Vec<u8>,
    pub written: usize,
    /// The reply streaming to the client was cut off: the client's connection must close (it
    /// has part of a reply and nothing can complete it).
    pub cut: bool,
    pub times: Timestamps,
}

/// A buffer larger than this is given back when its job is recycled (one large value must not
/// keep its memory with the job for ever).
const KEEP_CAPACITY: usize = 64 * 1024;

impl Job {
    pub fn new() -> Box<Job> {
        Box::new(Job {
            client: 0,
            socket: None,
            input: Vec::new(),
            request: None,
            rr: 0,
            room: 0,
            reply: Vec::new(),
            written: 0,
            cut: false,
            times: Timestamps::at(Instant::now()),
        })
    }

    /// Empties the job for reuse, keeping its buffers' capacity unless a large request or
    /// reply grew them.
    pub fn recycle(&mut self) {
        self.socket = None;
        crate::buffer::clear_and_trim(&mut self.input, KEEP_CAPACITY);
        self.request = None;
        crate::buffer::clear_and_trim(&mut self.reply, KEEP_CAPACITY);
        self.written = 0;
        self.cut = false;
    }
}
