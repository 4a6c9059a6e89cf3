//! No client and no server can hold up the others on a shared server connection (DESIGN.md,
//! "Isolation on shared server connections"): hostile clients that never read (or read a byte at
//! a time) and a server that dribbles a value, beside an innocent client on the same server
//! connections (one event loop, one pool worker). The innocent client's every answer is exact
//! and comes within [`LATE`] (the bugs these tests catch cost minutes), and memrelay's RSS grows
//! by at most the documented bound: N hostile clients hold N x (client budget + one value).
//!
//! Only counts, bytes, exact answers and generous wall-clock bounds are asserted, never rates.
//! The client budget's counters in `stats` (`client_budget_pauses`, `client_bytes_held`,
//! `clients_cut_off`) are checked where memrelay lists them.
//!
//! Every test is a function of the engine's name and runs once per engine (see `common`).

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::common::*;

engine_matrix!(
    pipelined_gets_never_read_hold_one_budget,
    sixteen_clients_never_reading_hold_sixteen_budgets,
    a_sharded_get_never_read_holds_up_no_other_client,
    eight_sharded_gets_never_read_hold_up_no_other_client,
    a_dribbling_server_holds_up_no_client_of_a_healthy_one,
    sixty_four_hostile_clients_beside_an_innocent_one,
);

const MIB: u64 = 1024 * 1024;
/// The values the hostile clients ask for: 1 MiB, memrelay's default `--max-value-size`.
const VALUE_LEN: usize = 1 << 20;
/// `--client-budget-bytes`' default (not passed: the option is newer than some trees tested).
const BUDGET: u64 = 4 * MIB;
/// What one hostile client may make memrelay hold: its budget and one reply more (the value, its
/// VALUE line and END: 512 bytes at most around it).
const PER_CLIENT: u64 = BUDGET + VALUE_LEN as u64 + 512;
/// What it may cost in RSS at the peak of many clients' replies arriving at once: one value more,
/// a reply being copied from the server connection's entry to the client's buffer, whose freed
/// copy the allocator keeps until it reuses it (docs/operating.md's limits say so).
const PER_CLIENT_PEAK: u64 = PER_CLIENT + VALUE_LEN as u64;
/// The longest an innocent answer may take. The server timeout is 1 s; what these tests catch
/// costs minutes (or for ever), so this does not depend on the machine's speed.
const LATE: Duration = Duration::from_secs(5);

/// One event loop, one pool worker: every client shares the same server connections.
const SHARED: &[&str] = &["--threads", "1", "--workers", "1", "--server-timeout-ms", "1000"];

