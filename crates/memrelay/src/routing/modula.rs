//! Modula placement (twemproxy's `distribution: modula`, `src/hashkit/nc_modula.c`): a
//! continuum of one point per unit of weight, server i holding `weight(i)` consecutive points
//! in configuration order, and a key on point `hash % total weight`. Adding or removing a server
//! moves most keys (unlike ketama); in exchange the share of each server is exactly its weight.
//!
//! The continuum is kept as the running sums of the weights rather than one entry per point, so
//! a weight of a billion costs four bytes, not four gigabytes; the server owning a point is the
//! same.

/// The weighted continuum of a pool's servers.
#[derive(Clone, Debug)]
pub struct Modula {
    /// `ends[i]`: the first point after server i's (the sum of the weights of servers 0..=i).
    ends: Box<[u32]>,
}

impl Modula {
    /// The continuum of servers with these `weights` (in configuration order); the error says
    /// why there is none (no servers, a weight of 0, weights adding up past `u32`, whose sum
    /// nutcracker keeps in a `uint32_t`).
    pub fn new(weights: &[u32]) -> Result<Modula, String> {
        if weights.is_empty() {
            return Err("modula: no servers".into());
        }
        let mut total: u32 = 0;
        let mut ends = Vec::with_capacity(weights.len());
        for (i, &weight) in weights.iter().enumerate() {
            if weight == 0 {
                return Err(format!("modula: server {i} has weight 0"));
            }
            total = total.checked_add(weight).ok_or("modula: the weights add up past 4294967295")?;
            ends.push(total);
        }
        Ok(Modula { ends: ends.into() })
    }

    /// Number of points (the total weight).
    pub fn points(&self) -> u32 {
        self.ends[self.ends.len() - 1]
    }

    /// The server owning the key of this hash: the one holding point `hash % points`
    /// (`modula_dispatch`).
    #[inline]
    pub fn owner(&self, hash: u32) -> usize {
        let point = hash % self.points();
        self.ends.partition_point(|&end| end <= point)
    }

    /// Writes the replicas of the key of this hash into `out`: its owner, then the next servers
    /// met walking the continuum on from its point, that is the next ones in configuration order,
    /// wrapping (twemproxy has no replicas; this is memrelay's extension, as for ketama). Writes
    /// `min(r, out.len(), servers)` indices and returns how many.
    pub fn replicas(&self, hash: u32, r: usize, out: &mut [usize]) -> usize {
        let n = self.ends.len();
        let want = r.min(out.len()).min(n);
        let owner = self.owner(hash);
        for (j, slot) in out[..want].iter_mut().enumerate() {
            *slot = (owner + j) % n;
        }
        want
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected owners: nc_modula.c's continuum written out by hand, one entry per weight unit.
    #[test]
    fn points_follow_weights_in_configuration_order() {
        let m = Modula::new(&[1, 2, 3]).unwrap();
        assert_eq!(m.points(), 6);
        let continuum = [0, 1, 1, 2, 2, 2];
        for hash in 0..60u32 {
            assert_eq!(m.owner(hash), continuum[(hash % 6) as usize], "hash {hash}");
        }
        assert_eq!(m.owner(u32::MAX), continuum[(u32::MAX % 6) as usize]);
        let equal = Modula::new(&[1, 1, 1, 1]).unwrap();
        assert_eq!((0..8).map(|h| equal.owner(h)).collect::<Vec<_>>(), [0, 1, 2, 3, 0, 1, 2, 3]);
    }

    #[test]
    fn replicas_are_the_next_servers_in_order() {
        let m = Modula::new(&[1, 2, 3]).unwrap();
        let mut out = [9; 4];
        assert_eq!(m.replicas(5, 2, &mut out), 2); // point 5: server 2
        assert_eq!(out[..2], [2, 0]);
        assert_eq!(m.replicas(1, 4, &mut out), 3); // capped at the servers
        assert_eq!(out[..3], [1, 2, 0]);
        assert_eq!(m.replicas(1, 3, &mut out[..1]), 1); // and at the buffer
        assert_eq!(m.replicas(1, 0, &mut out), 0);
    }

    #[test]
    fn bad_weights_are_refused() {
        assert!(Modula::new(&[]).is_err());
        assert!(Modula::new(&[1, 0]).unwrap_err().contains("weight 0"));
        assert!(Modula::new(&[u32::MAX, 1]).unwrap_err().contains("past"));
        // A huge weight is one number, not a billion entries.
        let big = Modula::new(&[1_000_000_000, 1]).unwrap();
        assert_eq!(big.owner(1_000_000_000), 1);
        assert_eq!(big.owner(999_999_999), 0);
    }
}
