//! Log lines that clients can cause, bounded: at most one line a second per kind for the whole
//! process, the lines left out in between counted into the next one, so that a flood of bad
//! clients cannot flood the log.

use std::sync::atomic::{AtomicU64, Ordering};

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
    fn one_line_a_second_and_the_rest_counted_into_the_next() {
        let log = OncePerSecond::new();
        assert_eq!(log.admit_at(100), Some(0));
        assert_eq!(log.admit_at(100), None);
        assert_eq!(log.admit_at(100), None);
        assert_eq!(log.admit_at(101), Some(2));
        assert_eq!(log.admit_at(101), None);
    }
}
