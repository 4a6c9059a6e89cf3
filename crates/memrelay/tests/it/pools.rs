//! Pools and routes against real memcached, read on the servers directly (issue 44): key
//! prefixes go to their pools and their keys are on exactly that pool's servers, a multi-get
//! over pools answers in key order, `get __memrelay__.route(OP,KEY)` and `memrelay route` name
//! the servers the keys were found on, and a SIGHUP moves a prefix to another pool.
//!
//! Where each key lives is learnt from the servers themselves (`get` on each memcached), never
//! from memrelay's own routing code.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::*;

engine_matrix!(
    prefixes_go_to_their_pools_and_a_multiget_over_pools_answers_in_key_order,
    a_sighup_moves_a_prefix,
    a_dead_servers_keys_are_served_from_the_gutter_with_a_capped_expiry
);

/// Default pool: `a`, `b` on ketama (one copy). `hot`: `c`, `d`, every key on both. `sessions`:
/// `e` alone. `hot:` and `s:` route to them; `moving:` goes where `moving` says.
fn write_config(path: &Path, servers: &[Memcached], moving: &str) {
    let [a, b, c, d, e] = [0, 1, 2, 3, 4].map(|i| servers[i].addr());
    let text = format!(
        r#"servers = ["{a}", "{b}"]
distribution = "ketama"
server_timeout_ms = 2000

[pools.hot]
servers = ["{c}", "{d}"]
distribution = "all"

[pools.sessions]
servers = ["{e}"]
write_policy = "all"

[[routes]]
prefix = "hot:"
pool = "hot"

[[routes]]
prefix = "s:"
pool = "sessions"

[[routes]]
prefix = "moving:"
pool = "{moving}"
"#
    );
    std::fs::write(path, text).unwrap();
}

/// The servers (by index) holding `key`, asked directly.
fn holders(servers: &[Memcached], key: &str) -> BTreeSet<usize> {
    servers.iter().enumerate().filter(|(_, s)| s.get_raw(key).is_some()).map(|(i, _)| i).collect()
}

/// `get __memrelay__.route(OP,KEY)` through memrelay: the servers' addresses, in order.
fn asked_route(client: &mut Client, op: &str, key: &str) -> Vec<String> {
    let values = client.get(&format!("__memrelay__.route({op},{key})"));
    assert_eq!(values.len(), 1, "{values:?}");
    String::from_utf8(values[0].1.clone()).unwrap().split("\r\n").map(str::to_string).collect()
}

fn indices(servers: &[Memcached], addresses: &[String]) -> BTreeSet<usize> {
    addresses
        .iter()
        .map(|address| servers.iter().position(|s| &s.addr() == address).unwrap_or_else(|| panic!("{address}")))
        .collect()
}

fn prefixes_go_to_their_pools_and_a_multiget_over_pools_answers_in_key_order(engine: &str) {
    let servers: Vec<Memcached> = (0..5).map(|_| Memcached::start()).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memrelay.toml");
    write_config(&path, &servers, "default");
    let relay = Memrelay::start_addrs(engine, &[], &["--config", path.to_str().unwrap()]);
    let mut client = relay.client();
    let mut on_default = BTreeSet::new();
    for i in 0..60 {
        for key in [format!("hot:{i}"), format!("s:{i}"), format!("k{i}")] {
            assert_eq!(client.set(&key, key.as_bytes()), "STORED\r\n", "{key}");
            let found = holders(&servers, &key);
            let expected: BTreeSet<usize> = match key.as_bytes()[0] {
                b'h' => [2, 3].into(),
                b's' => [4].into(),
                _ => {
                    assert!(found.len() == 1 && found.iter().all(|&s| s < 2), "{key} on {found:?}");
                    on_default.extend(found.iter().copied());
                    found.clone()
                }
            };
            assert_eq!(found, expected, "{key}");
            // What memrelay says of the key is where the servers hold it.
            assert_eq!(indices(&servers, &asked_route(&mut client, "set", &key)), expected, "{key}");
        }
    }
    assert_eq!(on_default, [0, 1].into(), "ketama spreads the default pool's keys over both servers");

    // A multi-get over the three pools: every value, in the order asked, a miss left out.
    let keys = ["hot:1", "k1", "s:1", "nothing", "k2", "hot:2", "s:2"];
    let got = client.get(&keys.join(" "));
    let names: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["hot:1", "k1", "s:1", "k2", "hot:2", "s:2"]);
    assert!(got.iter().all(|(k, v)| k.as_bytes() == v.as_slice()));

    // Deletes, meta commands and arithmetic follow the same routes.
    assert_eq!(client.line(b"delete s:3\r\n"), "DELETED\r\n");
    assert!(servers[4].get_raw("s:3").is_none());
    assert_eq!(client.line(b"ms hot:n 1\r\n7\r\n"), "HD\r\n");
    assert!(servers[2].get_raw("hot:n").is_some() && servers[3].get_raw("hot:n").is_some());
    assert_eq!(client.line(b"incr hot:n 5\r\n"), "12\r\n");
    assert_eq!(servers[3].get_raw("hot:n").as_deref(), Some(&b"12"[..]));

    // `memrelay route` over the same file answers as the running memrelay.
    for (op, key) in [("set", "k7"), ("get", "s:7"), ("delete", "hot:7")] {
        let output = Command::new(memrelay_binary())
            .args(["route", "--config", path.to_str().unwrap(), op, key])
            .output()
            .expect("memrelay route");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let printed: Vec<String> = String::from_utf8(output.stdout).unwrap().lines().map(str::to_string).collect();
        assert_eq!(printed, asked_route(&mut client, op, key), "{op} {key}");
    }
    let stats = stat_of(&mut client, "pool_1_name");
    assert_eq!(stats, "hot");
    // Per pool: the sessions pool's one server took its keys' requests, counted by memcached too
    // (the totals lag by up to a measurement window).
    let e_sets = servers[4].stats()["cmd_set"];
    assert!(e_sets >= 60, "{e_sets} sets on e");
    let sessions = || stat_of(&mut relay.client(), "pool_2_requests").parse::<u64>().unwrap_or(0);
    assert!(wait_for(Duration::from_secs(10), || sessions() >= e_sets), "{} requests, {e_sets} sets", sessions());
    assert_eq!(stat_of(&mut client, "pool_2_servers_up"), "1");
}

