//! Limits the request parser enforces, with memcached's defaults.

/// memcached's KEY_MAX_LENGTH.
pub const MAX_KEY_LEN: usize = 250;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest data block accepted in a storage command (memcached's default item size, 1 MiB).
    pub max_value_len: usize,
    /// Longest command line (without its data block). A line without a newline past this closes
    /// the connection. Large enough for a get of many long keys.
    pub max_line_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_value_len: 1024 * 1024, max_line_len: 64 * 1024 }
    }
}
