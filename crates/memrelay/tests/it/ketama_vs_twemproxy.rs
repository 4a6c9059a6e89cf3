//! Black-box check of `memrelay::ketama`, and of every placement, against the real twemproxy.
//!
//! Starts real memcached servers and a real `nutcracker` with
//! `distribution: ketama` in front of them, stores keys through nutcracker,
//! then asks every memcached directly which keys it holds. The server that
//! holds a key is twemproxy's choice; `Ring::primary` must name the same one
//! for every key, and memrelay's router built from the same `--server`
//! lines (`HOST:PORT:WEIGHT [NAME]`) must route it there. Runs with `hash: md5` and `hash: fnv1a_64`, equal and
//! unequal weights, unnamed and named servers, and port 11211 (left out of
//! the ring name by twemproxy).
//!
//! Then every placement, end to end: for each of twemproxy's twelve hashes, `ketama` and
//! `modula`, with and without `hash_tag: "{}"`, keys stored through nutcracker and through a
//! memrelay process with the same servers (weights 1 to 4, named and not) and options must land
//! on the same memcached; `random`, which cannot be compared key by key, must spread keys evenly
//! in both.
//!
//! Every process started here is killed when its guard drops, also when a
//! test panics. Missing binaries fail the test with a hint to run `make deps`.

use std::env;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use memrelay::ketama::{KeyHash, Ring, RingServer};
use memrelay::routing::Router;
use memrelay::settings::{Distribution, Endpoint, ReadFrom, Routing, WritePolicy};

use crate::common::Memrelay;

const NKEYS: usize = 2000;
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// A child process killed (and reaped) on drop.
struct Proc {
    child: Child,
}

impl Proc {
    fn spawn(cmd: &mut Command, what: String) -> Proc {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        Proc { child }
    }

    fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Finds `name` on PATH or in the usual sbin/bin directories, or fails the test.
fn find_binary(name: &str) -> PathBuf {
    let path = env::var_os("PATH").unwrap_or_default();
    let fallback = ["/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin", "/sbin", "/bin"];
    env::split_paths(&path)
        .chain(fallback.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "`{name}` is not installed (looked on PATH and in /usr/sbin, /usr/bin, ...): \
                 this test needs twemproxy (nutcracker) and memcached; run `make deps`"
            )
        })
}

/// A port that was free a moment ago (bind to 0, read it, release it).
fn free_port(ip: Ipv4Addr) -> u16 {
    TcpListener::bind((ip, 0)).and_then(|l| l.local_addr()).map(|a| a.port()).expect("bind an ephemeral port")
}

/// Waits until `addr` accepts connections; false if `proc` exits first or time runs out.
fn wait_listening(addr: SocketAddr, proc: &mut Proc) -> bool {
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        if proc.exited() {
            return false;
        }
        if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
            return true;
        }
        thread::sleep(Duration::from_millis(10));
    }
    false
}

fn memcached_cmd(bin: &Path, addr: SocketAddr) -> Command {
    let mut cmd = Command::new(bin);
    cmd.args(["-p", &addr.port().to_string(), "-l", &addr.ip().to_string()]).args(["-U", "0", "-m", "64"]);
    // memcached refuses to run as root unless told which user to be.
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        cmd.args(["-u", "root"]);
    }
    cmd
}

/// Starts memcached on a free port of `ip`, retrying if another process takes the port first.
fn start_memcached(bin: &Path, ip: Ipv4Addr) -> (Proc, SocketAddr) {
    for _ in 0..10 {
        let addr = SocketAddr::from((ip, free_port(ip)));
        let mut p = Proc::spawn(&mut memcached_cmd(bin, addr), format!("memcached on {addr}"));
        if wait_listening(addr, &mut p) {
            return (p, addr);
        }
    }
    panic!("could not start memcached on {ip} (10 attempts)");
}

