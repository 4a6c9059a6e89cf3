//! Consistent hashing (ketama): which server is a key's primary, and which
//! servers are its R replicas, placed exactly as twemproxy (`nutcracker`)
//! places keys with `distribution: ketama` in front of the same server list.
//!
//! This module owns the continuum (the ring) and the naming of servers on the
//! ring (the key hash functions are [`crate::routing::hashkit`]'s). It is pure: no I/O, and after [`Ring::new`]
//! no allocation ([`Ring::primary`] and [`Ring::replicas`] are hot-path safe).
//!
//! # How it matches twemproxy
//!
//! Read from twemproxy's source (`src/hashkit/nc_ketama.c`, `nc_md5.c`,
//! `src/nc_conf.c`, `src/nc_server.c`):
//!
//! - **Server names.** The string hashed onto the ring is the server's
//!   *name*: the text after the weight in a `servers:` line
//!   (`127.0.0.1:11212:1 cache-a` → `cache-a`), or, with no name, the address
//!   text as written in the configuration plus `:port`
//!   (`127.0.0.1:11212:1` → `127.0.0.1:11212`), except that for port 11211
//!   the port is left out (`127.0.0.1:11211:1` → `127.0.0.1`), for
//!   libmemcached compatibility (`conf_add_server`, `CONF_DEFAULT_KETAMA_PORT`).
//!   The host is never resolved for naming: `localhost:11212` hashes as
//!   `localhost:11212`. [`RingServer::from_addr`], [`RingServer::from_host_port`]
//!   and [`RingServer::from_twemproxy`] build names that way.
//! - **Points per server.** Each server gets
//!   `floorf(weight/total_weight * 160 / 4 * S + 1e-10) * 4` points, computed in
//!   C `float` (f32) as twemproxy does, so equal weights give 160 points each
//!   (except where f32 rounding lands just under an integer: 25 equal servers
//!   get 156 each), and a tiny weight can get 0 points (never chosen).
//! - **Four points per md5.** Point group `i` (0-based) of a server hashes the
//!   string `"<name>-<i>"` with MD5 once and cuts the 16-byte digest into four
//!   little-endian `u32`s, each one a point (`ketama_hash(host, len, 0..4)`).
//! - **Lookup.** The continuum is sorted by point value; a key goes to the
//!   first point whose value is `>=` the key's hash, wrapping to the first
//!   point past the end (`ketama_dispatch`). A one-server pool always gives
//!   server 0 (`server_pool_idx`).
//! - **Key hash** (`hash:` in twemproxy, [`KeyHash`]): any of twemproxy's twelve, computed as
//!   nutcracker computes them ([`crate::routing::hashkit`] says how, C `char` quirks included).
//!   The points are always MD5, whatever the key hash.
//! - **Ties.** Two points with the same value (about 3 rings in 100,000 for
//!   three servers) keep build order, twemproxy's server order (sorted by name,
//!   [`RingServer::twemproxy_order`]). twemproxy leaves their order to `qsort`,
//!   which in glibc before 2.37 is a stable merge sort, so the same.
//!
//! The ring hashes the key it is given: twemproxy's `hash_tag`, and its rule that an empty key
//! hashes to 0, are the placement's ([`crate::routing::placement`]), which hands the ring a hash
//! ([`Ring::primary_of_hash`]). Not covered: `auto_eject_hosts` (the ring is built from every
//! server given).
//!
//! # Replicas
//!
//! A key's R replicas are its primary followed by the next distinct servers met
//! walking the continuum clockwise from the key's point (twemproxy has no
//! replication; this is memrelay's extension of the same ring).

use std::fmt;
use std::io::Write as _;
use std::net::SocketAddr;

use crate::routing::hashkit::md5_words;
pub use crate::settings::key_hash::KeyHash;

/// Points per server at equal weights (`KETAMA_POINTS_PER_SERVER`).
const POINTS_PER_SERVER: u32 = 160;
/// Points made from one MD5 digest (`pointer_per_hash`).
const POINTS_PER_HASH: u32 = 4;
/// Size of twemproxy's `"<name>-<i>"` buffer (`KETAMA_MAX_HOSTLEN`); the
/// string must fit with its NUL.
const MAX_HOSTLEN: usize = 86;
/// The port twemproxy leaves out of an unnamed server's ring name.
pub const KETAMA_DEFAULT_PORT: u16 = 11211;

