//! memrelay: a memcached middleware that replicates writes, balances reads, shards multi-gets
//! and measures every request on its way through.
//!
//! Two engines (schedulers) over shared parts; `docs/ARCHITECTURE.md` draws both.
//!
//! ```text
//!  clients ─▶ client side ─▶ routing ─▶ engine (pool | evented) ─▶ memcached 1..S
//!     ▲       (accept, read,   (which      (threads, queues,          │
//!     │        parse, local     servers)    server connections)       │
//!     └──────── answers) ◀──── relay (reply rules, rewrites) ◀────────┘
//!                              measure (recorders ─▶ stats thread ─▶ files, `stats`)
//! ```
//!
//! - [`access`]: identities (memcached's ASCII authentication), access rules per identity and
//!   request limits, checked once per parsed request before routing, for both engines.
//! - [`settings`]: the typed settings everything runs with (the binary builds them from the
//!   command line; nothing in the library sees clap).
//! - `client`: the client side both engines share: listener, sessions, incremental parsing,
//!   local answers, flushing, closing.
//! - [`routing`]: pure routing, and the [`routing::ketama`] ring.
//! - [`servers`]: stable server ids; [`generation`]: the servers and routing in force;
//!   [`reload`]: SIGHUP puts a new configuration in force.
//! - `relay`: pure reply rules, request rewrites and the failover walk.
//! - `engine`: `pool` (net thread, FIFO queue, blocking workers: the seeds' design) and `evented`
//!   (event loops sharing non-blocking server connections), over one event-loop skeleton.
//! - [`measure`]: per-thread recorders, the stats thread, running totals.
//! - `startup`: start-up and stop shared by the engines, and [`Error`].
//! - `upstream_tls`: TLS to the servers (`--server-tls-ca`), for every connection to a server,
//!   both engines, the health probe and the repair thread.
//! - [`fuzzing`]: the client-side state machine and forwarding path over arbitrary bytes, for
//!   fuzz targets and property tests.

pub mod access;
mod buffer;
mod client;
mod descriptors;
mod engine;
pub mod export;
pub mod fuzzing;
pub mod generation;
mod log_limit;
pub mod measure;
pub mod memory;
pub mod own_files;
mod relay;
pub mod reload;
pub mod routing;
pub mod settings;
mod signals;
mod startup;
mod tls_files;
mod upkeep;
pub mod upstream;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub use client::tls::{certificate_identity, server_config as client_tls_config};
pub use export::https::server_config as metrics_tls_config;
pub use log_limit::{printable, shown};
pub use routing::ketama::{self, KeyHash};
pub use settings::{MetricsTls, ServerTlsSettings, Settings, TlsSettings, VERSION};
pub use signals::catch_from_start as catch_signals_from_start;
pub use startup::Error;
pub use upstream::tls::{client_config as server_tls_config, server_name as server_tls_name};

/// Everything a start checks of `settings` before it binds or starts anything: the servers make
/// a ring, the auth file and access rules can be used, the TLS files (to the servers, from
/// clients, of the metrics endpoint) load. `--check-config` runs this, so a configuration it
/// calls valid is one a start takes (short of the machine: a port in use).
pub fn validate(settings: &Settings) -> Result<(), Error> {
    let registry = upstream::registry::Registry::new(&[]);
    generation::Generation::build(settings, &registry, 1).map_err(Error::Routing)?;
    access::Policy::build(&settings.access, 1).map_err(Error::Access)?;
    upstream::tls::ServerTls::new(settings.server_tls_settings()).map_err(Error::ServerTls)?;
    if let Some(tls) = &settings.tls {
        client::tls::server_config(tls).map_err(Error::Access)?;
    }
    if let Some(tls) = &settings.measurement.metrics_tls {
        export::https::server_config(tls).map_err(Error::Access)?;
    }
    Ok(())
}

/// Runs the configured engine until SIGINT/SIGTERM, then returns after a clean stop.
pub fn run(settings: Settings) -> Result<(), Error> {
    run_reloading(settings, None)
}

/// [`run`], and on each SIGHUP reads the configuration again from `reload` and puts it in force
/// ([`reload`]).
pub fn run_reloading(mut settings: Settings, reload: Option<reload::Source>) -> Result<(), Error> {
    descriptors::fit(&mut settings).map_err(Error::Descriptors)?;
    if let Err(e) = memory::start_trimmer() {
        eprintln!("memrelay: warning: no memory trimmer thread ({e}): freed memory stays with the process");
    }
    let shutdown = Arc::new(AtomicBool::new(false));
    match settings.engine.kind {
        settings::Engine::Pool => engine::pool::run(settings, shutdown, reload),
        settings::Engine::Evented => engine::evented::run(settings, shutdown, reload),
    }
}