fn a_sighup_moves_a_prefix(engine: &str) {
    let servers: Vec<Memcached> = (0..5).map(|_| Memcached::start()).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memrelay.toml");
    write_config(&path, &servers, "default");
    let relay = Memrelay::start_addrs(engine, &[], &["--config", path.to_str().unwrap()]);
    let mut client = relay.client();
    assert_eq!(client.set("moving:1", b"before"), "STORED\r\n");
    assert!(holders(&servers, "moving:1").iter().all(|&s| s < 2));

    write_config(&path, &servers, "sessions");
    let status = Command::new("kill").args(["-HUP", &relay.pid().to_string()]).status().expect("kill");
    assert!(status.success());
    let generation = || stat_of(&mut relay.client(), "config_generation");
    assert!(wait_for(Duration::from_secs(10), || generation() == "2"), "{}", relay.stderr());
    assert_eq!(client.set("moving:2", b"after"), "STORED\r\n");
    assert_eq!(holders(&servers, "moving:2"), [4].into());
    // The prefix's keys are read from its new pool: the one written before is not there.
    assert!(client.get("moving:1").is_empty());
    assert_eq!(client.get("moving:2"), [("moving:2".to_string(), b"after".to_vec())]);
}

/// The remaining seconds memcached gives `key` (`mg <key> t`: -1 for never), asked directly.
fn ttl_on(server: &Memcached, key: &str) -> Option<i64> {
    let line = server.client().line(format!("mg {key} t\r\n").as_bytes());
    line.trim_end().strip_prefix("HD t").map(|t| t.parse().expect("a ttl"))
}