/// One server as the ring sees it: the string hashed for its points and its weight.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RingServer {
    /// The string twemproxy hashes for this server (see the module doc), e.g.
    /// `"127.0.0.1:11212"`, or `"127.0.0.1"` for port 11211, or an explicit name.
    pub name: String,
    /// Relative weight, > 0 (twemproxy rejects 0).
    pub weight: u32,
}

impl RingServer {
    /// A server with an explicit ring name (twemproxy's `host:port:weight name`).
    pub fn new(name: impl Into<String>, weight: u32) -> RingServer {
        RingServer { name: name.into(), weight }
    }

    /// The ring name twemproxy gives an unnamed server configured as
    /// `- IP:PORT:WEIGHT`: `"IP:PORT"`, or `"IP"` when the port is 11211.
    /// IPv6 addresses are written without brackets, as in a twemproxy line.
    pub fn from_addr(addr: SocketAddr, weight: u32) -> RingServer {
        let ip = addr.ip().to_string();
        let name = if addr.port() == KETAMA_DEFAULT_PORT { ip } else { format!("{ip}:{}", addr.port()) };
        RingServer { name, weight }
    }

    /// The ring name twemproxy gives an unnamed server configured as
    /// `- HOST:PORT:WEIGHT`, from the text `"HOST:PORT"` (kept as written,
    /// never resolved; the port is dropped when it is 11211).
    pub fn from_host_port(host_port: &str, weight: u32) -> Result<RingServer, RingError> {
        let bad = || RingError::BadServer(host_port.to_owned());
        let (host, port) = host_port.rsplit_once(':').ok_or_else(bad)?;
        let port = parse_c_uint(port).filter(|&p| (1..=65535).contains(&p)).ok_or_else(bad)?;
        let name = if port == u32::from(KETAMA_DEFAULT_PORT) { host.to_owned() } else { host_port.to_owned() };
        Ok(RingServer { name, weight })
    }

    /// Parses one twemproxy `servers:` entry, `"HOST:PORT:WEIGHT [NAME]"`,
    /// as `conf_add_server` does (TCP servers only, not `/unix/socket:WEIGHT`).
    pub fn from_twemproxy(line: &str) -> Result<RingServer, RingError> {
        let bad = || RingError::BadServer(line.to_owned());
        if line.starts_with('/') {
            return Err(bad());
        }
        // From the end: an optional " NAME", then ":WEIGHT", then ":PORT".
        let (rest, name) = match line.rsplit_once(' ') {
            Some((rest, name)) => (rest, Some(name)),
            None => (line, None),
        };
        let (host_port, weight) = rest.rsplit_once(':').ok_or_else(bad)?;
        let weight = parse_c_uint(weight).ok_or_else(bad)?;
        if weight == 0 {
            return Err(RingError::ZeroWeight(line.to_owned()));
        }
        let named = RingServer::from_host_port(host_port, weight).map_err(|_| bad())?;
        Ok(match name {
            Some(name) => RingServer::new(name, weight),
            None => named,
        })
    }

    /// The order twemproxy keeps a pool's servers in: by name, a shorter name first, then byte
    /// by byte (`conf_validate_server` sorts them with `string_compare` to find duplicates), so
    /// `127.0.0.1:9999` comes before `127.0.0.1:10000` and `cache-b` before `cache-aa`. Modula's
    /// continuum follows it, and so does the build order of the ketama ring (which decides ties).
    /// Returns the indices of `servers` in that order.
    pub fn twemproxy_order(servers: &[RingServer]) -> Vec<usize> {
        let mut order: Vec<usize> = (0..servers.len()).collect();
        order.sort_by(|&a, &b| {
            let (a, b) = (servers[a].name.as_bytes(), servers[b].name.as_bytes());
            a.len().cmp(&b.len()).then(a.cmp(b))
        });
        order
    }
}

