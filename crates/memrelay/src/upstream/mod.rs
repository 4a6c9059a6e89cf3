//! Everything about a server, in one place: its retry backoff ([`backoff`]).
pub(crate) mod backoff;
