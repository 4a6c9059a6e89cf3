//! The same bytes to a real memcached and to memrelay (three servers behind it), replies compared
//! byte for byte once cas values (and the meta debug line's access figures) are normalised:
//! scripts where memrelay claims to answer exactly as memcached 1.6 does, text and meta, with
//! `noreply` and quiet mode, in every mode (all servers, sharded, ketama with two replicas read
//! from any), sent pipelined and one request at a time. Each script is followed by a barrier with
//! a reply no script gives, so a silent request shows as nothing before it.
//!
//! Every test is a function of the engine's name and runs once per engine (see `common`).

use crate::common::*;

engine_matrix!(
    scripts_answer_as_memcached,
    scripts_answer_as_memcached_sharded,
    scripts_answer_as_memcached_ketama,
    scripts_answer_as_memcached_over_pools,
    stats_groups_gather_every_server,
    lines_that_never_fit_close_the_connection_as_memcached_closes_it,
);

/// Scripts of several requests each, sent whole (one request at a time too: [`requests`]).
const SCRIPTS: &[&[u8]] = &[
    // noreply: no reply line, errors included (memcached suppresses them too).
    b"set k 0 0 1 noreply\r\nx\r\n",
    b"set k x 0 1 noreply\r\nx\r\n",
    b"incr k abc noreply\r\n",
    b"delete k 5 noreply\r\n",
    b"set k 0 0 -1 noreply\r\n",
    b"touch k x noreply\r\n",
    b"flush_all noreply\r\n",
    b"verbosity noreply\r\n",
    b"verbosity 1 noreply\r\n",
    // Argument counts, extra tokens, numbers as memcached reads them.
    b"set k 0 0\r\n",
    b"set k 0 0 1 extra\r\nx\r\n",
    b"set k 99999999999 0 1\r\nx\r\nget k\r\n",
    b"set k 0 0 1\t\r\nx\r\nget k\r\n",
    b"incr k\r\n",
    b"incr n 1 2\r\n",
    b"delete k 5\r\n",
    b"delete k 0\r\n",
    b"flush_all -1\r\n",
    b"flush_all 0 0 0\r\n",
    b"verbosity 1\r\n",
    b"verbosity 1 2 3\r\n",
    // A level memcached cannot read (safe_strtoul) is a format error, silent under noreply.
    b"verbosity abc\r\nverbosity 99999999999999999999\r\nverbosity -1\r\nverbosity 1x\r\nverbosity abc 1\r\n",
    b"verbosity abc noreply\r\nverbosity 1 abc\r\nverbosity 5000000000\r\nverbosity -18446744073709551615\r\nverbosity 0\r\n",
    // cache_memlimit: refused as memcached refuses it, an acceptable limit set on every server.
    b"cache_memlimit 100\r\ncache_memlimit 4\r\ncache_memlimit x\r\ncache_memlimit\r\ncache_memlimit 1 2 3\r\n",
    b"cache_memlimit 2000000000\r\ncache_memlimit 100 noreply\r\ncache_memlimit 4 noreply\r\ncache_memlimit noreply\r\n",
    // memrelay's own answers where they match memcached's.
    b"stats noreply\r\n",
    b"stats nosuchgroup\r\n",
    b"stats reset\r\n",
    // A NUL ends the line.
    b"get k\0 k2\r\n",
    b"set n 0 0 2\r\n10\r\nincr n 18446744073709551615\r\ndecr n 18446744073709551616\r\n",
    // A data block of the wrong length is answered and memcached reads on after it.
    b"set k 0 0 3\r\nabcd\r\nget k\r\n",
    b"set k 0 0 1 noreply\r\nabc\r\nget k\r\n",
    // get and touch.
    b"gat 100 k n missing\r\ngats 0 k\r\n",
    b"gat 10\r\ngat\r\ngat x k\r\ngats 5 n missing k\r\nget k n\r\n",
    // Meta: storage and retrieval with returned flags, opaque tokens, base64 keys.
    b"ms k 3 T0 F5\r\nbar\r\nmg k v f t s k Oab\r\nmg k\r\nmg k s v\r\n",
    b"mg missing v\r\nmg missing v k Oxy\r\nmg k c\r\nmg k v c f\r\n",
    b"ms k 2 MA\r\nzz\r\nms k 2 MP\r\naa\r\nms k 2 ME\r\nxx\r\nms new 2 ME\r\nxx\r\nms new2 2 MR\r\nxx\r\nmg k v\r\n",
    b"ms Zm9v 3 b\r\nbaz\r\nmg Zm9v b v k\r\nget foo\r\nmd Zm9v b\r\nget foo\r\n",
    b"mg Zm9v== b v\r\nmg @@@ b v\r\n",
    b"ms k 1 C1\r\nx\r\nmd k C1\r\nma n C1\r\nmg k v\r\n",
    // Meta quiet mode: the nominal replies are left out, the rest are sent; mn ends a batch.
    b"mg missing v q\r\nmg k v q\r\nmn\r\n",
    b"ms k 1 q\r\nx\r\nms k 1 q ME\r\ny\r\nmg k v q\r\nmn\r\n",
    b"md k q\r\nmd k q\r\nmn\r\n",
    b"ma n q\r\nma n v q\r\nma n v\r\nma missing q\r\nma k q\r\nmn\r\n",
    b"ms k 1 q Mz\r\nx\r\nmg k v q v\r\nmn\r\n",
    // Meta arithmetic.
    b"ma n\r\nma n v\r\nma n MD D2 v\r\nma n M- v t\r\nma n Mx\r\nma k\r\nma missing\r\nma missing N0 J13 v\r\n",
    b"ma n D18446744073709551616\r\nma n Dx\r\nma missing N0 Jx\r\n",
    // Meta touch, vivify, invalidate.
    b"mg k T100 v t\r\nmg missing N30 v s\r\nmg missing N30 v s\r\nmd k I T30\r\nmg k v\r\n",
    // Meta errors: memrelay's (before the request is understood) and the server's.
    b"mg\r\nme\r\nms\r\nmd\r\nma\r\nmn foo bar\r\n",
    b"mg k v v\r\nmd k v v\r\nma k q q\r\nmg k !\r\nmd k !\r\n",
    b"ms k\r\nget k\r\n",
    b"ms k -1\r\nget k\r\n",
    b"ms k x\r\nget k\r\n",
    b"ms k 2 v v\r\nxx\r\nget k\r\n",
    b"ms k 2 Mz\r\nxx\r\nget k\r\n",
    b"ms k 2\r\nxyz\r\nget k\r\n",
    b"ms k 1 Fx\r\nx\r\nms k 1 Tx\r\nx\r\nmg k Ox23456789012345678901234567890123\r\n",
    b"mg k v t f s k c h l u O1 P L b q N1 R1 T1\r\nms k 1 v t f s k c h l u O1 P L q N1 R1\r\nx\r\nget k\r\n",
    b"mg k v t f s k c h l u O1 P L q N1 R1\r\n",
    b"md k v t f s k c h l u O1 P L q N1 R1 x\r\nmg k v\r\n",
];