/// twemproxy's `nc_atoi`: digits only, no sign, fits an `int`.
fn parse_c_uint(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<u32>().ok().filter(|&v| v <= i32::MAX as u32)
}

/// Why a ring could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RingError {
    /// No servers.
    Empty,
    /// A server with weight 0 (twemproxy refuses it too); holds the name.
    ZeroWeight(String),
    /// The weights add up past `u32::MAX`.
    WeightOverflow,
    /// `"<name>-<i>"` would not fit twemproxy's 86-byte buffer, where
    /// twemproxy's behaviour is undefined; holds the name.
    NameTooLong(String),
    /// A server address or configuration line that does not parse.
    BadServer(String),
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RingError::Empty => f.write_str("ketama ring: no servers"),
            RingError::ZeroWeight(s) => write!(f, "ketama ring: server {s:?} has weight 0"),
            RingError::WeightOverflow => f.write_str("ketama ring: total weight exceeds u32"),
            RingError::NameTooLong(s) => {
                write!(f, "ketama ring: server name {s:?} is too long for twemproxy's {MAX_HOSTLEN}-byte point buffer")
            }
            RingError::BadServer(s) => {
                write!(f, "ketama ring: {s:?} is not \"host:port\" / \"host:port:weight [name]\"")
            }
        }
    }
}

impl std::error::Error for RingError {}

/// Points twemproxy gives a server, in its f32 arithmetic:
/// `floorf((float)(pct * 160 / 4 * (float)S + 1e-10)) * 4`.
fn points_for(weight: u32, total_weight: u32, nservers: u32) -> u32 {
    let pct = weight as f32 / total_weight as f32;
    let x = pct * POINTS_PER_SERVER as f32 / POINTS_PER_HASH as f32 * nservers as f32;
    // `+ 0.0000000001` is a double literal: the sum is a double, then cast to float.
    let x = (f64::from(x) + 0.000_000_000_1) as f32;
    (x.floor() * POINTS_PER_HASH as f32) as u32
}

/// The continuum: sorted point values, each owned by a server index.
#[derive(Clone, Debug)]
pub struct Ring {
    /// Point values, ascending.
    values: Box<[u32]>,
    /// `owners[i]` is the server index owning `values[i]`.
    owners: Box<[u32]>,
    /// Points per server, by server index.
    points: Box<[u32]>,
    /// Servers with at least one point (the most distinct replicas a key can have).
    on_ring: usize,
    hash: KeyHash,
}

impl Ring {
    /// Builds the continuum for `servers` (index i in the ring is `servers[i]`),
    /// as twemproxy's `ketama_update` does with every server live.
    pub fn new(servers: &[RingServer], hash: KeyHash) -> Result<Ring, RingError> {
        if servers.is_empty() {
            return Err(RingError::Empty);
        }
        let nservers = u32::try_from(servers.len()).map_err(|_| RingError::WeightOverflow)?;
        let mut total: u32 = 0;
        for s in servers {
            if s.weight == 0 {
                return Err(RingError::ZeroWeight(s.name.clone()));
            }
            total = total.checked_add(s.weight).ok_or(RingError::WeightOverflow)?;
        }

        let points: Box<[u32]> = servers.iter().map(|s| points_for(s.weight, total, nservers)).collect();
        let npoints: usize = points.iter().map(|&p| p as usize).sum();
        let mut continuum: Vec<(u32, u32)> = Vec::with_capacity(npoints);
        let mut host = Vec::with_capacity(MAX_HOSTLEN);
        // In twemproxy's server order, so that equal point values keep its order.
        for index in RingServer::twemproxy_order(servers) {
            let (server, npts) = (&servers[index], points[index]);
            for group in 0..npts / POINTS_PER_HASH {
                host.clear();
                write!(host, "{}-{}", server.name, group).expect("write to Vec");
                if host.len() >= MAX_HOSTLEN {
                    return Err(RingError::NameTooLong(server.name.clone()));
                }
                for value in md5_words(&host) {
                    continuum.push((value, index as u32));
                }
            }
        }
        // Stable: equal values keep build order.
        continuum.sort_by_key(|&(value, _)| value);

        Ok(Ring {
            values: continuum.iter().map(|&(v, _)| v).collect(),
            owners: continuum.iter().map(|&(_, o)| o).collect(),
            on_ring: points.iter().filter(|&&p| p > 0).count(),
            points,
            hash,
        })
    }

