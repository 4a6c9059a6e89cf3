//! Warming a restarted server, against real memcached: with every key on every server, a read
//! balanced to a server that came back empty still finds its key (asked again of a replica), the
//! value is written back to the restarted server, and its miss rate returns to the level before
//! the restart as soon as the restart is noticed (within `--restart-check-ms`). With `--no-warm`
//! the same reads miss: the check can fail.
//!
//! Every test is a function of the engine's name and runs once per engine (see `common`).

use std::time::{Duration, Instant};

use crate::common::*;

engine_matrix!(a_restarted_server_is_warmed_from_its_replica, without_warming_reads_miss);

const KEYS: usize = 300;

/// Starts two servers and memrelay (every key on both), stores the keys, restarts server 1 and
/// waits until memrelay noticed. Returns the servers, memrelay and a client.
fn restarted(engine: &str, extra: &[&str]) -> (Vec<Memcached>, Memrelay, Client) {
    let mut servers: Vec<Memcached> = (0..2).map(|_| Memcached::start()).collect();
    let mut args = vec!["--restart-check-ms", "100"];
    args.extend_from_slice(extra);
    let relay = Memrelay::start(engine, &servers.iter().collect::<Vec<_>>(), &args);
    let mut c = relay.client();
    for i in 0..KEYS {
        assert_eq!(c.set(&format!("w{i}"), format!("value{i}").as_bytes()), "STORED\r\n");
    }
    // Let memrelay see the servers once before the restart.
    std::thread::sleep(Duration::from_millis(300));
    servers[1].restart();
    let deadline = Instant::now() + Duration::from_secs(5);
    while stat_of(&mut c, "server_1_restarts") != "1" {
        assert!(Instant::now() < deadline, "the restart was not noticed");
        std::thread::sleep(Duration::from_millis(20));
    }
    // memrelay's connections to the old process fail once; let them reconnect.
    for _ in 0..4 {
        let _ = c.get("warm-up-probe");
    }
    (servers, relay, c)
}

fn misses(c: &mut Client) -> usize {
    (0..KEYS).filter(|i| c.get(&format!("w{i}")).is_empty()).count()
}

fn a_restarted_server_is_warmed_from_its_replica(engine: &str) {
    let (servers, relay, mut c) = restarted(engine, &[]);
    assert_eq!(stat_of(&mut c, "server_1_cold"), "1");
    // Reads alternate between the servers: every one is a hit, as before the restart.
    assert_eq!(misses(&mut c), 0, "misses after the restart was noticed");
    // Half the reads went to the restarted server and wrote their value back (in add mode).
    let deadline = Instant::now() + Duration::from_secs(3);
    let back = loop {
        let back = (0..KEYS).filter(|i| servers[1].get_raw(&format!("w{i}")).is_some()).count();
        if back >= KEYS / 2 - 5 || Instant::now() > deadline {
            break back;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(back >= KEYS / 2 - 5, "only {back} values were written back");
    assert_eq!(servers[1].get_raw("w7").as_deref().unwrap_or(b"value7"), b"value7");
    // A second pass: the written-back keys now hit on the restarted server itself.
    assert_eq!(misses(&mut c), 0);
    // The log line may still be on its way when the state it reports is visible.
    assert!(
        wait_for(Duration::from_secs(5), || relay.stderr().contains("restarted; its read misses are retried")),
        "{}",
        relay.stderr()
    );
}

fn without_warming_reads_miss(engine: &str) {
    let (_servers, _relay, mut c) = restarted(engine, &["--no-warm"]);
    assert_eq!(stat_of(&mut c, "server_1_cold"), "0");
    let missed = misses(&mut c);
    assert!(missed >= KEYS / 2 - 5, "without warming about half the reads miss, not {missed}");
}
