//! Write policies and replica repair against real memcached servers: with `majority` and
//! `primary`, one of three servers killed does not fail the writes; once it is restarted
//! (empty) the repair brings every key back to it, each key at its last acknowledged value, read
//! on each server directly; while a server is being repaired no read is served from it; with
//! `all`, a dead server still fails every write (the policy that was memrelay's only one); and
//! `--route PREFIX=POLICY` gives the keys under a prefix their own policy.
//!
//! Every test is a function of the engine's name and runs once per engine (see `common`).

use std::time::Duration;

use crate::common::*;

engine_matrix!(
    majority_survives_a_dead_server_and_repairs_it,
    primary_survives_a_dead_server_and_repairs_it,
    all_fails_writes_while_a_server_is_dead,
    reads_avoid_a_server_being_repaired,
    too_few_replicas_is_not_stored,
    routes_choose_the_write_policy_per_key_prefix,
    the_spool_keeps_repairs_across_a_memrelay_restart,
    a_server_restarted_while_memrelay_was_down_is_resynced,
    a_large_resync_copies_while_it_reads_the_dump,
);

const KEYS: usize = 200;
/// Fast failure detection, so that the test waits on conditions for a short while only.
const FAST: &[&str] = &["--restart-check-ms", "100", "--probe-first-ms", "50", "--probe-max-ms", "200"];

fn start(engine: &str, servers: &[Memcached], policy: &str, more: &[&str]) -> Memrelay {
    let refs: Vec<&Memcached> = servers.iter().collect();
    let mut args = vec!["--write-policy", policy];
    args.extend_from_slice(FAST);
    args.extend_from_slice(more);
    Memrelay::start(engine, &refs, &args)
}

fn survives_a_dead_server_and_repairs_it(engine: &str, policy: &str) {
    let mut servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let metrics = format!("127.0.0.1:{}", free_port());
    let relay = start(engine, &servers, policy, &["--metrics-listen", &metrics]);
    let mut client = relay.client();
    for i in 0..KEYS {
        assert_eq!(client.set(&format!("old{i}"), b"v1"), "STORED\r\n");
        assert_eq!(client.set(&format!("kept{i}"), b"k"), "STORED\r\n");
        assert_eq!(client.set(&format!("gone{i}"), b"g"), "STORED\r\n");
    }
    servers[1].kill();
    // Writes and deletes while a third of the replicas is gone: acknowledged, every one.
    for i in 0..KEYS {
        assert_eq!(client.set(&format!("old{i}"), b"v2"), "STORED\r\n", "overwrite {i}");
        assert_eq!(client.set(&format!("new{i}"), b"n"), "STORED\r\n", "new {i}");
        assert_eq!(client.line(format!("delete gone{i}\r\n").as_bytes()), "DELETED\r\n", "delete {i}");
    }
    for i in (0..KEYS).step_by(17) {
        assert_eq!(client.get(&format!("old{i}")), [(format!("old{i}"), b"v2".to_vec())]);
    }
    servers[1].restart();
    // Repaired: every server holds every key at its last acknowledged value, read directly.
    let converged = wait_for(Duration::from_secs(20), || {
        (0..KEYS).all(|i| {
            servers.iter().all(|s| {
                s.get_raw(&format!("old{i}")).as_deref() == Some(b"v2")
                    && s.get_raw(&format!("new{i}")).as_deref() == Some(b"n")
                    && s.get_raw(&format!("kept{i}")).as_deref() == Some(b"k")
                    && s.get_raw(&format!("gone{i}")).is_none()
            })
        })
    });
    assert!(converged, "not converged; memrelay said: {}", relay.stderr());
    let mut stats = relay.client();
    // Up to date once the last piece of work is booked (a resync counts its keys when it ends,
    // which can be after the last of them reached the server).
    assert!(wait_for(Duration::from_secs(5), || stat_of(&mut stats, "server_1_repairing") == "0"));
    let repaired: u64 = stat_of(&mut stats, "server_1_repaired").parse().unwrap();
    // The keys written before the kill come back by the resync, those written during it too.
    assert!(repaired >= 3 * KEYS as u64, "repaired {repaired}");
    // The same counts on the metrics endpoint.
    let exposition = scrape(&metrics);
    let sample = format!("memrelay_server_repaired_total{{server=\"{}\"}} ", servers[1].addr());
    let line = exposition.lines().find(|l| l.starts_with(&sample)).unwrap_or_else(|| panic!("{sample}in {exposition}"));
    let exported: u64 = line[sample.len()..].trim().parse().unwrap();
    assert_eq!(exported.to_string(), stat_of(&mut stats, "server_1_repaired"));
    assert!(exposition.contains(&format!("memrelay_server_repairing{{server=\"{}\"}} 0", servers[1].addr())));
}