fn args(extra: &[&'static str]) -> Vec<&'static str> {
    SHARED.iter().chain(extra).copied().collect()
}

/// memcached taking values of 1 MiB (its item header does not fit beside one under `-I 1m`).
fn big_memcached() -> Memcached {
    Memcached::start_with(&["-I", "2m", "-m", "128"])
}

/// The bytes of value `i` (its own byte, so a value given to the wrong key shows).
fn big_value(i: usize) -> Vec<u8> {
    vec![b'a' + (i % 26) as u8; VALUE_LEN]
}

/// The exact retrieval reply for `values` (key, data) in order.
fn retrieval(values: &[(&str, &[u8])]) -> Vec<u8> {
    let mut reply = Vec::new();
    for (key, data) in values {
        reply.extend_from_slice(format!("VALUE {key} 0 {}\r\n", data.len()).as_bytes());
        reply.extend_from_slice(data);
        reply.extend_from_slice(b"\r\n");
    }
    reply.extend_from_slice(b"END\r\n");
    reply
}

/// The client that behaves: each answer read whole, compared byte for byte, and timed.
struct Innocent {
    stream: TcpStream,
    /// memrelay's pid, for its RSS in a failure's message.
    pid: u32,
    /// The longest wait for an answer so far.
    longest: Duration,
    answers: usize,
}

impl Innocent {
    fn connect(relay: &Memrelay) -> Innocent {
        let stream = TcpStream::connect(relay.addr()).expect("connect to memrelay");
        stream.set_nodelay(true).unwrap();
        stream.set_write_timeout(Some(LATE)).unwrap();
        Innocent { stream, pid: relay.pid(), longest: Duration::ZERO, answers: 0 }
    }

    /// `request` is answered with exactly `expected`, within [`LATE`].
    fn ask(&mut self, request: &[u8], expected: &[u8], what: &str) {
        let started = Instant::now();
        self.stream.write_all(request).unwrap_or_else(|e| panic!("{what}: writing {}: {e}", show(request)));
        let mut got = vec![0u8; expected.len()];
        let mut have = 0;
        while have < expected.len() {
            let left = LATE.saturating_sub(started.elapsed());
            assert!(
                !left.is_zero(),
                "{what}: {} unanswered after {:?} ({have} of {} bytes: {}; {} answers before, the longest {:?}; \
                 memrelay's RSS {} MiB, peak {} MiB)",
                show(request),
                started.elapsed(),
                expected.len(),
                show(&got[..have]),
                self.answers,
                self.longest,
                status_bytes(self.pid, "VmRSS") / MIB,
                status_bytes(self.pid, "VmHWM") / MIB
            );
            self.stream.set_read_timeout(Some(left)).unwrap();
            match self.stream.read(&mut got[have..]) {
                Ok(0) => {
                    panic!("{what}: memrelay closed the innocent client after {have} bytes: {}", show(&got[..have]))
                }
                Ok(n) => {
                    have += n;
                    // A wrong answer fails at once, not at the deadline.
                    assert!(
                        got[..have] == expected[..have],
                        "{what}: {} answered {}",
                        show(request),
                        show(&got[..have])
                    );
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
                Err(e) => panic!("{what}: reading the answer to {}: {e}", show(request)),
            }
        }
        self.longest = self.longest.max(started.elapsed());
        self.answers += 1;
    }

    fn get(&mut self, key: &str, value: &[u8], what: &str) {
        self.ask(format!("get {key}\r\n").as_bytes(), &retrieval(&[(key, value)]), what);
    }

    /// memrelay's own counters.
    fn stats(&mut self) -> HashMap<String, u64> {
        self.stream.set_read_timeout(Some(LATE)).unwrap();
        self.stream.write_all(b"stats\r\n").unwrap();
        let mut reply = Vec::new();
        let mut chunk = [0u8; 4096];
        while !reply.ends_with(b"END\r\n") {
            let n = self.stream.read(&mut chunk).expect("memrelay answers stats");
            assert!(n > 0, "memrelay closed the innocent client during stats");
            reply.extend_from_slice(&chunk[..n]);
        }
        parse_stats(&String::from_utf8_lossy(&reply))
    }
}

/// memrelay's peak RSS against its RSS before the hostile clients came: checked as the test goes
/// (so a memrelay holding gigabytes is stopped at the bound, not after) and at the end (VmHWM).
struct Rss {
    pid: u32,
    before: u64,
    bound: u64,
    what: String,
}

impl Rss {
    fn baseline(relay: &Memrelay, bound: u64, what: &str) -> Rss {
        Rss { pid: relay.pid(), before: status_bytes(relay.pid(), "VmRSS"), bound, what: what.to_string() }
    }

    fn check(&self) {
        let peak = status_bytes(self.pid, "VmHWM").max(status_bytes(self.pid, "VmRSS"));
        let grew = peak.saturating_sub(self.before);
        assert!(
            grew < self.bound,
            "{}: memrelay's RSS grew by {} MiB (peak {} MiB from {} MiB), bound {} MiB",
            self.what,
            grew / MIB,
            peak / MIB,
            self.before / MIB,
            self.bound / MIB
        );
    }

    /// Checks every 50 ms for `how_long`.
    fn watch(&self, how_long: Duration) {
        let started = Instant::now();
        while started.elapsed() < how_long {
            self.check();
            thread::sleep(Duration::from_millis(50));
        }
        self.check();
    }
}

/// A field of /proc/PID/status, in bytes.
fn status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("memrelay's status");
    let line = status.lines().find(|l| l.starts_with(field)).expect("the field");
    line.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()).expect("kB") * 1024
}

/// A client that sends `request` and never reads.
fn hostile(relay: &Memrelay, request: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(relay.addr()).expect("connect to memrelay");
    stream.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    // A memrelay that stops reading may leave part of it unsent: that is its right.
    let _ = stream.write_all(request);
    stream
}

/// The client budget's counters, if this memrelay has them.
fn budget_counters(innocent: &mut Innocent) -> Option<HashMap<String, u64>> {
    let stats = innocent.stats();
    ["client_budget_pauses", "client_bytes_held", "clients_cut_off"]
        .iter()
        .all(|c| stats.contains_key(*c))
        .then_some(stats)
}

/// Where memrelay has the budget's counters: what it holds for clients is within `held_bound`,
/// and with `over_budget` the hostile clients were paused or cut off (evented: the pool's clients
/// are held back by its one request in flight and its socket writes).
fn check_budget_counters(engine: &str, innocent: &mut Innocent, over_budget: bool, held_bound: u64, what: &str) {
    let Some(stats) = budget_counters(innocent) else { return };
    let (pauses, cut, held) = (stats["client_budget_pauses"], stats["clients_cut_off"], stats["client_bytes_held"]);
    if over_budget && engine == "evented" {
        assert!(pauses + cut > 0, "{what}: client_budget_pauses {pauses}, clients_cut_off {cut}");
    }
    assert!(held <= held_bound, "{what}: client_bytes_held {held} > {held_bound}");
}

/// After the hostile clients closed, memrelay holds nothing for clients (where it says so).
fn check_nothing_held(innocent: &mut Innocent, what: &str) {
    if budget_counters(innocent).is_none() {
        return;
    }
    let mut held = u64::MAX;
    let freed = wait_for(Duration::from_secs(5), || {
        held = innocent.stats()["client_bytes_held"];
        held == 0
    });
    assert!(freed, "{what}: client_bytes_held {held} after the hostile clients closed");
}

/// `count` gets of `key` in one write: `count x 7` bytes asking for `count` MiB.
fn pipelined_gets(key: &str, count: usize) -> Vec<u8> {
    format!("get {key}\r\n").repeat(count).into_bytes()
}

/// One memcached holding `k` (1 MiB) and `small`, memrelay in front of it warmed up (a 1 MiB
/// reply has passed, so what its threads keep is in the baseline), and the innocent client.
fn one_server_with_a_large_value(engine: &str) -> (Memcached, Memrelay, Innocent) {
    let server = big_memcached();
    server.set_raw("k", &big_value(0));
    server.set_raw("small", b"hello");
    let relay = Memrelay::start(engine, &[&server], &args(&[]));
    let mut innocent = Innocent::connect(&relay);
    innocent.get("k", &big_value(0), "warm-up");
    innocent.get("small", b"hello", "warm-up");
    (server, relay, innocent)
}

/// `clients` hostile clients each pipeline 300 gets of a 1 MiB value (2.1 KB asking for 300 MiB)
/// and never read; the innocent client's gets are exact and on time throughout, and memrelay's
/// RSS grows by at most `clients` budgets (and one value each) plus `slack`.
fn clients_never_reading(engine: &str, clients: usize, slack: u64) {
    let (_server, relay, mut innocent) = one_server_with_a_large_value(engine);
    let what = format!("{clients} clients pipelining 300 gets of 1 MiB, never reading");
    let rss = Rss::baseline(&relay, clients as u64 * PER_CLIENT + slack, &what);
    let hostiles: Vec<TcpStream> = (0..clients).map(|_| hostile(&relay, &pipelined_gets("k", 300))).collect();
    // 2 s of innocent gets (everything the hostile side asked for is on its way meanwhile).
    for round in 0..20 {
        innocent.get("small", b"hello", &format!("{what}, innocent get {round}"));
        rss.check();
        thread::sleep(Duration::from_millis(100));
    }
    rss.watch(Duration::from_millis(500));
    check_budget_counters(engine, &mut innocent, true, clients as u64 * PER_CLIENT, &what);
    drop(hostiles);
    innocent.get("small", b"hello", &format!("{what}: after they closed"));
    check_nothing_held(&mut innocent, &what);
    rss.check();
}

/// Case 1: one such client; 64 MiB above the baseline at most.
fn pipelined_gets_never_read_hold_one_budget(engine: &str) {
    clients_never_reading(engine, 1, 64 * MIB - PER_CLIENT);
}

/// Case 1 for 16 clients: 16 x (4 MiB + 1 MiB) + 32 MiB.
fn sixteen_clients_never_reading_hold_sixteen_budgets(engine: &str) {
    clients_never_reading(engine, 16, 32 * MIB);
}

/// Which of `servers` holds `key` (memrelay put it there: ketama, one replica).
fn holder(servers: &[&Memcached], key: &str) -> Option<usize> {
    let holders: Vec<usize> = (0..servers.len()).filter(|&i| servers[i].get_raw(key).is_some()).collect();
    assert!(holders.len() <= 1, "{key} is on servers {holders:?} with one replica");
    holders.first().copied()
}

/// Keys `prefix0`, `prefix1`, … set through memrelay (a byte each): which server got each.
fn place_keys(relay: &Memrelay, servers: &[&Memcached], prefix: &str, count: usize) -> Vec<(String, usize)> {
    let mut client = relay.client();
    (0..count)
        .map(|i| {
            let key = format!("{prefix}{i}");
            assert_eq!(client.set(&key, b"x"), "STORED\r\n", "placing {key}");
            let at = holder(servers, &key).unwrap_or_else(|| panic!("{key} is on no server"));
            (key, at)
        })
        .collect()
}

/// Two memcached servers behind memrelay (ketama, one replica, sharded): 40 keys of 1 MiB spread
/// over both (their values set on their server directly), and one small key on each.
struct TwoServers {
    _servers: [Memcached; 2],
    relay: Memrelay,
    /// The 40 large keys, each with its value.
    big: Vec<(String, Vec<u8>)>,
    /// A small key on each server.
    small: [String; 2],
}

fn two_servers(engine: &str) -> TwoServers {
    let servers = [big_memcached(), big_memcached()];
    let refs: Vec<&Memcached> = servers.iter().collect();
    let relay = Memrelay::start(engine, &refs, &args(&["--distribution", "ketama", "--sharded"]));
    let big: Vec<(String, Vec<u8>)> = place_keys(&relay, &refs, "big", 40)
        .into_iter()
        .enumerate()
        .map(|(i, (key, at))| {
            let value = big_value(i);
            servers[at].set_raw(&key, &value);
            (key, value)
        })
        .collect();
    let placed = place_keys(&relay, &refs, "small", 64);
    let on =
        |s: usize| placed.iter().find(|(_, at)| *at == s).map(|(k, _)| k.clone()).expect("a small key on each server");
    let small = [on(0), on(1)];
    for (i, server) in servers.iter().enumerate() {
        let count = big.iter().filter(|(key, _)| server.get_raw(key).is_some_and(|v| v.len() == VALUE_LEN)).count();
        assert!(count >= 5, "server {i} holds {count} of the 40 large keys");
        server.set_raw(&small[i], b"hello");
    }
    TwoServers { _servers: servers, relay, big, small }
}

/// `clients` hostile clients each send one `get big0 … big39` (a merged reply of 40 MiB from
/// both servers) and never read; then the innocent client's single gets of a key on each server
/// are exact and each within [`LATE`], and memrelay's RSS grows by at most `clients` budgets.
fn sharded_gets_never_read(engine: &str, clients: usize) {
    let setup = two_servers(engine);
    let mut innocent = Innocent::connect(&setup.relay);
    // Warm-up: a merged reply from both servers.
    let warm: Vec<(&str, &[u8])> = setup.big[..4].iter().map(|(k, v)| (k.as_str(), v.as_slice())).collect();
    let keys: Vec<&str> = warm.iter().map(|(k, _)| *k).collect();
    innocent.ask(format!("get {}\r\n", keys.join(" ")).as_bytes(), &retrieval(&warm), "warm-up");
    let what = format!("{clients} clients sending a 40 MiB sharded get, never reading");
    let rss = Rss::baseline(&setup.relay, clients as u64 * PER_CLIENT + 64 * MIB, &what);
    let all: Vec<&str> = setup.big.iter().map(|(k, _)| k.as_str()).collect();
    let request = format!("get {}\r\n", all.join(" ")).into_bytes();
    let hostiles: Vec<TcpStream> = (0..clients).map(|_| hostile(&setup.relay, &request)).collect();
    thread::sleep(Duration::from_millis(200));
    for round in 0..20 {
        let key = &setup.small[round % 2];
        innocent.get(key, b"hello", &format!("{what}, innocent get {round} (server {})", round % 2));
        rss.check();
    }
    check_budget_counters(engine, &mut innocent, true, clients as u64 * PER_CLIENT, &what);
    drop(hostiles);
    for (round, key) in setup.small.iter().enumerate() {
        innocent.get(key, b"hello", &format!("{what}: after they closed, server {round}"));
    }
    check_nothing_held(&mut innocent, &what);
    rss.check();
}

/// Case 2: one such client.
fn a_sharded_get_never_read_holds_up_no_other_client(engine: &str) {
    sharded_gets_never_read(engine, 1);
}

/// Case 2 for 8 clients.
fn eight_sharded_gets_never_read_hold_up_no_other_client(engine: &str) {
    sharded_gets_never_read(engine, 8);
}

/// A fake memcached whose value of any key starting with `slow` comes at about 1 KB a second
/// (a 1 MiB value: for ever); other keys are misses, storage commands are `STORED`. Its threads
/// stop when it is dropped.
struct DribblingServer {
    addr: String,
    stop: Arc<AtomicBool>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl DribblingServer {
    fn start() -> DribblingServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let threads = Arc::new(Mutex::new(Vec::new()));
        let accept = {
            let (stop, threads) = (Arc::clone(&stop), Arc::clone(&threads));
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let stop = Arc::clone(&stop);
                            threads.lock().unwrap().push(thread::spawn(move || Self::serve(stream, &stop)));
                        }
                        Err(_) => thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        threads.lock().unwrap().push(accept);
        DribblingServer { addr, stop, threads }
    }

    /// One connection: requests answered in order, as memcached does.
    fn serve(mut stream: TcpStream, stop: &AtomicBool) {
        stream.set_nonblocking(false).unwrap();
        stream.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        stream.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 16384];
        while !stop.load(Ordering::Relaxed) {
            while let Some(at) = find(&buf, b"\r\n") {
                let line = String::from_utf8_lossy(&buf[..at]).into_owned();
                let tokens: Vec<&str> = line.split(' ').collect();
                let reply_ok = match tokens[0] {
                    "get" | "gets" => {
                        buf.drain(..at + 2);
                        Self::answer_get(&mut stream, &tokens[1..], stop)
                    }
                    "set" | "add" | "replace" | "append" | "prepend" | "cas" => {
                        let len: usize = tokens.get(4).and_then(|n| n.parse().ok()).unwrap_or(0);
                        if buf.len() < at + 2 + len + 2 {
                            break; // the data block is still coming
                        }
                        buf.drain(..at + 2 + len + 2);
                        stream.write_all(b"STORED\r\n").is_ok()
                    }
                    "version" => {
                        buf.drain(..at + 2);
                        stream.write_all(b"VERSION 1.6.0\r\n").is_ok()
                    }
                    "stats" => {
                        buf.drain(..at + 2);
                        stream.write_all(b"END\r\n").is_ok()
                    }
                    _ => {
                        buf.drain(..at + 2);
                        stream.write_all(b"ERROR\r\n").is_ok()
                    }
                };
                if !reply_ok {
                    return;
                }
            }
            match stream.read(&mut chunk) {
                Ok(0) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
                Err(_) => return,
            }
        }
    }

    /// A `slow…` key's 1 MiB value at 100 bytes every 100 ms; other keys missing.
    fn answer_get(stream: &mut TcpStream, keys: &[&str], stop: &AtomicBool) -> bool {
        for key in keys.iter().filter(|k| k.starts_with("slow")) {
            if stream.write_all(format!("VALUE {key} 0 {VALUE_LEN}\r\n").as_bytes()).is_err() {
                return false;
            }
            let mut sent = 0;
            while sent < VALUE_LEN {
                if stop.load(Ordering::Relaxed) || stream.write_all(&[b's'; 100][..100.min(VALUE_LEN - sent)]).is_err()
                {
                    return false;
                }
                sent += 100;
                thread::sleep(Duration::from_millis(100));
            }
            if stream.write_all(b"\r\n").is_err() {
                return false;
            }
        }
        stream.write_all(b"END\r\n").is_ok()
    }
}

