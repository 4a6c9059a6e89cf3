//! Where a client's byte stream stands between requests, without I/O: the incremental-parse
//! state machine every request of either engine goes through. It discards what remains of a
//! refused data block, parses the next request, and remembers when the framing is lost (the
//! connection must then close).

use memrelay_protocol::{parse_request, ErrorReply, Limits, Parse, Request};

/// What the next bytes of a client hold.
#[derive(Debug)]
pub enum Next {
    /// Nothing whole yet: wait for more bytes.
    Wait,
    /// Bytes that cannot be a request: the client gets this reply (none for a `noreply` request,
    /// as memcached sends none).
    Invalid(Option<ErrorReply>),
    /// A whole request; its `consumed` bytes are still pending (the caller takes them).
    Request(Request),
}

#[derive(Debug, Default)]
pub struct Framing {
    /// Bytes still to discard (the data block of a value that was too large).
    skip: usize,
    /// The stream cannot be read as requests any more: answer, then close.
    pub lost: bool,
}

impl Framing {
    /// Looks at the start of `pending`: returns what it holds and how many bytes to consume now
    /// (skipped bytes and invalid input; a complete request's bytes are left to the caller).
    pub fn next(&mut self, pending: &[u8], limits: &Limits) -> (Next, usize) {
        if self.lost {
            return (Next::Wait, 0);
        }
        let mut consumed = 0;
        if self.skip > 0 {
            consumed = self.skip.min(pending.len());
            self.skip -= consumed;
            if self.skip > 0 {
                return (Next::Wait, consumed);
            }
        }
        let rest = &pending[consumed..];
        if rest.is_empty() {
            return (Next::Wait, consumed);
        }
        match parse_request(rest, limits) {
            Parse::Incomplete => (Next::Wait, consumed),
            Parse::Invalid(invalid) => {
                let n = invalid.skip.min(rest.len());
                self.skip = invalid.skip - n;
                self.lost = invalid.close;
                let reply = (!invalid.silent).then_some(invalid.reply);
                (Next::Invalid(reply), consumed + n)
            }
            Parse::Complete(request) => {
                // A refused value's data block follows the request's line: skip it as it comes.
                self.skip = request.too_large.unwrap_or(0);
                // The request's ranges index `pending` once the skipped bytes are consumed.
                (Next::Request(request), consumed)
            }
        }
    }
}
