//! What real client libraries need beyond the replies `conformance` compares: a binary-protocol
//! client is answered at once and closed instead of left waiting for a text line; `version`
//! carries one `x.y.z` (clients parse it differently); `mg` takes its turn in the read round
//! robin like `get` (with `--read-from any-replica` too); `cache_memlimit` reaches every server;
//! a `gat`/`gats` of many keys changes the expiry of every copy, as it does on one memcached; a
//! stale item's win flag goes to one reader of many, across replicas, as on one memcached.
//!
//! Every test is a function of the engine's name and runs once per engine (see `common`).

use std::collections::HashSet;
use std::io::Read;
use std::time::Duration;

use crate::common::*;

engine_matrix!(
    binary_clients_get_a_binary_refusal_and_a_close,
    version_is_one_three_part_number,
    meta_gets_take_turns_over_the_servers,
    meta_gets_take_turns_over_the_replicas,
    cache_memlimit_reaches_every_server,
    multi_key_gat_touches_every_replica_of_every_key,
    a_stale_item_has_one_winner_across_replicas,
);

/// A binary GET for `key` with `opaque`, laid out by hand from memcached's `protocol_binary.h`
/// (independently of memrelay's own encoder).
fn binary_get(key: &[u8], opaque: u32) -> Vec<u8> {
    let mut request = vec![0x80, 0x00];
    request.extend_from_slice(&(key.len() as u16).to_be_bytes());
    request.extend_from_slice(&[0, 0, 0, 0]); // extras, data type, vbucket
    request.extend_from_slice(&(key.len() as u32).to_be_bytes());
    request.extend_from_slice(&opaque.to_be_bytes());
    request.extend_from_slice(&[0; 8]);
    request.extend_from_slice(key);
    request
}

fn binary_clients_get_a_binary_refusal_and_a_close(engine: &str) {
    let server = Memcached::start();
    let relay = Memrelay::start(engine, &[&server], &[]);
    let mut bystander = relay.client();
    assert_eq!(bystander.set("k", b"v"), "STORED\r\n");

    // Whole, and split so that the header arrives in two pieces.
    for split in [None, Some(10)] {
        let mut binary = relay.client();
        binary.set_read_timeout(Duration::from_secs(5));
        let request = binary_get(b"k", 0xfeed_f00d);
        match split {
            None => binary.send(&request),
            Some(at) => {
                binary.send(&request[..at]);
                std::thread::sleep(Duration::from_millis(50));
                binary.send(&request[at..]);
            }
        }
        let header = binary.read_exact_reply(24);
        assert_eq!(header[0], 0x81, "response magic");
        assert_eq!(header[1], 0x00, "the request's opcode");
        assert_eq!(u16::from_be_bytes([header[6], header[7]]), 0x0083, "status: not supported");
        assert_eq!(&header[12..16], &0xfeed_f00du32.to_be_bytes(), "opaque echoed");
        let body = u32::from_be_bytes([header[8], header[9], header[10], header[11]]) as usize;
        let message = binary.read_exact_reply(body);
        assert!(String::from_utf8_lossy(&message).contains("text protocol"));
        let mut rest = Vec::new();
        assert_eq!(binary.stream.read_to_end(&mut rest).expect("closed, not timed out"), 0, "nothing more, then EOF");
    }
    // The text client beside it is untouched, and the refusal is logged.
    assert_eq!(bystander.get("k"), [("k".to_string(), b"v".to_vec())]);
    let logged =
        wait_for(Duration::from_secs(5), || relay.stderr().contains("spoke the binary protocol (opcode 0x00)"));
    assert!(logged, "{}", relay.stderr());
    let mut text = relay.client();
    assert_eq!(text.line(b"version\r\n"), "VERSION 1.6.0\r\n");
}

