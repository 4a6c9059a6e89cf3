//! Feeds arbitrary bytes to the reply parser in arbitrary chunks: it must never panic, and
//! resuming over a growing buffer must give the same answer as parsing it whole.
#![no_main]
use libfuzzer_sys::fuzz_target;
use memrelay_protocol::{Expect, Parse, ReplyParser};

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let expect = match data[0] % 3 {
        0 => Expect::Values,
        1 => Expect::Line,
        _ => Expect::Stats,
    };
    let data = &data[1..];
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
    }
});
