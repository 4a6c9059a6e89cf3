//! The memcached ASCII protocol, without I/O.
//!
//! Everything here is a pure function over byte slices, shared by the middleware and the load
//! generator:
//! - [`request`]: incremental parsing of client requests (`Complete` / `Incomplete` / `Invalid`),
//!   keys and values kept as ranges into the caller's buffer so nothing is copied or allocated;
//!   one file per command family.
//! - [`reply`]: incremental, resumable parsing of server replies (`VALUE … END`, status lines,
//!   `STAT … END`).
//! - [`reply_stream`]: a reply forwarded as it arrives (values of any length, bounded buffers).
//! - [`compose`]: writing requests and replies into a caller-owned `Vec<u8>`.
//! - [`limits`]: the limits the parser enforces (key length, value size, line length).
//!
//! The split of `Incomplete` (wait for more bytes) from `Invalid` (tell the client, then resync or
//! close) follows mini-redis; limits enforced in the parser follow pelikan.

pub mod binary;
pub mod compose;
pub mod fuzzing;
mod lexer;
pub mod limits;
pub mod reply;
pub mod reply_stream;
pub mod request;

pub use limits::Limits;
pub use reply::{value_block, Expect, Reply, ReplyError, ReplyParser, Status};
pub use reply_stream::{Ahead, ReplyStream, Streamed};
pub use request::{declared_len, parse_request, Command, ErrorReply, Invalid, Request};

pub(crate) use lexer::{find_newline, parse_u64, read_i32, read_u32, read_u64, tokens, trim_cr};

/// A number token read as memcached's `safe_strtoul` reads it (for callers that must read a
/// line as memcached does outside the request parser, such as its ASCII authentication).
pub fn safe_strtoul(token: &[u8]) -> Option<u32> {
    read_u32(token)
}

/// The outcome of parsing from the start of a buffer: for requests the error is [`Invalid`]
/// (what to answer the client and how to recover), for server replies [`ReplyError`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parse<T, E = Invalid> {
    /// A whole message, `consumed` bytes long (the value carries its own length).
    Complete(T),
    /// The buffer holds the start of a message only: read more and call again.
    Incomplete,
    /// The bytes cannot be a message.
    Invalid(E),
}
