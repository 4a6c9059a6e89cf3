//! Modula placement (twemproxy's `distribution: modula`, `src/hashkit/nc_modula.c`): a
//! continuum of one point per unit of weight, each server holding `weight` consecutive points,
//! the servers in twemproxy's order (sorted by name, [`RingServer::twemproxy_order`], not the
//! order configured), and a key on point `hash % total weight`. Adding or removing a server
//! moves most keys (unlike ketama); in exchange the share of each server is exactly its weight.
//!
//! The continuum is kept as the running sums of the weights rather than one entry per point, so
//! a weight of a billion costs four bytes, not four gigabytes; the server owning a point is the
//! same.

use super::ketama::RingServer;

/// The weighted continuum of a pool's servers.
#[derive(Clone, Debug)]
pub struct Modula {
    /// `ends[j]`: the first point after the j-th server's on the continuum (the sum of the
    /// weights of the servers up to and including it, in twemproxy's order).
    ends: Box<[u32]>,
    /// `owners[j]`: the index (in the configuration) of the j-th server on the continuum.
    owners: Box<[usize]>,
}

impl Modula {
    /// The continuum of `servers` (index i is `servers[i]`); the error says why there is none
    /// (no servers, a weight of 0, weights adding up past `u32`, whose sum nutcracker keeps in a
    /// `uint32_t`).
    pub fn new(servers: &[RingServer]) -> Result<Modula, String> {
        if servers.is_empty() {
            return Err("modula: no servers".into());
        }
        let owners = RingServer::twemproxy_order(servers);
        let mut total: u32 = 0;
        let mut ends = Vec::with_capacity(servers.len());
        for &index in &owners {
            let server = &servers[index];
            if server.weight == 0 {
                return Err(format!("modula: server {:?} has weight 0", server.name));
            }
            total = total.checked_add(server.weight).ok_or("modula: the weights add up past 4294967295")?;
            ends.push(total);
        }
        Ok(Modula { ends: ends.into(), owners: owners.into() })
    }

    /// Number of points (the total weight).
    pub fn points(&self) -> u32 {
        self.ends[self.ends.len() - 1]
    }

    /// Position on the continuum of the server holding the point of this hash.
    #[inline]
    fn position(&self, hash: u32) -> usize {
        let point = hash % self.points();
        self.ends.partition_point(|&end| end <= point)
    }

    /// The server owning the key of this hash: the one holding point `hash % points`
    /// (`modula_dispatch`).
    #[inline]
    pub fn owner(&self, hash: u32) -> usize {
        self.owners[self.position(hash)]
    }

    /// Writes the replicas of the key of this hash into `out`: its owner, then the next servers
    /// met walking the continuum on from its point, wrapping (twemproxy has no replicas; this is
    /// memrelay's extension, as for ketama). Writes `min(r, out.len(), servers)` indices and
    /// returns how many.
    pub fn replicas(&self, hash: u32, r: usize, out: &mut [usize]) -> usize {
        let n = self.owners.len();
        let want = r.min(out.len()).min(n);
        let at = self.position(hash);
        for (j, slot) in out[..want].iter_mut().enumerate() {
            *slot = self.owners[(at + j) % n];
        }
        want
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modula(servers: &[(&str, u32)]) -> Result<Modula, String> {
        let servers: Vec<RingServer> = servers.iter().map(|&(name, weight)| RingServer::new(name, weight)).collect();
        Modula::new(&servers)
    }

    // Expected owners: nc_modula.c's continuum written out by hand, one entry per weight unit.
    #[test]
    fn points_follow_weights() {
        let m = modula(&[("s0", 1), ("s1", 2), ("s2", 3)]).unwrap();
        assert_eq!(m.points(), 6);
        let continuum = [0, 1, 1, 2, 2, 2];
        for hash in 0..60u32 {
            assert_eq!(m.owner(hash), continuum[(hash % 6) as usize], "hash {hash}");
        }
        assert_eq!(m.owner(u32::MAX), continuum[(u32::MAX % 6) as usize]);
        let equal = modula(&[("a", 1), ("b", 1), ("c", 1), ("d", 1)]).unwrap();
        assert_eq!((0..8).map(|h| equal.owner(h)).collect::<Vec<_>>(), [0, 1, 2, 3, 0, 1, 2, 3]);
    }

    #[test]
    fn the_continuum_is_in_twemproxys_name_order() {
        // Sorted: "a" (server 1, weight 2), "b" (server 0, weight 1), "cc" (server 2, weight 3).
        let m = modula(&[("b", 1), ("a", 2), ("cc", 3)]).unwrap();
        let continuum = [1, 1, 0, 2, 2, 2];
        for hash in 0..12u32 {
            assert_eq!(m.owner(hash), continuum[(hash % 6) as usize], "hash {hash}");
        }
    }

    #[test]
    fn replicas_are_the_next_servers_on_the_continuum() {
        let m = modula(&[("b", 1), ("a", 2), ("cc", 3)]).unwrap();
        let mut out = [9; 4];
        assert_eq!(m.replicas(5, 2, &mut out), 2); // point 5: "cc", then "a"
        assert_eq!(out[..2], [2, 1]);
        assert_eq!(m.replicas(1, 4, &mut out), 3); // capped at the servers
        assert_eq!(out[..3], [1, 0, 2]);
        assert_eq!(m.replicas(1, 3, &mut out[..1]), 1); // and at the buffer
        assert_eq!(m.replicas(1, 0, &mut out), 0);
    }

    #[test]
    fn bad_weights_are_refused() {
        assert!(Modula::new(&[]).is_err());
        assert!(modula(&[("a", 1), ("b", 0)]).unwrap_err().contains("weight 0"));
        assert!(modula(&[("a", u32::MAX), ("b", 1)]).unwrap_err().contains("past"));
        // A huge weight is one number, not a billion entries.
        let big = modula(&[("a", 1_000_000_000), ("b", 1)]).unwrap();
        assert_eq!(big.owner(1_000_000_000), 1);
        assert_eq!(big.owner(999_999_999), 0);
    }
}
