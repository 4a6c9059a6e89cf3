//! Per-server health against a real memcached that stops answering (SIGSTOP): at most
//! `--down-after` requests wait for the server timeout, after which requests that need the server
//! fail well within the timeout (or, with failover, are served by a replica at once); SIGCONT brings
//! it back through a `version` probe, and `stats` shows the state and the transitions.
//!
//! Every test is a function of the engine's name and runs once per engine (see `common`).

use std::time::{Duration, Instant};

use crate::common::*;

engine_matrix!(
    a_stopped_server_costs_at_most_k_timeouts_then_fails_fast,
    reads_fail_over_at_once_while_a_replica_is_down,
);

const TIMEOUT_MS: u64 = 400;
const DOWN_AFTER: usize = 2;

/// Three servers and memrelay in front of them with a short timeout, a down count of
/// [`DOWN_AFTER`], and `extra` options.
fn start(engine: &str, extra: &[&str]) -> (Vec<Memcached>, Memrelay) {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let (timeout, down_after) = (TIMEOUT_MS.to_string(), DOWN_AFTER.to_string());
    let mut args = vec!["--server-timeout-ms", &timeout, "--down-after", &down_after];
    args.extend_from_slice(extra);
    let relay = Memrelay::start(engine, &servers.iter().collect::<Vec<_>>(), &args);
    (servers, relay)
}

fn a_stopped_server_costs_at_most_k_timeouts_then_fails_fast(engine: &str) {
    let (servers, relay) = start(engine, &["--probe-first-ms", "50", "--probe-max-ms", "200"]);
    let mut c = relay.client();
    c.set_read_timeout(Duration::from_secs(10));
    assert_eq!(c.set("k", b"v"), "STORED\r\n");
    servers[1].pause();
    // Writes need every server: each fails, the first ones after the timeout, then at once.
    let (mut slow, mut fast) = (0, 0);
    for _ in 0..12 {
        let started = Instant::now();
        let reply = c.set("k", b"w");
        let took = started.elapsed();
        assert!(reply.starts_with("SERVER_ERROR "), "{reply}");
        // Told apart by the reason memrelay gives, not by the clock (a loaded machine can make a
        // failure at once take as long as a timeout): a timeout waited for the server; "down",
        // or (before the count is reached) a connection still backing off, did not.
        if reply.contains("server timeout") {
            assert!(took >= Duration::from_millis(TIMEOUT_MS * 3 / 4), "a timeout after {took:?}");
            slow += 1;
        } else {
            assert!(reply.contains("server down") || reply.contains("server unavailable"), "{reply}");
            fast += 1;
        }
    }
    assert!(slow <= DOWN_AFTER, "{slow} requests waited for the timeout");
    assert!(fast >= 12 - DOWN_AFTER);
    assert_eq!(stat_of(&mut c, "server_1_state"), "down");
    assert_eq!(stat_of(&mut c, "server_0_state"), "up");
    // Back through a probe, without a restart of anything.
    servers[1].resume();
    let deadline = Instant::now() + Duration::from_secs(5);
    while c.set("k", b"x") != "STORED\r\n" {
        assert!(Instant::now() < deadline, "the server did not come back through a probe");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(stat_of(&mut c, "server_1_state"), "up");
    assert_eq!(stat_of(&mut c, "server_1_downs"), "1");
    for server in &servers {
        assert_eq!(server.get_raw("k").as_deref(), Some(&b"x"[..]));
    }
    // The log line may still be on its way when the state it reports is visible.
    assert!(
        wait_for(Duration::from_secs(5), || relay.stderr().contains("is down after 2 consecutive failures")),
        "{}",
        relay.stderr()
    );
    assert!(wait_for(Duration::from_secs(5), || relay.stderr().contains("is up again")), "{}", relay.stderr());
}

fn reads_fail_over_at_once_while_a_replica_is_down(engine: &str) {
    let ketama = ["--distribution", "ketama", "--replication", "3", "--read-from", "any-replica", "--failover"];
    let (servers, relay) = start(engine, &[&ketama[..], &["--probe-first-ms", "5000"]].concat());
    let mut c = relay.client();
    c.set_read_timeout(Duration::from_secs(10));
    for i in 0..20 {
        assert_eq!(c.set(&format!("k{i}"), b"v"), "STORED\r\n");
    }
    servers[2].pause();
    let mut slow = 0;
    for round in 0..60 {
        let started = Instant::now();
        let values = c.get(&format!("k{}", round % 20));
        assert_eq!(values.len(), 1, "round {round}: the read failed over to a replica");
        if started.elapsed() >= Duration::from_millis(TIMEOUT_MS * 3 / 4) {
            slow += 1;
        }
    }
    assert!(slow <= DOWN_AFTER, "{slow} reads waited for the timeout");
    servers[2].resume();
}
