//! Black-box tests of isolation and bounds: a hostile client beside an innocent one, and servers
//! that lie. Whatever the hostile side sends, the innocent client's every reply is exact (checked
//! against what a real memcached holds), memrelay stays alive and listening, and its memory stays
//! under a documented bound.
//!
//! Both clients share one server connection (one pool worker, one event loop), so a request that
//! memcached reads differently from memrelay would shift a reply onto the innocent client.
//!
//! Every test is a function of the engine's name and runs once per engine (see `common`).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;

engine_matrix!(
    hostile_bytes_never_reach_another_client,
    malformed_server_replies_fail_only_their_requests,
    a_client_that_never_reads_is_bounded,
    long_lines_do_not_break_other_clients,
    second_instance_on_the_same_port_fails,
    client_limit_is_process_wide,
    full_range_deltas_as_memcached,
    server_timeout_is_reported_on_time,
    shutdown_grace_below_the_server_timeout,
    accept_resumes_when_descriptors_free_up,
    listen_backlog_fits_bursts,
);

/// One worker or one event loop: every client shares the same server connection.
const SHARED: &[&str] = &["--workers", "1", "--threads", "1"];

fn with_shared(extra: &[&'static str]) -> Vec<&'static str> {
    SHARED.iter().chain(extra).copied().collect()
}

/// Everything the peer sends within `quiet` of its last byte (the hostile side's replies: read,
/// never asserted on except that they hold no innocent data).
fn drain(stream: &mut TcpStream, quiet: Duration) -> Vec<u8> {
    stream.set_read_timeout(Some(quiet)).unwrap();
    let mut out = Vec::new();
    let mut chunk = [0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
        }
    }
    out
}

/// Byte sequences that memrelay and memcached could tokenize differently: NUL and control bytes
/// in keys and numbers, odd separators, signs and radixes in numbers, data blocks of the wrong
/// length, commands hidden in data blocks, over-long lines and huge declared lengths.
fn hostile_inputs() -> Vec<Vec<u8>> {
    let mut inputs: Vec<Vec<u8>> = vec![
        b"set a\0b 0 0 12\r\nget probe\r\n\r\n".to_vec(),
        b"set a\0b 0 0 14\r\ndelete probe\r\n\r\n".to_vec(),
        b"get a\0 victim\r\n".to_vec(),
        b"get \0victim\r\n".to_vec(),
        b"set k\x01 0 0 12\r\nget probe\r\n\r\n".to_vec(),
        b"set k 0 0 +12\r\nget probe\r\n\r\n".to_vec(),
        b"set k 0 0 0x0c\r\nget probe\r\n\r\n".to_vec(),
        b"set k 0 0 12\0\r\nget probe\r\n\r\n".to_vec(),
        b"set k 0 0  12\r\nget probe\r\n\r\n".to_vec(),
        b"set k 0 0 12\t\r\nget probe\r\n\r\n".to_vec(),
        b"set k\t0 0 12\r\nget probe\r\n\r\n".to_vec(),
        b" set k 0 0 12\r\nget probe\r\n\r\n".to_vec(),
        b"set k 0 0 -1\r\nget probe\r\n\r\n".to_vec(),
        b"set k 0 0 12 noreply junk\r\nget probe\r\n\r\n".to_vec(),
        b"set k 4294967296 0 12\r\nget probe\r\n\r\n".to_vec(),
        b"set k 0 0 18446744073709551615\r\nget probe\r\n".to_vec(),
        b"set k 0 0 5\r\nget probe\r\n".to_vec(),
        b"cas k 0 0 12 0\0 1\r\nget probe\r\n\r\n".to_vec(),
        b"incr k 1\0\r\nget probe\r\n".to_vec(),
        b"incr k -1\r\n".to_vec(),
        b"delete k\0 noreply\r\nget probe\r\n".to_vec(),
        b"touch k 10\0\r\n".to_vec(),
        b"get k\rvictim\r\n".to_vec(),
        b"set k 0 0 1\r\nVALUE victim 0 5\r\nforge\r\nEND\r\n".to_vec(),
        b"\r\n\r\n\0\0\r\n".to_vec(),
    ];
    let long_key = "k".repeat(4000);
    inputs.push(format!("set {long_key} 0 0 12\r\nget probe\r\n\r\n").into_bytes());
    inputs.push(format!("get {long_key}\r\n").into_bytes());
    inputs.push(format!("set k 0 0 1{}\r\nx\r\n", "0".repeat(3000)).into_bytes());
    inputs
}

/// The innocent client: its own key read back exactly, and a fresh write acknowledged and applied.
fn innocent_round(c: &mut Client, servers: &[Memcached], round: usize) {
    let expected = b"VALUE victim 0 15\r\ninnocent-secret\r\nEND\r\n".to_vec();
    assert_eq!(c.get_reply("get victim\r\n"), expected, "round {round}: the innocent client's get");
    let key = format!("fresh:{round}");
    assert_eq!(c.storage("add", &key, b"mine"), "STORED\r\n", "round {round}: the innocent add");
    for server in servers {
        assert_eq!(
            server.get_raw(&key).as_deref(),
            Some(&b"mine"[..]),
            "round {round}: add applied on {}",
            server.addr()
        );
    }
}

/// For every hostile input, sent while the innocent client has requests on the same server
/// connection: the innocent client's replies are exact, the writes it was told are stored are
/// stored, and the hostile side never receives the innocent client's value (its inputs only ever
/// ask for other keys, so that value could only reach it as a reply shifted off the innocent).
fn hostile_bytes_never_reach_another_client(engine: &str) {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let refs: Vec<&Memcached> = servers.iter().collect();
    let relay = Memrelay::start(engine, &refs, SHARED);
    let mut innocent = relay.client();
    assert_eq!(innocent.set("victim", b"innocent-secret"), "STORED\r\n");
    let mut round = 0;
    for input in hostile_inputs() {
        for split in [false, true] {
            round += 1;
            let mut hostile = TcpStream::connect(relay.addr()).unwrap();
            hostile.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
            if split {
                // One byte at a time: the parser must not decide differently on partial input.
                for byte in &input {
                    if hostile.write_all(std::slice::from_ref(byte)).is_err() {
                        break;
                    }
                }
            } else {
                let _ = hostile.write_all(&input);
            }
            innocent_round(&mut innocent, &servers, round);
            let seen = drain(&mut hostile, Duration::from_millis(50));
            assert!(find(&seen, b"innocent-secret").is_none(), "input {} leaked: {}", show(&input), show(&seen));
            innocent_round(&mut innocent, &servers, round + 1000);
            round += 1;
        }
    }
    for server in &servers {
        assert_eq!(server.get_raw("victim").as_deref(), Some(&b"innocent-secret"[..]), "no hostile input wrote victim");
    }
    assert!(innocent.line(b"version\r\n").starts_with("VERSION "));
}

/// A fake memcached that answers each request line with `bad` on its first `bad_connections`
/// connections, and like an empty memcached (`END` to gets, `STORED` to sets) afterwards.
fn lying_server(bad: &'static [u8], bad_connections: usize) -> (String, Arc<AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let connections = Arc::new(AtomicUsize::new(0));
    let stop_flag = Arc::clone(&stop);
    listener.set_nonblocking(true).unwrap();
    thread::spawn(move || {
        while !stop_flag.load(Ordering::Relaxed) {
            let Ok((mut stream, _)) = listener.accept() else {
                thread::sleep(Duration::from_millis(5));
                continue;
            };
            stream.set_nonblocking(false).unwrap();
            stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let lying = connections.fetch_add(1, Ordering::SeqCst) < bad_connections;
            thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while let Some(at) = find(&buf, b"\r\n") {
                        let line = buf[..at].to_vec();
                        buf.drain(..at + 2);
                        let reply: &[u8] = if lying {
                            bad
                        } else if line.starts_with(b"get") {
                            b"END\r\n"
                        } else if line.starts_with(b"version") {
                            b"VERSION 1.6.0\r\n"
                        } else {
                            // A storage command's data block is the next line: skip it.
                            if let Some(end) = find(&buf, b"\r\n") {
                                buf.drain(..end + 2);
                            }
                            b"STORED\r\n"
                        };
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
    (addr, stop)
}

/// Absurd replies fail only the requests that met them, with `SERVER_ERROR`; memrelay stays alive
/// and listening, and serves again once the server behaves.
fn malformed_server_replies_fail_only_their_requests(engine: &str) {
    let bad_replies: &[&'static [u8]] = &[
        b"VALUE k 0 18446744073709551583\r\n",
        b"VALUE k 0 99999999999999\r\n",
        b"VALUE k x 5\r\nhello\r\nEND\r\n",
        b"VALUE k 0 5\r\nhello world and more\r\nEND\r\n",
        b"STORED\r\nSTORED\r\nSTORED\r\n",
        b"\0\0\0\0\r\n",
        b"SERVER_ERROR out of memory\r\nEND\r\n",
    ];
    for bad in bad_replies {
        let (addr, stop) = lying_server(bad, 1);
        let relay =
            Memrelay::start_addrs(engine, std::slice::from_ref(&addr), &with_shared(&["--server-timeout-ms", "1000"]));
        let mut c = relay.client();
        let first = c.get_reply("get k\r\n");
        assert!(
            first.starts_with(b"SERVER_ERROR") || first == b"END\r\n",
            "reply {} gave the client {}",
            show(bad),
            show(&first)
        );
        // Alive, listening, answering locally, and serving once the server behaves (bounded retries).
        let mut other = relay.client();
        assert!(other.line(b"version\r\n").starts_with("VERSION "), "memrelay deaf after {}", show(bad));
        let recovered = (0..50).any(|_| {
            let reply = other.get_reply("get k\r\n");
            if reply != b"END\r\n" {
                thread::sleep(Duration::from_millis(100));
            }
            reply == b"END\r\n"
        });
        assert!(recovered, "memrelay did not serve again after {}", show(bad));
        assert!(std::path::Path::new(&format!("/proc/{}", relay.pid())).exists());
        stop.store(true, Ordering::Relaxed);
    }
}

/// memrelay's resident memory in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// A client that pipelines gets of a 100 KiB value and never reads: memrelay stops reading from
/// it (back-pressure) instead of buffering replies without end, and the innocent client is served.
/// Bound: 256 MiB, far above the default per-client limit and far below the gigabytes the
/// unbounded version reached.
fn a_client_that_never_reads_is_bounded(engine: &str) {
    const BOUND: u64 = 256 << 20;
    let servers = vec![Memcached::start()];
    let relay = Memrelay::start(engine, &[&servers[0]], SHARED);
    let mut innocent = relay.client();
    assert_eq!(innocent.set("big", &vec![b'b'; 100 * 1024]), "STORED\r\n");
    assert_eq!(innocent.set("victim", b"innocent-secret"), "STORED\r\n");
    let mut hostile = TcpStream::connect(relay.addr()).unwrap();
    hostile.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    let request = b"get big\r\n".repeat(1000);
    let mut peak = 0;
    // 40 x 1,000 gets = 4 GB of replies asked for; writing stops when memrelay stops reading.
    for _ in 0..40 {
        if hostile.write_all(&request).is_err() {
            break;
        }
        peak = peak.max(rss(relay.pid()));
    }
    for round in 0..3 {
        innocent_round(&mut innocent, &servers, round);
        peak = peak.max(rss(relay.pid()));
    }
    // The unbounded version grew by about 300 MB a second here: watch for a few seconds.
    let watch = Instant::now();
    while watch.elapsed() < Duration::from_secs(4) && peak < BOUND {
        thread::sleep(Duration::from_millis(100));
        peak = peak.max(rss(relay.pid()));
    }
    innocent_round(&mut innocent, &servers, 3);
    assert!(peak < BOUND, "memrelay reached {peak} bytes of RSS with a client that never reads");
}

/// memcached closes a connection on a non-get line of over 2 KiB without its newline; memrelay
/// must not forward such a line, or every client sharing that server connection loses its request.
fn long_lines_do_not_break_other_clients(engine: &str) {
    let servers = vec![Memcached::start()];
    let relay = Memrelay::start(engine, &[&servers[0]], SHARED);
    let mut innocent = relay.client();
    assert_eq!(innocent.set("victim", b"innocent-secret"), "STORED\r\n");
    // Longer than memcached's 16 KiB read buffer, so it reads them in pieces without a newline.
    for (i, line) in [
        format!("set {} 0 0 1", "k".repeat(5000)),
        format!("delete {}", "k".repeat(3000)),
        format!("set k 0 0 1 {}", " ".repeat(30000)),
        format!("incr k 1{}", " ".repeat(40000)),
        format!("touch k 1{}", " ".repeat(20000)),
        format!("delete k{}", " ".repeat(60000)),
    ]
    .into_iter()
    .enumerate()
    {
        for trial in 0..5 {
            let mut hostile = TcpStream::connect(relay.addr()).unwrap();
            // Half the line, then the rest with the innocent client's requests right behind it, so
            // both travel on the shared server connection together.
            let half = line.len() / 2;
            let _ = hostile.write_all(&line.as_bytes()[..half]);
            thread::sleep(Duration::from_millis(20));
            let _ = hostile.write_all(format!("{}\r\nx\r\n", &line[half..]).as_bytes());
            innocent_round(&mut innocent, &servers, 10 * i + trial);
            let _ = drain(&mut hostile, Duration::from_millis(20));
        }
    }
}

/// A port in use is a start-up error, not a second listener that steals connections.
fn second_instance_on_the_same_port_fails(engine: &str) {
    let server = Memcached::start();
    let relay = Memrelay::start(engine, &[&server], &[]);
    let (status, stderr) = run_memrelay(&["--engine", engine, "--listen", &relay.addr(), "--server", &server.addr()]);
    assert!(!status.success(), "a second memrelay on {} started", relay.addr());
    assert!(stderr.contains(&relay.addr()), "the error names the address: {stderr}");
    assert!(relay.client().line(b"version\r\n").starts_with("VERSION "));
}

/// `--max-clients` counts every client of the process, whichever event loop or thread has it.
fn client_limit_is_process_wide(engine: &str) {
    let server = Memcached::start();
    let relay = Memrelay::start(engine, &[&server], &["--threads", "2", "--max-clients", "10"]);
    // One client that stays; once memrelay counts it alone (the start-up probe's connection is
    // gone), 9 places are left.
    let mut probe = relay.client();
    let alone = wait_for(Duration::from_secs(10), || {
        let stats = parse_stats(&String::from_utf8_lossy(&probe.request(b"stats\r\n", b"END\r\n")));
        stats.get("curr_connections") == Some(&1)
    });
    assert!(alone, "memrelay still counts other connections");
    let mut clients: Vec<TcpStream> = (0..30).map(|_| TcpStream::connect(relay.addr()).unwrap()).collect();
    let mut served = 0;
    for stream in &mut clients {
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        if stream.write_all(b"version\r\n").is_err() {
            continue;
        }
        let mut reply = [0u8; 64];
        if let Ok(n) = stream.read(&mut reply) {
            served += usize::from(reply[..n].starts_with(b"VERSION "));
        }
    }
    assert_eq!(served, 9, "clients served beside the probe with --max-clients 10");
}

/// Deltas over the whole 64-bit range, with and without noreply, give what memcached gives.
fn full_range_deltas_as_memcached(engine: &str) {
    let script: &[&[u8]] = &[
        b"set n 0 0 1\r\n0\r\n",
        b"incr n 18446744073709551615 noreply\r\n",
        b"get n\r\n",
        b"decr n 9223372036854775808 noreply\r\n",
        b"get n\r\n",
        b"incr n 9223372036854775808\r\n",
        b"incr n 18446744073709551616\r\n",
        b"decr n 18446744073709551615\r\n",
        b"get n\r\n",
    ];
    let reference = Memcached::start();
    let server = Memcached::start();
    let relay = Memrelay::start(engine, &[&server], &[]);
    let (mut direct, mut proxied) = (reference.client(), relay.client());
    for step in script {
        direct.send(step);
        proxied.send(step);
        if find(step, b"noreply").is_some() {
            continue;
        }
        let want = if step.starts_with(b"get") { direct.read_retrieval() } else { direct.read_line() };
        let got = if step.starts_with(b"get") { proxied.read_retrieval() } else { proxied.read_line() };
        assert_eq!(show(&got), show(&want), "after {}", show(step));
    }
}

/// A server that never answers costs the configured timeout, not the next statistics window.
fn server_timeout_is_reported_on_time(engine: &str) {
    let (addr, _requests) = slow_server(Duration::from_secs(30));
    let relay = Memrelay::start_addrs(
        engine,
        std::slice::from_ref(&addr),
        &["--server-timeout-ms", "500", "--stats-window", "5"],
    );
    let mut c = relay.client();
    let started = Instant::now();
    let reply = c.get_reply("get k\r\n");
    let took = started.elapsed();
    assert!(reply.starts_with(b"SERVER_ERROR"), "{}", show(&reply));
    // 10% is the aim; the bound is loose so a busy machine cannot fail it, yet far below the window.
    assert!(took < Duration::from_millis(2500), "a 500 ms timeout took {took:?}");
}

/// A shutdown grace shorter than the server timeout is honoured.
fn shutdown_grace_below_the_server_timeout(engine: &str) {
    let (addr, requests) = slow_server(Duration::from_secs(30));
    let mut relay = Memrelay::start_addrs(
        engine,
        std::slice::from_ref(&addr),
        &["--server-timeout-ms", "20000", "--shutdown-grace-ms", "300"],
    );
    let mut c = relay.client();
    c.send(b"get k\r\n");
    requests.recv_timeout(Duration::from_secs(10)).expect("the request reached the server");
    let started = Instant::now();
    relay.terminate();
    let status = relay.wait(Duration::from_secs(15));
    assert!(status.code().is_some(), "memrelay exited by itself");
    assert!(started.elapsed() < Duration::from_secs(5), "a 300 ms grace took {:?}", started.elapsed());
}

/// With descriptors exhausted, clients wait in the backlog; when descriptors free up they are
/// accepted without another connection arriving.
fn accept_resumes_when_descriptors_free_up(engine: &str) {
    let server = Memcached::start();
    let relay = Memrelay::start(engine, &[&server], &["--threads", "1", "--workers", "1"]);
    let limited = Command::new("prlimit")
        .args(["--nofile=64:64", "--pid", &relay.pid().to_string()])
        .status()
        .expect("prlimit (util-linux)");
    assert!(limited.success());
    let mut held: Vec<Client> = Vec::new();
    for _ in 0..100 {
        let mut c = relay.client();
        c.set_read_timeout(Duration::from_millis(300));
        c.send(b"version\r\n");
        let mut reply = [0u8; 64];
        match c.stream.read(&mut reply) {
            Ok(n) if reply[..n].starts_with(b"VERSION ") => held.push(c),
            _ => break,
        }
    }
    assert!(held.len() < 100, "the descriptor limit was not reached");
    // This one waits in the backlog (or was refused a descriptor).
    let mut waiting = TcpStream::connect(relay.addr()).unwrap();
    waiting.write_all(b"version\r\n").unwrap();
    held.truncate(held.len() / 2);
    waiting.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut reply = [0u8; 64];
    let n = waiting.read(&mut reply).unwrap_or(0);
    assert!(reply[..n].starts_with(b"VERSION "), "a waiting client was not served: {}", show(&reply[..n]));
}

/// The listening socket's backlog fits a burst of connections (`ss` shows it as Send-Q).
fn listen_backlog_fits_bursts(engine: &str) {
    let server = Memcached::start();
    let relay = Memrelay::start(engine, &[&server], &[]);
    let out = Command::new("ss").args(["-ltnH", &format!("sport = :{}", relay.port)]).output().expect("ss (iproute2)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let backlog: u64 = text.split_whitespace().nth(2).and_then(|q| q.parse().ok()).expect("ss shows the listener");
    assert!(backlog >= 1024, "listen backlog {backlog}");
}
