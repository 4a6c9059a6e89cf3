//! Placement: which server is a key's primary and which are its replicas, under a pool's
//! distribution, key hash and hash tag, as twemproxy's `server_pool_idx` (`src/nc_server.c`)
//! picks a key's server:
//!
//! 1. With one server, that server (nothing is hashed).
//! 2. With a hash tag, the part of the key inside it ([`HashTag::hashed_part`]).
//! 3. The key hash of that part, or 0 for an empty one (`server_pool_hash`).
//! 4. The distribution's dispatch: ketama's ring ([`Ring`]), modula's continuum ([`Modula`],
//!    whose servers are in twemproxy's order, sorted by name, not the order configured), or
//!    for `random` a server drawn at random, whatever the key (`random_dispatch`: one point per
//!    server, weights ignored, as nutcracker 0.5.0 does).
//!
//! Replicas (memrelay's, twemproxy has none) follow the dispatch: the next distinct servers on
//! the ring or the continuum. A random placement has no replicas beyond the one server drawn.
//! `--distribution all` places nothing (every server has every key) but still names a primary
//! for `gets`/`cas`, from a ketama ring.
//!
//! Pure but for `random`, which draws from a thread-local generator, as nutcracker calls
//! `random()`; no allocation after [`Placement::new`].

use rand::Rng;

use super::ketama::{Ring, RingServer};
use super::modula::Modula;
use crate::settings::{Distribution, HashTag, KeyHash};

/// The servers of a key under one pool's placement settings.
#[derive(Clone, Debug)]
pub struct Placement {
    dispatch: Dispatch,
    hash: KeyHash,
    tag: Option<HashTag>,
    servers: usize,
}

#[derive(Clone, Debug)]
enum Dispatch {
    Ketama(Ring),
    Modula(Modula),
    Random,
}

impl Placement {
    /// The placement of `servers` (index i is `servers[i]`; the ring hashes their names); the
    /// error says why there is none.
    pub fn new(
        distribution: Distribution,
        servers: &[RingServer],
        hash: KeyHash,
        tag: Option<HashTag>,
    ) -> Result<Placement, String> {
        let dispatch = match distribution {
            Distribution::All | Distribution::Ketama => {
                Dispatch::Ketama(Ring::new(servers, hash).map_err(|e| e.to_string())?)
            }
            Distribution::Modula => Dispatch::Modula(Modula::new(servers)?),
            Distribution::Random if servers.is_empty() => return Err("random: no servers".into()),
            Distribution::Random => Dispatch::Random,
        };
        Ok(Placement { dispatch, hash, tag, servers: servers.len() })
    }

    /// Whether a key's server is drawn at random for every request (`random`): then it has no
    /// server of its own.
    pub fn is_random(&self) -> bool {
        matches!(self.dispatch, Dispatch::Random)
    }

    /// `server_pool_hash` of the part of `key` the hash tag selects.
    #[inline]
    fn hash_of(&self, key: &[u8]) -> u32 {
        let key = match &self.tag {
            Some(tag) => tag.hashed_part(key),
            None => key,
        };
        if key.is_empty() {
            0
        } else {
            self.hash.hash(key)
        }
    }

    /// The index of the server twemproxy sends `key` to.
    #[inline]
    pub fn primary(&self, key: &[u8]) -> usize {
        if self.servers == 1 {
            return 0;
        }
        match &self.dispatch {
            Dispatch::Ketama(ring) => ring.primary_of_hash(self.hash_of(key)),
            Dispatch::Modula(modula) => modula.owner(self.hash_of(key)),
            Dispatch::Random => random_server(self.servers),
        }
    }

    /// Writes `key`'s replicas into `out`, its primary first, and returns how many: at most
    /// `r` and `out.len()`, and one for `random` (the server drawn).
    pub fn replicas(&self, key: &[u8], r: usize, out: &mut [usize]) -> usize {
        match &self.dispatch {
            Dispatch::Ketama(ring) => ring.replicas_of_hash(self.hash_of(key), r, out),
            Dispatch::Modula(modula) => modula.replicas(self.hash_of(key), r, out),
            Dispatch::Random if r == 0 || out.is_empty() => 0,
            Dispatch::Random => {
                out[0] = self.primary(key);
                1
            }
        }
    }
}

