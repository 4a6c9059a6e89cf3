//! A bounded, seeded mutation fuzzer against a real memcached: each case (valid requests with
//! bytes flipped, control bytes and separators inserted, numbers made extreme, lines truncated)
//! goes on a fresh connection to a memcached directly and to memrelay in front of three servers.
//! Checked: memrelay never crashes or hangs, an innocent client beside it keeps getting exact
//! replies, and the first reply has the same class as memcached's (errors count as one class:
//! which error line memrelay sends is the protocol-fidelity work's business, not isolation's).
//!
//! Every test is a function of the engine's name and runs once per engine (see `common`).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use crate::common::*;

engine_matrix!(mutated_inputs_answer_as_memcached);

const CASES: usize = 3000;

/// xorshift64*: a seeded generator, so a failure names a case that replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const SEEDS: &[&[u8]] = &[
    b"set k 1 2 3\r\nabc\r\n",
    b"add k 0 0 1\r\nx\r\n",
    b"replace k 5 0 2\r\nab\r\n",
    b"append k 0 0 1\r\nz\r\n",
    b"prepend k 0 0 1\r\na\r\n",
    b"get k\r\n",
    b"get k j m\r\n",
    b"gets k\r\n",
    b"incr n 5\r\n",
    b"decr n 3\r\n",
    b"delete k\r\n",
    b"touch k 100\r\n",
    b"gat 100 k j\r\n",
    b"gats 0 k\r\n",
    b"mg k v f t k Oab\r\n",
    b"mg k v q\r\nmn\r\n",
    b"ms k 3 T0 F5\r\nabc\r\n",
    b"ms k 1 MA q\r\nz\r\n",
    b"md k q\r\n",
    b"ma n D2 v\r\n",
    b"mn\r\n",
];

const INSERTS: &[&[u8]] = &[
    b"\0",
    b"\x01",
    b"\r",
    b"\n",
    b" ",
    b"  ",
    b"\t",
    b"+",
    b"-",
    b"\x7f",
    b"\xff",
    b"18446744073709551616",
    b"4294967296",
    b"-1",
    b"noreply",
    b"0x10",
    b"99999999999",
    b" q",
    b" b",
    b" C1",
    b" v v",
];

fn mutate(rng: &mut Rng) -> Vec<u8> {
    let mut bytes = Vec::new();
    for _ in 0..1 + rng.below(3) {
        bytes.extend_from_slice(SEEDS[rng.below(SEEDS.len())]);
    }
    for _ in 0..1 + rng.below(3) {
        if bytes.is_empty() {
            break;
        }
        let at = rng.below(bytes.len());
        match rng.below(4) {
            0 => bytes.truncate(at.max(1)),
            1 => {
                bytes.remove(at);
            }
            _ => {
                let insert = INSERTS[rng.below(INSERTS.len())];
                bytes.splice(at..at, insert.iter().copied());
            }
        }
    }
    bytes
}

/// Sends `input` on a fresh connection, half-closes, and reads until the peer closes (or 2 s).
fn exchange(addr: &str, input: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let _ = stream.write_all(input);
    let _ = stream.shutdown(Shutdown::Write);
    let mut reply = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut chunk = [0u8; 4096];
    while Instant::now() < deadline {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => reply.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => {
                // Waiting for a data block that never comes: both sides just wait.
                break;
            }
            Err(_) => break,
        }
    }
    reply
}

/// The class of the first reply line: errors are one class.
fn first_class(reply: &[u8]) -> String {
    let line = reply.split(|&b| b == b'\n').next().unwrap_or(b"");
    let word = line.split(|&b| b == b' ' || b == b'\r').next().unwrap_or(b"");
    match word {
        b"" => "none".into(),
        b"ERROR" | b"CLIENT_ERROR" | b"SERVER_ERROR" => "error".into(),
        w if w.iter().all(u8::is_ascii_digit) => "number".into(),
        w => String::from_utf8_lossy(w).into_owned(),
    }
}

fn mutated_inputs_answer_as_memcached(engine: &str) {
    let reference = Memcached::start();
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let refs: Vec<&Memcached> = servers.iter().collect();
    let relay = Memrelay::start(engine, &refs, &[]);
    let mut innocent = relay.client();
    assert_eq!(innocent.set("innocent", b"mine"), "STORED\r\n");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut compared = 0;
    for case in 0..CASES {
        let input = mutate(&mut rng);
        // The same state on both sides before each case: nothing but the keys the seeds use.
        // (Without the flush, keys an earlier case stored with an expiry outlive it, and each
        // memcached process ticks its one-second clock at its own moment: one side's copy can
        // expire a second before the other's.)
        let reset = b"flush_all\r\nset k 0 0 1\r\nv\r\nset n 0 0 2\r\n10\r\n";
        exchange(&reference.addr(), reset);
        exchange(&relay.addr(), reset);
        let check_innocent = case % 100 == 0;
        if check_innocent {
            assert_eq!(innocent.set("innocent", b"mine"), "STORED\r\n");
        }
        let want = exchange(&reference.addr(), &input);
        let got = exchange(&relay.addr(), &input);
        let (want_class, got_class) = (first_class(&want), first_class(&got));
        // A case memcached answers with a reply memrelay claims to give the same way.
        if want_class != "none" && want_class != "error" && !want.starts_with(b"VERSION") {
            assert_eq!(
                got_class,
                want_class,
                "case {case}: {} -> memcached {} memrelay {}",
                show(&input),
                show(&want),
                show(&got)
            );
            compared += 1;
        }
        if check_innocent {
            assert_eq!(innocent.get("innocent"), vec![("innocent".to_string(), b"mine".to_vec())], "after case {case}");
        }
    }
    assert!(compared > CASES / 4, "only {compared} of {CASES} cases were compared");
    assert!(innocent.line(b"version\r\n").starts_with("VERSION "));
}