/// Starts memcached on exactly `addr`; None if it does not come up (port taken).
fn start_memcached_at(bin: &Path, addr: SocketAddr) -> Option<Proc> {
    let mut p = Proc::spawn(&mut memcached_cmd(bin, addr), format!("memcached on {addr}"));
    wait_listening(addr, &mut p).then_some(p)
}

/// One `servers:` entry of the twemproxy pool.
struct Backend {
    addr: SocketAddr,
    weight: u32,
    name: Option<String>,
}

impl Backend {
    fn line(&self) -> String {
        match &self.name {
            Some(n) => format!("{}:{}:{} {n}", self.addr.ip(), self.addr.port(), self.weight),
            None => format!("{}:{}:{}", self.addr.ip(), self.addr.port(), self.weight),
        }
    }

    /// The ring server built with memrelay's helpers (not by parsing `line()`).
    fn ring_server(&self) -> RingServer {
        match &self.name {
            Some(n) => RingServer::new(n.clone(), self.weight),
            None => RingServer::from_addr(self.addr, self.weight),
        }
    }
}

/// A pool's placement settings, as twemproxy's configuration and memrelay's options say them.
#[derive(Clone, Copy)]
struct Pool {
    hash: KeyHash,
    distribution: &'static str,
    hash_tag: Option<&'static str>,
}

impl Pool {
    fn ketama(hash: KeyHash) -> Pool {
        Pool { hash, distribution: "ketama", hash_tag: None }
    }

    /// The same settings as memrelay's options.
    fn options(&self) -> Vec<&'static str> {
        let mut options = vec!["--hash", self.hash.as_str(), "--distribution", self.distribution];
        if let Some(tag) = self.hash_tag {
            options.extend(["--hash-tag", tag]);
        }
        options
    }
}

/// Starts nutcracker in front of `backends` with `pool`'s placement; checks the config with
/// `-t` first.
fn start_nutcracker(dir: &Path, backends: &[Backend], pool: Pool) -> (Proc, SocketAddr) {
    let bin = find_binary("nutcracker");
    let lo = Ipv4Addr::LOCALHOST;
    let Pool { hash, distribution, hash_tag } = pool;
    for attempt in 0..10 {
        let listen = SocketAddr::from((lo, free_port(lo)));
        let stats = free_port(lo);
        let mut yml = format!(
            "memrelay_test:\n  listen: {listen}\n  hash: {hash}\n  distribution: {distribution}\n  \
             auto_eject_hosts: false\n  timeout: 3000\n"
        );
        if let Some(tag) = hash_tag {
            yml.push_str(&format!("  hash_tag: \"{tag}\"\n"));
        }
        yml.push_str("  servers:\n");
        for b in backends {
            yml.push_str(&format!("   - {}\n", b.line()));
        }
        let conf = dir.join(format!("nutcracker-{hash}-{distribution}-{attempt}.yml"));
        fs::write(&conf, &yml).expect("write nutcracker config");
        let check = Command::new(&bin).arg("-t").arg("-c").arg(&conf).output().expect("run nutcracker -t");
        assert!(
            check.status.success(),
            "nutcracker -t rejected the config:\n{yml}\n{}",
            String::from_utf8_lossy(&check.stderr)
        );
        let log = dir.join(format!("nutcracker-{hash}-{distribution}-{attempt}.log"));
        let mut cmd = Command::new(&bin);
        cmd.arg("-c").arg(&conf).args(["-s", &stats.to_string(), "-a", "127.0.0.1", "-o"]).arg(&log);
        let mut p = Proc::spawn(&mut cmd, format!("nutcracker on {listen}"));
        if wait_listening(listen, &mut p) {
            return (p, listen);
        }
        eprintln!(
            "nutcracker did not come up on {listen} (attempt {attempt}), log:\n{}",
            fs::read_to_string(&log).unwrap_or_default()
        );
    }
    panic!("could not start nutcracker (10 attempts)");
}