/// The barrier after each script: its reply is unlike any script's.
const BARRIER: &[u8] = b"set __end__ 0 0 7\r\nthe-end\r\nget __end__\r\n";
const BARRIER_REPLY: &[u8] = b"STORED\r\nVALUE __end__ 0 7\r\nthe-end\r\nEND\r\n";

/// The script's replies: everything before the barrier's.
fn run(client: &mut Client, script: &[u8]) -> Vec<u8> {
    client.send(script);
    client.send(BARRIER);
    let mut reply = client.read_until(BARRIER_REPLY);
    reply.truncate(reply.len() - BARRIER_REPLY.len());
    reply
}

/// The scripts built at run time: values over memcached's item size limit, refused (and the old
/// value removed) both by memcached and by memrelay.
fn large_scripts() -> Vec<Vec<u8>> {
    let big = vec![b'x'; 2 * 1024 * 1024];
    let mut set = format!("set k 0 0 {}\r\n", big.len()).into_bytes();
    set.extend_from_slice(&big);
    set.extend_from_slice(b"\r\nget k\r\n");
    let mut quiet = format!("set k 0 0 {} noreply\r\n", big.len()).into_bytes();
    quiet.extend_from_slice(&big);
    quiet.extend_from_slice(b"\r\nget k\r\n");
    let mut meta = format!("ms k {} T0 q\r\n", big.len()).into_bytes();
    meta.extend_from_slice(&big);
    meta.extend_from_slice(b"\r\nmg k v\r\nmn\r\n");
    let mut add = format!("add k 0 0 {}\r\n", big.len()).into_bytes();
    add.extend_from_slice(&big);
    add.extend_from_slice(b"\r\nget k\r\n");
    vec![set, quiet, meta, add]
}

