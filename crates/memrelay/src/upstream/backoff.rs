//! The one doubling backoff every retry of a server uses: a connection that failed (pool or
//! evented) and the health probe of a server that is down. After a failure the next try waits
//! `first`, then twice as long after each further failure, up to `max`; a success starts over.

use std::time::{Duration, Instant};

/// A reconnecting connection's: 50 ms, doubling up to 1 s.
pub(crate) const RECONNECT: (Duration, Duration) = (Duration::from_millis(50), Duration::from_secs(1));

#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    first: Duration,
    max: Duration,
    /// The wait after the next failure.
    next: Duration,
    /// No try before this (after a failure).
    retry_at: Option<Instant>,
    /// The server's count of downs when last looked at ([`Backoff::note_downs`]).
    downs: u64,
}

impl Backoff {
    pub fn new((first, max): (Duration, Duration)) -> Backoff {
        Backoff { first, max, next: first, retry_at: None, downs: 0 }
    }

    /// A try failed at `now`: the next waits, each wait twice the last up to the ceiling.
    pub fn failed(&mut self, now: Instant) {
        self.retry_at = Some(now + self.next);
        self.next = (self.next * 2).min(self.max);
    }

    /// A try succeeded: the next failure waits `first` again.
    pub fn succeeded(&mut self) {
        self.retry_at = None;
        self.next = self.first;
    }

    /// `downs` is the server's count of downs (health): when it moved since the last look, the
    /// server went down and a probe brought it back since, so the wait is over (else a request
    /// in the rest of the wait would fail again and count against a server just found healthy).
    pub fn note_downs(&mut self, downs: u64) {
        if downs != self.downs {
            self.downs = downs;
            self.succeeded();
        }
    }

    /// Whether a try now must still wait.
    pub fn waiting(&self, now: Instant) -> bool {
        self.retry_at.is_some_and(|at| now < at)
    }

    /// When the next try may start (`None`: at once).
    pub fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_ceiling_and_a_success_starts_over() {
        let ms = Duration::from_millis;
        let mut backoff = Backoff::new((ms(50), ms(300)));
        let t = Instant::now();
        assert!(!backoff.waiting(t));
        let waits: Vec<Duration> = (0..5)
            .map(|_| {
                backoff.failed(t);
                backoff.retry_at().unwrap() - t
            })
            .collect();
        assert_eq!(waits, [ms(50), ms(100), ms(200), ms(300), ms(300)]);
        assert!(backoff.waiting(t + ms(299)) && !backoff.waiting(t + ms(300)));
        backoff.succeeded();
        assert!(!backoff.waiting(t));
        backoff.failed(t);
        assert_eq!(backoff.retry_at(), Some(t + ms(50)));
        // The server went down and came back through a probe: the wait is over.
        backoff.failed(t);
        backoff.note_downs(0);
        assert!(backoff.waiting(t), "no change, no effect");
        backoff.note_downs(1);
        assert!(!backoff.waiting(t));
    }
}
