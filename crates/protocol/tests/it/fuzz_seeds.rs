//! The saved fuzz seeds (fuzz/seeds/<target>: inputs worth keeping, crashers included once fixed)
//! replay through what each fuzz target runs, on stable Rust, so CI needs no nightly; and the same
//! properties over arbitrary bytes with proptest.

use std::path::Path;

use memrelay_protocol::fuzzing::{reply as parse_reply_target, request_stream as parse_request_target};
use proptest::prelude::*;

fn replay(target: &str, run: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds").join(target);
    let mut replayed = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        run(&std::fs::read(entry.unwrap().path()).unwrap());
        replayed += 1;
    }
    assert!(replayed > 0, "no seeds in {}", dir.display());
}

#[test]
fn parse_request_seeds() {
    replay("parse_request", parse_request_target);
}

#[test]
fn parse_reply_seeds() {
    replay("parse_reply", parse_reply_target);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn requests_never_panic(data in prop::collection::vec(any::<u8>(), 0..600)) {
        parse_request_target(&data);
    }

    #[test]
    fn replies_never_panic(data in prop::collection::vec(any::<u8>(), 0..300)) {
        parse_reply_target(&data);
    }

    #[test]
    fn value_headers_with_any_numbers_never_panic(n in any::<u64>(), flags in any::<u64>(), cas in any::<u64>()) {
        parse_reply_target(format!("\x00VALUE k {flags} {n} {cas}\r\nabc\r\nEND\r\n").as_bytes());
        parse_reply_target(format!("\x00VALUE k {flags} {n}\r\n").as_bytes());
    }
}