/// Issue 32, item 8: lines over 2,048 bytes that end with a newline (served by memcached 1.6.18
/// when they fit its 16 KiB read buffer), a long `mg` opaque (refused, connection kept), keys over
/// 250 bytes and bad expiry times (memcached's error texts), lines with more tokens than the
/// command takes.
fn long_line_scripts() -> Vec<Vec<u8>> {
    let keys: Vec<String> = (0..300).map(|i| format!("key{i:03}")).collect();
    let keys = keys.join(" ");
    let long_key = "k".repeat(251);
    let many = (0..12).map(|i| i.to_string()).collect::<Vec<_>>().join(" ");
    let texts = [
        format!("gat 0 k {keys} n\r\n"),
        format!("gats 100 {keys} k\r\nget k\r\n"),
        format!("mg k v O{}\r\nmg k v\r\n", "x".repeat(2100)),
        format!("mg k v O{} k\r\n", "o".repeat(33)),
        // One retrieval with a long key per script: memcached 1.6.18 drops the replies it has
        // not yet sent on that connection when it refuses one (`conn_release_items`).
        format!("get {long_key}\r\n"),
        format!("get k {long_key}\r\n"),
        format!("gets {long_key}\r\n"),
        format!("gat 0 {long_key}\r\n"),
        format!("gats 0 k {long_key}\r\n"),
        format!("touch {long_key} 0\r\ndelete {long_key}\r\nincr {long_key} 1\r\ndecr {long_key} 1\r\n"),
        format!("set {long_key} 0 0 1\r\nx\r\nappend {long_key} 0 0 1\r\nx\r\n"),
        format!("mg {long_key} v\r\nmd {long_key}\r\n"),
        "touch k abc\r\ntouch k 10x\r\ntouch k abc noreply\r\ntouch k -1\r\nget k\r\n".to_string(),
        "flush_all abc\r\nflush_all abc noreply\r\nflush_all 1x\r\nget k\r\n".to_string(),
        format!("delete k {many}\r\ntouch k {many}\r\nincr n {many}\r\nflush_all {many}\r\nget k\r\n"),
        format!("verbosity {many}\r\nstats {many}\r\ncache_memlimit 100 {many}\r\n"),
        format!("set k 0 0 1 {many}\r\nx\r\nget k\r\n"),
        format!("foo {}\r\nget k\r\n", "x".repeat(3000)),
        format!("set k 0 0 1{}\r\ny\r\nget k\r\n", " ".repeat(3000)),
        format!("touch k 0{}\r\ndelete k{} noreply\r\nget k\r\n", " ".repeat(5000), " ".repeat(2500)),
    ];
    texts.into_iter().map(String::into_bytes).collect()
}

/// The requests of a script, each whole, split where memcached would read them: a line, and for
/// storage commands whose data length reads as a number the data block after it (the scripts
/// are written so a line's data block is exactly what its length says, or a bad-chunk case).
fn requests(script: &[u8]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut rest = script;
    while !rest.is_empty() {
        let line_end = rest.iter().position(|&b| b == b'\n').map_or(rest.len(), |n| n + 1);
        let line = String::from_utf8_lossy(&rest[..line_end]).into_owned();
        let words: Vec<&str> = line.split_whitespace().collect();
        let data_len = match words.as_slice() {
            [cmd, _, _, _, n, ..] if ["set", "add", "replace", "append", "prepend", "cas"].contains(cmd) => {
                n.parse::<usize>().ok()
            }
            ["ms", _, n, ..] => n.parse::<usize>().ok(),
            _ => None,
        };
        let end = data_len.map_or(line_end, |n| (line_end + n + 2).min(rest.len()));
        out.push(rest[..end].to_vec());
        rest = &rest[end..];
    }
    out
}