/// `GET /metrics` over a plain socket: the exposition text.
fn scrape(addr: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("metrics endpoint");
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: memrelay\r\n\r\n").unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    reply.split_once("\r\n\r\n").map(|(_, body)| body.to_string()).unwrap_or_default()
}

fn majority_survives_a_dead_server_and_repairs_it(engine: &str) {
    survives_a_dead_server_and_repairs_it(engine, "majority");
}

fn primary_survives_a_dead_server_and_repairs_it(engine: &str) {
    survives_a_dead_server_and_repairs_it(engine, "primary");
}

fn all_fails_writes_while_a_server_is_dead(engine: &str) {
    let mut servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let relay = start(engine, &servers, "all", &[]);
    let mut client = relay.client();
    servers[2].kill();
    let reply = client.set("k", b"v");
    assert!(reply.starts_with("SERVER_ERROR"), "{reply}");
}

fn reads_avoid_a_server_being_repaired(engine: &str) {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let relay = start(engine, &servers, "majority", &["--server-timeout-ms", "300"]);
    let mut client = relay.client();
    assert_eq!(client.set("k", b"v1"), "STORED\r\n");
    // A server that stops answering misses the write: it is repaired, and until then no read goes
    // there (a read there would time out, or with a lost write, return the replaced value).
    servers[0].pause();
    assert_eq!(client.set("k", b"v2"), "STORED\r\n");
    let mut stats = relay.client();
    let all_stats = String::from_utf8(stats.request(b"stats\r\n", b"END\r\n")).unwrap();
    assert!(all_stats.contains("STAT server_0_repairing 1\r\n"), "{all_stats}\n{}", relay.stderr());
    for round in 0..12 {
        let reply = client.get_reply("get k\r\n");
        if reply.starts_with(b"SERVER_ERROR") {
            let all_stats = String::from_utf8(stats.request(b"stats\r\n", b"END\r\n")).unwrap();
            panic!("round {round}: {}\n{all_stats}\n{}", show(&reply), relay.stderr());
        }
        assert_eq!(parse_values(&reply), [("k".to_string(), b"v2".to_vec())]);
        let reply = client.request(b"mg k v\r\n", b"\r\n");
        assert_eq!(reply, b"VA 2\r\n");
        assert_eq!(client.read_line(), b"v2\r\n");
    }
    servers[0].resume();
    assert!(wait_for(Duration::from_secs(10), || stat_of(&mut stats, "server_0_repairing") == "0"));
    assert_eq!(servers[0].get_raw("k").as_deref(), Some(&b"v2"[..]));
    // Back in the turn: reads reach it again (its own counters show them), once memrelay's
    // connections to it are past their reconnect backoff.
    let before = servers[0].stats()["cmd_get"];
    let back = wait_for(Duration::from_secs(5), || {
        for _ in 0..3 {
            client.get_reply("get k\r\n");
        }
        servers[0].stats()["cmd_get"] > before
    });
    assert!(back, "no read reached the repaired server");
}

fn too_few_replicas_is_not_stored(engine: &str) {
    let mut servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let relay = start(engine, &servers, "majority", &[]);
    let mut client = relay.client();
    servers[0].kill();
    servers[1].kill();
    // One of three is no majority: refused in the form every client library takes calmly.
    assert_eq!(client.set("k", b"v"), "NOT_STORED\r\n");
    let reply = client.line(b"delete k\r\n");
    assert!(reply.starts_with("SERVER_ERROR too few replicas answered (1 of 3)"), "{reply}");
    assert_eq!(client.line(b"set q 0 0 1 noreply\r\nx\r\nversion\r\n"), "VERSION 1.6.0\r\n");
}

