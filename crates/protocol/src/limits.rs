//! Limits the request parser enforces, with memcached's defaults.

/// memcached's KEY_MAX_LENGTH.
pub const MAX_KEY_LEN: usize = 250;

/// memcached 1.6's read buffer (`READ_BUFFER_SIZE`): a command line whose newline is in it is
/// served whatever its length (a `gat` with 300 keys, a long `mg` opaque answered `CLIENT_ERROR
/// opaque token too long`). A longer line, but for `get`/`gets`, never fits: memcached closes the
/// connection, and so does memrelay.
pub const MAX_WHOLE_LINE_LEN: usize = 16384;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest data block accepted in a storage command (memcached's default item size, 1 MiB).
    pub max_value_len: usize,
    /// Most bytes of a command line (but for `get`/`gets`) without its newline: memcached's own
    /// bound (it closes a connection whose line runs past 2048 bytes with no newline read). A
    /// line whose newline has arrived may be longer, up to [`MAX_WHOLE_LINE_LEN`] (or this, if
    /// larger), as memcached reads it; past that the connection is closed.
    pub max_line_len: usize,
    /// Longest `get`/`gets` line: memcached reads these whatever their length, so this only
    /// bounds what one client can make memrelay buffer (1,000 keys of 250 bytes fit 30 times).
    pub max_get_line_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_value_len: 1024 * 1024, max_line_len: 2048, max_get_line_len: 8 * 1024 * 1024 }
    }
}

impl Limits {
    /// The most bytes one request can take before the parser decides: a reader that buffers up
    /// to this much never waits for a request it can no longer read.
    pub fn max_request_len(&self) -> usize {
        let line = self.max_line_len.max(MAX_WHOLE_LINE_LEN);
        self.max_get_line_len.max(line.saturating_add(self.max_value_len).saturating_add(2))
    }
}
