//! The per-request policy seen from outside, on both engines (`relay::exchange` decides it once):
//! each decision the engines once made differently, and the meta requests that write (`mg … N`,
//! `ma … N q`), against real memcached servers and, where memcached is the reference, the same
//! bytes sent to a memcached directly. Each test failed on the tree before the policy was one
//! (the closing note of the restructuring says how that was shown).
//!
//! Every test is a function of the engine's name and runs once per engine (see `common`).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread;
use std::time::Duration;

use crate::common::*;

engine_matrix!(
    a_win_flag_re_ask_whose_primary_fails_is_a_server_error,
    a_touching_read_whose_primary_fails_is_a_server_error,
    the_copies_get_a_deadline_of_their_own,
    a_write_held_back_from_a_server_being_repaired_is_not_its_failure,
    an_autovivifying_mg_writes_every_replica_as_memcached_would,
    a_quiet_autovivifying_ma_is_answered_as_memcached_answers_it,
);

/// Three servers, every key on each, a write policy that repairs (so reads fail over).
fn three(engine: &str) -> (Vec<Memcached>, Memrelay) {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let relay = Memrelay::start(
        engine,
        &servers.iter().collect::<Vec<_>>(),
        &[
            "--write-policy",
            "majority",
            "--server-timeout-ms",
            "300",
            "--restart-check-ms",
            "60000",
            "--stats-window",
            "0.1",
        ],
    );
    (servers, relay)
}

/// Which server is the primary of `key`: the one a cas read (`mg <key> c`, always the primary's)
/// reaches, seen in the servers' own `cmd_get` counters.
fn primary_of(servers: &[Memcached], c: &mut Client, key: &str) -> usize {
    let before: Vec<_> = servers.iter().map(Memcached::stats).collect();
    c.request(format!("mg {key} c\r\nmn\r\n").as_bytes(), b"MN\r\n");
    let after: Vec<_> = servers.iter().map(Memcached::stats).collect();
    let asked: Vec<usize> = (0..servers.len()).filter(|&i| delta(&before[i], &after[i], "cmd_get") > 0).collect();
    assert_eq!(asked.len(), 1, "one server answers a cas read: {asked:?}");
    asked[0]
}

fn a_win_flag_re_ask_whose_primary_fails_is_a_server_error(engine: &str) {
    let (servers, relay) = three(engine);
    let mut c = relay.client();
    assert_eq!(c.set("k", b"v"), "STORED\r\n");
    let primary = primary_of(&servers, &mut c, "k");
    // Invalidated on every replica: each one's first read hands out a win flag.
    assert_eq!(c.line(b"md k I\r\n"), "HD\r\n");
    servers[primary].pause();
    let others: Vec<usize> = (0..3).filter(|&s| s != primary).collect();
    let reads = |servers: &[Memcached]| -> u64 { others.iter().map(|&s| servers[s].stats()["cmd_get"]).sum() };
    // Wherever a read lands, the replica's flagged answer is asked again of the primary, which
    // does not answer: the client is told so, and no other replica is asked after the re-ask
    // (once, the evented engine walked on to the third replica, and re-asked again).
    for _ in 0..3 {
        let before = reads(&servers);
        let reply = c.request(b"mg k v\r\n", b"\r\n");
        assert!(reply.starts_with(b"SERVER_ERROR"), "{}", show(&reply));
        assert_eq!(reads(&servers) - before, 1, "one replica answers, the re-ask goes to the primary alone");
    }
    servers[primary].resume();
}

fn a_touching_read_whose_primary_fails_is_a_server_error(engine: &str) {
    let (servers, relay) = three(engine);
    let mut c = relay.client();
    assert_eq!(c.set("k", b"v"), "STORED\r\n");
    let primary = primary_of(&servers, &mut c, "k");
    servers[primary].pause();
    for request in [&b"gat 100 k\r\n"[..], b"gats 100 k\r\n", b"mg k T30 v\r\n"] {
        let reply = c.request(request, b"\r\n");
        assert!(reply.starts_with(b"SERVER_ERROR"), "{}: {}", show(request), show(&reply));
    }
    servers[primary].resume();
}

