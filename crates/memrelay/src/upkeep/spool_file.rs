//! The format of one repair spool file, and reading one back.
//!
//! `memrelay-repair-spool 2 <server name>`, then one record a line, each ending in the CRC-32 of
//! what comes before it on the line (8 hex digits): `K <key in base64> <crc>` (the key missed a
//! write), `R <crc>` (the server restarted: a resync), `F <crc>` (its set overflowed: flush and
//! resync). The checksum makes a damaged line known as such, so that it never passes for another
//! record nor hides the records after it. Version 1 files (no checksums) are still read.

use std::io;
use std::path::Path;

use base64::Engine;

use crate::upstream::repair_set::Record;

const MAGIC: &str = "memrelay-repair-spool";
const VERSION: &str = "2";

/// What a spool file holds.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Contents {
    /// The server the file is for; `None` when the first line is not a header.
    pub name: Option<String>,
    /// The records that read back whole.
    pub records: Vec<Record>,
    /// The last line has no newline: memrelay died writing it (the record is skipped).
    pub torn_tail: bool,
    /// Line numbers of lines that end but are not records (the file was damaged).
    pub damaged: Vec<usize>,
}

impl Contents {
    /// Whether records may be missing from [`Contents::records`], other than a torn last one.
    pub(crate) fn is_damaged(&self) -> bool {
        self.name.is_none() || !self.damaged.is_empty()
    }
}

/// The header line of the file of the server named `name`.
pub(crate) fn header(name: &str) -> Vec<u8> {
    format!("{MAGIC} {VERSION} {name}\n").into_bytes()
}

/// Appends `record`'s line to `out`.
pub(crate) fn encode(record: &Record, out: &mut Vec<u8>) {
    let start = out.len();
    match record {
        Record::Key(key) => {
            out.extend_from_slice(b"K ");
            out.extend_from_slice(base64::engine::general_purpose::STANDARD.encode(key).as_bytes());
        }
        Record::Resync => out.push(b'R'),
        Record::FlushAndResync => out.push(b'F'),
    }
    let crc = crc32(&out[start..]);
    out.extend_from_slice(format!(" {crc:08x}\n").as_bytes());
}

/// Reads the spool file at `path` (an error only when it cannot be read at all).
pub(crate) fn read(path: &Path) -> io::Result<Contents> {
    Ok(parse(&crate::own_files::read(path, crate::own_files::MAX_SPOOL_FILE)?))
}

fn parse(bytes: &[u8]) -> Contents {
    let mut contents = Contents::default();
    let mut lines = bytes.split_inclusive(|&b| b == b'\n');
    let Some((name, checksums)) = lines.next().and_then(parse_header) else {
        // Without a header nothing after it can be trusted to be records of this format.
        contents.damaged.push(1);
        return contents;
    };
    contents.name = Some(name);
    for (line, number) in lines.zip(2..) {
        let Some(text) = line.strip_suffix(b"\n") else {
            contents.torn_tail = true;
            break;
        };
        match parse_record(text, checksums) {
            Some(record) => contents.records.push(record),
            None => contents.damaged.push(number),
        }
    }
    contents
}

/// The server name of a header line, and whether its records carry checksums (version 2).
fn parse_header(line: &[u8]) -> Option<(String, bool)> {
    let text = std::str::from_utf8(line.strip_suffix(b"\n")?).ok()?;
    let rest = text.strip_prefix(MAGIC)?.strip_prefix(' ')?;
    let (version, name) = rest.split_once(' ')?;
    let checksums = match version {
        "1" => false,
        VERSION => true,
        _ => return None,
    };
    (!name.is_empty()).then(|| (name.to_string(), checksums))
}

fn parse_record(text: &[u8], checksums: bool) -> Option<Record> {
    let body = if checksums {
        let split = text.len().checked_sub(9)?;
        let (body, crc) = text.split_at(split);
        let crc = std::str::from_utf8(crc.strip_prefix(b" ")?).ok()?;
        if crc.len() != 8 || u32::from_str_radix(crc, 16).ok()? != crc32(body) {
            return None;
        }
        body
    } else {
        text
    };
    match body {
        b"R" => Some(Record::Resync),
        b"F" => Some(Record::FlushAndResync),
        _ => body
            .strip_prefix(b"K ")
            .and_then(|k| base64::engine::general_purpose::STANDARD.decode(k).ok())
            .filter(|k| !k.is_empty() && k.len() <= 250)
            .map(Record::Key),
    }
}

/// CRC-32 (IEEE, as zlib's): a spool line is short, so bit by bit is fast enough.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xedb8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(records: &[Record]) -> Vec<u8> {
        let mut bytes = header("s:1");
        for record in records {
            encode(record, &mut bytes);
        }
        bytes
    }

    #[test]
    fn records_read_back_as_written() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926, "the standard check value");
        let records = [Record::Key(b"a b".to_vec()), Record::Resync, Record::FlushAndResync];
        let contents = parse(&file(&records));
        assert_eq!(contents, Contents { name: Some("s:1".into()), records: records.to_vec(), ..Contents::default() });
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_a_damaged_one_is_known() {
        let records = [Record::Key(b"a".to_vec()), Record::Key(b"b".to_vec()), Record::Key(b"c".to_vec())];
        let whole = file(&records);
        // Cut anywhere inside the last record: the two before it are read, the file is not damaged.
        let last = whole.len() - 14;
        for cut in last..whole.len() - 1 {
            let contents = parse(&whole[..cut]);
            assert_eq!(contents.records, records[..2], "cut at {cut}");
            assert!(contents.torn_tail && !contents.is_damaged(), "cut at {cut}");
        }
        // A record cut short and another appended after it (what a failed write once left): the
        // damaged line is known, the records around it are read.
        let mut bytes = whole[..last + 4].to_vec();
        encode(&Record::Key(b"d".to_vec()), &mut bytes);
        let contents = parse(&bytes);
        assert_eq!(contents.records, [records[0].clone(), records[1].clone()]);
        assert!(contents.is_damaged() && !contents.torn_tail);
        // One flipped byte in a key: the checksum catches it.
        let mut flipped = whole.clone();
        let at = header("s:1").len() + 2;
        flipped[at] ^= 1;
        let contents = parse(&flipped);
        assert_eq!(contents.damaged, [2]);
        assert_eq!(contents.records, records[1..]);
        // No header: nothing is trusted.
        assert!(parse(b"K YQ== 00000000\n").is_damaged());
        assert!(parse(b"").is_damaged());
    }

    #[test]
    fn version_1_files_are_read() {
        let contents = parse(b"memrelay-repair-spool 1 s:1\nK YQ==\nR\nK Yg");
        assert_eq!(contents.name.as_deref(), Some("s:1"));
        assert_eq!(contents.records, [Record::Key(b"a".to_vec()), Record::Resync]);
        assert!(contents.torn_tail && !contents.is_damaged());
    }
}
