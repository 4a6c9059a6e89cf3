//! Running totals shared between threads: request totals the stats thread publishes as windows
//! arrive (so they lag by at most one window), and connection counts every client side updates.
//! The `stats` command reads them.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::measure::metrics::Window;

/// Request totals so far, published by the stats thread.
pub struct LiveTotals {
    totals: Mutex<Window>,
    /// Connections in memrelay: shared so the evented engine's threads can count too.
    pub current_connections: AtomicU64,
    pub total_connections: AtomicU64,
    pub client_errors: AtomicU64,
}

impl LiveTotals {
    pub fn new(servers: usize) -> Arc<LiveTotals> {
        Arc::new(LiveTotals {
            totals: Mutex::new(Window::new(servers)),
            current_connections: AtomicU64::new(0),
            total_connections: AtomicU64::new(0),
            client_errors: AtomicU64::new(0),
        })
    }

    pub fn add(&self, window: &Window) {
        if let Ok(mut totals) = self.totals.lock() {
            totals.add(window);
        }
    }
}

impl LiveTotals {
    /// The request totals so far (`None` if a thread panicked while holding them).
    pub fn totals(&self) -> Option<MutexGuard<'_, Window>> {
        self.totals.lock().ok()
    }
}
