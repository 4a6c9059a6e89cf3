//! memrelay: the middleware library (the binary in main.rs is a thin shell around it).

pub mod ketama;
