//! Where a client's byte stream stands between requests, without I/O: the incremental-parse
//! state machine every request of either engine goes through. It discards what remains of a
//! refused data block, parses the next request, and remembers when the framing is lost (the
//! connection must then close). A connection that opens with a binary-protocol request is
//! answered a binary "not supported" response and closed ([`memrelay_protocol::binary`]).

use memrelay_protocol::{binary, parse_request, ErrorReply, Limits, Parse, Request};

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
    /// Something was read already: the protocol is the text one (memcached decides on the
    /// connection's first byte too).
    started: bool,
}

impl Framing {
    /// Whether the connection's first bytes have been read (its protocol is decided).
    pub fn started(&self) -> bool {
        self.started
    }

    /// Marks the protocol decided: the text one (a login was read before any request).
    pub fn start(&mut self) {
        self.started = true;
    }

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
        if !self.started && binary::starts_binary(rest) {
            let Some((opcode, opaque)) = binary::request_header(rest) else { return (Next::Wait, consumed) };
            self.lost = true;
            return (Next::Invalid(Some(ErrorReply::Binary { opcode, opaque })), consumed + rest.len());
        }
        self.started = true;
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
