//! memcached's `stats` groups gathered from every server (`stats items`, `slabs`, `sizes`,
//! `settings`): one list, in the order the names first appear. A counter is the sum over the
//! servers (the pool holds that many items, has used that much memory); a figure that describes
//! one server's layout or an age is the largest (summing chunk sizes or ages means nothing);
//! anything not a number (and every `settings` line, a configuration rather than a count) is the
//! first server's.

use std::io::Write;

use memrelay_protocol::compose;

/// Stat names (their last `:`-separated part) that are not counts.
const NOT_ADDITIVE: [&str; 6] = ["chunk_size", "chunks_per_page", "age", "age_hot", "age_warm", "evicted_time"];

/// Writes the gathered list and `END` to `out`. `bodies` are the servers' `STAT` lines without
/// their `END`; `group` is the group asked for.
pub(crate) fn gather<'a>(group: &[u8], bodies: impl Iterator<Item = &'a [u8]>, out: &mut Vec<u8>) {
    let mut stats: Vec<(&'a [u8], Value<'a>)> = Vec::new();
    let first_only = group == b"settings";
    for body in bodies {
        for line in body.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let Some(rest) = line.strip_prefix(b"STAT ") else { continue };
            let (name, value) = match rest.iter().position(|&b| b == b' ') {
                Some(space) => (&rest[..space], &rest[space + 1..]),
                None => (rest, &b""[..]),
            };
            let value = Value::read(value);
            match stats.iter_mut().find(|(n, _)| *n == name) {
                Some((_, known)) if !first_only => known.combine(value, additive(name)),
                Some(_) => {}
                None => stats.push((name, value)),
            }
        }
    }
    for (name, value) in stats {
        out.extend_from_slice(b"STAT ");
        out.extend_from_slice(name);
        out.push(b' ');
        match value {
            Value::Number(n) => {
                let _ = write!(out, "{n}");
            }
            Value::Text(text) => out.extend_from_slice(text),
        }
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(compose::END);
}

fn additive(name: &[u8]) -> bool {
    let last = name.rsplit(|&b| b == b':').next().unwrap_or(name);
    !NOT_ADDITIVE.iter().any(|n| n.as_bytes() == last)
}

#[derive(Debug, Clone, Copy)]
enum Value<'a> {
    Number(u64),
    Text(&'a [u8]),
}

impl<'a> Value<'a> {
    fn read(text: &'a [u8]) -> Value<'a> {
        let number = (!text.is_empty() && text.len() <= 19 && text.iter().all(u8::is_ascii_digit))
            .then(|| std::str::from_utf8(text).ok()?.parse().ok())
            .flatten();
        number.map_or(Value::Text(text), Value::Number)
    }

    fn combine(&mut self, other: Value<'a>, additive: bool) {
        if let (Value::Number(a), Value::Number(b)) = (*self, other) {
            *self = Value::Number(if additive { a.saturating_add(b) } else { a.max(b) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_add_up_layouts_do_not() {
        let a = b"STAT items:1:number 3\r\nSTAT items:1:age 10\r\nSTAT 1:chunk_size 96\r\n".as_slice();
        let b = b"STAT items:1:number 4\r\nSTAT items:1:age 7\r\nSTAT 1:chunk_size 96\r\nSTAT items:2:number 1\r\n";
        let mut out = Vec::new();
        gather(b"items", [a, b.as_slice()].into_iter(), &mut out);
        let want =
            "STAT items:1:number 7\r\nSTAT items:1:age 10\r\nSTAT 1:chunk_size 96\r\nSTAT items:2:number 1\r\nEND\r\n";
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }

    #[test]
    fn settings_are_the_first_servers() {
        let a = b"STAT maxbytes 64\r\nSTAT evictions on\r\n".as_slice();
        let b = b"STAT maxbytes 128\r\nSTAT evictions off\r\n".as_slice();
        let mut out = Vec::new();
        gather(b"settings", [a, b].into_iter(), &mut out);
        assert_eq!(out, b"STAT maxbytes 64\r\nSTAT evictions on\r\nEND\r\n");
    }
}
