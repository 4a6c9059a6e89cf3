//! Log lines that clients can cause, bounded: at most one line a second per kind for the whole
//! process, the lines left out in between counted into the next one, so that a flood of bad
//! clients cannot flood the log.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};

/// The most characters of one message a log line shows (a 1 MB server name is cut).
pub const MAX_SHOWN: usize = 1024;

/// `text` safe to print as (part of) one log line: control characters (newline, carriage return,
/// ESC and the rest) escaped as Rust writes them (`\n`, `\u{1b}`), so no input can forge a
/// second line or drive the terminal; longer than [`MAX_SHOWN`] characters, cut (saying so).
pub fn printable(text: &str) -> Cow<'_, str> {
    shown(text, MAX_SHOWN)
}

/// [`printable`], cut at `max` characters (a value quoted inside a message).
pub fn shown(text: &str, max: usize) -> Cow<'_, str> {
    let long = text.chars().nth(max).is_some();
    if !long && !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len().min(max * 2));
    for c in text.chars().take(max) {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if long {
        out.push_str(&format!("… ({} bytes in all)", text.len()));
    }
    Cow::Owned(out)
}

/// One kind of line (a `static` where it is written).
pub struct OncePerSecond {
    last_second: AtomicU64,
    suppressed: AtomicU64,
}

impl OncePerSecond {
    pub const fn new() -> OncePerSecond {
        OncePerSecond { last_second: AtomicU64::new(0), suppressed: AtomicU64::new(0) }
    }

    /// `Some(n)` when a line may be written now, `n` lines having been left out since the last
    /// one; `None` (and this one counted) otherwise.
    pub fn admit(&self) -> Option<u64> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        self.admit_at(now)
    }

    fn admit_at(&self, second: u64) -> Option<u64> {
        let last = self.last_second.load(Ordering::Relaxed);
        if second == last
            || self.last_second.compare_exchange(last, second, Ordering::Relaxed, Ordering::Relaxed).is_err()
        {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some(self.suppressed.swap(0, Ordering::Relaxed))
    }
}

impl Default for OncePerSecond {
    fn default() -> Self {
        OncePerSecond::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_escapes_control_characters_and_cuts_long_text() {
        assert_eq!(printable("plain: words"), "plain: words");
        assert_eq!(printable("a\nreload: generation 99 in force"), "a\\nreload: generation 99 in force");
        assert_eq!(printable("\u{1b}[31mred\r\0"), "\\u{1b}[31mred\\r\\u{0}");
        let long = "n".repeat(1_000_000);
        let shown = printable(&long);
        assert!(shown.len() < 1100 && shown.ends_with("(1000000 bytes in all)"), "{shown}");
    }

    #[test]
    fn one_line_a_second_and_the_rest_counted_into_the_next() {
        let log = OncePerSecond::new();
        assert_eq!(log.admit_at(100), Some(0));
        assert_eq!(log.admit_at(100), None);
        assert_eq!(log.admit_at(100), None);
        assert_eq!(log.admit_at(101), Some(2));
        assert_eq!(log.admit_at(101), None);
    }
}