/// A memcached ASCII-protocol connection.
struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Conn {
    fn open(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        s.set_nodelay(true).unwrap();
        Conn { r: BufReader::new(s.try_clone().unwrap()), w: s }
    }

    fn line(&mut self) -> Vec<u8> {
        let mut buf = Vec::new();
        self.r.read_until(b'\n', &mut buf).expect("read reply line");
        assert!(buf.ends_with(b"\r\n"), "truncated reply {:?}", String::from_utf8_lossy(&buf));
        buf.truncate(buf.len() - 2);
        buf
    }

    fn command(&mut self, cmd: &[u8]) -> Vec<u8> {
        self.w.write_all(cmd).expect("write command");
        self.line()
    }

    /// Stores every key (value = its index), pipelined in batches.
    fn set_all(&mut self, keys: &[Vec<u8>]) {
        for (b, batch) in keys.chunks(100).enumerate() {
            let mut req = Vec::new();
            for (j, k) in batch.iter().enumerate() {
                let v = (b * 100 + j).to_string();
                req.extend_from_slice(b"set ");
                req.extend_from_slice(k);
                req.extend_from_slice(format!(" 0 0 {}\r\n{v}\r\n", v.len()).as_bytes());
            }
            self.w.write_all(&req).expect("write sets");
            for k in batch {
                let reply = self.line();
                assert_eq!(
                    reply,
                    b"STORED",
                    "set {:?} through nutcracker: {:?}",
                    String::from_utf8_lossy(k),
                    String::from_utf8_lossy(&reply)
                );
            }
        }
    }

    /// Which of `keys` this server holds (checking each value is the key's index).
    fn held(&mut self, keys: &[Vec<u8>]) -> Vec<bool> {
        let mut held = vec![false; keys.len()];
        for (b, batch) in keys.chunks(50).enumerate() {
            let mut req = b"get".to_vec();
            for k in batch {
                req.push(b' ');
                req.extend_from_slice(k);
            }
            req.extend_from_slice(b"\r\n");
            self.w.write_all(&req).expect("write get");
            loop {
                let line = self.line();
                if line == b"END" {
                    break;
                }
                let fields: Vec<&[u8]> = line.split(|&c| c == b' ').collect();
                assert!(
                    fields.len() == 4 && fields[0] == b"VALUE",
                    "unexpected get reply {:?}",
                    String::from_utf8_lossy(&line)
                );
                let j = batch.iter().position(|k| k.as_slice() == fields[1]).expect("VALUE for a key not asked for");
                let data = self.line();
                assert_eq!(data, (b * 50 + j).to_string().as_bytes(), "value of key {j}");
                held[b * 50 + j] = true;
            }
        }
        held
    }
}

