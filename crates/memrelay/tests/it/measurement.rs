//! Black-box tests of what memrelay measures: `summary.json`, `windows.jsonl`, `requests.csv`
//! and the `stats` command, checked against what the test sent (counted here) and what the
//! memcached servers counted themselves (their own `stats`).

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::thread;
use std::time::Duration;

use serde_json::Value;

use crate::common::*;

engine_matrix!(
    measurement_outputs,
    stats_command,
    pipelined_arrival_is_first_byte,
    meta_requests_are_measured,
    littles_law_holds_inside_memrelay,
);

type Stats = HashMap<String, u64>;

const CLIENTS: usize = 3;
const SETS_PER_CLIENT: usize = 50;
const GETS_PER_CLIENT: usize = 40;
const MULTIGETS: [usize; CLIENTS] = [14, 13, 13];
const DELETES_PER_CLIENT: usize = 10;
/// Recording threads memrelay may have (pool: workers + net thread): bounds sampling round-off.
const MAX_RECORDERS: usize = 16;

fn snapshot(servers: &[Memcached]) -> Vec<Stats> {
    servers.iter().map(Memcached::stats).collect()
}

fn delta_of(before: &[Stats], after: &[Stats], server: usize, names: &[&str]) -> u64 {
    names.iter().map(|name| delta(&before[server], &after[server], name)).sum()
}

fn sum_delta(before: &[Stats], after: &[Stats], name: &str) -> u64 {
    (0..before.len()).map(|s| delta(&before[s], &after[s], name)).sum()
}

/// Runs `body(client_index, client)` on `CLIENTS` clients at once.
fn phase(relay: &Memrelay, body: impl Fn(usize, &mut Client) + Sync) {
    thread::scope(|scope| {
        for id in 0..CLIENTS {
            let body = &body;
            let mut client = relay.client();
            scope.spawn(move || body(id, &mut client));
        }
    });
}

fn u(value: &Value, path: &str) -> u64 {
    value.pointer(path).and_then(Value::as_u64).unwrap_or_else(|| panic!("{path} missing or not a count in {value}"))
}

fn f(value: &Value, path: &str) -> f64 {
    value.pointer(path).and_then(Value::as_f64).unwrap_or_else(|| panic!("{path} missing or not a number"))
}

