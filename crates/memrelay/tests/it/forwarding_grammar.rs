//! For any bytes a client sends, what memrelay writes to a server parses, with memcached's own
//! grammar, into exactly the requests memrelay believed it forwarded: one request per write,
//! same command, keys, numbers and data. If the two ever read the same bytes differently, a
//! server could see a request memrelay never accounted for and shift replies between clients.
//!
//! The grammar below is written from memcached 1.6's `proto_text.c` (`try_read_command_ascii`,
//! `tokenize_command`, `process_*_command`) and shares no code with memrelay's parser.

use memrelay::fuzzing::{client_stream, forwarded, Forwarded};
use proptest::prelude::*;

/// A request as memcached reads it.
#[derive(Debug, PartialEq, Eq)]
struct Read {
    command: String,
    keys: Vec<Vec<u8>>,
    flags: u32,
    exptime: i64,
    number: u64,
    data: Vec<u8>,
    /// A meta command's flag tokens.
    meta_flags: Vec<Vec<u8>>,
    /// Bytes of the buffer the request took.
    consumed: usize,
}

/// memcached's reading of the start of `buf`, or why it would not take it as one request.
fn memcached_reads(buf: &[u8]) -> Result<Read, String> {
    // The line ends at the first '\n'; a '\r' before it is dropped; the C string ends at a NUL.
    let newline = buf.iter().position(|&b| b == b'\n').ok_or("no newline")?;
    let mut line = &buf[..newline];
    if line.last() == Some(&b'\r') {
        line = &line[..line.len() - 1];
    }
    if let Some(nul) = line.iter().position(|&b| b == 0) {
        line = &line[..nul];
    }
    if newline + 1 > 16384 && !line.starts_with(b"get ") && !line.starts_with(b"gets ") {
        // (a longer line never fits memcached's 16 KiB read buffer, where it looks for the newline.)
        return Err("memcached closes a connection on a non-get line this long".into());
    }
    // tokenize_command: split on single spaces, empty tokens skipped.
    let tokens: Vec<&[u8]> = line.split(|&b| b == b' ').filter(|t| !t.is_empty()).collect();
    let text = |t: &[u8]| String::from_utf8(t.to_vec()).map_err(|_| "not a number".to_string());
    let mut read = Read {
        command: text(tokens.first().ok_or("empty line")?)?,
        keys: Vec::new(),
        flags: 0,
        exptime: 0,
        number: 0,
        data: Vec::new(),
        meta_flags: Vec::new(),
        consumed: newline + 1,
    };
    let args = &tokens[1..];
    let key = |t: &[u8]| if t.len() > 250 { Err("key too long".to_string()) } else { Ok(t.to_vec()) };
    match read.command.as_str() {
        "get" | "gets" => {
            if args.is_empty() {
                return Err("get without keys".into());
            }
            read.keys = args.iter().map(|k| key(k)).collect::<Result<_, _>>()?;
        }
        "set" | "add" | "replace" | "append" | "prepend" | "cas" => {
            let fixed = if read.command == "cas" { 5 } else { 4 };
            if args.len() != fixed {
                return Err(format!("{} arguments", args.len()));
            }
            read.keys = vec![key(args[0])?];
            read.flags = text(args[1])?.parse().map_err(|_| "flags")?;
            read.exptime = text(args[2])?.parse().map_err(|_| "exptime")?;
            let bytes: usize = text(args[3])?.parse().map_err(|_| "bytes")?;
            if fixed == 5 {
                read.number = text(args[4])?.parse().map_err(|_| "cas")?;
            }
            (read.data, read.consumed) = data_block(buf, newline + 1, bytes)?;
        }
        "gat" | "gats" => {
            let (exptime, keys) = args.split_first().ok_or("gat without expiry")?;
            read.exptime = text(exptime)?.parse().map_err(|_| "exptime")?;
            read.keys = keys.iter().map(|k| key(k)).collect::<Result<_, _>>()?;
        }
        // Meta commands (process_m*_command): a key, for ms its data length, then flags; at most
        // 20 tokens counting the command and the final empty one.
        "mg" | "md" | "ma" | "me" | "ms" => {
            let data_len = usize::from(read.command == "ms");
            if args.len() < 1 + data_len || args.len() + 2 > 20 {
                return Err(format!("{} meta tokens", args.len()));
            }
            read.keys = vec![key(args[0])?];
            read.meta_flags = args[1 + data_len..].iter().map(|t| t.to_vec()).collect();
            if read.command == "ms" {
                let bytes: usize = text(args[1])?.parse().map_err(|_| "bytes")?;
                (read.data, read.consumed) = data_block(buf, newline + 1, bytes)?;
            }
        }
        "incr" | "decr" => {
            if args.len() != 2 {
                return Err(format!("{} arguments", args.len()));
            }
            read.keys = vec![key(args[0])?];
            read.number = text(args[1])?.parse().map_err(|_| "delta")?;
        }
        "touch" => {
            if args.len() != 2 {
                return Err(format!("{} arguments", args.len()));
            }
            read.keys = vec![key(args[0])?];
            read.exptime = text(args[1])?.parse().map_err(|_| "exptime")?;
        }
        "delete" => {
            if args.len() != 1 {
                return Err(format!("{} arguments", args.len()));
            }
            read.keys = vec![key(args[0])?];
        }
        "flush_all" => match args {
            [] => {}
            [delay] => read.exptime = text(delay)?.parse().map_err(|_| "delay")?,
            _ => return Err(format!("{} arguments", args.len())),
        },
        other => return Err(format!("memrelay never forwards `{other}`")),
    }
    Ok(read)
}