    /// Number of servers (S), including any that got no points.
    #[inline]
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// Always false: a ring has at least one server.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The key hash this ring uses.
    #[inline]
    pub fn key_hash(&self) -> KeyHash {
        self.hash
    }

    /// Points server `index` has on the continuum (160 at equal weights).
    pub fn points(&self, index: usize) -> u32 {
        self.points[index]
    }

    /// Total points on the continuum.
    pub fn continuum_len(&self) -> usize {
        self.values.len()
    }

    /// Position on the continuum of the first point at or after `hash`, wrapping.
    #[inline]
    fn position(&self, hash: u32) -> usize {
        let i = self.values.partition_point(|&v| v < hash);
        if i == self.values.len() {
            0
        } else {
            i
        }
    }

    /// The index of `key`'s primary server, the one twemproxy sends it to (the whole key hashed
    /// with the ring's [`KeyHash`]).
    #[inline]
    pub fn primary(&self, key: &[u8]) -> usize {
        if self.points.len() == 1 {
            return 0;
        }
        self.primary_of_hash(self.hash.hash(key))
    }

    /// The index of the server owning the first point at or after `hash` (`ketama_dispatch`);
    /// a one-server ring always answers 0.
    #[inline]
    pub fn primary_of_hash(&self, hash: u32) -> usize {
        if self.points.len() == 1 {
            return 0;
        }
        self.owners[self.position(hash)] as usize
    }

    /// Writes `key`'s replicas into `out`: the primary first, then the next
    /// distinct servers clockwise. Writes `min(r, out.len(), servers with
    /// points)` indices and returns how many. Does not allocate.
    pub fn replicas(&self, key: &[u8], r: usize, out: &mut [usize]) -> usize {
        self.replicas_of_hash(self.hash.hash(key), r, out)
    }

