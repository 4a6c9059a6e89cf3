//! Arbitrary bytes as a stream of requests (see `memrelay_protocol::fuzzing::request_stream`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    memrelay_protocol::fuzzing::request_stream(data);
});