fn routes_choose_the_write_policy_per_key_prefix(engine: &str) {
    let mut servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let relay = start(engine, &servers, "all", &["--route", "s:=majority", "--route", "s:strict:=all"]);
    let mut client = relay.client();
    servers[2].kill();
    // The prefix's policy: acknowledged with one server of three gone, and repaired later.
    for i in 0..20 {
        assert_eq!(client.set(&format!("s:{i}"), b"m"), "STORED\r\n", "{}", relay.stderr());
    }
    // The default (`all`), and a longer prefix that asks for `all` again: refused.
    for key in ["other", "s:strict:1"] {
        let reply = client.set(key, b"a");
        assert!(reply.starts_with("SERVER_ERROR"), "{key}: {reply}");
    }
    servers[2].restart();
    let converged = wait_for(Duration::from_secs(20), || {
        (0..20).all(|i| servers.iter().all(|s| s.get_raw(&format!("s:{i}")).as_deref() == Some(b"m")))
    });
    assert!(converged, "the majority route's keys did not converge: {}", relay.stderr());
    // Keys under `all` never wait for a repair: once the server is up they reach it directly.
    let stored = wait_for(Duration::from_secs(10), || client.set("other", b"b") == "STORED\r\n");
    assert!(stored, "{}", relay.stderr());
    assert!(servers.iter().all(|s| s.get_raw("other").as_deref() == Some(b"b")));
    let mut stats = relay.client();
    assert_eq!(stat_of(&mut stats, "route_0"), "s: -> default (majority)");
    assert_eq!(stat_of(&mut stats, "route_1"), "s:strict: -> default (all)");
}

/// Keys overwritten while server 2 was stopped (SIGSTOP, so it keeps its old values), with
/// memrelay SIGKILLed afterwards; the reads of a new memrelay over the same servers.
fn reads_after_a_memrelay_restart(engine: &str, spool: Option<&std::path::Path>) -> Vec<Vec<u8>> {
    const N: usize = 50;
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let spool_args: Vec<&str> = match spool {
        Some(dir) => vec!["--repair-spool-dir", dir.to_str().unwrap()],
        None => vec![],
    };
    let mut args = vec!["--server-timeout-ms", "300"];
    args.extend_from_slice(&spool_args);
    let relay = start(engine, &servers, "majority", &args);
    let mut client = relay.client();
    for i in 0..N {
        assert_eq!(client.set(&format!("k{i}"), b"v1"), "STORED\r\n");
    }
    servers[2].pause();
    for i in 0..N {
        assert_eq!(client.set(&format!("k{i}"), b"v2"), "STORED\r\n", "{}", relay.stderr());
    }
    if let Some(dir) = spool {
        // Each missed key reaches the spool within a turn of the repair thread.
        let spooled = wait_for(Duration::from_secs(10), || {
            let text: String = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
                .collect();
            text.lines().filter(|l| l.starts_with("K ")).count() >= N
        });
        assert!(spooled, "{}", relay.stderr());
    }
    drop(relay); // SIGKILL
    servers[2].resume();
    // Server 2 works through what was queued for it while paused before it answers; the new
    // memrelay gets a timeout a busy machine cannot run out, so that its reads of server 2 are
    // answered by server 2 (a read failed over to a replica would hide the stale value this
    // test looks for without the spool).
    assert!(wait_for(Duration::from_secs(10), || servers[2].client().line(b"version\r\n").starts_with("VERSION")));
    let args: Vec<&str> = args.iter().map(|&a| if a == "300" { "5000" } else { a }).collect();
    let relay = start(engine, &servers, "majority", &args);
    let mut client = relay.client();
    let mut values = Vec::new();
    for round in 0..3 {
        for i in 0..N {
            let reply = parse_values(&client.get_reply(&format!("get k{i}\r\n")));
            assert_eq!(reply.len(), 1, "round {round} k{i}: {reply:?}");
            values.push(reply[0].1.clone());
        }
    }
    if spool.is_some() {
        let converged = wait_for(Duration::from_secs(20), || {
            (0..N).all(|i| servers[2].get_raw(&format!("k{i}")).as_deref() == Some(b"v2"))
        });
        assert!(converged, "server 2 not repaired: {}", relay.stderr());
    }
    values
}

fn the_spool_keeps_repairs_across_a_memrelay_restart(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let values = reads_after_a_memrelay_restart(engine, Some(dir.path()));
    assert!(values.iter().all(|v| v == b"v2"), "a replaced value was read: {values:?}");
    // Without the spool the new memrelay does not know what server 2 missed: its reads there
    // return the replaced values (what the spool is for, and proof this test can fail).
    let values = reads_after_a_memrelay_restart(engine, None);
    assert!(values.iter().any(|v| v == b"v1"), "no stale read without the spool: {values:?}");
}

