//! Replies too long to hold stream through memrelay (src/relay/stream.rs): memory stays bounded
//! whatever one request makes the servers send, a long reply that keeps arriving is not a server
//! timeout, `--max-reply-bytes` ends a reply as memcached ends one it cannot finish, and a client
//! that reads slowly slows only its own reply. The bounds are memrelay's own RSS, read from
//! /proc, against its RSS before the request (the bytes asked for are hundreds of times more).
//!
//! Every test is a function of the engine's name and runs once per engine (see `common`).

use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;

engine_matrix!(
    an_amplifying_get_streams_in_bounded_memory,
    max_reply_bytes_ends_a_streaming_reply_as_memcached_does,
    a_client_reading_a_byte_at_a_time_keeps_memory_bounded,
    a_2_gb_reply_passes_without_a_server_timeout_while_another_client_is_served,
    a_client_that_leaves_mid_reply_frees_the_server_connection_at_once,
    a_sharded_get_streams_merged_in_key_order_in_bounded_memory,
    a_server_that_dies_mid_merge_closes_only_that_client,
);

const MIB: u64 = 1024 * 1024;
const VALUE_LEN: usize = 1_000_000;

/// memcached holding `k`, a 1 MB value.
fn server_with_a_large_value() -> Memcached {
    let server = Memcached::start_with(&["-I", "2m"]);
    server.set_raw("k", &vec![b'v'; VALUE_LEN]);
    server
}

/// memrelay in front of `server`, warmed up: one long reply has passed (its threads have
/// allocated what they keep), so its RSS from now on is the baseline.
fn start(engine: &str, server: &Memcached, extra: &[&str]) -> Memrelay {
    let mut args = vec!["--max-value-size", "2000000"];
    args.extend_from_slice(extra);
    let relay = Memrelay::start(engine, &[server], &args);
    let mut client = relay.client();
    client.set_read_timeout(Duration::from_secs(30));
    assert_eq!(client.get("k")[0].1.len(), VALUE_LEN);
    relay
}

/// A field of /proc/PID/status, in bytes.
fn status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("memrelay's status");
    let line = status.lines().find(|l| l.starts_with(field)).expect("the field");
    line.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()).expect("kB") * 1024
}

/// memrelay's peak RSS (VmHWM) is within 64 MiB of `before`, its RSS before `what`.
fn assert_peak_within_64_mib(relay: &Memrelay, before: u64, what: &str) {
    let peak = status_bytes(relay.pid(), "VmHWM");
    assert!(peak < before + 64 * MIB, "{what} made memrelay peak at {} MiB from {}", peak / MIB, before / MIB);
}

/// `get k k …` naming the value `times` times: one short request, a reply of `times` MB.
fn amplifying_get(times: usize) -> Vec<u8> {
    let mut request = b"get".to_vec();
    for _ in 0..times {
        request.extend_from_slice(b" k");
    }
    request.extend_from_slice(b"\r\n");
    request
}

/// The length of the reply memcached gives to [`amplifying_get`].
fn reply_len(times: usize) -> u64 {
    let block = format!("VALUE k 0 {VALUE_LEN}\r\n").len() + VALUE_LEN + 2;
    (block * times + b"END\r\n".len()) as u64
}

/// Reads `len` bytes in reads of at most `chunk`, checking the framing of each value block on
/// the way (without holding the reply); returns the last bytes.
fn read_reply(client: &mut Client, len: u64, chunk: usize) -> Vec<u8> {
    let mut buf = vec![0; chunk];
    let (mut left, mut tail) = (len, Vec::new());
    while left > 0 {
        let want = chunk.min(left as usize);
        let n = client.stream.read(&mut buf[..want]).expect("the reply goes on");
        assert!(n > 0, "memrelay closed with {left} bytes of the reply to come");
        left -= n as u64;
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > 64 {
            tail.drain(..tail.len() - 64);
        }
    }
    tail
}

