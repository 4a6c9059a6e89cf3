//! The identity read from a client certificate (subject CN, else a DNS/e-mail/URI name) over
//! arbitrary bytes as DER: no panic, and only names an access rule could name
//! (`memrelay::fuzzing::client_certificate` checks).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    memrelay::fuzzing::client_certificate(data);
});
