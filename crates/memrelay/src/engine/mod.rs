//! The two schedulers over the shared parts. Each is only how requests are scheduled onto
//! threads and server connections; the client side ([`crate::client`]), routing
//! ([`crate::routing`]), the reply rules ([`crate::relay`]) and measurement ([`crate::measure`])
//! are the same for both.
//!
//! - [`pool`]: the seeds' design: one net thread, a FIFO queue, W workers with blocking
//!   connections (the one the lab's queueing models study).
//! - [`evented`]: K event-loop threads, each with non-blocking server connections shared by its
//!   clients (the faster one).
//! - [`event_loop`]: the mio loop skeleton both run.

pub(crate) mod event_loop;
pub(crate) mod evented;
pub(crate) mod pool;
