//! What each virtual client sends: the request mix (`--ratio`, counted in requests), the keys
//! (per `--key-pattern`, from a per-client seeded generator) and the request bytes.
//!
//! Requests are written straight into the connection's output buffer from templates built once
//! (`" 0 0 <size>\r\n"`, the value and its `\r\n`), so the hot path neither allocates nor
//! formats. The bytes are the same as `memrelay_protocol::compose` writes (tested below).

use rand::rngs::SmallRng;
use rand::SeedableRng;

use memrelay_protocol::Expect;

use crate::config::{Config, Protocol};
use crate::keys::{write_key, write_u64, KeyChooser, KeyRange};

/// Request types, as reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Set = 0,
    /// A get of one key.
    Get = 1,
    /// A get of `--multiget` > 1 keys.
    MultiGet = 2,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Set, Kind::Get, Kind::MultiGet];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Set => "set",
            Kind::Get => "get",
            Kind::MultiGet => "multiget",
        }
    }

    /// The shape of the (first) reply to this request; a meta multi-get's replies are `VA`
    /// blocks up to `MN`, each read as a meta reply.
    pub fn expect(self, protocol: Protocol) -> Expect {
        match (protocol, self) {
            (Protocol::Meta, _) => Expect::Meta,
            (Protocol::Text, Kind::Set) => Expect::Line,
            (Protocol::Text, Kind::Get | Kind::MultiGet) => Expect::Values,
        }
    }
}

/// Request pieces built once per run.
#[derive(Debug, Clone)]
pub struct Templates {
    pub protocol: Protocol,
    prefix: Vec<u8>,
    /// After the key: text `" 0 0 <size>\r\n"` (flags 0, exptime 0: memtier's defaults), meta
    /// `" <size> T0 F0\r\n"`.
    set_tail: Vec<u8>,
    /// The value, a fixed pattern, followed by `\r\n`.
    data: Vec<u8>,
}

/// The value pattern: `--data-size` bytes of `x`, as memtier writes without `--random-data`.
pub const DATA_BYTE: u8 = b'x';

impl Templates {
    pub fn new(protocol: Protocol, prefix: &str, data_size: usize) -> Templates {
        let mut set_tail = match protocol {
            Protocol::Text => b" 0 0 ".to_vec(),
            Protocol::Meta => b" ".to_vec(),
        };
        write_u64(&mut set_tail, data_size as u64);
        if protocol == Protocol::Meta {
            set_tail.extend_from_slice(b" T0 F0");
        }
        set_tail.extend_from_slice(b"\r\n");
        let mut data = vec![DATA_BYTE; data_size];
        data.extend_from_slice(b"\r\n");
        Templates { protocol, prefix: prefix.as_bytes().to_vec(), set_tail, data }
    }

    /// `set <prefix><id> 0 0 <size>\r\n<data>\r\n`, or `ms <prefix><id> <size> T0 F0\r\n…`
    #[inline]
    pub fn write_set(&self, out: &mut Vec<u8>, id: u64) {
        out.extend_from_slice(match self.protocol {
            Protocol::Text => b"set ",
            Protocol::Meta => b"ms ",
        });
        write_key(out, &self.prefix, id);
        out.extend_from_slice(&self.set_tail);
        out.extend_from_slice(&self.data);
    }

    /// `get <prefix><id> <prefix><id> …\r\n`; meta: `mg <prefix><id> v f\r\n` for one key,
    /// `mg <prefix><id> v f q k\r\n` per key and `mn\r\n` for several (quiet mode leaves the
    /// misses out, `mn` ends the batch).
    #[inline]
    pub fn write_get(&self, out: &mut Vec<u8>, keys: u32, ids: impl Iterator<Item = u64>) {
        if self.protocol == Protocol::Meta {
            let flags: &[u8] = if keys == 1 { b" v f\r\n" } else { b" v f q k\r\n" };
            for id in ids {
                out.extend_from_slice(b"mg ");
                write_key(out, &self.prefix, id);
                out.extend_from_slice(flags);
            }
            if keys > 1 {
                out.extend_from_slice(b"mn\r\n");
            }
            return;
        }
        out.extend_from_slice(b"get");
        for id in ids {
            out.push(b' ');
            write_key(out, &self.prefix, id);
        }
        out.extend_from_slice(b"\r\n");
    }

    /// Upper bound of one request's size, to size buffers once.
    pub fn max_request_len(&self, multiget: u32) -> usize {
        let key = self.prefix.len() + 20;
        let set = 4 + key + self.set_tail.len() + self.data.len();
        let get = match self.protocol {
            Protocol::Text => 3 + (1 + key) * multiget as usize + 2,
            Protocol::Meta => (3 + key + 11) * multiget as usize + 4,
        };
        set.max(get)
    }
}

/// One virtual client's request stream in the workload phase.
#[derive(Debug, Clone)]
pub struct ClientWorkload {
    rng: SmallRng,
    set_keys: KeyChooser,
    get_keys: KeyChooser,
    sets: u32,
    cycle: u32,
    /// Position in the cycle: the first `sets` positions are sets, the rest gets.
    pos: u32,
    multiget: u32,
}

