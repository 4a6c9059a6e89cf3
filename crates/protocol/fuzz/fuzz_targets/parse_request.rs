//! Feeds arbitrary bytes to the request parser: it must never panic, and what it reports as
//! consumed must lie inside the buffer; parsing a stream request by request must terminate.
#![no_main]
use libfuzzer_sys::fuzz_target;
use memrelay_protocol::{parse_request, Limits, Parse};

fuzz_target!(|data: &[u8]| {
    let limits = Limits { max_value_len: 4096, max_line_len: 1024 };
    let mut offset = 0;
    while offset < data.len() {
        match parse_request(&data[offset..], &limits) {
            Parse::Complete(request) => {
                assert!(request.consumed > 0 && request.consumed <= data.len() - offset);
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
});