/// Drives a known mix through memrelay in phases, then checks every output.
fn measurement_outputs(engine: &str) {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let dir = tempfile::tempdir().unwrap();
    let stats_dir = dir.path().join("stats");
    let refs: Vec<&Memcached> = servers.iter().collect();
    let mut relay = Memrelay::start(
        engine,
        &refs,
        &["--stats-dir", stats_dir.to_str().unwrap(), "--stats-window", "0.2", "--request-log-sample", "3"],
    );

    let s0 = snapshot(&servers);
    phase(&relay, |c, client| {
        for i in 0..SETS_PER_CLIENT {
            assert_eq!(client.set(&format!("ms:{c}:{i}"), format!("v{i}").as_bytes()), "STORED\r\n");
        }
    });
    let s1 = snapshot(&servers);
    // Single gets: every fourth misses.
    phase(&relay, |c, client| {
        for i in 0..GETS_PER_CLIENT {
            let key = if i % 4 == 3 { format!("ms:miss:{c}:{i}") } else { format!("ms:{c}:{i}") };
            let values = client.get(&key);
            assert_eq!(values.len(), usize::from(i % 4 != 3));
        }
    });
    let s2 = snapshot(&servers);
    // Multi-gets of 4 keys: 3 hits and a miss each.
    phase(&relay, |c, client| {
        for j in 0..MULTIGETS[c] {
            let values = client.get(&format!("ms:{c}:{j} ms:{c}:{} ms:none:{c}:{j} ms:{c}:{}", j + 1, j + 2));
            assert_eq!(values.len(), 3);
        }
    });
    let s3 = snapshot(&servers);
    // Deletes ("other"): half find their key.
    phase(&relay, |c, client| {
        for i in 0..DELETES_PER_CLIENT {
            let (key, reply) = if i % 2 == 0 {
                (format!("ms:{c}:{i}"), "DELETED\r\n")
            } else {
                (format!("ms:gone:{c}:{i}"), "NOT_FOUND\r\n")
            };
            assert_eq!(client.line(format!("delete {key}\r\n").as_bytes()), reply);
        }
    });
    let s4 = snapshot(&servers);

    let status = relay.stop();
    assert_eq!(status.code(), Some(0), "stderr: {}", relay.stderr());

    // What was sent, counted here.
    let sets = (CLIENTS * SETS_PER_CLIENT) as u64;
    let gets = (CLIENTS * GETS_PER_CLIENT) as u64;
    let multigets: u64 = MULTIGETS.iter().sum::<usize>() as u64;
    let others = (CLIENTS * DELETES_PER_CLIENT) as u64;
    let get_misses = (CLIENTS * GETS_PER_CLIENT / 4) as u64;
    let (multi_hits, multi_misses) = (3 * multigets, multigets);

    // What the servers counted.
    assert_eq!(sum_delta(&s0, &s1, "cmd_set"), 3 * sets);
    let server_hits = sum_delta(&s1, &s3, "get_hits");
    let server_misses = sum_delta(&s1, &s3, "get_misses");
    assert_eq!(server_hits, gets - get_misses + multi_hits, "servers' own hit count");
    assert_eq!(server_misses, get_misses + multi_misses, "servers' own miss count");
    // Requests each server got: every set, its share of the single gets (one key each), of the
    // multi-gets (4 keys each, one server each), and every delete.
    let per_server: Vec<u64> = (0..servers.len())
        .map(|s| {
            let multi_keys = delta_of(&s2, &s3, s, &["cmd_get"]);
            assert_eq!(multi_keys % 4, 0, "server {s} got whole multi-gets");
            delta_of(&s0, &s1, s, &["cmd_set"])
                + delta_of(&s1, &s2, s, &["cmd_get"])
                + multi_keys / 4
                + delta_of(&s3, &s4, s, &["delete_hits", "delete_misses"])
        })
        .collect();
    assert_eq!(per_server.iter().sum::<u64>(), 3 * sets + gets + multigets + 3 * others);

    // summary.json: complete once memrelay has exited.
    let summary: Value = serde_json::from_str(&fs::read_to_string(stats_dir.join("summary.json")).unwrap())
        .expect("summary.json is JSON");
    let expected_counts = [("get", gets), ("multiget", multigets), ("set", sets), ("other", others)];
    for (kind, count) in expected_counts {
        assert_eq!(u(&summary, &format!("/types/{kind}/count")), count, "{kind} count");
        assert_eq!(u(&summary, &format!("/types/{kind}/errors")), 0, "{kind} errors");
    }
    assert_eq!(u(&summary, "/types/get/keys"), gets);
    assert_eq!(u(&summary, "/types/multiget/keys"), 4 * multigets);
    assert_eq!(u(&summary, "/types/get/hits") + u(&summary, "/types/multiget/hits"), server_hits);
    assert_eq!(u(&summary, "/types/get/misses") + u(&summary, "/types/multiget/misses"), server_misses);
    assert_eq!(u(&summary, "/types/get/misses"), get_misses);
    assert_eq!(u(&summary, "/types/multiget/hits"), multi_hits);
    assert_eq!(u(&summary, "/totals/count"), gets + multigets + sets + others);
    assert_eq!(u(&summary, "/totals/hits"), server_hits);
    assert_eq!(u(&summary, "/totals/misses"), server_misses);
    let summary_servers = summary["servers"].as_array().expect("servers list");
    assert_eq!(summary_servers.len(), 3);
    for (s, server) in summary_servers.iter().enumerate() {
        assert_eq!(server["address"], servers[s].addr());
        assert_eq!(u(server, "/requests"), per_server[s], "requests memrelay sent to server {s}");
        assert_eq!(u(server, "/failures"), 0);
    }
    for (kind, count) in expected_counts {
        let t = &summary["types"][kind];
        let mut total = 0;
        let mut last_lower = None;
        for bucket in t["response_histogram"]["buckets"].as_array().expect("buckets") {
            let (lower, n) = (bucket[0].as_u64().unwrap(), bucket[1].as_u64().unwrap());
            assert_eq!(lower % u(t, "/response_histogram/bucket_us"), 0);
            assert!(last_lower.is_none_or(|last| lower > last), "buckets ascend");
            last_lower = Some(lower);
            total += n;
        }
        assert_eq!(total, count, "{kind}: histogram buckets add up to the count");
        for time in ["response_us", "queue_us", "service_us"] {
            let p = |q: &str| f(t, &format!("/{time}/{q}"));
            assert!(p("p50") <= p("p90") && p("p90") <= p("p99") && p("p99") <= p("p999") && p("p999") <= p("max"));
            assert!(p("mean") > 0.0 || time == "queue_us", "{kind} {time} mean");
        }
        assert!(f(t, "/queue_us/mean") + f(t, "/service_us/mean") <= f(t, "/response_us/mean") + 1e-6);
    }

    check_windows(&stats_dir.join("windows.jsonl"), &summary);
    check_requests_csv(&stats_dir.join("requests.csv"), gets + multigets + sets + others);
}

