//! Request parser: splits at every byte, pipelined requests, bad input, and a round-trip property.

use memrelay_protocol::request::TOO_LARGE;
use memrelay_protocol::{compose, parse_request, Command, ErrorReply, Invalid, Limits, Parse, Request};
use proptest::prelude::*;

fn limits() -> Limits {
    Limits::default()
}

fn complete(buf: &[u8]) -> Request {
    match parse_request(buf, &limits()) {
        Parse::Complete(request) => request,
        other => panic!("expected a request from {:?}, got {other:?}", String::from_utf8_lossy(buf)),
    }
}

fn invalid(buf: &[u8]) -> Invalid {
    match parse_request(buf, &limits()) {
        Parse::Invalid(invalid) => invalid,
        other => panic!("expected invalid for {:?}, got {other:?}", String::from_utf8_lossy(buf)),
    }
}

const SAMPLES: &[&[u8]] = &[
    b"get foo\r\n",
    b"gets a bb ccc\r\n",
    b"get  spaced   keys \r\n",
    b"set k 5 0 3\r\nabc\r\n",
    b"set k 5 0 0 noreply\r\n\r\n",
    b"add k 0 -1 2\r\n\r\n\r\n",
    b"cas k 1 2 3 77\r\nxyz\r\n",
    b"append k 0 0 1\r\nz\r\n",
    b"delete k\r\n",
    b"delete k 0 noreply\r\n",
    b"incr n 10\r\n",
    b"decr n 3 noreply\r\n",
    b"touch k 100\r\n",
    b"flush_all\r\n",
    b"flush_all 10 noreply\r\n",
    b"version\r\n",
    b"verbosity 1\r\n",
    b"stats\r\n",
    b"stats items\r\n",
    b"quit\r\n",
    b"get lf-only\n",
];

#[test]
fn every_sample_parses_whole() {
    for &sample in SAMPLES {
        let request = complete(sample);
        assert_eq!(request.consumed, sample.len(), "{:?}", String::from_utf8_lossy(sample));
    }
}

#[test]
fn every_split_point_is_incomplete_then_complete() {
    for &sample in SAMPLES {
        let whole = complete(sample);
        for split in 0..sample.len() {
            assert_eq!(
                parse_request(&sample[..split], &limits()),
                Parse::Incomplete,
                "{:?} split at {split}",
                String::from_utf8_lossy(sample)
            );
        }
        assert_eq!(complete(sample), whole);
    }
}

#[test]
fn many_requests_in_one_read() {
    let all: Vec<u8> = SAMPLES.concat();
    let mut offset = 0;
    let mut count = 0;
    while offset < all.len() {
        let request = complete(&all[offset..]);
        assert_eq!(request.consumed, SAMPLES[count].len());
        offset += request.consumed;
        count += 1;
    }
    assert_eq!(count, SAMPLES.len());
}

#[test]
fn fields_are_read() {
    let buf = b"cas mykey 42 -5 3 99 noreply\r\nabc\r\n";
    let r = complete(buf);
    assert_eq!(r.command, Command::Cas);
    assert_eq!(r.key(buf), b"mykey");
    assert_eq!((r.flags, r.exptime, r.number, r.noreply), (42, -5, 99, true));
    assert_eq!(&buf[r.data.clone()], b"abc");

    let buf = b"get a bb ccc\r\n";
    let r = complete(buf);
    assert_eq!(r.key_count, 3);
    assert_eq!(r.keys(buf).collect::<Vec<_>>(), vec![&b"a"[..], b"bb", b"ccc"]);
    let ranges: Vec<_> = r.key_ranges(buf).collect();
    assert_eq!(&buf[ranges[2].clone()], b"ccc");
}

#[test]
fn data_may_contain_newlines() {
    let buf = b"set k 0 0 4\r\na\r\nb\r\n";
    assert_eq!(&buf[complete(buf).data], b"a\r\nb");
}

