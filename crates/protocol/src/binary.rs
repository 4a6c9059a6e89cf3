//! The little of memcached's binary protocol memrelay needs to refuse it: a binary client
//! (memjs, Dalli's default, pylibmc `binary=True`) starts its connection with the request magic
//! 0x80 and waits for a binary response; waiting for a text line instead would hang it. So a
//! connection that opens with that byte gets one binary response, "not supported", for the
//! request's opcode with its opaque echoed, and is closed (memcached's `protocol_binary.h`
//! layout: a 24-byte header, then the body).

/// The first byte of every binary request.
pub const REQUEST_MAGIC: u8 = 0x80;
/// The first byte of every binary response.
pub const RESPONSE_MAGIC: u8 = 0x81;
/// Bytes of a request or response header.
pub const HEADER_LEN: usize = 24;
/// `PROTOCOL_BINARY_RESPONSE_NOT_SUPPORTED`.
pub const STATUS_NOT_SUPPORTED: u16 = 0x0083;

/// What the body of the refusal says.
const MESSAGE: &[u8] = b"Not supported: this memcached proxy speaks the text protocol only";

/// Whether `buf`, the first bytes of a connection, start a binary request.
pub fn starts_binary(buf: &[u8]) -> bool {
    buf.first() == Some(&REQUEST_MAGIC)
}

/// The opcode and opaque of the binary request header at the start of `buf`, once all 24 bytes
/// are there.
pub fn request_header(buf: &[u8]) -> Option<(u8, u32)> {
    let header = buf.get(..HEADER_LEN)?;
    let opaque = u32::from_be_bytes([header[12], header[13], header[14], header[15]]);
    Some((header[1], opaque))
}

/// Appends a "not supported" response to a request with `opcode` and `opaque`.
pub fn not_supported(opcode: u8, opaque: u32, out: &mut Vec<u8>) {
    out.push(RESPONSE_MAGIC);
    out.push(opcode);
    out.extend_from_slice(&0u16.to_be_bytes()); // key length
    out.push(0); // extras length
    out.push(0); // data type
    out.extend_from_slice(&STATUS_NOT_SUPPORTED.to_be_bytes());
    out.extend_from_slice(&(MESSAGE.len() as u32).to_be_bytes()); // total body length
    out.extend_from_slice(&opaque.to_be_bytes());
    out.extend_from_slice(&0u64.to_be_bytes()); // cas
    out.extend_from_slice(MESSAGE);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_echoes_opcode_and_opaque_in_a_well_formed_response() {
        // A binary GET (opcode 0x00) for key "k", opaque 0xdeadbeef, laid out by hand from
        // memcached's protocol_binary.h.
        let mut request = vec![0x80, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef];
        request.extend_from_slice(&[0; 8]);
        request.push(b'k');
        assert!(starts_binary(&request));
        assert_eq!(request_header(&request[..23]), None);
        let (opcode, opaque) = request_header(&request).unwrap();
        assert_eq!((opcode, opaque), (0x00, 0xdead_beef));
        let mut out = Vec::new();
        not_supported(opcode, opaque, &mut out);
        assert_eq!(out[0], 0x81);
        assert_eq!(out[1], 0x00);
        assert_eq!(u16::from_be_bytes([out[6], out[7]]), 0x0083);
        let body = u32::from_be_bytes([out[8], out[9], out[10], out[11]]) as usize;
        assert_eq!(out.len(), HEADER_LEN + body);
        assert_eq!(&out[12..16], &[0xde, 0xad, 0xbe, 0xef]);
        assert!(!starts_binary(b"get k\r\n"));
    }
}
