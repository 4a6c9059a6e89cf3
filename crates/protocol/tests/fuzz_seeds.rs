//! The saved fuzz seeds (fuzz/seeds/<target>: inputs worth keeping, crashers included once fixed)
//! replay through what each fuzz target runs, on stable Rust, so CI needs no nightly; and the same
//! properties over arbitrary bytes with proptest.

use std::path::Path;

use memrelay_protocol::{parse_request, Expect, Limits, Parse, ReplyParser};
use proptest::prelude::*;

/// What the parse_request target checks: no panic; a complete request lies within the buffer.
fn parse_request_target(data: &[u8]) {
    match parse_request(data, &Limits::default()) {
        Parse::Complete(request) => assert!(request.consumed <= data.len() && request.data.end <= data.len()),
        Parse::Invalid(invalid) => assert!(invalid.skip > 0),
        Parse::Incomplete => {}
    }
}

/// What the parse_reply target checks: no panic; resuming over a growing buffer agrees with
/// parsing it whole.
fn parse_reply_target(data: &[u8]) {
    let Some((&selector, data)) = data.split_first() else { return };
    let expect = [Expect::Values, Expect::Line, Expect::Stats][usize::from(selector % 3)];
    let whole = ReplyParser::new(expect).parse(data);
    let mut resumed = ReplyParser::new(expect);
    let mut last = Parse::Incomplete;
    for end in 0..=data.len() {
        last = resumed.parse(&data[..end]);
        if !matches!(last, Parse::Incomplete) {
            break;
        }
    }
    if let (Parse::Complete(a), Parse::Complete(b)) = (&whole, &last) {
        assert_eq!(a.consumed, b.consumed);
        assert!(a.consumed <= data.len());
    }
}

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
