//! Black-box tests of memrelay as a middleware: raw protocol bytes to a running memrelay in front
//! of real memcached servers, checked against what the servers themselves hold and count (their
//! own `get` and `stats`), never against memrelay's own account.
//!
//! Every test is a function of the engine's name and runs once per engine (see `common`).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;

engine_matrix!(
    replication,
    success_only_when_every_server_succeeds,
    noreply,
    single_gets_round_robin,
    multiget_not_sharded,
    multiget_sharded,
    gets_then_cas,
    pipelining,
    steady_pipelining_memory_is_bounded,
    split_and_batched_requests,
    bad_input,
    oversized_and_broken_requests,
    client_disconnects_mid_request,
    server_down_at_start,
    server_killed_then_restarted,
    server_restarted_while_idle,
    server_never_answers,
    sigterm_idle,
    sigterm_answers_request_in_flight,
    sigterm_during_bursts,
    bad_arguments,
    thousand_clients,
);

fn servers(n: usize) -> Vec<Memcached> {
    (0..n).map(|_| Memcached::start()).collect()
}

fn refs(servers: &[Memcached]) -> Vec<&Memcached> {
    servers.iter().collect()
}

fn stats_all(servers: &[Memcached]) -> Vec<std::collections::HashMap<String, u64>> {
    servers.iter().map(Memcached::stats).collect()
}

/// Per-server change of one counter between two snapshots.
fn deltas(
    before: &[std::collections::HashMap<String, u64>],
    after: &[std::collections::HashMap<String, u64>],
    name: &str,
) -> Vec<u64> {
    before.iter().zip(after).map(|(b, a)| delta(b, a, name)).collect()
}

fn assert_everywhere(servers: &[Memcached], key: &str, value: Option<&[u8]>) {
    for (i, server) in servers.iter().enumerate() {
        assert_eq!(server.get_raw(key).as_deref(), value, "server {i} holds the wrong value for {key}");
    }
}

// ------------------------------------------------------------------------------------------
// Replication

/// Every write command reaches every server: the servers' own contents and counters.
fn replication(engine: &str) {
    let servers = servers(3);
    let relay = Memrelay::start(engine, &refs(&servers), &[]);
    let mut c = relay.client();

    assert_eq!(c.set("r:set", b"hello"), "STORED\r\n");
    assert_everywhere(&servers, "r:set", Some(b"hello"));

    assert_eq!(c.storage("add", "r:add", b"a1"), "STORED\r\n");
    assert_everywhere(&servers, "r:add", Some(b"a1"));
    assert_eq!(c.storage("add", "r:add", b"a2"), "NOT_STORED\r\n");
    assert_everywhere(&servers, "r:add", Some(b"a1"));

    assert_eq!(c.storage("replace", "r:add", b"r1"), "STORED\r\n");
    assert_everywhere(&servers, "r:add", Some(b"r1"));
    assert_eq!(c.storage("replace", "r:none", b"zz"), "NOT_STORED\r\n");
    assert_everywhere(&servers, "r:none", None);

    assert_eq!(c.storage("append", "r:add", b"+app"), "STORED\r\n");
    assert_eq!(c.storage("prepend", "r:add", b"pre+"), "STORED\r\n");
    assert_everywhere(&servers, "r:add", Some(b"pre+r1+app"));

    assert_eq!(c.set("r:n", b"10"), "STORED\r\n");
    assert_eq!(c.line(b"incr r:n 5\r\n"), "15\r\n");
    assert_eq!(c.line(b"decr r:n 3\r\n"), "12\r\n");
    assert_everywhere(&servers, "r:n", Some(b"12"));
    assert_eq!(c.line(b"incr r:missing 1\r\n"), "NOT_FOUND\r\n");

    let before = stats_all(&servers);
    assert_eq!(c.line(b"touch r:set 1000\r\n"), "TOUCHED\r\n");
    let after = stats_all(&servers);
    assert_eq!(deltas(&before, &after, "cmd_touch"), [1, 1, 1]);
    assert_eq!(deltas(&before, &after, "touch_hits"), [1, 1, 1]);

    let before = stats_all(&servers);
    assert_eq!(c.line(b"delete r:set\r\n"), "DELETED\r\n");
    assert_everywhere(&servers, "r:set", None);
    assert_eq!(c.line(b"delete r:set\r\n"), "NOT_FOUND\r\n");
    let after = stats_all(&servers);
    assert_eq!(deltas(&before, &after, "delete_hits"), [1, 1, 1]);
    assert_eq!(deltas(&before, &after, "delete_misses"), [1, 1, 1]);

    let before = stats_all(&servers);
    assert_eq!(c.line(b"flush_all\r\n"), "OK\r\n");
    let after = stats_all(&servers);
    assert_eq!(deltas(&before, &after, "cmd_flush"), [1, 1, 1]);
    assert_everywhere(&servers, "r:add", None);
    assert_everywhere(&servers, "r:n", None);
}

