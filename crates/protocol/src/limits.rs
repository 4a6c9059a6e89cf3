//! Limits the request parser enforces, with memcached's defaults.

/// memcached's KEY_MAX_LENGTH.
pub const MAX_KEY_LEN: usize = 250;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest data block accepted in a storage command (memcached's default item size, 1 MiB).
    pub max_value_len: usize,
    /// Longest command line (without its data block) but for `get`/`gets`: memcached's own bound
    /// (it closes a connection whose line runs past 2048 bytes without a newline). A longer line
    /// is refused and the connection closed; memrelay never sends a server a line it may refuse.
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
        self.max_get_line_len.max(self.max_line_len.saturating_add(self.max_value_len).saturating_add(2))
    }
}
