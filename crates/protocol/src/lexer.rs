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

/// Parses an unsigned decimal number without allocating; `None` on anything else or overflow.
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

/// Parses a signed decimal number (memcached's exptime may be negative).
pub(crate) fn parse_i64(text: &[u8]) -> Option<i64> {
    match text.first() {
        Some(b'-') => parse_u64(&text[1..]).and_then(|v| i64::try_from(v).ok()).map(|v| -v),
        _ => parse_u64(text).and_then(|v| i64::try_from(v).ok()),
    }
}