/// A replicated write is a success only if it succeeded everywhere; otherwise a failure reply
/// is relayed.
fn success_only_when_every_server_succeeds(engine: &str) {
    let servers = servers(3);
    let relay = Memrelay::start(engine, &refs(&servers), &[]);
    let mut c = relay.client();
    for (holder, server) in servers.iter().enumerate() {
        // One server holds the key, the others do not.
        let key = format!("s:add{holder}");
        server.set_raw(&key, b"mine");
        assert_eq!(c.storage("add", &key, b"new"), "NOT_STORED\r\n", "add with server {holder} holding the key");
        assert_eq!(server.get_raw(&key).as_deref(), Some(&b"mine"[..]));

        // replace fails on the servers without the key.
        let key = format!("s:replace{holder}");
        server.set_raw(&key, b"mine");
        assert_eq!(c.storage("replace", &key, b"new"), "NOT_STORED\r\n");

        // delete finds it on one server only.
        let key = format!("s:delete{holder}");
        server.set_raw(&key, b"mine");
        assert_eq!(c.line(format!("delete {key}\r\n").as_bytes()), "NOT_FOUND\r\n");
    }
}

/// `noreply`: no reply line, and the write is done before the next request is answered.
fn noreply(engine: &str) {
    let servers = servers(3);
    let relay = Memrelay::start(engine, &refs(&servers), &[]);
    let mut c = relay.client();

    // In one write.
    c.send(b"set nr:a 0 0 3 noreply\r\nabc\r\nget nr:a\r\n");
    assert_eq!(c.read_until(b"END\r\n"), b"VALUE nr:a 0 3\r\nabc\r\nEND\r\n");
    // In separate writes, the get right after.
    c.send(b"set nr:b 5 0 2 noreply\r\nxy\r\n");
    c.send(b"get nr:b\r\n");
    assert_eq!(c.read_until(b"END\r\n"), b"VALUE nr:b 5 2\r\nxy\r\nEND\r\n");
    assert_everywhere(&servers, "nr:b", Some(b"xy"));

    c.send(b"append nr:b 0 0 1 noreply\r\nz\r\nget nr:b\r\n");
    assert_eq!(c.read_until(b"END\r\n"), b"VALUE nr:b 5 3\r\nxyz\r\nEND\r\n");
    c.send(b"set nr:n 0 0 1 noreply\r\n7\r\nincr nr:n 5 noreply\r\ndecr nr:n 1 noreply\r\nget nr:n\r\n");
    assert_eq!(c.read_until(b"END\r\n"), b"VALUE nr:n 0 2\r\n11\r\nEND\r\n");
    assert_everywhere(&servers, "nr:n", Some(b"11"));
    c.send(b"touch nr:n 100 noreply\r\ndelete nr:a noreply\r\nget nr:a\r\n");
    assert_eq!(c.read_until(b"END\r\n"), b"END\r\n");
    assert_everywhere(&servers, "nr:a", None);
    c.send(b"flush_all noreply\r\nget nr:b\r\n");
    assert_eq!(c.read_until(b"END\r\n"), b"END\r\n");
    assert_everywhere(&servers, "nr:b", None);
    // Nothing was left over: the next reply is the version.
    assert!(c.line(b"version\r\n").starts_with("VERSION "));
}

// ------------------------------------------------------------------------------------------
// Reads

/// Single-key gets from one client go round robin: each server gets exactly a third.
fn single_gets_round_robin(engine: &str) {
    let servers = servers(3);
    let relay = Memrelay::start(engine, &refs(&servers), &[]);
    let mut c = relay.client();
    assert_eq!(c.set("rr:k", b"v"), "STORED\r\n");
    let before = stats_all(&servers);
    for _ in 0..300 {
        assert_eq!(c.get("rr:k"), [("rr:k".to_string(), b"v".to_vec())]);
    }
    let after = stats_all(&servers);
    assert_eq!(deltas(&before, &after, "cmd_get"), [100, 100, 100]);
    assert_eq!(deltas(&before, &after, "get_hits"), [100, 100, 100]);
}

fn value(key: &str) -> Vec<u8> {
    format!("value-of-{key}").into_bytes()
}

fn expect_values(keys: &[&str]) -> Vec<(String, Vec<u8>)> {
    keys.iter().map(|k| (k.to_string(), value(k))).collect()
}