impl Drop for DribblingServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let threads = std::mem::take(&mut *self.threads.lock().unwrap());
        for thread in threads {
            let _ = thread.join();
        }
    }
}

/// Case 3: a sharded get spans a server that dribbles its value and a healthy one whose part
/// (2 MiB) waits behind it in key order. An innocent get of a small key on the healthy server
/// is answered exactly within [`LATE`], again and again.
fn a_dribbling_server_holds_up_no_client_of_a_healthy_one(engine: &str) {
    let dribbler = DribblingServer::start();
    let healthy = big_memcached();
    let relay = Memrelay::start_addrs(
        engine,
        &[dribbler.addr.clone(), healthy.addr()],
        &args(&["--distribution", "ketama", "--sharded"]),
    );
    // Where memrelay puts keys (ketama, one replica): a key set through it that the healthy
    // server does not hold went to the dribbler.
    let mut client = relay.client();
    let mut on_healthy = |key: &String| {
        assert_eq!(client.set(key, b"x"), "STORED\r\n", "placing {key}");
        healthy.get_raw(key).is_some()
    };
    let slow = (0..64).map(|i| format!("slow{i}")).find(|k| !on_healthy(k)).expect("a slow key on the dribbler");
    let big: Vec<String> = (0..64).map(|i| format!("big{i}")).filter(|k| on_healthy(k)).take(3).collect();
    let small = (0..64).map(|i| format!("small{i}")).find(|k| on_healthy(k)).expect("a small key on the healthy one");
    assert_eq!(big.len(), 3, "large keys on the healthy server");
    for (i, key) in big.iter().enumerate() {
        healthy.set_raw(key, &big_value(i));
    }
    healthy.set_raw(&small, b"hello");
    let mut innocent = Innocent::connect(&relay);
    innocent.get(&small, b"hello", "before the slow get");
    // The slow key first: the merge waits on it while the healthy part (3 MiB) fills up.
    let waiting = hostile(&relay, format!("get {slow} {}\r\n", big.join(" ")).as_bytes());
    thread::sleep(Duration::from_millis(200));
    for round in 0..10 {
        innocent.get(&small, b"hello", &format!("a server dribbling a merged part, innocent get {round}"));
        thread::sleep(Duration::from_millis(100));
    }
    // The waiting client holds its healthy part at most: within one budget and one value.
    check_budget_counters(engine, &mut innocent, false, PER_CLIENT, "a merge waiting on a dribbler");
    drop(waiting);
    innocent.get(&small, b"hello", "after the slow get's client closed");
}