/// The sequence that once lost acknowledged writes: 200 keys written; server 2 killed; 200 new
/// keys and 100 overwrites acknowledged (majority); memrelay killed and started again with the
/// same options; server 2 restarted empty. The spool repairs the 300 keys it recorded, and the
/// server identities it keeps tell that server 2 is another process than the one that held the
/// 100 older keys, so it is resynced: every read through memrelay finds every acknowledged value.
fn a_server_restarted_while_memrelay_was_down_is_resynced(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let args = ["--server-timeout-ms", "300", "--repair-spool-dir", dir.path().to_str().unwrap()];
    let relay = start(engine, &servers, "majority", &args);
    let mut client = relay.client();
    for i in 0..200 {
        assert_eq!(client.set(&format!("old{i}"), b"v1"), "STORED\r\n");
    }
    // memrelay has seen every server (the identities are on disk) before server 2 dies.
    let identities = dir.path().join("identities");
    assert!(wait_for(Duration::from_secs(10), || std::fs::read_to_string(&identities)
        .is_ok_and(|text| text.lines().count() == 4)));
    servers[2].kill();
    for i in 0..200 {
        assert_eq!(client.set(&format!("new{i}"), b"n"), "STORED\r\n", "{}", relay.stderr());
    }
    for i in 0..100 {
        assert_eq!(client.set(&format!("old{i}"), b"v2"), "STORED\r\n");
    }
    let spooled = wait_for(Duration::from_secs(10), || {
        let text: String = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
            .collect();
        text.lines().filter(|l| l.starts_with("K ")).count() >= 300
    });
    assert!(spooled, "{}", relay.stderr());
    drop(relay); // SIGKILL
    let relay = start(engine, &servers, "majority", &args);
    servers[2].restart();
    let mut client = relay.client();
    let resynced = wait_for(Duration::from_secs(30), || {
        stat_of(&mut client, "server_2_resyncs") != "0"
            && (0..200).all(|i| servers[2].get_raw(&format!("old{i}")).is_some())
            && (0..200).all(|i| servers[2].get_raw(&format!("new{i}")).is_some())
    });
    assert!(resynced, "server 2 was not brought back: {}", relay.stderr());
    let mut missed = 0;
    for _round in 0..2 {
        for i in 0..200 {
            let want: &[u8] = if i < 100 { b"v2" } else { b"v1" };
            let old = parse_values(&client.get_reply(&format!("get old{i}\r\n")));
            missed += usize::from(old.first().map(|(_, v)| v.as_slice()) != Some(want));
            let new = parse_values(&client.get_reply(&format!("get new{i}\r\n")));
            missed += usize::from(new.first().map(|(_, v)| v.as_slice()) != Some(&b"n"[..]));
        }
    }
    assert_eq!(missed, 0, "reads that missed an acknowledged value: {}", relay.stderr());
}

/// A resync of a server whose dump is far larger than a socket's buffers (issue 43): each key is
/// copied as the dump lists it, so memcached's crawler waits on memrelay between lines, and the
/// restarted server still gets every key.
fn a_large_resync_copies_while_it_reads_the_dump(engine: &str) {
    const N: u64 = 20_000;
    let mut servers: Vec<Memcached> = (0..2).map(|_| Memcached::start()).collect();
    let relay = start(engine, &servers, "majority", &[]);
    let mut client = relay.client();
    assert_eq!(client.set("seen", b"x"), "STORED\r\n");
    let mut direct = servers[0].client();
    let batch: String = (0..N).map(|i| format!("set big{i} 0 0 1 noreply\r\nv\r\n")).collect();
    direct.send(batch.as_bytes());
    assert_eq!(direct.line(b"version\r\n").split(' ').next(), Some("VERSION"));
    servers[1].restart();
    let items = |s: &Memcached| s.stats().get("curr_items").copied().unwrap_or(0);
    let resynced = wait_for(Duration::from_secs(60), || items(&servers[1]) == N + 1);
    assert!(resynced, "{} of {} keys on server 1: {}", items(&servers[1]), N + 1, relay.stderr());
    // The resync says so once its last copy is in: a moment after the server holds every key.
    let said = || relay.stderr().contains(&format!("{} keys copied back", N + 1));
    assert!(wait_for(Duration::from_secs(10), said), "{}", relay.stderr());
}