    /// [`Ring::replicas`] of the key whose hash is `hash`.
    pub fn replicas_of_hash(&self, hash: u32, r: usize, out: &mut [usize]) -> usize {
        let want = r.min(out.len()).min(self.on_ring);
        if want == 0 {
            return 0;
        }
        if self.points.len() == 1 {
            out[0] = 0;
            return 1;
        }
        let len = self.values.len();
        let mut at = self.position(hash);
        let mut n = 0;
        for _ in 0..len {
            let server = self.owners[at] as usize;
            if !out[..n].contains(&server) {
                out[n] = server;
                n += 1;
                if n == want {
                    break;
                }
            }
            at += 1;
            if at == len {
                at = 0;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use core::ffi::c_char;

    use super::*;

    fn servers(names: &[&str]) -> Vec<RingServer> {
        names.iter().map(|n| RingServer::new(*n, 1)).collect()
    }

    fn key(i: usize) -> Vec<u8> {
        format!("key:{i}").into_bytes()
    }

    // Reference values: twemproxy's src/test_all.c (taken there from
    // libmemcached's tests/hash_results.h), and Python:
    //   struct.unpack('<4I', hashlib.md5(b"server1-8").digest())
    #[test]
    fn md5_key_hash_known_values() {
        assert_eq!(KeyHash::Md5.hash(b"apple"), 3_195_025_439); // test_all.c
        assert_eq!(KeyHash::Md5.hash(b"foobar"), 586_569_784); // hashlib
        assert_eq!(KeyHash::Md5.hash(b""), 3_649_838_548); // hashlib
    }

    #[test]
    fn ketama_point_hash_known_values() {
        // test_all.c: ketama_hash("server1-8", 9, 0) and (.., 3).
        let w = md5_words(b"server1-8");
        assert_eq!(w[0], 3_853_726_576);
        assert_eq!(w[3], 2_667_054_752);
        // hashlib: the four points of the first group of "127.0.0.1:11212".
        assert_eq!(md5_words(b"127.0.0.1:11212-0"), [647_876_633, 3_420_366_637, 96_110_928, 4_175_585_575]);
    }

    #[test]
    fn fnv1a_64_known_values() {
        // test_all.c: hash_fnv1a_64("apple", 5).
        assert_eq!(KeyHash::Fnv1a64.hash(b"apple"), 1_488_911_807);
        // Low 32 bits of the published 64-bit FNV-1a vectors:
        // fnv1a64("") = 0xcbf29ce484222325, fnv1a64("a") = 0xaf63dc4c8601ec8c,
        // fnv1a64("foobar") = 0x85944171f73967e8.
        assert_eq!(KeyHash::Fnv1a64.hash(b""), 0x8422_2325);
        assert_eq!(KeyHash::Fnv1a64.hash(b"a"), 0x8601_ec8c);
        assert_eq!(KeyHash::Fnv1a64.hash(b"foobar"), 0xf739_67e8);
    }

    #[test]
    fn fnv1a_64_high_bytes_follow_c_char() {
        // Python, 32-bit FNV-1a with each byte widened as C `char`:
        //   signed char:   v = b if b < 128 else b | 0xffffff00  -> 2046707310, 1756336354
        //   unsigned char: v = b (= low 32 bits of real FNV-1a) -> 2248338286, 1580234466
        let signed = c_char::MIN != 0;
        let (ff, word) = if signed { (2_046_707_310, 1_756_336_354) } else { (2_248_338_286, 1_580_234_466) };
        assert_eq!(KeyHash::Fnv1a64.hash(b"\xff"), ff);
        assert_eq!(KeyHash::Fnv1a64.hash(b"key:\xe9t\xe9"), word);
    }

    // Expected names read from twemproxy's conf_add_server (src/nc_conf.c).
    #[test]
    fn server_names_as_twemproxy() {
        let a: SocketAddr = "127.0.0.1:11212".parse().unwrap();
        assert_eq!(RingServer::from_addr(a, 1).name, "127.0.0.1:11212");
        let d: SocketAddr = "10.0.0.7:11211".parse().unwrap();
        assert_eq!(RingServer::from_addr(d, 2), RingServer::new("10.0.0.7", 2));
        let v6: SocketAddr = "[::1]:11300".parse().unwrap();
        assert_eq!(RingServer::from_addr(v6, 1).name, "::1:11300");

        assert_eq!(RingServer::from_host_port("localhost:11212", 1).unwrap().name, "localhost:11212");
        assert_eq!(RingServer::from_host_port("mc1:11211", 1).unwrap().name, "mc1");
        assert!(RingServer::from_host_port("mc1", 1).is_err());
        assert!(RingServer::from_host_port("mc1:0", 1).is_err());
        assert!(RingServer::from_host_port("mc1:70000", 1).is_err());

        assert_eq!(RingServer::from_twemproxy("127.0.0.1:11212:3").unwrap(), RingServer::new("127.0.0.1:11212", 3));
        assert_eq!(RingServer::from_twemproxy("127.0.0.1:11211:1").unwrap(), RingServer::new("127.0.0.1", 1));
        assert_eq!(RingServer::from_twemproxy("127.0.0.1:11212:1 server1").unwrap(), RingServer::new("server1", 1));
        assert_eq!(
            RingServer::from_twemproxy("127.0.0.1:11212:0"),
            Err(RingError::ZeroWeight("127.0.0.1:11212:0".into()))
        );
        assert!(RingServer::from_twemproxy("127.0.0.1:11212").is_err());
        assert!(RingServer::from_twemproxy("127.0.0.1:11212:+1").is_err());
        assert!(RingServer::from_twemproxy("/tmp/mc.sock:1").is_err());
    }

    // Expected order: string_compare in nc_string.c (length first, then strncmp).
    #[test]
    fn servers_are_in_twemproxys_name_order() {
        let s: Vec<RingServer> = ["127.0.0.1:10000", "cache-b", "127.0.0.1:9999", "cache-aa", "cache-a"]
            .iter()
            .map(|n| RingServer::new(*n, 1))
            .collect();
        assert_eq!(RingServer::twemproxy_order(&s), [4, 1, 3, 2, 0]);
    }

    // Expected counts: Python, each f32 step rounded with struct.pack('f', ...):
    //   pct = w/total; x = pct*160/4*S; floor(float(x + 1e-10))*4
    #[test]
    fn points_per_server_follow_twemproxy_float_math() {
        assert_eq!(points_for(1, 3, 3), 160);
        assert_eq!(points_for(1, 25, 25), 156); // f32 rounding lands below 40
        assert_eq!(points_for(1, 3, 2), 104);
        assert_eq!(points_for(2, 3, 2), 212);
        let w = [1, 2, 3, 1, 5];
        let got: Vec<u32> = w.iter().map(|&x| points_for(x, 12, 5)).collect();
        assert_eq!(got, [64, 132, 200, 64, 332]);
        // Weights 1,3,7,7,7: f32 gives 28 and 92 where exact maths gives 32 and 96.
        let w = [1, 3, 7, 7, 7];
        let got: Vec<u32> = w.iter().map(|&x| points_for(x, 25, 5)).collect();
        assert_eq!(got, [28, 92, 224, 224, 224]);
        assert_eq!(points_for(1, 1001, 2), 0);

        let ring = Ring::new(&servers(&["a", "b", "c"]), KeyHash::Md5).unwrap();
        assert_eq!(ring.continuum_len(), 480);
        assert_eq!((0..3).map(|i| ring.points(i)).collect::<Vec<_>>(), [160; 3]);
    }

    #[test]
    fn zero_point_server_is_never_chosen() {
        let s = vec![RingServer::new("tiny", 1), RingServer::new("huge", 1000)];
        let ring = Ring::new(&s, KeyHash::Md5).unwrap();
        assert_eq!(ring.points(0), 0);
        let mut out = [usize::MAX; 2];
        for i in 0..1000 {
            assert_eq!(ring.primary(&key(i)), 1);
            assert_eq!(ring.replicas(&key(i), 2, &mut out), 1);
            assert_eq!(out[0], 1);
        }
    }

    #[test]
    fn bad_rings_are_refused() {
        assert_eq!(Ring::new(&[], KeyHash::Md5).unwrap_err(), RingError::Empty);
        let z = [RingServer::new("a", 1), RingServer::new("b", 0)];
        assert_eq!(Ring::new(&z, KeyHash::Md5).unwrap_err(), RingError::ZeroWeight("b".into()));
        let o = [RingServer::new("a", u32::MAX), RingServer::new("b", 1)];
        assert_eq!(Ring::new(&o, KeyHash::Md5).unwrap_err(), RingError::WeightOverflow);
        // "<name>-39" must fit in 85 bytes: 82 is the longest name for 160 points.
        let ok = [RingServer::new("x".repeat(82), 1), RingServer::new("b", 1)];
        assert!(Ring::new(&ok, KeyHash::Md5).is_ok());
        let long = [RingServer::new("x".repeat(83), 1), RingServer::new("b", 1)];
        assert!(matches!(Ring::new(&long, KeyHash::Md5), Err(RingError::NameTooLong(_))));
    }

    #[test]
    fn primary_is_first_point_at_or_after_hash() {
        let ring = Ring::new(&servers(&["a", "b", "c", "d"]), KeyHash::Md5).unwrap();
        // Brute force over the continuum: the smallest point value >= hash, else the smallest.
        for i in 0..2000 {
            let k = key(i);
            let h = KeyHash::Md5.hash(&k);
            let mut best: Option<(u32, u32)> = None;
            let mut lowest = (u32::MAX, 0);
            for (&v, &o) in ring.values.iter().zip(ring.owners.iter()) {
                if v >= h && best.is_none_or(|(bv, _)| v < bv) {
                    best = Some((v, o));
                }
                if v < lowest.0 {
                    lowest = (v, o);
                }
            }
            let expect = best.unwrap_or(lowest).1 as usize;
            assert_eq!(ring.primary(&k), expect, "key {i}");
        }
    }

    #[test]
    fn single_server_takes_everything() {
        let ring = Ring::new(&servers(&["only"]), KeyHash::Fnv1a64).unwrap();
        let mut out = [9; 3];
        assert_eq!(ring.primary(b"x"), 0);
        assert_eq!(ring.replicas(b"x", 3, &mut out), 1);
        assert_eq!(out[0], 0);
    }

    #[test]
    fn replicas_are_distinct_and_start_with_primary() {
        for hash in [KeyHash::Md5, KeyHash::Fnv1a64] {
            let ring = Ring::new(&servers(&["a", "b", "c", "d", "e"]), hash).unwrap();
            let mut out = [0usize; 8];
            for i in 0..5000 {
                let k = key(i);
                for r in 1..=5 {
                    let n = ring.replicas(&k, r, &mut out);
                    assert_eq!(n, r);
                    assert_eq!(out[0], ring.primary(&k));
                    let mut seen = [false; 5];
                    for &s in &out[..n] {
                        assert!(!seen[s], "duplicate replica {s} for key {i}, r {r}");
                        seen[s] = true;
                    }
                }
                // R = S covers every server; R > S and a short buffer are capped.
                assert_eq!(ring.replicas(&k, 8, &mut out), 5);
                let mut all = out[..5].to_vec();
                all.sort_unstable();
                assert_eq!(all, [0, 1, 2, 3, 4]);
                assert_eq!(ring.replicas(&k, 4, &mut out[..2]), 2);
                assert_eq!(ring.replicas(&k, 0, &mut out), 0);
            }
        }
    }

    #[test]
    fn replicas_prefix_is_stable_in_r() {
        let ring = Ring::new(&servers(&["a", "b", "c", "d"]), KeyHash::Md5).unwrap();
        let (mut r2, mut r4) = ([0; 2], [0; 4]);
        for i in 0..2000 {
            ring.replicas(&key(i), 2, &mut r2);
            ring.replicas(&key(i), 4, &mut r4);
            assert_eq!(r2, r4[..2]);
        }
    }

    #[test]
    fn adding_a_fourth_server_moves_about_a_quarter() {
        const N: usize = 100_000;
        let three = Ring::new(&servers(&["s0", "s1", "s2"]), KeyHash::Md5).unwrap();
        let four = Ring::new(&servers(&["s0", "s1", "s2", "s3"]), KeyHash::Md5).unwrap();
        let mut moved = 0;
        for i in 0..N {
            let (before, after) = (three.primary(&key(i)), four.primary(&key(i)));
            if before != after {
                moved += 1;
                // Old servers keep their 160 points, so keys only move to the new one.
                assert_eq!(after, 3, "key {i} moved between old servers");
            }
        }
        let frac = moved as f64 / N as f64;
        eprintln!("adding 4th server to 3: moved fraction {frac:.4} (ideal 0.25)");
        assert!((0.15..=0.35).contains(&frac), "moved fraction {frac}");
    }

    #[test]
    fn removing_a_server_moves_only_its_keys() {
        const N: usize = 100_000;
        let names = ["s0", "s1", "s2", "s3"];
        let four = Ring::new(&servers(&names), KeyHash::Fnv1a64).unwrap();
        // Remove s1: indices shift, so compare by name.
        let left = ["s0", "s2", "s3"];
        let three = Ring::new(&servers(&left), KeyHash::Fnv1a64).unwrap();
        let mut moved = 0;
        for i in 0..N {
            let before = names[four.primary(&key(i))];
            let after = left[three.primary(&key(i))];
            if before != after {
                moved += 1;
                assert_eq!(before, "s1", "key {i} moved off a server that stayed");
            }
        }
        let frac = moved as f64 / N as f64;
        eprintln!("removing 1 of 4 servers: moved fraction {frac:.4} (ideal 0.25)");
        assert!((0.15..=0.35).contains(&frac), "moved fraction {frac}");
    }

    #[test]
    fn load_is_roughly_even_at_equal_weights() {
        let ring = Ring::new(&servers(&["s0", "s1", "s2"]), KeyHash::Md5).unwrap();
        let mut count = [0usize; 3];
        for i in 0..30_000 {
            count[ring.primary(&key(i))] += 1;
        }
        for c in count {
            assert!((7_000..=13_000).contains(&c), "{count:?}");
        }
    }
}