fn an_amplifying_get_streams_in_bounded_memory(engine: &str) {
    let server = server_with_a_large_value();
    let relay = start(engine, &server, &[]);
    let mut client = relay.client();
    client.set_read_timeout(Duration::from_secs(30));
    let before = status_bytes(relay.pid(), "VmRSS");
    client.send(&amplifying_get(500));
    let tail = read_reply(&mut client, reply_len(500), 1 << 20);
    assert!(tail.ends_with(b"vv\r\nEND\r\n"), "{}", show(&tail));
    assert_peak_within_64_mib(&relay, before, "500 MB asked for");
    // The connection is in step: the next request is answered as memcached answers it.
    assert_eq!(client.get("k")[0].1.len(), VALUE_LEN);
}

fn max_reply_bytes_ends_a_streaming_reply_as_memcached_does(engine: &str) {
    let server = server_with_a_large_value();
    let relay = start(engine, &server, &["--max-reply-bytes", "16777216"]);
    let mut client = relay.client();
    client.set_read_timeout(Duration::from_secs(30));
    let before = status_bytes(relay.pid(), "VmRSS");
    client.send(&amplifying_get(500));
    // The whole blocks that fit, then memcached's way of ending a reply it cannot finish: an
    // error line instead of END (memcached: "SERVER_ERROR out of memory writing get response").
    let block = reply_len(1) - 5;
    let fit = 16_777_216 / block;
    let tail = read_reply(&mut client, fit * block, 1 << 20);
    assert!(tail.ends_with(b"vv\r\n"), "{}", show(&tail));
    assert_eq!(client.read_line(), b"SERVER_ERROR reply too large\r\n");
    assert!(status_bytes(relay.pid(), "VmHWM") < before + 64 * MIB);
    // The rest of the server's reply was dropped: the next request gets its own answer.
    assert_eq!(client.get("k")[0].1.len(), VALUE_LEN);
}

fn a_client_reading_a_byte_at_a_time_keeps_memory_bounded(engine: &str) {
    let server = server_with_a_large_value();
    // One worker or event loop, warmed up: nothing else of memrelay grows meanwhile. The pool's
    // worker cuts off a client that takes nothing for the server timeout while it waits on it:
    // 10 s, so that a test thread a busy machine leaves unscheduled for a second is not taken
    // for a client that is gone (this test is about memory, not patience).
    let relay = start(engine, &server, &["--workers", "1", "--threads", "1", "--server-timeout-ms", "10000"]);
    let mut client = relay.client();
    client.set_read_timeout(Duration::from_secs(30));
    let before = status_bytes(relay.pid(), "VmRSS");
    // A 40 MB reply, its first megabyte read a byte at a time: memrelay that held replies would
    // have read all of it from the server meanwhile.
    let times = 40;
    client.send(&amplifying_get(times));
    let (mut most, mut byte) = (0, [0u8; 1]);
    for read in 1..=1_000_000u64 {
        assert_eq!(client.stream.read(&mut byte).expect("the reply goes on"), 1);
        if read % 100_000 == 0 {
            most = most.max(status_bytes(relay.pid(), "VmRSS"));
        }
    }
    thread::sleep(Duration::from_millis(500));
    most = most.max(status_bytes(relay.pid(), "VmRSS"));
    assert!(most < before + 16 * MIB, "RSS rose to {} MiB from {} MiB", most / MIB, before / MIB);
    let tail = read_reply(&mut client, reply_len(times) - 1_000_000, 1 << 20);
    assert!(tail.ends_with(b"vv\r\nEND\r\n"), "{}", show(&tail));
}

