//! SIGHUP reload under load, against real memcached: clients keep writing and reading through
//! memrelay while its `--config` file gains a server, turns invalid, and loses a server. No client
//! sees an error or a closed connection; the added server gets its share of the traffic; the
//! removed one gets none once the reload is in force; the invalid file is refused with one line
//! and changes nothing.
//!
//! Every test is a function of the engine's name and runs once per engine (see `common`).

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::common::*;

engine_matrix!(reload_under_load_adds_and_removes_servers_and_refuses_a_bad_file);

const CLIENTS: usize = 4;
/// Keys each client cycles through.
const KEYS: usize = 50;

/// Closed-loop clients that set then get their keys until told to stop, counting operations and
/// anything that is not a well-formed answer (a miss is an answer: a server the reload added does
/// not have the keys written before it joined).
struct Load {
    stop: Arc<AtomicBool>,
    /// Operations per client.
    operations: Arc<Vec<AtomicU64>>,
    threads: Vec<thread::JoinHandle<Vec<String>>>,
}

impl Load {
    fn start(addr: &str) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let operations = Arc::new((0..CLIENTS).map(|_| AtomicU64::new(0)).collect::<Vec<_>>());
        let threads = (0..CLIENTS)
            .map(|client| {
                let (stop, operations, addr) = (Arc::clone(&stop), Arc::clone(&operations), addr.to_string());
                thread::spawn(move || {
                    let mut c = Client::connect(&addr);
                    c.set_read_timeout(Duration::from_secs(10));
                    let mut errors = Vec::new();
                    // Bounded: at most a million rounds even if the flag were never set.
                    for round in 0..1_000_000usize {
                        if stop.load(Ordering::Relaxed) || errors.len() >= 10 {
                            break;
                        }
                        let key = format!("k{client}-{}", round % KEYS);
                        let value = format!("v{round}");
                        let stored = c.set(&key, value.as_bytes());
                        if stored != "STORED\r\n" {
                            errors.push(format!("set {key}: {stored:?}"));
                        }
                        let reply = c.get_reply(&format!("get {key}\r\n"));
                        let text = String::from_utf8_lossy(&reply);
                        if !(text == "END\r\n"
                            || text.starts_with(&format!("VALUE {key} ")) && text.ends_with("END\r\n"))
                        {
                            errors.push(format!("get {key}: {text:?}"));
                        }
                        operations[client].fetch_add(2, Ordering::Relaxed);
                    }
                    errors
                })
            })
            .collect();
        Load { stop, operations, threads }
    }

    fn operations(&self) -> u64 {
        self.operations.iter().map(|o| o.load(Ordering::Relaxed)).sum()
    }

    /// Waits until every client finished a round it started after now (bounded).
    fn every_client_moves_on(&self) {
        let now: Vec<u64> = self.operations.iter().map(|o| o.load(Ordering::Relaxed)).collect();
        let moved = || self.operations.iter().zip(&now).all(|(o, &then)| o.load(Ordering::Relaxed) >= then + 4);
        assert!(wait_for(Duration::from_secs(20), moved), "a client stalled");
    }

    /// Waits until the clients did `more` operations beyond now (bounded).
    fn run_for(&self, more: u64) {
        let target = self.operations() + more;
        assert!(wait_for(Duration::from_secs(20), || self.operations() >= target), "the load stalled");
    }

    fn stop(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.threads.into_iter().flat_map(|t| t.join().expect("client thread")).collect()
    }
}

fn write_config(path: &std::path::Path, servers: &[&Memcached]) {
    let list: Vec<String> = servers.iter().map(|s| format!("\"{}\"", s.addr())).collect();
    std::fs::write(path, format!("servers = [{}]\nserver_timeout_ms = 2000\n", list.join(", "))).unwrap();
}

fn hang_up(relay: &Memrelay) {
    let status = Command::new("kill").args(["-HUP", &relay.pid().to_string()]).status().expect("kill");
    assert!(status.success());
}

fn generation(relay: &Memrelay) -> u64 {
    stat_of(&mut relay.client(), "config_generation").parse().expect("config_generation")
}

/// Requests a server was sent (memcached's own counters).
fn requests_seen(server: &Memcached) -> u64 {
    let stats = server.stats();
    stats["cmd_get"] + stats["cmd_set"]
}

fn reload_under_load_adds_and_removes_servers_and_refuses_a_bad_file(engine: &str) {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let [a, b, c] = [&servers[0], &servers[1], &servers[2]];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memrelay.toml");
    write_config(&path, &[a, b]);
    let relay = Memrelay::start_addrs(engine, &[], &["--config", path.to_str().unwrap()]);
    assert_eq!(generation(&relay), 1);
    let load = Load::start(&relay.addr());
    load.run_for(2_000);

    // A server joins: every write now reaches it too, and reads are balanced onto it.
    let c_before = requests_seen(c);
    write_config(&path, &[a, b, c]);
    hang_up(&relay);
    assert!(wait_for(Duration::from_secs(10), || generation(&relay) == 2), "{}", relay.stderr());
    load.run_for(2_000);
    assert!(requests_seen(c) > c_before, "the added server got no requests");

    // An invalid file: refused with one line, generation 2 stays.
    std::fs::write(&path, "servers = [\"127.0.0.1:1\"\n").unwrap();
    hang_up(&relay);
    // Wait for the whole line: stderr may be read while memrelay is still writing it.
    let refusal_written =
        || relay.stderr().split_inclusive('\n').any(|line| line.contains("reload refused") && line.ends_with('\n'));
    assert!(wait_for(Duration::from_secs(10), refusal_written), "{}", relay.stderr());
    let refused: Vec<String> =
        relay.stderr().lines().filter(|l| l.contains("reload refused")).map(str::to_string).collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].contains("memrelay.toml") && refused[0].contains("generation 2 stays"), "{}", refused[0]);
    load.run_for(1_000);
    assert_eq!(generation(&relay), 2);

    // A server leaves: once the reload is in force it gets nothing more.
    write_config(&path, &[b, c]);
    hang_up(&relay);
    assert!(wait_for(Duration::from_secs(10), || generation(&relay) == 3), "{}", relay.stderr());
    // Every client has started a request after the reload.
    load.every_client_moves_on();
    let a_after = requests_seen(a);
    load.run_for(2_000);
    assert_eq!(requests_seen(a), a_after, "the removed server still got requests");

    let errors = load.stop();
    assert!(errors.is_empty(), "clients saw errors across the reloads: {errors:?}\n{}", relay.stderr());
    let stderr = relay.stderr();
    for line in ["generation 2 in force: 3 servers", "generation 3 in force: 2 servers"] {
        assert!(stderr.contains(line), "no `{line}` in:\n{stderr}");
    }
    assert!(stderr.contains(&format!("removed: {}", a.addr())), "{stderr}");
}
