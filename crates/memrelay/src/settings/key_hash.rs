//! The key hash of the ketama ring (twemproxy's `hash:`): `md5` (the first four bytes of a key's
//! MD5, little-endian, as twemproxy and libmemcached compute them) or `fnv1a_64` (its low 32
//! bits). A setting, so it lives with the settings; the ring ([`crate::routing::ketama`]) uses it.

use core::ffi::c_char;
use std::fmt;
use std::str::FromStr;

use md5::{Digest, Md5};

/// The key hash function (twemproxy's `hash:` setting).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KeyHash {
    /// `md5` (the default): first four digest bytes, little-endian.
    #[default]
    Md5,
    /// `fnv1a_64`: FNV-1a in 32 bits, as twemproxy computes it.
    Fnv1a64,
}

impl KeyHash {
    /// The 32-bit hash of `key`, as twemproxy's `pool->key_hash` computes it.
    #[inline]
    pub fn hash(self, key: &[u8]) -> u32 {
        match self {
            KeyHash::Md5 => md5_words(key)[0],
            KeyHash::Fnv1a64 => fnv1a_64(key),
        }
    }

    /// The name twemproxy's configuration uses for this hash.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyHash::Md5 => "md5",
            KeyHash::Fnv1a64 => "fnv1a_64",
        }
    }
}

impl fmt::Display for KeyHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A key hash name that is not `md5` or `fnv1a_64`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseKeyHashError(pub String);

impl fmt::Display for ParseKeyHashError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown key hash {:?} (expected \"md5\" or \"fnv1a_64\")", self.0)
    }
}

impl std::error::Error for ParseKeyHashError {}

impl FromStr for KeyHash {
    type Err = ParseKeyHashError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "md5" => Ok(KeyHash::Md5),
            "fnv1a_64" => Ok(KeyHash::Fnv1a64),
            other => Err(ParseKeyHashError(other.to_owned())),
        }
    }
}

/// The MD5 digest of `data` as four little-endian words; word `a` is
/// twemproxy's `ketama_hash(data, len, a)`, word 0 is `hash_md5(data, len)`.
#[inline]
pub(crate) fn md5_words(data: &[u8]) -> [u32; 4] {
    let d = Md5::digest(data);
    let w = |i: usize| u32::from_le_bytes([d[4 * i], d[4 * i + 1], d[4 * i + 2], d[4 * i + 3]]);
    [w(0), w(1), w(2), w(3)]
}

/// twemproxy's `hash_fnv1a_64`: FNV-1a with the 64-bit offset basis and prime
/// truncated to 32 bits, each byte read as C `char` then widened to `u32`.
#[inline]
fn fnv1a_64(key: &[u8]) -> u32 {
    const INIT: u32 = 0xcbf2_9ce4_8422_2325_u64 as u32;
    const PRIME: u32 = 0x0000_0100_0000_01b3_u64 as u32;
    let mut hash = INIT;
    for &b in key {
        // `(uint32_t)key[x]` with `const char *key`: sign-extends where char is signed.
        #[allow(clippy::unnecessary_cast)]
        let val = (b as c_char) as i32 as u32;
        hash ^= val;
        hash = hash.wrapping_mul(PRIME);
    }
    hash
}