/// Replies with what differs between any two servers taken out: cas values (`VALUE` lines'
/// fifth field, meta `c<number>`), and the meta debug line's access time and fetched state (a
/// read balanced to another replica leaves the primary unfetched).
fn normalise(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(reply);
    let mut out = String::new();
    for line in text.split_inclusive("\r\n") {
        let words: Vec<&str> = line.trim_end_matches("\r\n").split(' ').collect();
        let normal: Vec<String> = match words.first().copied() {
            Some("VALUE") if words.len() == 5 => {
                words[..4].iter().map(|w| w.to_string()).chain(["<cas>".to_string()]).collect()
            }
            Some("VA" | "HD" | "EN" | "NF" | "NS" | "EX") => words
                .iter()
                .map(|w| {
                    let digits = |n: &str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
                    match w.split_at_checked(1) {
                        Some(("c", n)) if digits(n) => "c<cas>".to_string(),
                        // Seconds since the last access: a second boundary between the two runs
                        // of a script (a busy machine) makes them differ, as `la` in `ME`.
                        Some(("l", n)) if digits(n) => "l<la>".to_string(),
                        _ => w.to_string(),
                    }
                })
                .collect(),
            Some("ME") => words
                .iter()
                .map(|w| match w.split_once('=') {
                    Some((name @ ("la" | "cas" | "fetch"), _)) => format!("{name}=<{name}>"),
                    _ => w.to_string(),
                })
                .collect(),
            _ => {
                out.push_str(line);
                continue;
            }
        };
        out.push_str(&normal.join(" "));
        if line.ends_with("\r\n") {
            out.push_str("\r\n");
        }
    }
    out
}

fn scripts_answer_as_memcached(engine: &str) {
    compare_scripts(engine, &[]);
}

fn scripts_answer_as_memcached_sharded(engine: &str) {
    compare_scripts(engine, &["--sharded"]);
}

fn scripts_answer_as_memcached_ketama(engine: &str) {
    compare_scripts(engine, &["--distribution", "ketama", "--replication", "2", "--read-from", "any-replica"]);
}

