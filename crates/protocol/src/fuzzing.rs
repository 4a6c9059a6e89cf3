//! What the fuzz targets check, callable from stable tests too (the saved seeds and proptests
//! replay through these same functions, so CI needs no nightly).

use crate::{parse_request, Expect, Limits, Parse, ReplyParser, ReplyStream, Streamed};

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
    let expect =
        [Expect::Values, Expect::Line, Expect::Stats, Expect::Meta, Expect::QuietMeta][usize::from(selector % 5)];
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
    reply_stream(expect, data);
}

/// Streams `data` ([`ReplyStream`], arriving a byte at a time): no panic, and where the parser
/// takes the whole reply the stream forwards exactly its answer and ends as it does.
pub fn reply_stream(expect: Expect, data: &[u8]) {
    let mut stream = ReplyStream::new(expect, usize::MAX - 1024);
    let (mut at, mut fed, mut forwarded) = (0, 0, Vec::new());
    let end = loop {
        match stream.next(&data[at..fed]) {
            Streamed::Forward(n) => {
                assert!(n > 0 && at + n <= fed);
                forwarded.extend_from_slice(&data[at..at + n]);
                at += n;
            }
            Streamed::Drop(n) => {
                assert!(n > 0 && at + n <= fed);
                at += n;
            }
            Streamed::Incomplete if fed < data.len() => fed += 1,
            end => break end,
        }
    };
    if let Parse::Complete(reply) = ReplyParser::new(expect).parse(data) {
        assert_eq!(end, Streamed::Complete { status: reply.status, items: reply.items });
        assert_eq!(forwarded, &data[..reply.answer_len()]);
    }
}
