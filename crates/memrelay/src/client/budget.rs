//! The byte budget per client, for both engines: every byte memrelay holds for a client counts
//! against that client (replies waiting for its socket, the parts of a merge, replies of its
//! requests in flight). Past its budget memrelay reads none of the client's requests until it
//! takes its replies; past the budget and one value more, the client is cut off (its connection
//! closed, the rest of its replies read and dropped), so that memory for N clients that never
//! read is at most N × (budget + one value), and a shared server connection never waits for one.
//!
//! The counters are process-wide (`stats` and `/metrics` read them): times a client's reading
//! stopped at its budget, clients cut off, and the bytes held for clients now.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::relay::stream::HOLD_LIMIT;

/// One client's budget as configured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    /// `--client-budget-bytes`: past it the client's requests wait unread.
    limit: usize,
    /// One reply more (`--max-value-size`, at most what a held reply may be, and the reply's
    /// header and end around it): past the limit and this, the client is cut off.
    allowance: usize,
}

/// What a reply adds around its value: the `VALUE` line (a 250-byte key, flags, length, cas) and
/// the `END` after it, rounded up.
const REPLY_FRAMING: usize = 512;

impl Budget {
    pub fn new(limit: usize, max_value_len: usize) -> Budget {
        Budget { limit, allowance: max_value_len.min(HOLD_LIMIT) + REPLY_FRAMING }
    }

    /// `--client-budget-bytes`.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// What a client holding `held` may still be made to hold before it is cut off.
    pub fn room(&self, held: usize) -> usize {
        self.limit.saturating_add(self.allowance).saturating_sub(held)
    }

    /// The client holds more than its budget: none of its requests is read.
    pub fn spent(&self, held: usize) -> bool {
        held > self.limit
    }

    /// The client holds more than its budget and one value: it is cut off.
    pub fn exceeded(&self, held: usize) -> bool {
        held > self.limit.saturating_add(self.allowance)
    }
}

static PAUSES: AtomicU64 = AtomicU64::new(0);
static CUT_OFF: AtomicU64 = AtomicU64::new(0);
static HELD: AtomicI64 = AtomicI64::new(0);

/// A client's reading stopped at its budget, or a server connection paused for a client past it
/// (counted once each time).
pub(crate) fn count_pause() {
    PAUSES.fetch_add(1, Ordering::Relaxed);
}

/// A client was cut off for holding more than its budget and one value.
pub(crate) fn count_cut_off() {
    CUT_OFF.fetch_add(1, Ordering::Relaxed);
}

/// Times a client's reading stopped at its budget, or a connection paused for a client past it,
/// since start (`client_budget_pauses`).
pub fn pauses() -> u64 {
    PAUSES.load(Ordering::Relaxed)
}

/// Clients cut off for their budget, since start (`clients_cut_off`).
pub fn cut_off() -> u64 {
    CUT_OFF.load(Ordering::Relaxed)
}

/// Bytes held for clients now, as the threads last published them (`client_bytes_held`).
pub fn held() -> u64 {
    HELD.load(Ordering::Relaxed).max(0) as u64
}

/// One thread's share of [`held`]: it publishes its total when it changed (once a loop turn,
/// not once a reply: no shared cache line on the hot path).
#[derive(Default)]
pub(crate) struct HeldGauge {
    published: usize,
}

impl HeldGauge {
    pub fn publish(&mut self, total: usize) {
        if total != self.published {
            HELD.fetch_add(total as i64 - self.published as i64, Ordering::Relaxed);
            self.published = total;
        }
    }
}

impl Drop for HeldGauge {
    fn drop(&mut self) {
        self.publish(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_stops_reading_past_its_limit_and_cuts_off_past_one_value_more() {
        let budget = Budget::new(4 << 20, 1 << 20);
        assert!(!budget.spent(4 << 20));
        assert!(budget.spent((4 << 20) + 1));
        // A reply of the largest value, with its VALUE line and END, still fits after the limit.
        let reply = format!("VALUE {} 4294967295 1048576 18446744073709551615\r\n", "k".repeat(250)).len()
            + (1 << 20)
            + "\r\nEND\r\n".len();
        assert!(!budget.exceeded((4 << 20) + reply));
        assert!(budget.exceeded((5 << 20) + REPLY_FRAMING + 1));
        // A value larger than a held reply may be counts as a held reply's most.
        let huge = Budget::new(1, usize::MAX);
        assert!(!huge.exceeded(1 + HOLD_LIMIT + REPLY_FRAMING));
        assert!(huge.exceeded(2 + HOLD_LIMIT + REPLY_FRAMING));
    }

    #[test]
    fn a_gauge_publishes_what_changed_and_takes_its_share_back() {
        let before = HELD.load(Ordering::Relaxed);
        let mut gauge = HeldGauge::default();
        gauge.publish(100);
        gauge.publish(40);
        assert_eq!(HELD.load(Ordering::Relaxed) - before, 40);
        drop(gauge);
        assert_eq!(HELD.load(Ordering::Relaxed), before);
    }
}