/// Non-sharded multi-get: one server answers all the keys; the next request goes to the next.
fn multiget_not_sharded(engine: &str) {
    let servers = servers(3);
    let relay = Memrelay::start(engine, &refs(&servers), &[]);
    let mut c = relay.client();
    for key in ["m:1", "m:2", "m:3", "m:5", "m:6"] {
        assert_eq!(c.set(key, &value(key)), "STORED\r\n");
    }
    let mut answered = Vec::new();
    for _ in 0..3 {
        let before = stats_all(&servers);
        assert_eq!(c.get("m:1 m:2 m:3 m:4 m:5 m:6"), expect_values(&["m:1", "m:2", "m:3", "m:5", "m:6"]));
        let after = stats_all(&servers);
        let gets = deltas(&before, &after, "cmd_get");
        let mut sorted = gets.clone();
        sorted.sort();
        assert_eq!(sorted, [0, 0, 6], "one server answers every key: {gets:?}");
        answered.push(gets.iter().position(|&n| n == 6).unwrap());
        assert_eq!(deltas(&before, &after, "get_hits").iter().sum::<u64>(), 5);
        assert_eq!(deltas(&before, &after, "get_misses").iter().sum::<u64>(), 1);
    }
    answered.sort();
    assert_eq!(answered, [0, 1, 2], "consecutive multi-gets go round robin");
    // A key asked twice is answered twice, as memcached does.
    assert_eq!(c.get("m:1 m:4 m:1"), expect_values(&["m:1", "m:1"]));
}

/// Sharded multi-get: consecutive groups of keys, one per server, merged in the order asked.
fn multiget_sharded(engine: &str) {
    let servers = servers(3);
    let relay = Memrelay::start(engine, &refs(&servers), &["--sharded"]);
    let mut c = relay.client();
    for key in ["sh:1", "sh:2", "sh:4", "sh:6"] {
        assert_eq!(c.set(key, &value(key)), "STORED\r\n");
    }
    for _ in 0..3 {
        let before = stats_all(&servers);
        let reply = c.get_reply("get sh:1 sh:2 sh:3 sh:4 sh:5 sh:6\r\n");
        assert_eq!(parse_values(&reply), expect_values(&["sh:1", "sh:2", "sh:4", "sh:6"]));
        assert_eq!(reply.windows(5).filter(|w| w == b"END\r\n").count(), 1, "one END: {}", show(&reply));
        let after = stats_all(&servers);
        assert_eq!(deltas(&before, &after, "cmd_get"), [2, 2, 2], "each server gets its two keys");
        assert_eq!(deltas(&before, &after, "get_hits").iter().sum::<u64>(), 4);
        assert_eq!(deltas(&before, &after, "get_misses").iter().sum::<u64>(), 2);
    }
    // Any order asked is the order answered.
    assert_eq!(c.get("sh:6 sh:5 sh:4 sh:3 sh:2 sh:1"), expect_values(&["sh:6", "sh:4", "sh:2", "sh:1"]));
    // Fewer keys than servers: one key per server, two servers.
    let before = stats_all(&servers);
    assert_eq!(c.get("sh:4 sh:1"), expect_values(&["sh:4", "sh:1"]));
    let after = stats_all(&servers);
    let mut gets = deltas(&before, &after, "cmd_get");
    gets.sort();
    assert_eq!(gets, [0, 1, 1]);
    // Repeated keys, in one group and across groups.
    assert_eq!(c.get("sh:1 sh:2 sh:1"), expect_values(&["sh:1", "sh:2", "sh:1"]));
    assert_eq!(c.get("sh:2 sh:2 sh:2 sh:2 sh:2 sh:2"), expect_values(&["sh:2"; 6]));
    assert_eq!(c.get("sh:1 sh:1 sh:3 sh:3 sh:6 sh:6"), expect_values(&["sh:1", "sh:1", "sh:6", "sh:6"]));
    // All misses.
    assert_eq!(c.get_reply("get sh:7 sh:8 sh:9 sh:10\r\n"), b"END\r\n");
}