/// 2,000 keys of assorted shapes and lengths, some with bytes >= 0x80
/// (fnv1a_64 reads those through C `char`).
fn test_keys() -> Vec<Vec<u8>> {
    (0..NKEYS)
        .map(|i| match i % 8 {
            0 | 1 => format!("key:{i}").into_bytes(),
            2 => format!("user:{i}:profile").into_bytes(),
            3 => format!("{i}").into_bytes(),
            4 => format!("{}{i}", "k".repeat(i % 240)).into_bytes(),
            5 => format!("session_{:016x}", (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).into_bytes(),
            6 => [b"caf\xc3\xa9:".as_slice(), i.to_string().as_bytes()].concat(),
            _ => [b"\xff\x80k".as_slice(), i.to_string().as_bytes(), b"\xe9"].concat(),
        })
        .collect()
}

/// Stores the keys through a fresh nutcracker in front of `backends`, finds
/// where each landed, and compares with `Ring::primary`.
fn check_against_twemproxy(backends: &[Backend], hash: KeyHash, what: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    for b in backends {
        let mut c = Conn::open(b.addr);
        assert_eq!(c.command(b"flush_all\r\n"), b"OK", "flush_all {}", b.addr);
    }
    let (_nutcracker, listen) = start_nutcracker(dir.path(), backends, Pool::ketama(hash));
    let keys = test_keys();
    Conn::open(listen).set_all(&keys);

    let held: Vec<Vec<bool>> = backends.iter().map(|b| Conn::open(b.addr).held(&keys)).collect();

    let servers: Vec<RingServer> = backends.iter().map(Backend::ring_server).collect();
    for (b, s) in backends.iter().zip(&servers) {
        // The same name the twemproxy line gives, parsed the way nc_conf.c does.
        assert_eq!(RingServer::from_twemproxy(&b.line()).as_ref(), Ok(s));
    }
    let ring = Ring::new(&servers, hash).expect("ring");
    // memrelay's own `--server` syntax takes the same lines and must route as the ring does.
    let endpoints: Vec<Endpoint> =
        backends.iter().map(|b| Endpoint::server(&b.line()).expect("a twemproxy line is a --server")).collect();
    let routing = Routing {
        sharded: false,
        distribution: Distribution::Ketama,
        hash,
        hash_tag: None,
        replication: 1,
        read_from: ReadFrom::Primary,
        failover: false,
        write_policy: WritePolicy::All,
    };
    let router = Router::new(&routing, &endpoints).expect("router");
    let mut routed = Vec::new();

    let mut mismatches = Vec::new();
    let mut per_server = vec![0usize; backends.len()];
    for (i, key) in keys.iter().enumerate() {
        let on: Vec<usize> = (0..backends.len()).filter(|&s| held[s][i]).collect();
        assert_eq!(
            on.len(),
            1,
            "{what}: key {:?} is on servers {on:?}, expected exactly one",
            String::from_utf8_lossy(key)
        );
        per_server[on[0]] += 1;
        router.replicas(key, &mut routed);
        assert_eq!(routed, [on[0]], "{what}: --server {} routes {:?} elsewhere", backends[on[0]].line(), key);
        let ours = ring.primary(key);
        if ours != on[0] {
            mismatches.push(format!(
                "{:?}: twemproxy {} ({}), memrelay {} ({})",
                String::from_utf8_lossy(key),
                on[0],
                servers[on[0]].name,
                ours,
                servers[ours].name
            ));
        }
    }
    eprintln!("{what} ({hash}): keys per server {per_server:?}, {} mismatches", mismatches.len());
    assert!(
        mismatches.is_empty(),
        "{what} ({hash}): {} of {NKEYS} keys placed differently from twemproxy, e.g.\n{}",
        mismatches.len(),
        mismatches[..mismatches.len().min(10)].join("\n")
    );
}

fn start_servers(n: usize) -> (Vec<Proc>, Vec<SocketAddr>) {
    let bin = find_binary("memcached");
    (0..n).map(|_| start_memcached(&bin, Ipv4Addr::LOCALHOST)).unzip()
}

#[test]
fn three_servers_place_keys_like_twemproxy() {
    let (_procs, addrs) = start_servers(3);
    let unnamed: Vec<Backend> = addrs.iter().map(|&addr| Backend { addr, weight: 1, name: None }).collect();
    check_against_twemproxy(&unnamed, KeyHash::Md5, "3 servers, weight 1");
    check_against_twemproxy(&unnamed, KeyHash::Fnv1a64, "3 servers, weight 1");

    // Explicit names after the weight replace "host:port" on the ring.
    let named: Vec<Backend> = addrs
        .iter()
        .enumerate()
        .map(|(i, &addr)| Backend { addr, weight: 1, name: Some(format!("cache-{i}")) })
        .collect();
    check_against_twemproxy(&named, KeyHash::Md5, "3 named servers");
}

#[test]
fn five_servers_with_weights_place_keys_like_twemproxy() {
    let (_procs, addrs) = start_servers(5);
    // twemproxy's f32 point arithmetic gives these 28, 92, 224, 224, 224 points
    // where exact arithmetic would give 32, 96, 224, 224, 224.
    let weights = [1, 3, 7, 7, 7];
    let backends: Vec<Backend> =
        addrs.iter().zip(weights).map(|(&addr, weight)| Backend { addr, weight, name: None }).collect();
    check_against_twemproxy(&backends, KeyHash::Md5, "5 servers, weights 1,3,7,7,7");
    check_against_twemproxy(&backends, KeyHash::Fnv1a64, "5 servers, weights 1,3,7,7,7");

    let equal: Vec<Backend> = addrs.iter().map(|&addr| Backend { addr, weight: 1, name: None }).collect();
    check_against_twemproxy(&equal, KeyHash::Fnv1a64, "5 servers, weight 1");
}

/// Unnamed servers on port 11211 are named by host alone; this needs three
/// loopback addresses with port 11211 free (127.0.0.x, x >= 2, which Linux
/// routes to lo). Where no such address is free it says so loudly and stops.
#[test]
fn port_11211_servers_place_keys_like_twemproxy() {
    let bin = find_binary("memcached");
    let mut procs = Vec::new();
    let mut backends = Vec::new();
    for x in 2..=40u8 {
        if backends.len() == 3 {
            break;
        }
        let addr = SocketAddr::from((Ipv4Addr::new(127, 0, 0, x), 11211));
        if let Some(p) = start_memcached_at(&bin, addr) {
            procs.push(p);
            backends.push(Backend { addr, weight: 1, name: None });
        }
    }
    if backends.len() < 3 {
        eprintln!(
            "NOT CHECKED: port 11211 naming rule; could not start 3 memcached servers on \
             127.0.0.x:11211 (port 11211 in use on a wildcard address?)"
        );
        return;
    }
    assert_eq!(backends[0].ring_server().name, backends[0].addr.ip().to_string());
    check_against_twemproxy(&backends, KeyHash::Md5, "3 servers on port 11211");
    check_against_twemproxy(&backends, KeyHash::Fnv1a64, "3 servers on port 11211");
    drop(procs);
}

/// A few hundred keys for every placement: some with a `{tag}` (several keys per tag), some with
/// an empty tag `{}` or no closing brace (hashed whole), some with bytes >= 0x80.
fn placement_keys() -> Vec<Vec<u8>> {
    (0..300)
        .map(|i| match i % 6 {
            0 => format!("user:{{{}}}:field{i}", i % 40).into_bytes(),
            1 => format!("{{{i}}}").into_bytes(),
            2 => format!("empty:{{}}:{i}").into_bytes(),
            3 => format!("open:{{{i}").into_bytes(),
            4 => format!("key:{i}").into_bytes(),
            _ => [b"\xe9t\xe9:{".as_slice(), (i % 25).to_string().as_bytes(), b"}\xff", i.to_string().as_bytes()]
                .concat(),
        })
        .collect()
}

/// Stores `keys` through the proxy at `listen` on emptied `backends`, then asks every backend
/// which it holds: the index of each key's server.
fn owners(backends: &[Backend], listen: SocketAddr, keys: &[Vec<u8>], what: &str) -> Vec<usize> {
    for b in backends {
        assert_eq!(Conn::open(b.addr).command(b"flush_all\r\n"), b"OK", "flush_all {}", b.addr);
    }
    Conn::open(listen).set_all(keys);
    let held: Vec<Vec<bool>> = backends.iter().map(|b| Conn::open(b.addr).held(keys)).collect();
    (0..keys.len())
        .map(|i| {
            let on: Vec<usize> = (0..backends.len()).filter(|&s| held[s][i]).collect();
            assert_eq!(on.len(), 1, "{what}: key {:?} is on servers {on:?}", String::from_utf8_lossy(&keys[i]));
            on[0]
        })
        .collect()
}

/// Four servers of weights 1 to 4, two named (the ring hashes the name) and two not.
fn weighted_backends(addrs: &[SocketAddr]) -> Vec<Backend> {
    addrs
        .iter()
        .enumerate()
        .map(|(i, &addr)| Backend { addr, weight: i as u32 + 1, name: (i % 2 == 0).then(|| format!("cache-{i}")) })
        .collect()
}

/// Every hash × {ketama, modula} × {no hash tag, `{}`}: the same keys stored through nutcracker
/// and through a memrelay with the same servers and options land on the same servers, found by
/// asking each memcached.
#[test]
fn every_placement_stores_keys_where_twemproxy_does() {
    let (_servers, addrs) = start_servers(4);
    let backends = weighted_backends(&addrs);
    let specs: Vec<String> = backends.iter().map(Backend::line).collect();
    let keys = placement_keys();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut failures = Vec::new();
    let started = Instant::now();
    for hash in KeyHash::ALL {
        for distribution in ["ketama", "modula"] {
            for hash_tag in [None, Some("{}")] {
                let pool = Pool { hash, distribution, hash_tag };
                let what = format!("hash {hash}, {distribution}, hash_tag {hash_tag:?}");
                let twemproxy = {
                    let (_nutcracker, listen) = start_nutcracker(dir.path(), &backends, pool);
                    owners(&backends, listen, &keys, &what)
                };
                let options = [pool.options(), vec!["--threads", "1"]].concat();
                let memrelay = Memrelay::start_addrs("evented", &specs, &options);
                let ours = owners(&backends, memrelay.addr().parse().unwrap(), &keys, &what);
                let differ: Vec<usize> = (0..keys.len()).filter(|&i| twemproxy[i] != ours[i]).collect();
                if let Some(&i) = differ.first() {
                    failures.push(format!(
                        "{what}: {} of {} keys elsewhere, e.g. {:?} on {} (twemproxy) and {} (memrelay)",
                        differ.len(),
                        keys.len(),
                        String::from_utf8_lossy(&keys[i]),
                        specs[twemproxy[i]],
                        specs[ours[i]]
                    ));
                }
                // With the tag, the keys of one tag are together. (Not every placement uses every
                // server: crc32's hashes are below 32768, so on a ketama ring they fall on the few
                // points there, as in nutcracker.)
                if hash_tag.is_some() {
                    let mut home = std::collections::HashMap::new();
                    for i in (0..keys.len()).filter(|i| i % 6 == 0) {
                        let first = *home.entry(i % 40).or_insert(twemproxy[i]);
                        assert_eq!(twemproxy[i], first, "{what}: the keys of tag {{{}}} split", i % 40);
                    }
                }
            }
        }
    }
    eprintln!("48 placements against nutcracker in {:?}", started.elapsed());
    assert!(failures.is_empty(), "placed differently from nutcracker:\n{}", failures.join("\n"));
}

/// `random` cannot be compared key by key (each request draws a server): both spread keys over
/// every server, and evenly, whatever the weights (nutcracker 0.5.0 gives each server one point
/// of its random continuum).
#[test]
fn random_spreads_keys_evenly_whatever_the_weights_as_twemproxy_does() {
    const N: usize = 800;
    let (_servers, addrs) = start_servers(4);
    let backends = weighted_backends(&addrs);
    let specs: Vec<String> = backends.iter().map(Backend::line).collect();
    let keys: Vec<Vec<u8>> = (0..N).map(|i| format!("key:{i}").into_bytes()).collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let pool = Pool { hash: KeyHash::Md5, distribution: "random", hash_tag: None };
    let twemproxy = {
        let (_nutcracker, listen) = start_nutcracker(dir.path(), &backends, pool);
        owners(&backends, listen, &keys, "nutcracker, random")
    };
    let memrelay = Memrelay::start_addrs("evented", &specs, &["--distribution", "random", "--threads", "1"]);
    let ours = owners(&backends, memrelay.addr().parse().unwrap(), &keys, "memrelay, random");
    for (who, owners) in [("nutcracker", twemproxy), ("memrelay", ours)] {
        let mut count = [0usize; 4];
        for s in owners {
            count[s] += 1;
        }
        eprintln!("{who}, random, weights 1,2,3,4: keys per server {count:?}");
        // 200 each expected (sd 12); by weight it would be 80, 160, 240, 320.
        assert!(count.iter().all(|c| (140..=260).contains(c)), "{who}: {count:?} is not even");
    }
}
