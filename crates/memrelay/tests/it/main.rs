//! memrelay's integration tests, one binary: each module is what used to be a test binary of its
//! own (linking twenty was minutes of every `make test`), `common` the black-box harness they
//! share. An engine suite is a module's functions of the engine's name and one
//! `engine_matrix!(...)` call (see `common`), which runs each test once per engine as
//! `<module>::<engine>::<test>`.

#[macro_use]
mod common;

mod access;
mod client_compat;
mod clients;
mod config;
mod conformance;
mod descriptors;
mod differential_fuzz;
mod forwarding_grammar;
mod health;
mod isolation;
mod ketama_vs_twemproxy;
mod measurement;
mod metrics_hostile;
mod middleware;
mod policy;
mod pools;
mod reload;
mod replication;
mod server_tls;
mod sharing;
mod signals_at_start;
mod spool;
mod streaming;
mod tls;
mod tls_identity;
mod warming;
mod write_policy;