/// `gets` then `cas` through memrelay: the token works, every server gets the new value.
fn gets_then_cas(engine: &str) {
    let servers = servers(3);
    let relay = Memrelay::start(engine, &refs(&servers), &[]);
    let mut c = relay.client();
    assert_eq!(c.set("cas:k", b"v1"), "STORED\r\n");
    let reply = String::from_utf8(c.get_reply("gets cas:k\r\n")).unwrap();
    let header = reply.lines().next().unwrap();
    let fields: Vec<&str> = header.split(' ').collect();
    assert_eq!(&fields[..4], ["VALUE", "cas:k", "0", "2"], "{reply:?}");
    let token: u64 = fields[4].parse().expect("a cas token");
    assert!(reply.ends_with("\r\nv1\r\nEND\r\n"));

    assert_eq!(c.line(format!("cas cas:k 0 0 2 {}\r\nvX\r\n", token + 1000).as_bytes()), "EXISTS\r\n");
    assert_everywhere(&servers, "cas:k", Some(b"v1"));
    assert_eq!(c.line(format!("cas cas:k 0 0 2 {token}\r\nv2\r\n").as_bytes()), "STORED\r\n");
    assert_everywhere(&servers, "cas:k", Some(b"v2"));
    assert_eq!(c.line(format!("cas cas:k 0 0 2 {token}\r\nv3\r\n").as_bytes()), "EXISTS\r\n");
    assert_everywhere(&servers, "cas:k", Some(b"v2"));
    assert_eq!(c.line(b"cas cas:none 0 0 1 1\r\nx\r\n"), "NOT_FOUND\r\n");
    // A fresh token works again.
    let reply = String::from_utf8(c.get_reply("gets cas:k\r\n")).unwrap();
    let token: u64 = reply.lines().next().unwrap().split(' ').nth(4).unwrap().parse().unwrap();
    assert_eq!(c.line(format!("cas cas:k 0 0 2 {token}\r\nv4\r\n").as_bytes()), "STORED\r\n");
    assert_everywhere(&servers, "cas:k", Some(b"v4"));
}

// ------------------------------------------------------------------------------------------
// Framing

/// 200 requests of mixed types in one write: every reply, in order.
fn pipelining(engine: &str) {
    let servers = servers(3);
    let relay = Memrelay::start(engine, &refs(&servers), &[]);
    let mut c = relay.client();
    let mut requests = Vec::new();
    let mut expected = Vec::new();
    for i in 0..40 {
        let (key, v) = (format!("pl:{i}"), format!("v{i}"));
        requests.extend(format!("set {key} 0 0 {}\r\n{v}\r\n", v.len()).bytes());
        expected.extend(b"STORED\r\n");
        requests.extend(format!("get {key}\r\n").bytes());
        expected.extend(format!("VALUE {key} 0 {}\r\n{v}\r\nEND\r\n", v.len()).bytes());
        requests.extend(format!("append {key} 0 0 1\r\nx\r\n").bytes());
        expected.extend(b"STORED\r\n");
        requests.extend(format!("get pl:none {key}\r\n").bytes());
        expected.extend(format!("VALUE {key} 0 {}\r\n{v}x\r\nEND\r\n", v.len() + 1).bytes());
        requests.extend(format!("delete {key}\r\n").bytes());
        expected.extend(b"DELETED\r\n");
    }
    c.send(&requests);
    let reply = c.read_exact_reply(expected.len());
    if reply != expected {
        let at = reply.iter().zip(&expected).position(|(a, b)| a != b).unwrap_or(0);
        panic!("replies differ at byte {at}: got {} expected {}", show(&reply[at..]), show(&expected[at..]));
    }
    assert!(c.line(b"version\r\n").starts_with("VERSION "));
}

/// memrelay's resident memory in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// Streams `count` copies of `request` in pieces that do not line up with requests, at most
/// `AHEAD` requests ahead of the replies, and checks every reply.
fn stream_requests(c: &mut Client, request: &[u8], count: usize, reply: &[u8]) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    const AHEAD: usize = 16;
    let stream = request.repeat(count);
    let request_len = request.len();
    let replies = Arc::new(AtomicUsize::new(0));
    let mut writer = c.stream.try_clone().unwrap();
    let sender = {
        let replies = Arc::clone(&replies);
        thread::spawn(move || {
            let mut sent = 0;
            for piece in stream.chunks(3001) {
                while sent / request_len > replies.load(Ordering::Acquire) + AHEAD {
                    thread::sleep(Duration::from_micros(50));
                }
                writer.write_all(piece).unwrap();
                sent += piece.len();
            }
        })
    };
    for i in 0..count {
        assert_eq!(c.read_line(), reply, "reply {i}");
        replies.fetch_add(1, Ordering::Release);
    }
    sender.join().unwrap();
}

/// A client that streams requests a few ahead of its replies, in pieces that do not line up
/// with requests (so memrelay's input buffer practically never runs empty, yet never holds
/// much), is served in order, and memrelay's memory does not grow with the bytes it reads:
/// after a warm-up run (buffers at their working size, every measurement window allocated:
/// hence the short windows), two more runs of 40 MB each add next to nothing.
fn steady_pipelining_memory_is_bounded(engine: &str) {
    const REQUESTS: usize = 2000;
    const SIZE: usize = 20_000;
    let servers = servers(1);
    let relay = Memrelay::start(engine, &refs(&servers), &["--stats-window", "0.1"]);
    let mut c = relay.client();
    let mut request = format!("set sp:k 0 0 {SIZE}\r\n").into_bytes();
    request.extend(std::iter::repeat_n(b'p', SIZE));
    request.extend_from_slice(b"\r\n");
    stream_requests(&mut c, &request, REQUESTS, b"STORED\r\n");
    thread::sleep(Duration::from_millis(300));
    let warm = rss(relay.pid());
    for _ in 0..2 {
        stream_requests(&mut c, &request, REQUESTS, b"STORED\r\n");
    }
    let grown = rss(relay.pid()).saturating_sub(warm);
    let read = (2 * REQUESTS * request.len()) as u64;
    assert!(grown < read / 5, "memrelay grew by {grown} bytes while reading {read} more");
    assert_usable(&mut c);
}