#[test]
fn unknown_command_is_error_and_resyncs() {
    let buf = b"bogus 1 2\r\nget k\r\n";
    let bad = invalid(buf);
    assert_eq!(bad.reply, ErrorReply::Error);
    assert!(!bad.close);
    assert_eq!(complete(&buf[bad.skip..]).command, Command::Get);
    assert_eq!(invalid(b"\r\n").reply, ErrorReply::Error);
    assert_eq!(invalid(b"get\r\n").reply, ErrorReply::Error);
}

#[test]
fn key_too_long_is_client_error() {
    let key = "k".repeat(251);
    for line in [format!("get {key}\r\n"), format!("get ok {key}\r\n"), format!("delete {key}\r\n")] {
        let bad = invalid(line.as_bytes());
        assert!(matches!(bad.reply, ErrorReply::Client(_)), "{line}");
        assert_eq!((bad.skip, bad.close), (line.len(), false));
    }
    let key = "k".repeat(250);
    complete(format!("get {key}\r\n").as_bytes());
}

#[test]
fn malformed_lines_are_answered_as_memcached_answers() {
    // Replies of a real memcached 1.6.18 to the same lines.
    let cases: [(&[u8], ErrorReply); 8] = [
        (b"set k 0 0\r\n", ErrorReply::Error),
        (b"cas k 0 0 1\r\n", ErrorReply::Error),
        (b"incr k\r\n", ErrorReply::Error),
        (b"touch k\r\n", ErrorReply::Error),
        (b"flush_all 0 0 0\r\n", ErrorReply::Error),
        (b"set k x 0 1\r\n", ErrorReply::Client("bad command line format")),
        (b"set k 0 0 -1\r\n", ErrorReply::Client("bad command line format")),
        (b"delete k 5\r\n", ErrorReply::Client("bad command line format.  Usage: delete <key> [noreply]")),
    ];
    for (line, reply) in cases {
        let bad = invalid(line);
        assert_eq!(bad.reply, reply, "{:?}", String::from_utf8_lossy(line));
        assert!(!bad.close);
    }
    assert_eq!(invalid(b"incr k abc\r\n").reply, ErrorReply::Client("invalid numeric delta argument"));
}

#[test]
fn numbers_and_extra_tokens_as_memcached_reads_them() {
    // memcached 1.6.18 stores these: flags truncated to 32 bits, a fifth token that is not
    // `noreply` ignored.
    let Parse::Complete(request) = parse_request(b"set k 99999999999 0 1 extra\r\nx\r\n", &Limits::default()) else {
        panic!()
    };
    assert_eq!((request.flags, request.noreply), (99999999999u64 as u32, false));
}

#[test]
fn too_large_value_is_skipped() {
    let limits = Limits { max_value_len: 10, ..Limits::default() };
    // A set is refused with its key (memcached then removes the old value)...
    let line = b"set k 0 0 11\r\n";
    let Parse::Complete(refused) = parse_request(line, &limits) else { panic!() };
    assert_eq!((refused.command, refused.too_large, refused.consumed), (Command::Set, Some(13), line.len()));
    // ... the other storage commands are answered and skipped.
    let line = b"add k 0 0 11\r\n";
    let Parse::Invalid(bad) = parse_request(line, &limits) else { panic!() };
    assert_eq!(bad.reply, ErrorReply::Server(TOO_LARGE));
    assert_eq!(bad.skip, line.len() + 11 + 2);
    assert!(!bad.close);
}

#[test]
fn wrong_data_length_is_answered_and_skipped_as_memcached_does() {
    let bad = invalid(b"set k 0 0 3\r\nabcd\r\n");
    assert_eq!(bad.reply, ErrorReply::Client("bad data chunk"));
    assert_eq!((bad.skip, bad.close), (18, false));
}

#[test]
fn endless_line_closes() {
    let limits = Limits { max_line_len: 100, ..Limits::default() };
    let Parse::Invalid(bad) = parse_request(&[b'a'; 101], &limits) else { panic!() };
    assert!(bad.close);
    assert_eq!(parse_request(&[b'a'; 100], &limits), Parse::Incomplete);
    // A get line may be longer (memcached does not bound it).
    let mut get = b"get ".to_vec();
    get.resize(5000, b'k');
    assert_eq!(parse_request(&get, &Limits::default()), Parse::Incomplete);
    get[..4].copy_from_slice(b"gat ");
    assert!(matches!(parse_request(&get, &Limits::default()), Parse::Invalid(Invalid { close: true, .. })));
}

