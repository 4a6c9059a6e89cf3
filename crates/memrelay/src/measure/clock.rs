//! The window clock every measuring thread shares.

use std::time::{Duration, Instant};

/// The window clock every thread shares, so that window k means the same span everywhere.
#[derive(Debug, Clone, Copy)]
pub struct WindowClock {
    pub start: Instant,
    pub length: Duration,
}

impl WindowClock {
    pub fn index(&self, at: Instant) -> u64 {
        (at.saturating_duration_since(self.start).as_nanos() / self.length.as_nanos().max(1)) as u64
    }
    pub fn end_of(&self, index: u64) -> Instant {
        self.start + self.length * (index as u32 + 1)
    }
}