impl ClientWorkload {
    /// The workload of client `client` (global index) of `clients`.
    pub fn new(cfg: &Config, client: u64, clients: u64) -> ClientWorkload {
        let range = key_range(cfg);
        let cycle = cfg.ratio_sets + cfg.ratio_gets;
        ClientWorkload {
            rng: SmallRng::seed_from_u64(client_seed(cfg.seed, client)),
            set_keys: KeyChooser::new(cfg.key_pattern_set, &range, client, clients),
            get_keys: KeyChooser::new(cfg.key_pattern_get, &range, client, clients),
            sets: cfg.ratio_sets,
            cycle,
            // Clients start at different points of the cycle so the mix holds at every instant.
            pos: (client % u64::from(cycle)) as u32,
            multiget: cfg.multiget,
        }
    }

    /// Writes the next request into `out`; returns its type and number of keys.
    #[inline]
    pub fn next(&mut self, out: &mut Vec<u8>, t: &Templates) -> (Kind, u32) {
        let is_set = self.pos < self.sets;
        self.pos += 1;
        if self.pos == self.cycle {
            self.pos = 0;
        }
        if is_set {
            let id = self.set_keys.next(&mut self.rng);
            t.write_set(out, id);
            (Kind::Set, 1)
        } else {
            let (rng, keys) = (&mut self.rng, &mut self.get_keys);
            t.write_get(out, self.multiget, (0..self.multiget).map(|_| keys.next(rng)));
            (if self.multiget == 1 { Kind::Get } else { Kind::MultiGet }, self.multiget)
        }
    }
}

pub fn key_range(cfg: &Config) -> KeyRange {
    KeyRange {
        min: cfg.key_minimum,
        max: cfg.key_maximum,
        median: cfg.key_median,
        stddev: cfg.key_stddev,
        zipf_exp: cfg.key_zipf_exp,
    }
}

/// A client's own seed: splitmix64 of the run seed and the client index.
pub fn client_seed(seed: u64, client: u64) -> u64 {
    let mut z = seed ^ client.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Args;
    use clap::Parser;
    use memrelay_protocol::{compose, parse_request, Command, Limits, Parse};

    fn config(extra: &[&str]) -> Config {
        let mut argv = vec!["memrelay-bench"];
        argv.extend_from_slice(extra);
        Config::from_args(Args::try_parse_from(argv).unwrap()).unwrap()
    }

    #[test]
    fn bytes_match_the_protocol_crates_compose() {
        let t = Templates::new(Protocol::Text, "memtier-", 5);
        let mut ours = Vec::new();
        t.write_set(&mut ours, 1234);
        let mut theirs = Vec::new();
        compose::storage(&mut theirs, Command::Set, b"memtier-1234", 0, 0, b"xxxxx", 0, false);
        assert_eq!(ours, theirs);

        ours.clear();
        theirs.clear();
        t.write_get(&mut ours, 3, [1u64, 22, 333].into_iter());
        compose::retrieval(&mut theirs, Command::Get, [&b"memtier-1"[..], b"memtier-22", b"memtier-333"]);
        assert_eq!(ours, theirs);
        assert!(t.max_request_len(3) >= ours.len());
    }

    #[test]
    fn meta_bytes_match_the_protocol_crates_compose() {
        let t = Templates::new(Protocol::Meta, "memtier-", 5);
        let mut ours = Vec::new();
        t.write_set(&mut ours, 7);
        let mut theirs = Vec::new();
        compose::meta(&mut theirs, Command::MetaSet, b"memtier-7", Some(b"xxxxx"), [&b"T0"[..], b"F0"]);
        assert_eq!(ours, theirs);
        ours.clear();
        t.write_get(&mut ours, 2, [1u64, 22].into_iter());
        assert_eq!(ours, b"mg memtier-1 v f q k\r\nmg memtier-22 v f q k\r\nmn\r\n");
        assert!(t.max_request_len(2) >= ours.len());
        // Every piece parses as one meta request.
        let mut rest = &ours[..];
        while !rest.is_empty() {
            let Parse::Complete(req) = parse_request(rest, &Limits::default()) else { panic!() };
            assert!(req.command.is_meta());
            rest = &rest[req.consumed..];
        }
    }

    #[test]
    fn ratio_counts_requests_and_multiget_size_is_exact() {
        let cfg = config(&["--ratio", "1:6", "--multiget", "7", "--key-maximum", "999"]);
        let t = Templates::new(cfg.protocol, &cfg.key_prefix, cfg.data_size);
        let mut w = ClientWorkload::new(&cfg, 3, 10);
        let (mut sets, mut gets) = (0, 0);
        let mut out = Vec::new();
        for _ in 0..7000 {
            out.clear();
            let (kind, keys) = w.next(&mut out, &t);
            // The request the server will see, parsed by the protocol crate.
            let Parse::Complete(req) = parse_request(&out, &Limits::default()) else { panic!() };
            assert_eq!(req.consumed, out.len());
            match kind {
                Kind::Set => {
                    sets += 1;
                    assert_eq!((req.command, keys), (Command::Set, 1));
                }
                Kind::MultiGet => {
                    gets += 1;
                    assert_eq!((req.command, req.key_count, keys), (Command::Get, 7, 7));
                }
                Kind::Get => panic!("multiget 7 sent a single-key get"),
            }
        }
        assert_eq!((sets, gets), (1000, 6000));
    }

    #[test]
    fn same_seed_same_keys_other_client_other_keys() {
        let cfg = config(&["--ratio", "0:1"]);
        let t = Templates::new(cfg.protocol, &cfg.key_prefix, cfg.data_size);
        let run = |client| {
            let mut w = ClientWorkload::new(&cfg, client, 4);
            let mut out = Vec::new();
            for _ in 0..50 {
                w.next(&mut out, &t);
            }
            out
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }
}
