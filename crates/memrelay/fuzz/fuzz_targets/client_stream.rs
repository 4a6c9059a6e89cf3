//! A client's byte stream, in arbitrary chunks, through the client-side state machine, routing
//! and request composition: no panic, no hang, and every request bound for a server parses back
//! as exactly the request memrelay parsed (`memrelay::fuzzing::client_stream` checks).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    memrelay::fuzzing::client_stream(data);
});
