//! memrelay-protocol's integration tests, one binary: each module is what used to be a test binary
//! of its own.

mod fuzz_seeds;
mod request_parsing;