/// The windows add up to the summary, type by type and server by server.
fn check_windows(path: &Path, summary: &Value) {
    let text = fs::read_to_string(path).unwrap();
    assert!(text.ends_with('\n'), "windows.jsonl ends with a whole line");
    let mut sums: HashMap<String, u64> = HashMap::new();
    let mut per_server = [0u64; 3];
    let mut last = None;
    let mut lines = 0;
    for line in text.lines() {
        let window: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("bad window line {line:?}: {e}"));
        let index = u(&window, "/window");
        assert!(last.is_none_or(|l| index > l), "window numbers ascend");
        last = Some(index);
        let mut count = 0;
        for kind in ["get", "multiget", "set", "other"] {
            for field in ["count", "hits", "misses", "keys", "errors"] {
                *sums.entry(format!("{kind}/{field}")).or_default() += u(&window, &format!("/types/{kind}/{field}"));
            }
            count += u(&window, &format!("/types/{kind}/count"));
        }
        assert_eq!(u(&window, "/count"), count);
        for (s, n) in window["per_server_requests"].as_array().unwrap().iter().enumerate() {
            per_server[s] += n.as_u64().unwrap();
        }
        lines += 1;
    }
    assert!(lines >= 1);
    for kind in ["get", "multiget", "set", "other"] {
        for field in ["count", "hits", "misses", "keys", "errors"] {
            assert_eq!(
                sums[&format!("{kind}/{field}")],
                u(summary, &format!("/types/{kind}/{field}")),
                "windows' {kind} {field}"
            );
        }
    }
    for (s, n) in per_server.iter().enumerate() {
        assert_eq!(*n, u(&summary["servers"][s], "/requests"), "windows' requests to server {s}");
    }
}

/// Every sampled request's timestamps are in order and its times consistent.
fn check_requests_csv(path: &Path, total: u64) {
    let text = fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("a header").split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no column {name}"));
    let stamps: Vec<usize> =
        ["arrival_us", "enqueue_us", "dequeue_us", "first_send_us", "last_reply_us", "reply_written_us"]
            .map(column)
            .to_vec();
    let (response, queue, service) = (column("response_us"), column("queue_us"), column("service_us"));
    let (kind, keys, hits, misses, error, servers) =
        (column("type"), column("keys"), column("hits"), column("misses"), column("error"), column("servers"));
    let mut rows = 0u64;
    for line in lines {
        let fields: Vec<&str> = line.split(',').collect();
        assert_eq!(fields.len(), header.len(), "row {line:?}");
        let n = |i: usize| fields[i].parse::<u64>().unwrap_or_else(|_| panic!("column {} of {line:?}", header[i]));
        for pair in stamps.windows(2) {
            assert!(n(pair[0]) <= n(pair[1]), "{} > {} in {line:?}", header[pair[0]], header[pair[1]]);
        }
        assert!(n(queue) <= n(response) && n(service) <= n(response), "{line:?}");
        assert!(n(queue) + n(service) <= n(response), "{line:?}");
        // The durations and the timestamps (each rounded down to 1 µs) agree.
        let close = |a: u64, b: u64| a.abs_diff(b) <= 1;
        assert!(close(n(response), n(stamps[5]) - n(stamps[0])), "{line:?}");
        assert!(close(n(queue), n(stamps[2]) - n(stamps[1])), "{line:?}");
        assert!(close(n(service), n(stamps[4]) - n(stamps[3])), "{line:?}");
        assert_eq!(n(error), 0);
        let expected = match fields[kind] {
            "get" => (1, 1),
            "multiget" => (4, 1),
            "set" => (1, 3),
            "other" => (1, 3),
            other => panic!("unknown type {other}"),
        };
        assert_eq!((n(keys), n(servers)), expected, "{line:?}");
        if fields[kind].ends_with("get") {
            assert_eq!(n(hits) + n(misses), n(keys), "{line:?}");
        }
        rows += 1;
    }
    // Every third request of each recording thread.
    assert!(3 * rows <= total && 3 * rows + 2 * MAX_RECORDERS as u64 >= total, "{rows} rows sampled of {total}");
}