/// Case 4: 64 hostile clients pipelining gets of a 1 MiB value (48 never read, 16 read a byte
/// every 100 ms) beside an innocent client doing 200 gets: every answer exact, none later than
/// [`LATE`], memrelay's RSS within 64 x (budget + two values) + 64 MiB (the held bytes within
/// 64 x (budget + one value)).
fn sixty_four_hostile_clients_beside_an_innocent_one(engine: &str) {
    let (_server, relay, mut innocent) = one_server_with_a_large_value(engine);
    let what = "64 hostile clients (16 reading a byte per 100 ms)";
    let rss = Rss::baseline(&relay, 64 * PER_CLIENT_PEAK + 64 * MIB, what);
    let mut hostiles: Vec<TcpStream> = (0..64).map(|_| hostile(&relay, &pipelined_gets("k", 100))).collect();
    let slow_readers = SlowReaders::start(hostiles.drain(..16).collect());
    for round in 0..200 {
        innocent.get("small", b"hello", &format!("{what}, innocent get {round}"));
        if round % 10 == 0 {
            rss.check();
        }
        thread::sleep(Duration::from_millis(5));
    }
    rss.watch(Duration::from_millis(500));
    check_budget_counters(engine, &mut innocent, true, 64 * PER_CLIENT, what);
    drop(slow_readers);
    drop(hostiles);
    innocent.get("small", b"hello", &format!("{what}: after they closed"));
    check_nothing_held(&mut innocent, what);
    rss.check();
}

/// Clients that read one byte every 100 ms each, on a thread of their own; stopped (and the
/// clients closed) when dropped.
struct SlowReaders {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SlowReaders {
    fn start(readers: Vec<TcpStream>) -> SlowReaders {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                for reader in &readers {
                    reader.set_nonblocking(true).unwrap();
                }
                let mut byte = [0u8; 1];
                // Bounded: the test stops it long before 10 minutes.
                for _ in 0..6000 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    for mut reader in &readers {
                        let _ = reader.read(&mut byte);
                    }
                    thread::sleep(Duration::from_millis(100));
                }
            })
        };
        SlowReaders { stop, thread: Some(thread) }
    }
}

impl Drop for SlowReaders {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