fn version_is_one_three_part_number(engine: &str) {
    let server = Memcached::start();
    let relay = Memrelay::start(engine, &[&server], &[]);
    let line = relay.client().line(b"version\r\n");
    let version = line.strip_prefix("VERSION ").and_then(|v| v.strip_suffix("\r\n")).expect(&line);
    // What both parsers read: libmemcached the leading x.y.z, the Node client the last one.
    let numbers: Vec<&str> =
        version.split(|c: char| !c.is_ascii_digit() && c != '.').filter(|s| !s.is_empty()).collect();
    assert_eq!(numbers.len(), 1, "one version in {version:?}");
    let parts: Vec<u32> = numbers[0].split('.').map(|p| p.parse().expect("a number")).collect();
    assert_eq!(parts[..2], [1, 6], "{version}");
    // And memcached's own line has the same shape.
    let real = server.client().line(b"version\r\n");
    assert!(real.starts_with("VERSION 1.6."), "{real}");
    assert!(!relay.client().request(b"stats\r\n", b"END\r\n").is_empty());
    let mut client = relay.client();
    assert!(!stat_of(&mut client, "memrelay_version").is_empty());
}

/// Reads `key` with `mg <key> v` `n` times; returns the values seen.
fn meta_reads(client: &mut Client, key: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let reply = client.request(format!("mg {key} v\r\n").as_bytes(), b"\r\n");
            let reply = String::from_utf8(reply).unwrap();
            assert!(reply.starts_with("VA "), "{reply}");
            String::from_utf8(client.read_line()).unwrap().trim_end().to_string()
        })
        .collect()
}

fn meta_gets_take_turns_over_the_servers(engine: &str) {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    for (i, server) in servers.iter().enumerate() {
        server.set_raw("k", format!("s{i}").as_bytes());
    }
    let refs: Vec<&Memcached> = servers.iter().collect();
    let relay = Memrelay::start(engine, &refs, &[]);
    let mut client = relay.client();
    let seen = meta_reads(&mut client, "k", 6);
    let distinct: HashSet<&String> = seen.iter().collect();
    assert_eq!(distinct.len(), 3, "mg read every server in turn: {seen:?}");
    // mg and get share the turn: six reads alternating between them still visit every server.
    let mut mixed = HashSet::new();
    for _ in 0..3 {
        mixed.extend(meta_reads(&mut client, "k", 1));
        mixed.extend(client.get("k").into_iter().map(|(_, v)| String::from_utf8(v).unwrap()));
    }
    assert_eq!(mixed.len(), 3, "{mixed:?}");
    // Each server's own counters: every one was read.
    for server in &servers {
        assert!(server.stats()["cmd_get"] >= 2, "{:?}", server.stats()["cmd_get"]);
    }
}

fn meta_gets_take_turns_over_the_replicas(engine: &str) {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    for (i, server) in servers.iter().enumerate() {
        server.set_raw("k", format!("s{i}").as_bytes());
    }
    let refs: Vec<&Memcached> = servers.iter().collect();
    let args = ["--distribution", "ketama", "--replication", "2", "--read-from", "any-replica"];
    let relay = Memrelay::start(engine, &refs, &args);
    let seen = meta_reads(&mut relay.client(), "k", 6);
    let distinct: HashSet<&String> = seen.iter().collect();
    assert_eq!(distinct.len(), 2, "mg read both replicas of k: {seen:?}");
}

fn cache_memlimit_reaches_every_server(engine: &str) {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let refs: Vec<&Memcached> = servers.iter().collect();
    let relay = Memrelay::start(engine, &refs, &[]);
    assert_eq!(relay.client().line(b"cache_memlimit 100\r\n"), "OK\r\n");
    for server in &servers {
        let settings = server.client().request(b"stats settings\r\n", b"END\r\n");
        let settings = String::from_utf8(settings).unwrap();
        assert!(settings.contains("STAT maxbytes 104857600\r\n"), "{settings}");
    }
}

/// The remaining time to live of `key` on `server` (`mg <key> t`: -1 is never), or None if absent.
fn ttl_on(server: &Memcached, key: &str) -> Option<i64> {
    let reply = String::from_utf8(server.client().request(format!("mg {key} t\r\n").as_bytes(), b"\r\n")).unwrap();
    if reply == "EN\r\n" {
        return None;
    }
    let ttl = reply.trim_end().split(' ').find_map(|flag| flag.strip_prefix('t'));
    Some(ttl.unwrap_or_else(|| panic!("{reply}")).parse().unwrap())
}

