//! The descriptor budget, against a real memcached, on both engines: memrelay started under a
//! low descriptor limit caps its clients below it (`stats` shows the budget), so that clients
//! beyond the cap get `SERVER_ERROR too many connections` while the clients already connected
//! keep being served and the healthy server is never taken down for memrelay's own shortage
//! (once, with 256 descriptors and 400 clients, pool workers could not open server sockets and
//! the server was marked down for everyone).

use std::time::Duration;

use crate::common::*;

engine_matrix!(clients_beyond_the_descriptor_budget_are_refused_and_the_rest_served);

fn clients_beyond_the_descriptor_budget_are_refused_and_the_rest_served(engine: &str) {
    let server = Memcached::start();
    let relay = Memrelay::start_with_nofile(engine, &[&server], &["--server-timeout-ms", "500"], 256);
    let mut first = relay.client();
    assert_eq!(first.set("k", b"v"), "STORED\r\n");
    assert_eq!(stat_of(&mut first, "descriptor_limit"), "256");
    let cap: usize = stat_of(&mut first, "max_connections").parse().unwrap();
    assert!(cap > 0 && cap < 256, "clients capped below the limit: {cap}");
    // 400 more clients, each asking once: those within the cap are served, the rest refused.
    let (mut served, mut refused) = (0, 0);
    let mut clients = Vec::new();
    for _ in 0..400 {
        let mut c = relay.client();
        c.set_read_timeout(Duration::from_secs(5));
        c.send(b"get k\r\n");
        let line = c.read_line();
        if line.starts_with(b"VALUE") {
            assert_eq!(c.read_until(b"END\r\n"), b"v\r\nEND\r\n");
            served += 1;
            clients.push(c);
        } else {
            assert_eq!(line, b"SERVER_ERROR too many connections\r\n", "{}", show(&line));
            refused += 1;
        }
    }
    assert_eq!(served, cap - 1, "every client within the cap is served");
    assert_eq!(refused, 400 - served);
    // The clients connected before are still served, and the server was never taken down.
    for c in clients.iter_mut().chain(std::iter::once(&mut first)) {
        assert_eq!(c.get("k"), vec![("k".to_string(), b"v".to_vec())]);
    }
    assert_eq!(stat_of(&mut first, "server_0_state"), "up");
    assert_eq!(stat_of(&mut first, "server_0_downs"), "0");
    drop(clients);
    // Once they have gone, a new client is served.
    assert!(wait_for(Duration::from_secs(5), || relay.client().get("k").len() == 1));
}

/// Issue 43, item 9: after the descriptor budget lowered `--max-clients`, every reload logged
/// "max-clients changed (… -> 16384)", a change that was none. A reload asking what the start
/// asked logs nothing about it; one asking for fewer clients than the budget allows does.
#[test]
fn a_reload_logs_no_max_clients_change_the_budget_made() {
    let server = Memcached::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memrelay.toml");
    std::fs::write(&path, "server_timeout_ms = 500\n").unwrap();
    let relay = Memrelay::start_with_nofile("evented", &[&server], &["--config", path.to_str().unwrap()], 256);
    let hang_up = || {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(relay.pid() as libc::pid_t, libc::SIGHUP) }, 0);
    };
    let in_force = |generation: u64| {
        let line = format!("generation {generation} in force");
        assert!(wait_for(Duration::from_secs(10), || relay.stderr().contains(&line)), "{}", relay.stderr());
    };
    hang_up();
    in_force(2);
    hang_up();
    in_force(3);
    let stderr = relay.stderr();
    assert!(stderr.contains("the descriptor limit is 256: at most"), "{stderr}");
    assert!(!stderr.contains("max-clients changed"), "{stderr}");
    std::fs::write(&path, "server_timeout_ms = 500\nmax_clients = 10\n").unwrap();
    hang_up();
    in_force(4);
    let stderr = relay.stderr();
    assert!(stderr.contains("max-clients changed (") && stderr.contains(" -> 10) but takes a restart"), "{stderr}");
}