/// `random_dispatch`: one of `servers`, uniformly (nutcracker gives every server one point of
/// its random continuum, whatever its weight).
fn random_server(servers: usize) -> usize {
    rand::thread_rng().gen_range(0..servers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(weights: &[u32]) -> Vec<RingServer> {
        weights.iter().enumerate().map(|(i, &w)| RingServer::new(format!("s{i}"), w)).collect()
    }

    fn placement(distribution: Distribution, hash: KeyHash, tag: Option<&str>) -> Placement {
        let tag = tag.map(|t| t.parse().unwrap());
        Placement::new(distribution, &servers(&[1, 2, 3, 4]), hash, tag).unwrap()
    }

    #[test]
    fn ketama_places_as_the_ring_does() {
        let ring = Ring::new(&servers(&[1, 2, 3, 4]), KeyHash::Murmur).unwrap();
        let p = placement(Distribution::Ketama, KeyHash::Murmur, None);
        let (mut a, mut b) = ([0; 4], [0; 4]);
        for i in 0..2000 {
            let key = format!("key:{i}");
            assert_eq!(p.primary(key.as_bytes()), ring.primary(key.as_bytes()));
            assert_eq!(p.replicas(key.as_bytes(), 3, &mut a), ring.replicas(key.as_bytes(), 3, &mut b));
            assert_eq!(a, b);
        }
    }

    // Expected: the modula continuum written out (s0..s3 of weights 1,2,3,4: 10 points) and the
    // hash function's own value of the key.
    #[test]
    fn modula_places_on_hash_mod_total_weight() {
        let continuum = [0, 1, 1, 2, 2, 2, 3, 3, 3, 3];
        for hash in KeyHash::ALL {
            let p = placement(Distribution::Modula, hash, None);
            for i in 0..500 {
                let key = format!("k{i}");
                let point = hash.hash(key.as_bytes()) % 10;
                assert_eq!(p.primary(key.as_bytes()), continuum[point as usize], "{hash} {key}");
            }
        }
    }

    #[test]
    fn the_hash_tag_places_related_keys_together() {
        for distribution in [Distribution::Ketama, Distribution::Modula] {
            let p = placement(distribution, KeyHash::Fnv1a32, Some("{}"));
            let untagged = placement(distribution, KeyHash::Fnv1a32, None);
            for i in 0..200 {
                let id = format!("{i}");
                let home = untagged.primary(id.as_bytes());
                for key in [format!("user:{{{i}}}:name"), format!("{{{i}}}"), format!("x{{{i}}}y{{z}}")] {
                    assert_eq!(p.primary(key.as_bytes()), home, "{key}");
                }
                // No tag in the key, or an empty one: the whole key.
                for key in [format!("plain:{i}"), format!("empty:{{}}:{i}"), format!("open:{{{i}")] {
                    assert_eq!(p.primary(key.as_bytes()), untagged.primary(key.as_bytes()), "{key}");
                }
            }
        }
    }

    #[test]
    fn an_empty_key_hashes_to_zero() {
        // server_pool_hash: keylen 0 gives hash 0, whatever the hash function.
        let p = placement(Distribution::Modula, KeyHash::Md5, None);
        assert_eq!(p.primary(b""), 0);
        let ring = Ring::new(&servers(&[1, 2, 3, 4]), KeyHash::Md5).unwrap();
        assert_eq!(placement(Distribution::Ketama, KeyHash::Md5, None).primary(b""), ring.primary_of_hash(0));
    }

    #[test]
    fn one_server_takes_every_key() {
        for distribution in [Distribution::Ketama, Distribution::Modula, Distribution::Random] {
            let p = Placement::new(distribution, &servers(&[5]), KeyHash::Crc16, None).unwrap();
            let mut out = [9; 2];
            assert_eq!(p.primary(b"anything"), 0);
            assert_eq!(p.replicas(b"anything", 2, &mut out), 1);
            assert_eq!(out[0], 0);
        }
    }

    #[test]
    fn random_ignores_the_key_and_the_weights() {
        let p = placement(Distribution::Random, KeyHash::Md5, None);
        assert!(p.is_random());
        let mut count = [0usize; 4];
        for _ in 0..40_000 {
            count[p.primary(b"same key")] += 1;
        }
        // Uniform: 10,000 each expected, whatever the weights 1,2,3,4 (4 sigma ~ 350).
        for c in count {
            assert!((9_000..=11_000).contains(&c), "{count:?}");
        }
        let mut out = [9; 3];
        assert_eq!(p.replicas(b"k", 3, &mut out), 1);
        assert!(out[0] < 4);
        assert_eq!(p.replicas(b"k", 0, &mut out), 0);
    }
}