/// A request split over many writes, and many requests in one write.
fn split_and_batched_requests(engine: &str) {
    let servers = servers(3);
    let relay = Memrelay::start(engine, &refs(&servers), &[]);
    let mut c = relay.client();
    for &byte in b"set sp 0 0 10\r\n0123456789\r\n" {
        c.send(&[byte]);
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(c.read_line(), b"STORED\r\n");
    for &byte in b"get sp\r\n" {
        c.send(&[byte]);
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(c.read_until(b"END\r\n"), b"VALUE sp 0 10\r\n0123456789\r\nEND\r\n");
    // Split inside the data and between CR and LF.
    for part in [&b"set sp2 0 0 4\r"[..], b"\nab", b"cd\r", b"\n"] {
        c.send(part);
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(c.read_line(), b"STORED\r\n");
    assert_everywhere(&servers, "sp2", Some(b"abcd"));
    // Many in one write.
    let mut batch = Vec::new();
    for _ in 0..100 {
        batch.extend_from_slice(b"get sp2\r\n");
    }
    batch.extend_from_slice(b"version\r\n");
    c.send(&batch);
    for _ in 0..100 {
        assert_eq!(c.read_until(b"END\r\n"), b"VALUE sp2 0 4\r\nabcd\r\nEND\r\n");
    }
    assert!(c.read_line().starts_with(b"VERSION "));
}

fn assert_usable(c: &mut Client) {
    let line = c.line(b"version\r\n");
    // memrelay's own answer (a memcached would name its own release, 1.6.x with x > 0).
    assert_eq!(line, "VERSION 1.6.0\r\n");
}

/// Errors that keep the connection usable; `version` and `quit`.
fn bad_input(engine: &str) {
    let servers = servers(3);
    let relay = Memrelay::start(engine, &refs(&servers), &[]);
    let mut c = relay.client();
    assert_usable(&mut c);

    assert_eq!(c.line(b"foo bar\r\n"), "ERROR\r\n");
    assert_usable(&mut c);
    assert_eq!(c.line(b"\r\n"), "ERROR\r\n");
    assert_usable(&mut c);

    let long = "k".repeat(251);
    assert!(c.line(format!("get {long}\r\n").as_bytes()).starts_with("CLIENT_ERROR "));
    assert_usable(&mut c);
    assert!(c.line(format!("get a {long} b\r\n").as_bytes()).starts_with("CLIENT_ERROR "));
    assert_usable(&mut c);
    assert!(c.line(format!("delete {long}\r\n").as_bytes()).starts_with("CLIENT_ERROR "));
    assert_usable(&mut c);
    // 250 bytes is a key.
    let key = "k".repeat(250);
    assert_eq!(c.set(&key, b"ok"), "STORED\r\n");
    assert_eq!(c.get(&key), [(key.clone(), b"ok".to_vec())]);

    assert!(c.line(b"set k x 0 1\r\n").starts_with("CLIENT_ERROR "));
    assert_usable(&mut c);
    // A wrong number of arguments is ERROR, as memcached 1.6 answers it.
    assert_eq!(c.line(b"set k 0 0\r\n"), "ERROR\r\n");
    assert_usable(&mut c);
    assert!(c.line(b"incr k abc\r\n").starts_with("CLIENT_ERROR "));
    assert_usable(&mut c);

    let line = c.line(b"version\r\n");
    assert_eq!(line, "VERSION 1.6.0\r\n");

    c.send(b"quit\r\n");
    assert_eq!(c.closed_within(Duration::from_secs(3)), Some(Vec::new()), "quit closes without a reply");
    // As memcached: whatever follows `quit` on its line, and after it, the connection closes.
    let mut q = relay.client();
    q.send(b"quit now\r\nget k\r\n");
    assert_eq!(q.closed_within(Duration::from_secs(3)), Some(Vec::new()), "quit now closes without a reply");
    // memrelay goes on serving.
    assert_usable(&mut relay.client());
}

/// Too-large values are answered and skipped; a wrong-length data block and an endless line
/// close the connection.
fn oversized_and_broken_requests(engine: &str) {
    let servers = servers(3);
    let relay = Memrelay::start(engine, &refs(&servers), &["--max-value-size", "1000"]);
    let mut c = relay.client();

    // Exactly the limit is fine.
    assert_eq!(c.set("big:ok", &[b'a'; 1000]), "STORED\r\n");
    // Over it: answered at once, the data block (full of commands) skipped, even if it arrives
    // in pieces, and the next request works.
    let mut data = b"version\r\n".repeat(222);
    data.extend_from_slice(b"xx");
    assert_eq!(data.len(), 2000);
    c.send(b"set big:no 0 0 2000\r\n");
    assert_eq!(c.read_line(), b"SERVER_ERROR object too large for cache\r\n");
    for piece in data.chunks(500) {
        c.send(piece);
        thread::sleep(Duration::from_millis(2));
    }
    c.send(b"\r\nget big:no\r\n");
    assert_eq!(c.read_until(b"END\r\n"), b"END\r\n");
    assert_usable(&mut c);
    assert_everywhere(&servers, "big:no", None);
    // Over it, all in one write.
    let mut request = b"set big:no 0 0 2000\r\n".to_vec();
    request.extend_from_slice(&data);
    request.extend_from_slice(b"\r\nget big:ok\r\n");
    c.send(&request);
    assert_eq!(c.read_line(), b"SERVER_ERROR object too large for cache\r\n");
    let reply = c.read_until(b"END\r\n");
    assert_eq!(parse_values(&reply), [("big:ok".to_string(), vec![b'a'; 1000])]);

    // A data block longer than announced: answered, and (as memcached) the bytes after the
    // announced block are read as the next request.
    let mut d = relay.client();
    d.send(b"set wl 0 0 3\r\nabcdef\r\n");
    assert_eq!(d.read_line(), b"CLIENT_ERROR bad data chunk\r\n");
    assert_eq!(d.read_line(), b"ERROR\r\n");
    assert_usable(&mut d);
    assert_everywhere(&servers, "wl", None);

    // A 100 KB line without a newline: closed.
    let mut e = relay.client();
    let _ = e.stream.write_all(&vec![b'g'; 100 * 1024]);
    let got = e.closed_within(Duration::from_secs(3)).expect("memrelay closes an endless line");
    assert!(got.is_empty() || got.starts_with(b"CLIENT_ERROR "), "{}", show(&got));

    // The first connection still works.
    assert_usable(&mut c);
}

/// Clients that leave halfway (or before their reply) do not hurt memrelay.
fn client_disconnects_mid_request(engine: &str) {
    let servers = servers(3);
    let relay = Memrelay::start(engine, &refs(&servers), &[]);
    {
        let mut half = relay.client();
        half.send(b"set half 0 0 10\r\nabc");
    }
    {
        let mut half = relay.client();
        half.send(b"get hal");
    }
    for _ in 0..20 {
        // Requests in flight when the client goes.
        let mut gone = relay.client();
        gone.send(b"set gone 0 0 1\r\nx\r\nget gone\r\nget gone\r\n");
    }
    {
        let mut gone = relay.client();
        gone.send(b"set gone 0 0 1\r\nx\r\n");
        gone.shutdown_write();
        assert_eq!(gone.read_line(), b"STORED\r\n", "a request before EOF is still answered");
    }
    let mut c = relay.client();
    assert_eq!(c.set("after", b"fine"), "STORED\r\n");
    assert_eq!(c.get("after half"), [("after".to_string(), b"fine".to_vec())]);
    assert_everywhere(&servers, "half", None);
}

// ------------------------------------------------------------------------------------------
// Server failures

const TIMEOUT_ARGS: &[&str] = &["--server-timeout-ms", "300"];
/// How long a failure may take to come back: the 300 ms timeout plus slack for a busy machine.
const FAIL_WITHIN: Duration = Duration::from_millis(1500);

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

/// A server down from the start: requests needing it fail fast, the others are served.
fn server_down_at_start(engine: &str) {
    let (a, b) = (Memcached::start(), Memcached::start());
    let dead = format!("127.0.0.1:{}", free_port());
    let relay = Memrelay::start_addrs(engine, &[a.addr(), dead, b.addr()], TIMEOUT_ARGS);
    a.set_raw("d:k", b"v");
    b.set_raw("d:k", b"v");
    let mut c = relay.client();
    for _ in 0..3 {
        let (reply, took) = timed(|| c.set("d:new", b"x"));
        assert!(reply.starts_with("SERVER_ERROR "), "{reply:?}");
        assert!(took < FAIL_WITHIN, "took {took:?}");
    }
    let mut failed = 0;
    for _ in 0..6 {
        let (reply, took) = timed(|| c.get_reply("get d:k\r\n"));
        assert!(took < FAIL_WITHIN, "took {took:?}");
        if reply.starts_with(b"SERVER_ERROR ") {
            assert!(reply.ends_with(b"\r\n") && reply.iter().filter(|&&b| b == b'\n').count() == 1);
            failed += 1;
        } else {
            assert_eq!(reply, b"VALUE d:k 0 1\r\nv\r\nEND\r\n");
        }
    }
    assert_eq!(failed, 2, "one read in three goes to the dead server");
    assert_usable(&mut c);
}

/// A server killed mid-run: quick SERVER_ERROR; restarted on its port: healed, no restart of
/// memrelay.
fn server_killed_then_restarted(engine: &str) {
    let mut servers = servers(3);
    let relay = Memrelay::start(engine, &refs(&servers), TIMEOUT_ARGS);
    let mut c = relay.client();
    assert_eq!(c.set("h:k", b"v"), "STORED\r\n");
    servers[1].kill();
    for i in 0..10 {
        let (reply, took) = timed(|| c.set("h:k", b"w"));
        assert!(reply.starts_with("SERVER_ERROR "), "set {i} with a server down: {reply:?}");
        assert!(took < FAIL_WITHIN, "set {i} took {took:?}");
    }
    servers[1].restart();
    // Keep asking, faster than the reconnect backoff, until 20 sets in a row succeed: a
    // connection may wait out its backoff (at most a second) but must be retried then.
    let mut in_a_row = 0;
    let (healed, took) = timed(|| {
        wait_for(Duration::from_secs(5), || {
            in_a_row = if c.set("h:k2", b"back") == "STORED\r\n" { in_a_row + 1 } else { 0 };
            in_a_row == 20
        })
    });
    assert!(healed, "sets still fail 5 s after the server came back");
    eprintln!("healed after {took:?}");
    assert_everywhere(&servers, "h:k2", Some(b"back"));
    // And stay healed.
    for i in 0..50 {
        assert_eq!(c.set(&format!("h:after{i}"), b"ok"), "STORED\r\n", "set {i} after healing");
    }
    assert_everywhere(&servers, "h:after49", Some(b"ok"));
}

/// A server restarted while memrelay's connections to it sat idle: the next request finds the
/// old connection closed and uses a new one, so the client never notices.
fn server_restarted_while_idle(engine: &str) {
    let mut servers = servers(3);
    let relay = Memrelay::start(engine, &refs(&servers), &["--workers", "1", "--server-timeout-ms", "300"]);
    let mut c = relay.client();
    assert_eq!(c.set("i:k", b"v"), "STORED\r\n");
    for round in 0..3 {
        servers[round % 3].restart();
        assert_eq!(c.set("i:k", b"again"), "STORED\r\n", "first set after restarting server {}", round % 3);
        assert_everywhere(&servers, "i:k", Some(b"again"));
    }
}

/// A server that accepts and never answers: SERVER_ERROR within the timeout.
fn server_never_answers(engine: &str) {
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap().to_string();
    let (a, b) = (Memcached::start(), Memcached::start());
    let relay = Memrelay::start_addrs(engine, &[a.addr(), silent_addr, b.addr()], TIMEOUT_ARGS);
    a.set_raw("q:k", b"v");
    b.set_raw("q:k", b"v");
    let mut c = relay.client();
    let (reply, took) = timed(|| c.set("q:new", b"x"));
    assert!(reply.starts_with("SERVER_ERROR "), "{reply:?}");
    assert!(took >= Duration::from_millis(250) && took < FAIL_WITHIN, "took {took:?}");
    let mut failed = 0;
    for _ in 0..6 {
        let (reply, took) = timed(|| c.get_reply("get q:k\r\n"));
        assert!(took < FAIL_WITHIN, "took {took:?}");
        if reply.starts_with(b"SERVER_ERROR ") {
            failed += 1;
        } else {
            assert_eq!(reply, b"VALUE q:k 0 1\r\nv\r\nEND\r\n");
        }
    }
    assert_eq!(failed, 2, "one read in three goes to the silent server");
    assert_usable(&mut c);
    drop(silent);
}

// ------------------------------------------------------------------------------------------
// Shutdown

fn sigterm_idle(engine: &str) {
    let servers = servers(1);
    let mut relay = Memrelay::start(engine, &refs(&servers), &[]);
    let mut c = relay.client();
    assert_eq!(c.set("idle", b"x"), "STORED\r\n");
    let (status, took) = timed(|| relay.stop());
    assert_eq!(status.code(), Some(0), "exit status; stderr: {}", relay.stderr());
    assert!(took < Duration::from_secs(2), "idle shutdown took {took:?}");
    assert!(c.closed_within(Duration::from_secs(2)).is_some(), "clients are closed at exit");
}

/// SIGTERM while a request waits on its server: the request is answered, then memrelay exits 0.
fn sigterm_answers_request_in_flight(engine: &str) {
    let (addr, has_request) = slow_server(Duration::from_millis(400));
    let mut relay = Memrelay::start_addrs(engine, &[addr], &[]);
    let mut c = relay.client();
    c.send(b"get slow\r\n");
    has_request.recv_timeout(Duration::from_secs(5)).expect("the request reaches the server");
    relay.terminate();
    assert_eq!(c.read_line(), b"END\r\n", "the request in flight is answered");
    assert!(c.closed_within(Duration::from_secs(3)).is_some(), "then the connection is closed");
    let status = relay.wait(Duration::from_secs(5));
    assert_eq!(status.code(), Some(0), "stderr: {}", relay.stderr());
}

/// SIGTERM while clients pipeline bursts: every reply sent is whole and right, exit 0.
fn sigterm_during_bursts(engine: &str) {
    let servers = servers(1);
    let mut relay = Memrelay::start(engine, &refs(&servers), &[]);
    servers[0].set_raw("b:k", b"x");
    const REPLY: &[u8] = b"VALUE b:k 0 1\r\nx\r\nEND\r\n";
    let mut clients: Vec<Client> = (0..8).map(|_| relay.client()).collect();
    let burst = b"get b:k\r\n".repeat(2000);
    for c in &mut clients {
        c.send(&burst);
    }
    relay.terminate();
    let mut answered = 0;
    for c in &mut clients {
        let mut got = Vec::new();
        let mut clean = false;
        let mut chunk = [0u8; 65536];
        loop {
            match c.stream.read(&mut chunk) {
                Ok(0) => {
                    clean = true;
                    break;
                }
                Ok(n) => got.extend_from_slice(&chunk[..n]),
                Err(_) => break,
            }
        }
        let whole = got.len() / REPLY.len();
        for i in 0..whole {
            assert_eq!(&got[i * REPLY.len()..(i + 1) * REPLY.len()], REPLY, "reply {i}");
        }
        if clean {
            assert_eq!(got.len() % REPLY.len(), 0, "no partial reply before a clean close");
        }
        answered += whole;
    }
    let status = relay.wait(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "stderr: {}", relay.stderr());
    eprintln!("{answered} replies before the shutdown");
}

// ------------------------------------------------------------------------------------------
// Command line

fn bad_arguments(engine: &str) {
    let listen = format!("127.0.0.1:{}", free_port());
    let cases: [&[&str]; 4] = [
        &["--engine", engine, "--listen", &listen],
        &["--engine", engine, "--listen", &listen, "--server", "127.0.0.1:1", "--workers", "0"],
        &["--engine", engine, "--listen", &listen, "--server", "nohost:99999"],
        &["--engine", engine, "--listen", &listen, "--server", "127.0.0.1:1", "--no-such-option"],
    ];
    for args in cases {
        let (status, stderr) = run_memrelay(args);
        assert_eq!(status.code(), Some(2), "memrelay {args:?}: stderr {stderr:?}");
        let text = stderr.trim_end_matches('\n');
        assert!(!text.is_empty() && !text.contains('\n'), "one line on stderr for {args:?}: {stderr:?}");
        assert!(text.starts_with("memrelay: "), "{text:?}");
    }
}

// ------------------------------------------------------------------------------------------
// Many clients

fn thousand_clients(engine: &str) {
    const CLIENTS: usize = 1000;
    let limit = raise_nofile(8192);
    assert!(limit >= 2 * CLIENTS as u64 + 100, "open-file limit {limit} is too low for this test");
    let servers = servers(3);
    let relay = Memrelay::start(engine, &refs(&servers), &[]);
    servers.iter().for_each(|s| s.set_raw("tc:k", b"hello"));
    let before = stats_all(&servers);
    let mut clients: Vec<Client> = (0..CLIENTS).map(|_| relay.client()).collect();
    for c in &mut clients {
        c.send(b"get tc:k\r\n");
    }
    for (i, c) in clients.iter_mut().enumerate() {
        assert_eq!(c.read_until(b"END\r\n"), b"VALUE tc:k 0 5\r\nhello\r\nEND\r\n", "client {i}");
    }
    let after = stats_all(&servers);
    let gets = deltas(&before, &after, "cmd_get");
    assert_eq!(gets.iter().sum::<u64>(), CLIENTS as u64);
    // Reads are balanced over the servers.
    assert!(gets.iter().all(|&n| n >= CLIENTS as u64 / 4), "{gets:?}");
    // All still connected and usable.
    for c in clients.iter_mut().step_by(50) {
        assert_usable(c);
    }
    let _ = TcpStream::connect(relay.addr()).expect("still accepting");
}
