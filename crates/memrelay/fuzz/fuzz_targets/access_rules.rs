//! The auth file, access-rule and login parsers over arbitrary bytes (an auth file, a rule and a
//! client's bytes, separated by lines `--`): no panic, listed users log in and others do not, a
//! rule reads back as itself (`memrelay::fuzzing::access_rules` checks).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    memrelay::fuzzing::access_rules(data);
});
