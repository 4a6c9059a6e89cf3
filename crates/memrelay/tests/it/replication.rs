//! Consistent hashing with a replication factor (seeds 001/002), checked against the servers'
//! own contents and counters.
//!
//! Expected placements come from the ketama ring, which `ketama_vs_twemproxy.rs` checks key by
//! key against real twemproxy. A key's second replica is computed independently of the replica
//! walk under test: with equal weights every server keeps its ring points when another is
//! removed, so the next distinct server clockwise is the primary of the ring without the first.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use crate::common::{delta, show, wait_for, Memcached, Memrelay};
use memrelay::ketama::{KeyHash, Ring, RingServer};

engine_matrix!(
    replication_two_of_three_places_keys_on_their_ring_successors,
    replication_all_and_half,
    reads_from_primary_reach_only_primaries,
    any_replica_spreads_reads_over_the_replicas,
    multiget_is_split_by_owner_and_merged_in_order,
    failover_serves_reads_while_a_server_is_down,
    failover_serves_split_reads_while_a_server_is_dead,
    reads_pipelined_behind_a_compare_and_set_see_it,
);

fn servers(n: usize) -> Vec<Memcached> {
    (0..n).map(|_| Memcached::start()).collect()
}

fn ring_of(addrs: &[String]) -> Ring {
    let ring_servers: Vec<RingServer> = addrs.iter().map(|a| RingServer::from_host_port(a, 1).unwrap()).collect();
    Ring::new(&ring_servers, KeyHash::Md5).unwrap()
}

/// The key's first `r` replicas as server indexes, each found as the primary of the ring with
/// the earlier replicas removed.
fn expected_replicas(addrs: &[String], key: &str, r: usize) -> BTreeSet<usize> {
    let mut remaining: Vec<usize> = (0..addrs.len()).collect();
    let mut replicas = BTreeSet::new();
    for _ in 0..r {
        let names: Vec<String> = remaining.iter().map(|&i| addrs[i].clone()).collect();
        let chosen = remaining[ring_of(&names).primary(key.as_bytes())];
        replicas.insert(chosen);
        remaining.retain(|&i| i != chosen);
    }
    replicas
}

fn addrs(servers: &[Memcached]) -> Vec<String> {
    servers.iter().map(Memcached::addr).collect()
}

fn refs(servers: &[Memcached]) -> Vec<&Memcached> {
    servers.iter().collect()
}

fn holders(servers: &[Memcached], key: &str) -> BTreeSet<usize> {
    (0..servers.len()).filter(|&i| servers[i].get_raw(key).is_some()).collect()
}

fn replication_two_of_three_places_keys_on_their_ring_successors(engine: &str) {
    let servers = servers(3);
    let relay = Memrelay::start(engine, &refs(&servers), &["--distribution", "ketama", "--replication", "2"]);
    let mut client = relay.client();
    let names = addrs(&servers);
    for i in 0..150 {
        let key = format!("user:{i}");
        assert_eq!(client.set(&key, format!("v{i}").as_bytes()), "STORED\r\n");
        assert_eq!(holders(&servers, &key), expected_replicas(&names, &key, 2), "placement of {key}");
    }
    // Deletes go to the same two replicas.
    assert_eq!(client.line(b"delete user:7\r\n"), "DELETED\r\n");
    assert!(holders(&servers, "user:7").is_empty());
}

fn replication_all_and_half(engine: &str) {
    let servers = servers(5);
    let names = addrs(&servers);
    {
        let relay = Memrelay::start(engine, &refs(&servers), &["--distribution", "ketama", "--replication", "half"]);
        let mut client = relay.client();
        for i in 0..40 {
            let key = format!("half:{i}");
            assert_eq!(client.set(&key, b"x"), "STORED\r\n");
            // half of 5 is ⌈5/2⌉ = 3 (seed 001).
            assert_eq!(holders(&servers, &key), expected_replicas(&names, &key, 3), "placement of {key}");
        }
    }
    let relay = Memrelay::start(engine, &refs(&servers), &["--distribution", "ketama", "--replication", "all"]);
    let mut client = relay.client();
    for i in 0..20 {
        let key = format!("all:{i}");
        assert_eq!(client.set(&key, b"x"), "STORED\r\n");
        assert_eq!(holders(&servers, &key).len(), 5);
    }
}