fn a_2_gb_reply_passes_without_a_server_timeout_while_another_client_is_served(engine: &str) {
    // Two servers on ketama, both holding `k`; the other client's key lives on the server that
    // does not answer `k`. So nothing of the other client's waits behind the stream on a server
    // connection, and the stream may pause while the reader is slow: the reader is never cut
    // off however slowly a busy machine lets it read (a request behind the stream on a shared
    // connection would forbid the pause, issue 42, and a reader that fell a budget behind would
    // be cut off: that is isolation, not what this test is about).
    let servers = [server_with_a_large_value(), server_with_a_large_value()];
    let args = ["--max-value-size", "2000000", "--workers", "2", "--threads", "2", "--server-timeout-ms", "1000"];
    let relay =
        Memrelay::start(engine, &[&servers[0], &servers[1]], &[&args[..], &["--distribution", "ketama"]].concat());
    let mut probe = relay.client();
    let mut route = |key: &str| probe.get(&format!("__memrelay__.route(get,{key})"))[0].1.clone();
    let streams_from = route("k");
    let small = (0..100)
        .map(|i| format!("small{i}"))
        .find(|key| route(key) != streams_from)
        .expect("a key on the other server");
    let times = 2048;
    let done = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicU64::new(0));
    let other = {
        let (done, served, addr) = (Arc::clone(&done), Arc::clone(&served), relay.addr());
        thread::spawn(move || {
            let mut client = Client::connect(&addr);
            client.set_read_timeout(Duration::from_secs(60));
            let mut n = 0u64;
            while !done.load(Ordering::Relaxed) {
                let value = format!("value {n}");
                assert_eq!(client.set(&small, value.as_bytes()), "STORED\r\n");
                let got = client.get(&small);
                assert_eq!(got, vec![(small.clone(), value.into_bytes())], "request {n}");
                served.store(n + 1, Ordering::Relaxed);
                n += 1;
                thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let mut client = relay.client();
    client.set_read_timeout(Duration::from_secs(60));
    let started = Instant::now();
    client.send(&amplifying_get(times));
    let tail = read_reply(&mut client, reply_len(times), 1 << 20);
    let took = started.elapsed();
    done.store(true, Ordering::Relaxed);
    other.join().expect("the other client was served correctly throughout");
    assert!(tail.ends_with(b"vv\r\nEND\r\n"), "{}", show(&tail));
    assert!(served.load(Ordering::Relaxed) > 0, "the other client was served during {took:?}");
    // Longer than the server timeout, and no server failure was counted.
    let stats = client.request(b"stats\r\n", b"END\r\n");
    let stats = String::from_utf8_lossy(&stats);
    assert!(!relay.stderr().contains("is down"), "{}", relay.stderr());
    assert!(!stats.contains("SERVER_ERROR"), "{stats}");
}

fn a_client_that_leaves_mid_reply_frees_the_server_connection_at_once(engine: &str) {
    let server = server_with_a_large_value();
    // One worker or event loop: the leaver's reply and the next client share the connection.
    let relay = start(engine, &server, &["--workers", "1", "--threads", "1"]);
    let mut leaver = relay.client();
    leaver.send(&amplifying_get(200));
    // It reads nothing: memrelay has filled its socket and waits on it (its patience is 5 minutes).
    thread::sleep(Duration::from_millis(500));
    drop(leaver);
    let mut next = relay.client();
    next.set_read_timeout(Duration::from_secs(30));
    let started = Instant::now();
    assert_eq!(next.set("small", b"1"), "STORED\r\n");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "the next client waited {took:?} for the leaver's reply");
    assert!(!relay.stderr().contains("is down"), "{}", relay.stderr());
}

/// Two servers holding the same eight 1 MB values (every key on every server), each value
/// its own byte.
fn two_servers_with_large_values() -> (Memcached, Memcached) {
    let servers = (Memcached::start_with(&["-I", "2m"]), Memcached::start_with(&["-I", "2m"]));
    for i in 0..8u8 {
        for server in [&servers.0, &servers.1] {
            server.set_raw(&format!("k{i}"), &vec![b'a' + i; VALUE_LEN]);
        }
    }
    servers
}

/// Reads `a`'s and `b`'s replies side by side in chunks, comparing them, until `a`'s ends
/// with `END`; returns its length. Neither is held whole.
fn same_reply(a: &mut Client, b: &mut Client) -> u64 {
    let (mut buf_a, mut buf_b) = (vec![0; 1 << 20], vec![0; 1 << 20]);
    let (mut len, mut tail) = (0u64, Vec::new());
    loop {
        let n = a.stream.read(&mut buf_a).expect("memrelay's reply goes on");
        assert!(n > 0, "memrelay closed after {len} bytes");
        b.stream.read_exact(&mut buf_b[..n]).expect("memcached's reply is as long");
        assert!(
            buf_a[..n] == buf_b[..n],
            "the replies differ within bytes {len}..{}: {}",
            len + n as u64,
            show(&buf_a[..n.min(200)])
        );
        len += n as u64;
        tail.extend_from_slice(&buf_a[..n]);
        tail.drain(..tail.len().saturating_sub(16));
        if tail.ends_with(b"\r\nEND\r\n") || (len == 5 && tail == b"END\r\n") {
            return len;
        }
    }
}

fn a_sharded_get_streams_merged_in_key_order_in_bounded_memory(engine: &str) {
    let (one, two) = two_servers_with_large_values();
    let relay = Memrelay::start(engine, &[&one, &two], &["--sharded", "--max-value-size", "2000000"]);
    let (mut client, mut reference) = (relay.client(), one.client());
    for c in [&mut client, &mut reference] {
        c.set_read_timeout(Duration::from_secs(60));
    }
    // Warm-up: one merged reply has passed, so the RSS from now on is the baseline.
    client.send(b"get k0 k1 k2 k3\r\n");
    reference.send(b"get k0 k1 k2 k3\r\n");
    same_reply(&mut client, &mut reference);
    let before = status_bytes(relay.pid(), "VmRSS");
    // 300 keys, every eighth one missing, repeated keys: each server's half is well over what
    // memrelay may hold of one part (32 MiB), the whole about 260 MB.
    let keys: Vec<String> =
        (0..300).map(|i| if i % 8 == 7 { format!("missing{i}") } else { format!("k{}", (i * 3) % 8) }).collect();
    let request = format!("get {}\r\n", keys.join(" "));
    client.send(request.as_bytes());
    reference.send(request.as_bytes());
    let len = same_reply(&mut client, &mut reference);
    assert!(len > 250_000_000, "{len} bytes");
    assert_peak_within_64_mib(&relay, before, &format!("a merged reply of {len} bytes"));
    // Both server connections are in step: the next merged request is exact.
    client.send(b"get k1 missing k2\r\n");
    reference.send(b"get k1 missing k2\r\n");
    same_reply(&mut client, &mut reference);
}

fn a_server_that_dies_mid_merge_closes_only_that_client(engine: &str) {
    let (one, mut two) = two_servers_with_large_values();
    let relay = Memrelay::start(engine, &[&one, &two], &["--sharded", "--max-value-size", "2000000"]);
    let mut client = relay.client();
    client.set_read_timeout(Duration::from_secs(30));
    let keys: Vec<String> = (0..300).map(|i| format!("k{}", i % 8)).collect();
    client.send(format!("get {}\r\n", keys.join(" ")).as_bytes());
    // Part of the first server's half, then the second server dies.
    let mut buf = vec![0; 1 << 20];
    let mut got = 0;
    while got < 20_000_000 {
        let n = client.stream.read(&mut buf).expect("the reply goes on");
        assert!(n > 0, "closed after {got} bytes, before the server died");
        got += n;
    }
    two.kill();
    // The reply cannot be finished: the client's connection is closed (not left hanging).
    let rest = client.closed_within(Duration::from_secs(20));
    assert!(rest.is_some(), "the client's connection is still open 20 s after its server died");
    // memrelay is still there for everyone else.
    let mut other = relay.client();
    assert!(other.line(b"version\r\n").starts_with("VERSION"));
}