/// The data block of `bytes` bytes at `start` and where the request ends, as memcached reads it.
fn data_block(buf: &[u8], start: usize, bytes: usize) -> Result<(Vec<u8>, usize), String> {
    let block = buf.get(start..start + bytes + 2).ok_or("data block short")?;
    if &block[bytes..] != b"\r\n" {
        return Err("bad data chunk".into());
    }
    Ok((block[..bytes].to_vec(), start + bytes + 2))
}

fn check(input: &[u8]) {
    client_stream(input);
    for sent in forwarded(input) {
        let read = memcached_reads(&sent.bytes).unwrap_or_else(|why| {
            panic!("memcached would not read {:?} as one request: {why}", String::from_utf8_lossy(&sent.bytes))
        });
        let Forwarded { bytes, command, keys, flags, exptime, number, data, meta_flags } = sent;
        // One write is exactly one request; a quiet `ma` that may create its item (its quiet
        // mode is memcached's to apply) is followed by an `mn` that ends what it says.
        let quiet_vivify = read.command == "ma"
            && read.meta_flags.iter().any(|f| f.first() == Some(&b'q'))
            && read.meta_flags.iter().any(|f| f.first() == Some(&b'N'));
        let rest: &[u8] = if quiet_vivify { b"mn\r\n" } else { b"" };
        assert_eq!(
            &bytes[read.consumed..],
            rest,
            "one write is exactly one request: {:?}",
            String::from_utf8_lossy(&bytes)
        );
        let believed = Read {
            command: command.to_string(),
            keys,
            flags,
            exptime,
            number,
            data,
            meta_flags,
            consumed: bytes.len() - rest.len(),
        };
        assert_eq!(read, believed);
    }
}

/// Valid requests of every forwarded command, to mutate.
const SEEDS: &[&[u8]] = &[
    b"set k 1 2 3\r\nabc\r\n",
    b"add k 0 0 1 noreply\r\nx\r\n",
    b"cas k 0 -1 2 99\r\nab\r\n",
    b"append k 0 0 0\r\n\r\n",
    b"get a b c\r\n",
    b"gets k\r\n",
    b"incr k 18446744073709551615\r\n",
    b"decr k 1 noreply\r\n",
    b"delete k 0\r\n",
    b"touch k -5\r\n",
    b"flush_all 10 noreply\r\n",
    b"gat 10 a b\r\n",
    b"gats -1 k\r\n",
    b"mg k v f t c k Oab q\r\n",
    b"mg a2V5 b v\r\n",
    b"ms k 3 T0 F5 C7 q\r\nabc\r\n",
    b"ms k 1 MA I\r\nx\r\n",
    b"md k q C5\r\n",
    b"ma k N0 J5 D2 MD v\r\n",
    b"ma k N0 q\r\n",
    b"me k\r\n",
    b"mn\r\n",
];

fn mutated() -> impl Strategy<Value = Vec<u8>> {
    let seed = prop::sample::select(SEEDS).prop_map(<[u8]>::to_vec);
    let edit = (
        any::<prop::sample::Index>(),
        prop::sample::select(&[0u8, 1, b'\r', b'\n', b' ', b'\t', b'+', b'-', 0x7f, 0xff, b'0'][..]),
    );
    (prop::collection::vec(seed, 1..6), prop::collection::vec(edit, 0..6), any::<u8>()).prop_map(
        |(seeds, edits, mode)| {
            let mut bytes = vec![mode];
            bytes.extend(seeds.concat());
            for (at, byte) in edits {
                let i = 1 + at.index(bytes.len() - 1);
                if byte == b'0' {
                    bytes.remove(i.min(bytes.len() - 1));
                } else {
                    bytes.insert(i, byte);
                }
            }
            bytes
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(input in prop::collection::vec(any::<u8>(), 0..512)) {
        check(&input);
    }

    #[test]
    fn mutated_requests(input in mutated()) {
        check(&input);
    }
}

#[test]
fn every_seed_is_forwarded_as_memcached_reads_it() {
    for mode in [0u8, 16, 32] {
        let mut input = vec![mode];
        input.extend(SEEDS.concat());
        assert!(forwarded(&input).len() >= SEEDS.len());
        check(&input);
    }
}

/// The saved fuzz seeds (fuzz/seeds/client_stream: inputs worth keeping, crashers included once
/// fixed) replay on stable Rust, so CI needs no nightly.
#[test]
fn fuzz_corpora_replay() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/client_stream");
    let mut replayed = 0;
    for entry in std::fs::read_dir(&root).expect("the client_stream corpus") {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        check(&bytes);
        replayed += 1;
    }
    assert!(replayed > 0, "an empty corpus in {}", root.display());
}