fn reads_from_primary_reach_only_primaries(engine: &str) {
    let servers = servers(3);
    let relay = Memrelay::start(engine, &refs(&servers), &["--distribution", "ketama", "--replication", "2"]);
    let mut client = relay.client();
    let names = addrs(&servers);
    let ring = ring_of(&names);
    let keys: Vec<String> = (0..90).map(|i| format!("k{i}")).collect();
    for key in &keys {
        client.set(key, b"v");
    }
    let before: Vec<HashMap<String, u64>> = servers.iter().map(Memcached::stats).collect();
    let mut expected = [0u64; 3];
    for key in &keys {
        assert_eq!(client.get(key).len(), 1, "{key} is readable");
        expected[ring.primary(key.as_bytes())] += 1;
    }
    for (i, server) in servers.iter().enumerate() {
        assert_eq!(delta(&before[i], &server.stats(), "cmd_get"), expected[i], "gets on server {i}");
    }
}

fn any_replica_spreads_reads_over_the_replicas(engine: &str) {
    let servers = servers(3);
    let args = ["--distribution", "ketama", "--replication", "2", "--read-from", "any-replica"];
    let relay = Memrelay::start(engine, &refs(&servers), &args);
    let mut client = relay.client();
    let names = addrs(&servers);
    assert_eq!(client.set("hot", b"v"), "STORED\r\n");
    let replicas = expected_replicas(&names, "hot", 2);
    let before: Vec<HashMap<String, u64>> = servers.iter().map(Memcached::stats).collect();
    for _ in 0..100 {
        assert_eq!(client.get("hot").len(), 1);
    }
    let gets: Vec<u64> = (0..3).map(|i| delta(&before[i], &servers[i].stats(), "cmd_get")).collect();
    assert_eq!(gets.iter().sum::<u64>(), 100);
    for i in 0..3 {
        if replicas.contains(&i) {
            assert!(gets[i] >= 30, "replica {i} served {} of 100 reads: {gets:?}", gets[i]);
        } else {
            assert_eq!(gets[i], 0, "server {i} holds no copy: {gets:?}");
        }
    }
}

fn multiget_is_split_by_owner_and_merged_in_order(engine: &str) {
    let servers = servers(3);
    let relay = Memrelay::start(engine, &refs(&servers), &["--distribution", "ketama"]);
    let mut client = relay.client();
    let names = addrs(&servers);
    let ring = ring_of(&names);
    let keys: Vec<String> = (0..12).map(|i| format!("mg{i}")).collect();
    for key in keys.iter().step_by(2) {
        client.set(key, key.as_bytes());
    }
    let before: Vec<HashMap<String, u64>> = servers.iter().map(Memcached::stats).collect();
    let values = client.get(&keys.join(" "));
    let expected: Vec<String> = keys.iter().step_by(2).cloned().collect();
    assert_eq!(values.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(), expected, "hits, in the order asked");
    let mut owned = [0u64; 3];
    for key in &keys {
        owned[ring.primary(key.as_bytes())] += 1;
    }
    for (i, server) in servers.iter().enumerate() {
        assert_eq!(delta(&before[i], &server.stats(), "cmd_get"), owned[i], "keys asked of server {i}");
    }
}

fn failover_serves_reads_while_a_server_is_down(engine: &str) {
    let mut servers = servers(3);
    let args = ["--distribution", "ketama", "--replication", "2", "--failover", "--server-timeout-ms", "500"];
    let relay = Memrelay::start(engine, &refs(&servers), &args);
    let mut client = relay.client();
    let names = addrs(&servers);
    let ring = ring_of(&names);
    let keys: Vec<String> = (0..60).map(|i| format!("f{i}")).collect();
    for key in &keys {
        assert_eq!(client.set(key, b"v"), "STORED\r\n");
    }
    servers[0].kill();
    let on_dead: Vec<&String> = keys.iter().filter(|k| ring.primary(k.as_bytes()) == 0).collect();
    assert!(!on_dead.is_empty());
    for key in &on_dead {
        assert_eq!(client.get(key).len(), 1, "{key}, whose primary is down, is read from its next replica");
    }
    // Without failover the same reads fail with SERVER_ERROR.
    let plain = Memrelay::start(
        engine,
        &refs(&servers),
        &["--distribution", "ketama", "--replication", "2", "--server-timeout-ms", "500"],
    );
    let mut plain_client = plain.client();
    let reply = plain_client.get_reply(&format!("get {}\r\n", on_dead[0]));
    assert!(String::from_utf8_lossy(&reply).starts_with("SERVER_ERROR"), "{}", crate::common::show(&reply));
    // The failures are counted per server in `stats`.
    assert!(wait_for(Duration::from_secs(5), || {
        let stats = client.request(b"stats\r\n", b"END\r\n");
        let text = String::from_utf8_lossy(&stats).to_string();
        text.lines().any(|l| l.starts_with("STAT server_0_failures ") && !l.ends_with(" 0"))
    }));
}