/// A fake memcached that answers each storage request `STORED` after `delay` (a slow server no
/// real one can be made to be), and health checks at once.
fn slow_storing_server(delay: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while let Some(at) = find(&buf, b"\r\n") {
                        let line = buf[..at].to_vec();
                        let mut end = at + 2;
                        let reply: &[u8] = if line.starts_with(b"version") {
                            b"VERSION 1.6.18\r\n"
                        } else if line.starts_with(b"stats") {
                            b"END\r\n"
                        } else {
                            // A storage line's data block follows it.
                            let len = line
                                .split(|&b| b == b' ')
                                .nth(4)
                                .and_then(|n| std::str::from_utf8(n).ok()?.parse::<usize>().ok());
                            if let Some(len) = len {
                                end += len + 2;
                                if buf.len() < end {
                                    break;
                                }
                            }
                            thread::sleep(delay);
                            b"STORED\r\n"
                        };
                        buf.drain(..end);
                        if stream.write_all(reply).is_err() {
                            return;
                        }
                    }
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    addr
}

fn the_copies_get_a_deadline_of_their_own(engine: &str) {
    // Each server takes 600 ms of a 1,000 ms timeout: the primary's answer, then the copy's.
    let servers: Vec<String> = (0..2).map(|_| slow_storing_server(Duration::from_millis(600))).collect();
    let relay =
        Memrelay::start_addrs(engine, &servers, &["--server-timeout-ms", "1000", "--restart-check-ms", "60000"]);
    let mut c = relay.client();
    c.set_read_timeout(Duration::from_secs(5));
    assert_eq!(c.line(b"cas k 0 0 1 5\r\nx\r\n"), "STORED\r\n");
}

fn a_write_held_back_from_a_server_being_repaired_is_not_its_failure(engine: &str) {
    let (servers, relay) = three(engine);
    let mut c = relay.client();
    servers[2].pause();
    // The first write times out there: the key waits for repair, and server 2 is being repaired.
    assert_eq!(c.set("first", b"v"), "STORED\r\n");
    // `stats` totals are published per window: wait one out before each reading.
    let failures = |c: &mut Client| {
        std::thread::sleep(Duration::from_millis(400));
        stat_of(c, "server_2_failures").parse::<u64>().unwrap()
    };
    let before = failures(&mut c);
    for i in 0..20 {
        assert_eq!(c.set(&format!("k{i}"), b"v"), "STORED\r\n");
    }
    // Held back by memrelay, not sent: not the server's failures (the pool once counted each).
    let after = failures(&mut c);
    assert!(after - before < 5, "{} held-back writes counted as failures of server 2", after - before);
    servers[2].resume();
}

/// The same bytes to a memcached directly and through memrelay (three servers, every key on
/// each): the same replies, byte for byte. Each sequence ends with `mn` and is read up to `MN`.
fn same_as_memcached(engine: &str, sequences: &[&[u8]]) {
    let reference = Memcached::start();
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let relay = Memrelay::start(engine, &servers.iter().collect::<Vec<_>>(), &["--restart-check-ms", "60000"]);
    let (mut direct, mut through) = (reference.client(), relay.client());
    for sequence in sequences {
        let mut bytes = sequence.to_vec();
        bytes.extend_from_slice(b"mn\r\n");
        let expected = direct.request(&bytes, b"MN\r\n");
        let got = through.request(&bytes, b"MN\r\n");
        assert_eq!(show(&got), show(&expected), "after {}", show(sequence));
    }
}

fn an_autovivifying_mg_writes_every_replica_as_memcached_would(engine: &str) {
    same_as_memcached(
        engine,
        &[
            b"mg k N100 v\r\n",
            b"append k 0 0 3\r\nabc\r\n",
            // Balanced reads reach every replica in turn: each holds what the primary holds.
            b"get k\r\nget k\r\nget k\r\n",
            b"mg d N100\r\n",
            b"delete d\r\n",
            b"mg d v\r\nmg d v\r\nmg d v\r\n",
        ],
    );
}

fn a_quiet_autovivifying_ma_is_answered_as_memcached_answers_it(engine: &str) {
    same_as_memcached(
        engine,
        &[
            // Created by the miss: answered, quiet or not.
            b"ma c N0 q\r\n",
            // An increment in quiet mode: nothing.
            b"ma c q\r\n",
            b"ma n N0 J5 q v\r\n",
            b"ma n q v\r\n",
            b"ma missing q\r\n",
            b"mg c v\r\nmg n v\r\n",
        ],
    );
}
