//! The tokenizer every parser here uses: lines, space-separated tokens and decimal numbers, read
//! the way memcached's text protocol reads them.

/// Position of the first `\n` in `buf`, if any.
#[inline]
pub(crate) fn find_newline(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

/// The line before `\n`, without a trailing `\r`.
#[inline]
pub(crate) fn trim_cr(line: &[u8]) -> &[u8] {
    match line.last() {
        Some(b'\r') => &line[..line.len() - 1],
        _ => line,
    }
}

/// Space-separated tokens of a line, with their offsets (memcached allows runs of spaces).
pub(crate) fn tokens(line: &[u8]) -> impl Iterator<Item = (usize, &[u8])> + '_ {
    let mut pos = 0;
    std::iter::from_fn(move || {
        while pos < line.len() && line[pos] == b' ' {
            pos += 1;
        }
        if pos >= line.len() {
            return None;
        }
        let start = pos;
        while pos < line.len() && line[pos] != b' ' {
            pos += 1;
        }
        Some((start, &line[start..pos]))
    })
}

/// Parses an unsigned decimal number strictly (digits only; `None` on anything else or overflow):
/// for server replies, which memcached writes canonically.
pub(crate) fn parse_u64(text: &[u8]) -> Option<u64> {
    if text.is_empty() || text.len() > 20 {
        return None;
    }
    let mut value: u64 = 0;
    for &b in text {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(value)
}

/// `isspace` in the C locale, as memcached's number parsing tests the byte after a number.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// A number token read as memcached 1.6's `safe_strtoull` reads it (deltas, cas values):
/// `strtoull` (leading white space and a sign allowed, decimal digits, overflow refused),
/// accepted when at least one digit was read and the byte after the number is white space (the
/// rest is then ignored) or the end; a value that looks negative with a `-` in the token refused.
/// Reading request numbers exactly as memcached does keeps memrelay's idea of a request equal to
/// the server's; what memrelay forwards is then composed in canonical decimal.
pub(crate) fn read_u64(token: &[u8]) -> Option<u64> {
    let (negative, magnitude) = read_number(token)?;
    // strtoull negates in unsigned arithmetic.
    let value = if negative { magnitude.wrapping_neg() } else { magnitude };
    ((value as i64) >= 0 || !negative).then_some(value)
}

/// `safe_strtoul` (flags): as [`read_u64`], then stored in 32 bits (memcached truncates).
pub(crate) fn read_u32(token: &[u8]) -> Option<u32> {
    read_u64(token).map(|value| value as u32)
}

/// `safe_strtol` (exptime, data length): `strtol` into a 64-bit `long` (overflow refused), then
/// stored in 32 bits (memcached truncates).
pub(crate) fn read_i32(token: &[u8]) -> Option<i32> {
    let (negative, magnitude) = read_number(token)?;
    let value = if negative {
        i64::try_from(magnitude).ok().map(|m| -m).or((magnitude == 1 << 63).then_some(i64::MIN))?
    } else {
        i64::try_from(magnitude).ok()?
    };
    Some(value as i32)
}

/// `strto*`'s reading: white space, a sign, digits; then the end or a white-space byte. Returns
/// the sign and the magnitude; `None` without digits or past `u64::MAX` (a range error).
fn read_number(token: &[u8]) -> Option<(bool, u64)> {
    let mut rest = token;
    while let Some((&b, tail)) = rest.split_first() {
        if !is_c_space(b) {
            break;
        }
        rest = tail;
    }
    let mut negative = false;
    if let Some((&sign @ (b'+' | b'-'), tail)) = rest.split_first() {
        negative = sign == b'-';
        rest = tail;
    }
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let mut magnitude: u64 = 0;
    for &b in &rest[..digits] {
        magnitude = magnitude.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    match rest.get(digits) {
        None => Some((negative, magnitude)),
        Some(&b) if is_c_space(b) => Some((negative, magnitude)),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_memcached_reads_them() {
        // Values worked out from the C library's strtoull/strtol and memcached's safe_strto* checks.
        assert_eq!(read_u64(b"12"), Some(12));
        assert_eq!(read_u64(b"+12"), Some(12));
        assert_eq!(read_u64(b"12\t"), Some(12));
        assert_eq!(read_u64(b"12\rjunk"), Some(12));
        assert_eq!(read_u64(b"\t7"), Some(7));
        assert_eq!(read_u64(b"\t"), None);
        assert_eq!(read_u64(b"-0"), Some(0));
        assert_eq!(read_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(read_u64(b"18446744073709551616"), None);
        assert_eq!(read_u64(b"-1"), None);
        assert_eq!(read_u64(b"12x"), None);
        assert_eq!(read_u64(b"0x10"), None);
        assert_eq!(read_u64(b"x"), None);
        assert_eq!(read_u32(b"4294967297"), Some(1));
        assert_eq!(read_i32(b"-1"), Some(-1));
        assert_eq!(read_i32(b"42949672961"), Some(1));
        assert_eq!(read_i32(b"9223372036854775808"), None);
        assert_eq!(read_i32(b"5\x0b"), Some(5));
    }
}
