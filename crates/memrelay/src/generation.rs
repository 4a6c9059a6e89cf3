//! The configuration in force, as one **generation**: which servers (by stable id,
//! [`crate::upstream::registry`]), how requests are routed to them, how long a server may take. A reload
//! (`reload`) builds a new generation and publishes it whole. Each engine thread keeps
//! the generation it works under and, before it routes a request, compares its number with the
//! published one (one relaxed atomic load); it picks up a new one there. So a request is routed,
//! timed and failed over under one generation from start to end, and requests in flight when a
//! reload lands finish under the one they started with.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::routing::Router;
use crate::settings::{Endpoint, Settings};
use crate::upstream::registry::Registry;

#[derive(Debug)]
pub struct Generation {
    /// 1 at start, one more per reload applied.
    pub number: u64,
    /// The ids of the servers in force, every pool's, in the configuration's order.
    pub servers: Vec<usize>,
    pub router: Router,
    pub server_timeout: Duration,
    /// Whether a failed read of some pool is retried on another replica (the key's pool says
    /// whether its reads are: [`Router::fails_over`]).
    pub failover: bool,
}

impl Generation {
    /// The generation `settings` describe; servers get their ids from `registry`. Nothing is
    /// registered when the error says why the servers do not make a ring.
    pub fn build(settings: &Settings, registry: &Registry, number: u64) -> Result<Generation, String> {
        // The rings and routes are checked before ids are handed out, so an invalid file leaves
        // no trace.
        let all: Vec<Endpoint> = settings.all_servers().cloned().collect();
        Router::build(settings, &(0..all.len()).collect::<Vec<_>>())?;
        let servers = registry.ids_for(&all)?;
        let router = Router::build(settings, &servers)?;
        Ok(Generation {
            number,
            servers,
            router,
            server_timeout: settings.server_timeout,
            failover: settings.routing.fails_over() || settings.pools.iter().any(|p| p.routing.fails_over()),
        })
    }
}

/// The generation in force, shared by every thread.
#[derive(Debug)]
pub struct Current {
    number: AtomicU64,
    generation: RwLock<Arc<Generation>>,
}

impl Current {
    pub fn new(first: Generation) -> Current {
        Current { number: AtomicU64::new(first.number), generation: RwLock::new(Arc::new(first)) }
    }

    /// The number of the generation in force.
    pub fn number(&self) -> u64 {
        self.number.load(Ordering::Acquire)
    }

    pub fn get(&self) -> Arc<Generation> {
        Arc::clone(&self.generation.read().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    /// Puts `next` in force for every request routed from now on.
    pub fn publish(&self, next: Generation) {
        let number = next.number;
        *self.generation.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(next);
        self.number.store(number, Ordering::Release);
    }

    /// Replaces `mine` with the generation in force if that is a newer one; says whether it did.
    #[inline]
    pub fn refresh(&self, mine: &mut Arc<Generation>) -> bool {
        if self.number.load(Ordering::Relaxed) == mine.number {
            return false;
        }
        *mine = self.get();
        true
    }
}
