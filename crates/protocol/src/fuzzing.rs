//! What the fuzz targets check, callable from stable tests too (the saved seeds and proptests
//! replay through these same functions, so CI needs no nightly).

use crate::{parse_request, Expect, Limits, Parse, ReplyParser};

/// Parses `data` as a stream of requests: no panic, everything reported consumed lies inside the
/// buffer, and the walk ends.
pub fn request_stream(data: &[u8]) {
    let limits = Limits { max_value_len: 4096, max_line_len: 1024, max_get_line_len: 4096 };
    let mut offset = 0;
    while offset < data.len() {
        match parse_request(&data[offset..], &limits) {
            Parse::Complete(request) => {
                assert!(request.consumed > 0 && request.consumed <= data.len() - offset);
                assert!(request.data.end <= request.consumed);
                offset += request.consumed;
            }
            Parse::Invalid(invalid) => {
                assert!(invalid.skip > 0);
                if invalid.close {
                    break;
                }
                offset = offset.saturating_add(invalid.skip);
            }
            Parse::Incomplete => break,
        }
    }
}

/// Parses `data[1..]` as a reply of the shape `data[0]` picks: no panic, and resuming over a
/// growing buffer agrees with parsing it whole.
pub fn reply(data: &[u8]) {
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