/// A request in owned form, to compare what was composed with what was parsed.
#[derive(Debug, Clone, PartialEq)]
struct Owned {
    command: Command,
    keys: Vec<Vec<u8>>,
    flags: u32,
    exptime: i64,
    number: u64,
    noreply: bool,
    data: Vec<u8>,
}

impl Owned {
    fn from_parsed(buf: &[u8], r: &Request) -> Owned {
        Owned {
            command: r.command,
            keys: r.keys(buf).map(<[u8]>::to_vec).collect(),
            flags: r.flags,
            exptime: r.exptime,
            number: r.number,
            noreply: r.noreply,
            data: buf[r.data.clone()].to_vec(),
        }
    }

    fn compose(&self, out: &mut Vec<u8>) {
        let key = self.keys.first().map(Vec::as_slice).unwrap_or(b"");
        match self.command {
            Command::Get | Command::Gets => compose::retrieval(out, self.command, self.keys.iter().map(Vec::as_slice)),
            c if c.is_storage() => {
                compose::storage(out, c, key, self.flags, self.exptime, &self.data, self.number, self.noreply)
            }
            Command::Delete => compose::keyed(out, Command::Delete, key, None::<u64>, self.noreply),
            Command::Incr | Command::Decr => compose::keyed(out, self.command, key, Some(self.number), self.noreply),
            Command::Touch => compose::keyed(out, Command::Touch, key, Some(self.exptime), self.noreply),
            c => unreachable!("{c:?} is not generated"),
        }
    }
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(0x21u8..0x7f, 1..=250)
}

fn request() -> impl Strategy<Value = Owned> {
    let command = prop::sample::select(vec![
        Command::Get,
        Command::Gets,
        Command::Set,
        Command::Add,
        Command::Replace,
        Command::Append,
        Command::Prepend,
        Command::Cas,
        Command::Delete,
        Command::Incr,
        Command::Decr,
        Command::Touch,
    ]);
    (
        command,
        proptest::collection::vec(key(), 1..6),
        any::<u32>(),
        -1000i64..100_000,
        0u64..u64::MAX / 2,
        any::<bool>(),
        proptest::collection::vec(any::<u8>(), 0..2000),
    )
        .prop_map(|(command, mut keys, flags, exptime, number, noreply, data)| {
            let mut owned =
                Owned { command, keys: Vec::new(), flags: 0, exptime: 0, number: 0, noreply: false, data: Vec::new() };
            if command.is_retrieval() {
                owned.keys = keys;
                return owned;
            }
            keys.truncate(1);
            owned.keys = keys;
            owned.noreply = noreply;
            match command {
                Command::Incr | Command::Decr => owned.number = number,
                Command::Touch => owned.exptime = exptime,
                Command::Delete => {}
                _ => {
                    owned.flags = flags;
                    owned.exptime = exptime;
                    owned.data = data;
                    if command == Command::Cas {
                        owned.number = number;
                    }
                }
            }
            owned
        })
}

proptest! {
    #[test]
    fn parse_reads_back_what_compose_wrote(req in request(), split in any::<prop::sample::Index>()) {
        let mut buf = Vec::new();
        req.compose(&mut buf);
        let parsed = complete(&buf);
        prop_assert_eq!(parsed.consumed, buf.len());
        prop_assert_eq!(Owned::from_parsed(&buf, &parsed), req);
        // Any strict prefix is incomplete.
        let at = split.index(buf.len());
        prop_assert_eq!(parse_request(&buf[..at], &limits()), Parse::Incomplete);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let small = Limits { max_value_len: 100, max_line_len: 200, max_get_line_len: 200 };
        if let Parse::Complete(r) = parse_request(&bytes, &small) {
            prop_assert!(r.consumed <= bytes.len());
        }
    }
}