/// A multi-get split over servers, one of which died and is not known to be down (it is never
/// taken down here, and no write missed it): routed again without it, whole, instead of
/// SERVER_ERROR (which makes pylibmc and node `memcached` mark memrelay dead).
fn failover_serves_split_reads_while_a_server_is_dead(engine: &str) {
    let configs: [&[&str]; 2] = [
        &["--distribution", "ketama", "--replication", "2", "--failover", "--down-after", "0"],
        // Every key on every server; `gets` goes to each key's primary (pylibmc's reads).
        &["--write-policy", "majority", "--down-after", "0"],
    ];
    for (args, command) in configs.into_iter().zip(["get", "gets"]) {
        let mut servers = servers(3);
        let relay = Memrelay::start(engine, &refs(&servers), args);
        let mut client = relay.client();
        let keys: Vec<String> = (0..30).map(|i| format!("s{i}")).collect();
        for key in &keys {
            assert_eq!(client.set(key, key.as_bytes()), "STORED\r\n");
        }
        servers[0].kill();
        for round in 0..3 {
            let reply = client.get_reply(&format!("{command} {}\r\n", keys.join(" ")));
            let values = crate::common::parse_values(&reply);
            let got: Vec<&String> = values.iter().map(|(k, _)| k).collect();
            assert_eq!(got, keys.iter().collect::<Vec<_>>(), "{args:?} round {round}: {}", show(&reply));
        }
    }
}

/// Reads pipelined right behind a compare-and-set on the same connection see the new value on
/// every replica they are balanced to (the copies reach the replicas before those reads do):
/// text `cas`, meta `ms` with `C`, and a `gat`'s touch, with reads from any replica.
fn reads_pipelined_behind_a_compare_and_set_see_it(engine: &str) {
    let servers = servers(3);
    let relay = Memrelay::start(
        engine,
        &refs(&servers),
        &["--distribution", "ketama", "--replication", "3", "--read-from", "any-replica"],
    );
    let mut c = relay.client();
    c.send(b"set k 0 0 2\r\nv0\r\n");
    assert_eq!(c.read_line(), b"STORED\r\n");
    for round in 1..=20 {
        c.send(b"gets k\r\n");
        let reply = c.read_until(b"END\r\n");
        let cas = String::from_utf8_lossy(&reply).split_whitespace().nth(4).unwrap().to_string();
        let value = format!("t{round:03}");
        let mut pipeline = format!("cas k 0 0 {} {cas}\r\n{value}\r\n", value.len());
        pipeline.push_str(&"get k\r\n".repeat(6));
        c.send(pipeline.as_bytes());
        assert_eq!(c.read_line(), b"STORED\r\n");
        for _ in 0..6 {
            let want = format!("VALUE k 0 {}\r\n{value}\r\nEND\r\n", value.len());
            assert_eq!(show(&c.read_until(b"END\r\n")), show(want.as_bytes()), "round {round}, text");
        }

        c.send(b"mg k c\r\n");
        let reply = String::from_utf8(c.read_line()).unwrap();
        let cas = reply.trim_end().strip_prefix("HD c").unwrap().to_string();
        let value = format!("m{round:03}");
        let mut pipeline = format!("ms k {} C{cas}\r\n{value}\r\n", value.len());
        pipeline.push_str(&"mg k v\r\n".repeat(6));
        c.send(pipeline.as_bytes());
        assert_eq!(c.read_line(), b"HD\r\n");
        for _ in 0..6 {
            let want = format!("VA {}\r\n{value}\r\n", value.len());
            assert_eq!(show(&c.read_exact_reply(want.len())), show(want.as_bytes()), "round {round}, meta");
        }
    }
    // The value and every replica agree.
    for server in &servers {
        let mut direct = server.client();
        direct.send(b"get k\r\n");
        assert_eq!(direct.read_until(b"END\r\n"), b"VALUE k 0 4\r\nm020\r\nEND\r\n");
    }
}