/// Pools and routes (issue 44): the scripts' keys `k` and `n` live in pools of their own (a
/// replicated one and a single server), the others in the default pool, so that their
/// multi-gets span pools.
fn scripts_answer_as_memcached_over_pools(engine: &str) {
    let more: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let hot = format!(
        "{{ name = \"hot\", servers = [\"{}\", \"{}\"], distribution = \"ketama\", replication = 2 }}",
        more[0].addr(),
        more[1].addr()
    );
    let single = format!("{{ name = \"single\", servers = [\"{}\"] }}", more[2].addr());
    let routes = [r#"{ prefix = "k", pool = "hot" }"#, r#"{ prefix = "n", pool = "single" }"#];
    let mode =
        ["--distribution", "ketama", "--pool", &hot, "--pool", &single, "--route", routes[0], "--route", routes[1]];
    compare_scripts(engine, &mode);
}

fn compare_scripts(engine: &str, mode: &[&str]) {
    let reference = Memcached::start();
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let refs: Vec<&Memcached> = servers.iter().collect();
    let relay = Memrelay::start(engine, &refs, mode);
    let (large, long) = (large_scripts(), long_line_scripts());
    let scripts = SCRIPTS.iter().copied().chain(large.iter().chain(&long).map(Vec::as_slice));
    for script in scripts {
        for pipelined in [true, false] {
            // Fresh connections and the same starting state on both sides.
            let reset = b"set k 0 0 1\r\nv\r\nset n 0 0 1\r\n5\r\ndelete missing\r\ndelete new\r\n";
            let (mut direct, mut proxied) = (reference.client(), relay.client());
            run(&mut direct, reset);
            run(&mut proxied, reset);
            let (want, got) = if pipelined {
                (run(&mut direct, script), run(&mut proxied, script))
            } else {
                let mut both = (Vec::new(), Vec::new());
                for request in requests(script) {
                    both.0.extend(run(&mut direct, &request));
                    both.1.extend(run(&mut proxied, &request));
                }
                both
            };
            let shown = if script.len() > 300 { format!("{}…", show(&script[..100])) } else { show(script) };
            assert_eq!(
                normalise(&got),
                normalise(&want),
                "mode {mode:?}, {} script {shown}",
                if pipelined { "pipelined" } else { "one request at a time" }
            );
        }
    }
}

/// `stats items` and `stats slabs` through memrelay: each counter is the sum of what the servers
/// themselves report, read from each server directly.
fn stats_groups_gather_every_server(engine: &str) {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let refs: Vec<&Memcached> = servers.iter().collect();
    let relay = Memrelay::start(engine, &refs, &["--distribution", "ketama"]);
    let mut client = relay.client();
    for i in 0..60 {
        client.send(format!("set key{i} 0 0 {len}\r\n{}\r\n", "v".repeat(i * 7), len = i * 7).as_bytes());
        assert_eq!(client.read_line(), b"STORED\r\n");
    }
    for group in ["items", "slabs"] {
        let through = stats_of(&mut client, group);
        let mut direct: Vec<std::collections::HashMap<String, String>> = Vec::new();
        for server in &servers {
            direct.push(stats_of(&mut server.client(), group));
        }
        for name in ["items:1:number", "total_malloced", "1:used_chunks", "1:chunk_size"] {
            let Some(got) = through.get(name) else { continue };
            let values: Vec<u64> = direct.iter().filter_map(|s| s.get(name)?.parse().ok()).collect();
            let want = if name.ends_with("chunk_size") { *values.iter().max().unwrap() } else { values.iter().sum() };
            assert_eq!(got.parse::<u64>().unwrap(), want, "stats {group}: {name}");
        }
        assert!(!through.is_empty(), "stats {group} is empty");
    }
    client.send(b"stats settings\r\n");
    let settings = client.read_until(b"END\r\n");
    assert!(show(&settings).contains("STAT maxbytes 67108864"), "{}", show(&settings));
}

fn stats_of(client: &mut Client, group: &str) -> std::collections::HashMap<String, String> {
    client.send(format!("stats {group}\r\n").as_bytes());
    let reply = client.read_until(b"END\r\n");
    String::from_utf8_lossy(&reply)
        .lines()
        .filter_map(|line| {
            let mut words = line.strip_prefix("STAT ")?.splitn(2, ' ');
            Some((words.next()?.to_string(), words.next()?.to_string()))
        })
        .collect()
}

/// A line that can never be whole in memcached's 16 KiB read buffer (a `gat` line of 20,000
/// bytes), or 3,000 bytes with no newline: memcached closes the connection without a word, and
/// so does memrelay; a `get` line that long is served by both.
fn lines_that_never_fit_close_the_connection_as_memcached_closes_it(engine: &str) {
    let reference = Memcached::start();
    let server = Memcached::start();
    let relay = Memrelay::start(engine, &[&server], &[]);
    let keys: Vec<String> = (0..2000).map(|i| format!("key{i:05}")).collect();
    let keys = keys.join(" ");
    for request in [format!("gat 0 {keys}\r\n").into_bytes(), format!("foo {}", "x".repeat(3000)).into_bytes()] {
        let (mut direct, mut proxied) = (reference.client(), relay.client());
        direct.send(&request);
        proxied.send(&request);
        let want = direct.closed_within(std::time::Duration::from_secs(5)).expect("memcached kept the connection");
        let got = proxied.closed_within(std::time::Duration::from_secs(5)).expect("memrelay kept the connection");
        assert_eq!(show(&got), show(&want), "{}", show(&request[..60]));
    }
    let get = format!("get {keys}\r\n");
    assert_eq!(relay.client().get_reply(&get), reference.client().get_reply(&get));
}