/// The default pool (`a`, `b`, one copy each on ketama) has `gutter` as its gutter (TTL 30 s).
/// `a` is SIGKILLed: its keys' writes, reads and deletes go to the gutter's server, what is
/// written there expires within 30 s (read on the gutter's memcached), no client sees
/// `SERVER_ERROR`, and `b`'s keys stay on `b`.
fn a_dead_servers_keys_are_served_from_the_gutter_with_a_capped_expiry(engine: &str) {
    let mut servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let [a, b, g] = [0, 1, 2].map(|i| servers[i].addr());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memrelay.toml");
    let text = format!(
        "servers = [\"{a}\", \"{b}\"]\ndistribution = \"ketama\"\nserver_timeout_ms = 1000\ngutter = \"gutter\"\n\
         gutter_ttl = 30\n\n[pools.gutter]\nservers = [\"{g}\"]\n"
    );
    std::fs::write(&path, text).unwrap();
    let relay = Memrelay::start_addrs(engine, &[], &["--config", path.to_str().unwrap()]);
    let mut client = relay.client();
    let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
    for key in &keys {
        assert_eq!(client.set(key, b"before"), "STORED\r\n");
    }
    let on_a: Vec<&String> = keys.iter().filter(|k| servers[0].get_raw(k).is_some()).collect();
    let on_b: Vec<&String> = keys.iter().filter(|k| servers[1].get_raw(k).is_some()).collect();
    assert!(!on_a.is_empty() && !on_b.is_empty() && on_a.len() + on_b.len() == keys.len());
    // While a is up, a request of one of its keys would go to the gutter only if a failed it.
    let route = asked_route(&mut client, "set", on_a[0]);
    assert_eq!(route, [a.clone(), g.clone()]);

    servers[0].kill();
    for key in &on_a {
        // Refused by the dead server, asked again of the gutter: stored, with no expiry given.
        assert_eq!(client.set(key, b"during"), "STORED\r\n", "{key}: {}", relay.stderr());
        let ttl = ttl_on(&servers[2], key).unwrap_or_else(|| panic!("{key} is not on the gutter"));
        assert!((1..=30).contains(&ttl), "{key}: ttl {ttl} on the gutter");
        assert_eq!(client.get(key), [(key.to_string(), b"during".to_vec())]);
    }
    // A longer expiry is capped too; a shorter one stays.
    assert_eq!(client.line(format!("set {} 0 3600 1\r\nx\r\n", on_a[0]).as_bytes()), "STORED\r\n");
    assert!(ttl_on(&servers[2], on_a[0]).is_some_and(|t| (1..=30).contains(&t)));
    assert_eq!(client.line(format!("set {} 0 5 1\r\nx\r\n", on_a[0]).as_bytes()), "STORED\r\n");
    assert!(ttl_on(&servers[2], on_a[0]).is_some_and(|t| (1..=5).contains(&t)));
    // A delete of the dead server's key reaches the gutter.
    assert_eq!(client.line(format!("delete {}\r\n", on_a[1]).as_bytes()), "DELETED\r\n");
    assert!(servers[2].get_raw(on_a[1]).is_none());
    // b's keys never left b.
    for key in &on_b {
        assert_eq!(client.get(key), [(key.to_string(), b"before".to_vec())]);
        assert!(servers[2].get_raw(key).is_none(), "{key} went to the gutter");
    }
    // A multi-get over both servers: a's keys from the gutter, b's from b, in key order.
    let asked = [on_b[0].as_str(), on_a[2].as_str(), on_b[1].as_str()];
    let got = client.get(&asked.join(" "));
    let names: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, asked);
    let counted: u64 = stat_of(&mut client, "gutter_requests").parse().unwrap();
    assert!(counted >= on_a.len() as u64, "{counted}");
    // Once a is known to be down, memrelay names the gutter as where its keys go.
    let down = || stat_of(&mut relay.client(), "server_0_state") == "down";
    assert!(wait_for(Duration::from_secs(10), down), "a is not down: {}", relay.stderr());
    assert_eq!(asked_route(&mut client, "set", on_a[0]), [g]);
}

#[test]
fn bad_pools_and_routes_are_refused_with_one_line_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memrelay.toml");
    for (text, says) in [
        (
            "servers = [\"127.0.0.1:1\"]\n[[routes]]\nprefix = \"x:\"\npool = \"nope\"\n",
            "the route `x:` names the pool `nope`, which is not configured (pools: default)",
        ),
        (
            "servers = [\"127.0.0.1:1\"]\n[pools.default]\nservers = [\"127.0.0.1:2\"]\n",
            "`default` is the pool of the top-level servers",
        ),
        ("servers = [\"127.0.0.1:1\"]\n[pools.p]\nservers = [\"127.0.0.1:1\"]\n", "127.0.0.1:1 is already a server"),
        (
            "servers = [\"127.0.0.1:1\"]\n[pools.p]\nservers = [\"127.0.0.1:2\"]\nreplication = 2\n",
            "pool `p`: replication needs distribution ketama",
        ),
        (
            "servers = [\"127.0.0.1:1\"]\n[pools.p]\nservers = [\"127.0.0.1:2\"]\nhosts = 1\n",
            "pool `p`: unknown key `hosts`",
        ),
        ("servers = [\"127.0.0.1:1\"]\n[pools.p]\ndistribution = \"ketama\"\n", "pool `p`: needs `servers`"),
    ] {
        std::fs::write(&path, text).unwrap();
        let (status, stderr) = run_memrelay(&["--check-config", path.to_str().unwrap()]);
        assert_eq!(status.code(), Some(2), "{text}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(says), "{text}\n{stderr}");
    }
    std::fs::write(
        &path,
        "servers = [\"127.0.0.1:1\"]\n[pools.p]\nservers = [\"127.0.0.1:2\"]\n[[routes]]\nprefix = \"p:\"\npool = \"p\"\n",
    )
    .unwrap();
    let (status, stderr) = run_memrelay(&["--check-config", path.to_str().unwrap()]);
    assert!(status.success(), "{stderr}");
}
