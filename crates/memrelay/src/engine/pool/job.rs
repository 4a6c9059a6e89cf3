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
    /// The reply to the client; `reply[written..]` is what the socket did not take.
    pub reply: Vec<u8>,
    pub written: usize,
    pub times: Timestamps,
}

impl Job {
    pub fn new() -> Box<Job> {
        Box::new(Job {
            client: 0,
            socket: None,
            input: Vec::new(),
            request: None,
            rr: 0,
            reply: Vec::new(),
            written: 0,
            times: Timestamps::at(Instant::now()),
        })
    }

    /// Empties the job for reuse, keeping its buffers' capacity.
    pub fn recycle(&mut self) {
        self.socket = None;
        self.input.clear();
        self.request = None;
        self.reply.clear();
        self.written = 0;
    }
}