fn multi_key_gat_touches_every_replica_of_every_key(engine: &str) {
    const KEYS: [&str; 6] = ["k0", "k1", "k2", "k3", "k4", "k5"];
    let gat = format!("gat 1000 {}\r\n", KEYS.join(" "));
    let expire = format!("gats -1 {}\r\n", KEYS.join(" "));
    // One memcached, the reference: its reply, and every key's new time to live.
    let reference = Memcached::start();
    for key in KEYS {
        reference.set_raw(key, key.as_bytes());
    }
    let expected = reference.client().get_reply(&gat);
    assert!(KEYS.iter().all(|k| ttl_on(&reference, k).is_some_and(|t| (990..=1000).contains(&t))));

    // Every key on every server, and each key on two of four.
    for (servers, args) in [(3, &[][..]), (4, &["--distribution", "ketama", "--replication", "2"][..])] {
        let servers: Vec<Memcached> = (0..servers).map(|_| Memcached::start()).collect();
        let refs: Vec<&Memcached> = servers.iter().collect();
        let relay = Memrelay::start(engine, &refs, args);
        let mut client = relay.client();
        for key in KEYS {
            assert_eq!(client.set(key, key.as_bytes()), "STORED\r\n");
        }
        assert_eq!(show(&client.get_reply(&gat)), show(&expected), "{args:?}");
        for key in KEYS {
            let ttls: Vec<Option<i64>> = servers.iter().map(|s| ttl_on(s, key)).collect();
            let copies: Vec<i64> = ttls.iter().flatten().copied().collect();
            assert!(!copies.is_empty() && copies.iter().all(|t| (990..=1000).contains(t)), "{key} {args:?}: {ttls:?}");
        }
        // A negative time expires the items at once: memcached answers the values, then has none.
        let reply = client.get_reply(&expire);
        assert_eq!(parse_values(&reply).len(), KEYS.len(), "{}", show(&reply));
        assert!(KEYS.iter().all(|k| ttl_on(&reference, k).is_some()), "the reference still has them here");
        for key in KEYS {
            assert!(servers.iter().all(|s| ttl_on(s, key).is_none()), "{key} {args:?} survived somewhere");
            assert_eq!(client.get(key), vec![], "{key}");
        }
    }
}

/// The flags of each of `readers` concurrent `mg <key> v` (one connection each) to `addr`
/// after `md <key> I` made the item stale.
fn stale_readers(addr: &str, readers: usize) -> Vec<Vec<String>> {
    let mut writer = Client::connect(addr);
    assert_eq!(writer.set("k", b"v"), "STORED\r\n");
    assert_eq!(writer.line(b"md k I\r\n"), "HD\r\n");
    let threads: Vec<_> = (0..readers)
        .map(|_| {
            let addr = addr.to_string();
            std::thread::spawn(move || {
                let mut client = Client::connect(&addr);
                let line = String::from_utf8(client.request(b"mg k v\r\n", b"\r\n")).unwrap();
                assert!(line.starts_with("VA 1 "), "{line}");
                assert_eq!(client.read_line(), b"v\r\n");
                line.split_whitespace().skip(2).map(str::to_string).collect::<Vec<String>>()
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

fn winners(flags: &[Vec<String>]) -> usize {
    flags.iter().filter(|f| f.iter().any(|x| x == "W")).count()
}

fn a_stale_item_has_one_winner_across_replicas(engine: &str) {
    const READERS: usize = 12;
    let reference = Memcached::start();
    let flags = stale_readers(&reference.addr(), READERS);
    // memcached: one W, every other reader Z, all of them X.
    assert_eq!(winners(&flags), 1, "{flags:?}");
    assert!(flags.iter().all(|f| f.contains(&"X".to_string())), "{flags:?}");
    assert_eq!(flags.iter().filter(|f| f.contains(&"Z".to_string())).count(), READERS - 1, "{flags:?}");
    for args in [&[][..], &["--distribution", "ketama", "--replication", "3", "--read-from", "any-replica"][..]] {
        let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
        let refs: Vec<&Memcached> = servers.iter().collect();
        let relay = Memrelay::start(engine, &refs, args);
        let through = stale_readers(&relay.addr(), READERS);
        assert_eq!(winners(&through), 1, "{args:?}: {through:?}");
        assert!(through.iter().all(|f| f.contains(&"X".to_string())), "{through:?}");
        // The readers were spread over the replicas (each server's own counters).
        let read: Vec<u64> = servers.iter().map(|s| s.stats()["cmd_get"]).collect();
        assert!(read.iter().filter(|&&n| n > 0).count() > 1, "{args:?}: {read:?}");
    }
}