/// `stats` through memrelay: well-formed lines, and request counters equal to what was sent.
fn stats_command(engine: &str) {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let refs: Vec<&Memcached> = servers.iter().collect();
    let relay = Memrelay::start(engine, &refs, &["--stats-window", "0.2"]);
    let mut c = relay.client();

    let s0 = snapshot(&servers);
    for i in 0..20 {
        assert_eq!(c.set(&format!("st:{i}"), b"v"), "STORED\r\n");
    }
    let s1 = snapshot(&servers);
    for i in 0..15 {
        // 10 hits, 5 misses.
        c.get(&format!("st:{}", if i < 10 { i } else { 100 + i }));
    }
    let s2 = snapshot(&servers);
    for i in 0..5 {
        // 2 hits and a miss each.
        assert_eq!(c.get(&format!("st:{i} st:none st:{}", i + 1)).len(), 2);
    }
    let s3 = snapshot(&servers);
    for i in 0..4 {
        assert_eq!(c.line(format!("delete st:{i}\r\n").as_bytes()), "DELETED\r\n");
    }
    let s4 = snapshot(&servers);
    let per_server: Vec<u64> = (0..3)
        .map(|s| {
            delta_of(&s0, &s1, s, &["cmd_set"])
                + delta_of(&s1, &s2, s, &["cmd_get"])
                + delta_of(&s2, &s3, s, &["cmd_get"]) / 3
                + delta_of(&s3, &s4, s, &["delete_hits", "delete_misses"])
        })
        .collect();

    let calls = std::cell::Cell::new(0u64);
    let read_stats = |c: &mut Client| -> Stats {
        let reply = String::from_utf8(c.request(b"stats\r\n", b"END\r\n")).expect("stats is text");
        calls.set(calls.get() + 1);
        let mut stats = Stats::new();
        let mut lines: Vec<&str> = reply.split("\r\n").collect();
        assert_eq!(lines.pop(), Some(""), "ends with CRLF");
        assert_eq!(lines.pop(), Some("END"));
        for line in lines {
            let fields: Vec<&str> = line.split(' ').collect();
            assert!(
                fields.len() == 3 && fields[0] == "STAT" && !fields[1].is_empty() && !fields[2].is_empty(),
                "{line:?}"
            );
            assert!(fields[1].bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'), "{line:?}");
            if let Ok(value) = fields[2].parse() {
                stats.insert(fields[1].to_string(), value);
            }
        }
        stats
    };
    let want = [
        ("requests_set", 20),
        ("requests_get", 15),
        ("requests_multiget", 5),
        ("cmd_set", 20),
        ("cmd_get", 30),
        ("get_hits", 20),
        ("get_misses", 10),
        ("server_0_requests", per_server[0]),
        ("server_1_requests", per_server[1]),
        ("server_2_requests", per_server[2]),
        ("errors_get", 0),
        ("errors_set", 0),
    ];
    let matches = |stats: &Stats| want.iter().all(|(name, value)| stats.get(*name) == Some(value));
    let mut stats = read_stats(&mut c);
    assert!(
        wait_for(Duration::from_secs(5), || {
            stats = read_stats(&mut c);
            matches(&stats)
        }),
        "stats never showed what was sent: {stats:?}, want {want:?}"
    );
    // `stats` calls count as "other" too: once a window has passed since the last one, every
    // earlier call is counted (a call is not counted in its own answer).
    let mut stats = Stats::new();
    let mut earlier = 0;
    let counted_all = (0..10).any(|_| {
        thread::sleep(Duration::from_millis(500));
        earlier = calls.get();
        stats = read_stats(&mut c);
        stats["requests_other"] == 4 + earlier
    });
    assert!(counted_all, "requests_other {} never reached 4 deletes + {earlier} stats calls", stats["requests_other"]);
    assert!(matches(&stats), "{stats:?}");
    assert_eq!(stats["requests_total"], 20 + 15 + 5 + 4 + earlier);
    assert!(stats["curr_connections"] >= 1);
    assert_eq!(stats["pid"], u64::from(relay.pid()));
}

/// Reads `requests.csv` into rows of column name to value.
fn read_csv(path: &Path) -> Vec<HashMap<String, String>> {
    let text = fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().expect("a header").split(',').map(String::from).collect();
    lines.map(|line| header.iter().cloned().zip(line.split(',').map(String::from)).collect()).collect()
}

/// A request's arrival is the read that brought its first byte, also when it arrives while
/// earlier requests of the same client still wait in memrelay.
fn pipelined_arrival_is_first_byte(engine: &str) {
    let (server, _) = slow_server(Duration::from_millis(300));
    let dir = tempfile::tempdir().unwrap();
    let stats_dir = dir.path().join("stats");
    let mut relay = Memrelay::start_addrs(
        engine,
        &[server],
        &["--stats-dir", stats_dir.to_str().unwrap(), "--stats-window", "0.2", "--request-log-sample", "1"],
    );
    let mut c = relay.client();
    // a and b arrive together; c arrives 150 ms later, while a is at the server and b waits.
    c.send(b"get a\r\nget b\r\n");
    thread::sleep(Duration::from_millis(150));
    c.send(b"get c\r\n");
    for _ in 0..3 {
        assert_eq!(c.read_until(b"END\r\n"), b"END\r\n");
    }
    assert_eq!(relay.stop().code(), Some(0));
    let mut rows = read_csv(&stats_dir.join("requests.csv"));
    assert_eq!(rows.len(), 3);
    let at = |row: &HashMap<String, String>, column: &str| row[column].parse::<u64>().unwrap();
    rows.sort_by_key(|row| at(row, "reply_written_us"));
    let (a, b, c) = (at(&rows[0], "arrival_us"), at(&rows[1], "arrival_us"), at(&rows[2], "arrival_us"));
    assert!(b - a < 50_000, "a and b were sent together: arrivals {a} and {b} µs");
    assert!(c - a >= 120_000, "c was sent 150 ms after a, yet its arrival is {} µs after a's", c - a);
    // c arrived 150 ms in and was answered when b's turn (300-600 ms) and its own (600-900 ms)
    // were over: about 750 ms, not the 900 ms since a arrived.
    let response_c = at(&rows[2], "response_us");
    assert!(response_c < 850_000, "c's response time {response_c} µs counts time before it arrived");
}

/// Meta requests are measured as the text ones are: `ms` counts as a set, `mg` as a get, with
/// the hits and misses the servers themselves count (quiet misses included).
fn meta_requests_are_measured(engine: &str) {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let dir = tempfile::tempdir().unwrap();
    let stats_dir = dir.path().join("stats");
    let refs: Vec<&Memcached> = servers.iter().collect();
    let mut relay =
        Memrelay::start(engine, &refs, &["--stats-dir", stats_dir.to_str().unwrap(), "--stats-window", "0.2"]);
    let s0 = snapshot(&servers);
    let mut client = relay.client();
    for i in 0..40 {
        assert_eq!(client.line(format!("ms mk{i} 2 T0\r\nv{}\r\n", i % 10).as_bytes()), "HD\r\n");
    }
    let s1 = snapshot(&servers);
    for i in 0..60 {
        let key = if i % 3 == 0 { format!("none{i}") } else { format!("mk{}", i % 40) };
        client.send(format!("mg {key} v\r\n").as_bytes());
        let line = client.read_line();
        if i % 3 == 0 {
            assert_eq!(line, b"EN\r\n");
        } else {
            assert_eq!(line, b"VA 2\r\n");
            client.read_line();
        }
    }
    // Quiet: 5 misses and 5 hits pipelined, the misses left out, `mn` closing the batch.
    let batch: String =
        (0..10).map(|i| if i % 2 == 0 { format!("mg q{i} v q\r\n") } else { format!("mg mk{i} v q\r\n") }).collect();
    client.send(format!("{batch}mn\r\n").as_bytes());
    let reply = client.read_until(b"MN\r\n");
    assert_eq!(String::from_utf8_lossy(&reply).matches("VA 2").count(), 5);
    let s2 = snapshot(&servers);
    let status = relay.stop();
    assert_eq!(status.code(), Some(0), "stderr: {}", relay.stderr());

    let summary: Value = serde_json::from_str(&fs::read_to_string(stats_dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(sum_delta(&s0, &s1, "cmd_set"), 3 * 40, "every replica stored every ms");
    assert_eq!(u(&summary, "/types/set/count"), 40);
    assert_eq!(u(&summary, "/types/get/count"), 70);
    assert_eq!(u(&summary, "/types/get/hits"), sum_delta(&s1, &s2, "get_hits"), "hits as the servers count them");
    assert_eq!(u(&summary, "/types/get/misses"), sum_delta(&s1, &s2, "get_misses"), "misses as the servers count them");
    assert_eq!(u(&summary, "/types/get/misses"), 25);
}

/// The requests inside memrelay, sampled about 1000 times a second at random instants, against
/// X·R from the requests it measured (Little's law over the same run): two figures from
/// different sources that must agree, both counting a request from its first byte on both
/// engines. Both are also held against what the clients measured themselves: they sent as
/// many requests as memrelay counted, and each request spends less time inside memrelay than
/// its client waited for it, so memrelay's X·R and its sampled N lie below the clients' own
/// N (their time in requests over the span).
fn littles_law_holds_inside_memrelay(engine: &str) {
    let servers: Vec<Memcached> = (0..2).map(|_| Memcached::start()).collect();
    let dir = tempfile::tempdir().unwrap();
    let stats_dir = dir.path().join("stats");
    let refs: Vec<&Memcached> = servers.iter().collect();
    let mut relay = Memrelay::start(engine, &refs, &["--stats-dir", stats_dir.to_str().unwrap()]);
    let begin = std::time::Instant::now();
    let until = begin + Duration::from_millis(1500);
    // Per client: requests sent and seconds spent waiting for their replies.
    let measured: Vec<(u64, f64)> = thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|c| {
                let mut client = relay.client();
                scope.spawn(move || {
                    let (mut sent, mut waited) = (0u64, 0.0f64);
                    for i in 0..200_000 {
                        if std::time::Instant::now() >= until {
                            break;
                        }
                        let start = std::time::Instant::now();
                        assert_eq!(client.set(&format!("ll:{c}:{}", i % 100), b"value"), "STORED\r\n");
                        client.get(&format!("ll:{c}:{}", i % 100));
                        waited += start.elapsed().as_secs_f64();
                        sent += 2;
                    }
                    (sent, waited)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let span = begin.elapsed().as_secs_f64();
    assert!(relay.stop().success());
    let summary: Value = serde_json::from_str(&fs::read_to_string(stats_dir.join("summary.json")).unwrap()).unwrap();
    let counted: u64 =
        ["get", "multiget", "set", "other"].iter().map(|kind| u(&summary["types"][*kind], "/count")).sum();
    let busy_us: f64 = ["get", "multiget", "set", "other"]
        .iter()
        .map(|kind| {
            let t = &summary["types"][*kind];
            u(t, "/count") as f64 * t["response_us"]["mean"].as_f64().unwrap_or(0.0)
        })
        .sum();
    let sent: u64 = measured.iter().map(|m| m.0).sum();
    let clients_n = measured.iter().map(|m| m.1).sum::<f64>() / span;
    assert_eq!(counted, sent, "memrelay counted the requests the clients sent");
    // Over the clients' span: memrelay's summary also covers its start and stop, when nothing
    // was inside it.
    let x_r = busy_us / 1e6 / span;
    assert!(x_r <= clients_n, "memrelay's X·R {x_r:.3} above the clients' own N {clients_n:.3}");
    assert!(x_r > 0.5, "the load kept memrelay busy: X·R = {x_r}");
    let samples = u(&summary, "/in_system/samples");
    assert!(samples > 50, "{summary}");
    // The samples' mean, spread over the clients' span (the sampler also ran before and after
    // the load, when nothing was inside: one sample per SAMPLE_EVERY on average).
    let sampler_ran = samples as f64 * memrelay::measure::in_system::SAMPLE_EVERY.as_secs_f64();
    let sampled = f(&summary, "/in_system/mean") * sampler_ran / span;
    let ratio = sampled / x_r;
    assert!(sampled <= clients_n * 1.25, "sampled N = {sampled:.3} above the clients' own N {clients_n:.3}");
    // The same band on both engines: each sample is the count as of its own instant, whatever
    // the sampler's waking did to the threads after it.
    assert!((0.8..1.25).contains(&ratio), "sampled N = {sampled:.3}, X·R = {x_r:.3}");
}
