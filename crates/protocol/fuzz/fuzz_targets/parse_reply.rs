//! Arbitrary bytes as a server reply, whole and resumed (see `memrelay_protocol::fuzzing::reply`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    memrelay_protocol::fuzzing::reply(data);
});
