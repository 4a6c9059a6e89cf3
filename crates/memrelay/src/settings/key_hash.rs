//! The key hash of a pool (twemproxy's `hash:`): one of twemproxy's twelve, by the name its
//! configuration uses. A setting, so it lives with the settings; the functions themselves are
//! [`crate::routing::hashkit`]'s, and the placement ([`crate::routing::placement`]) uses them.

use std::fmt;
use std::str::FromStr;

use crate::routing::hashkit;

/// The key hash function (twemproxy's `hash:` setting), each computing what nutcracker 0.5.0's
/// function of the same name computes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KeyHash {
    OneAtATime,
    /// `md5` (the default, as in twemproxy): first four digest bytes, little-endian.
    #[default]
    Md5,
    Crc16,
    /// libmemcached's 15-bit `crc32` (not the CRC-32 itself: that is `crc32a`).
    Crc32,
    Crc32a,
    Fnv1_64,
    /// `fnv1a_64`: FNV-1a in 32 bits, as twemproxy computes it.
    Fnv1a64,
    Fnv1_32,
    Fnv1a32,
    Hsieh,
    Murmur,
    Jenkins,
}

impl KeyHash {
    /// Every hash, in twemproxy's order (`HASH_CODEC`).
    pub const ALL: [KeyHash; 12] = [
        KeyHash::OneAtATime,
        KeyHash::Md5,
        KeyHash::Crc16,
        KeyHash::Crc32,
        KeyHash::Crc32a,
        KeyHash::Fnv1_64,
        KeyHash::Fnv1a64,
        KeyHash::Fnv1_32,
        KeyHash::Fnv1a32,
        KeyHash::Hsieh,
        KeyHash::Murmur,
        KeyHash::Jenkins,
    ];

    /// The 32-bit hash of `key`, as twemproxy's `pool->key_hash` computes it.
    #[inline]
    pub fn hash(self, key: &[u8]) -> u32 {
        match self {
            KeyHash::OneAtATime => hashkit::one_at_a_time(key),
            KeyHash::Md5 => hashkit::md5(key),
            KeyHash::Crc16 => hashkit::crc16(key),
            KeyHash::Crc32 => hashkit::crc32(key),
            KeyHash::Crc32a => hashkit::crc32a(key),
            KeyHash::Fnv1_64 => hashkit::fnv1_64(key),
            KeyHash::Fnv1a64 => hashkit::fnv1a_64(key),
            KeyHash::Fnv1_32 => hashkit::fnv1_32(key),
            KeyHash::Fnv1a32 => hashkit::fnv1a_32(key),
            KeyHash::Hsieh => hashkit::hsieh(key),
            KeyHash::Murmur => hashkit::murmur(key),
            KeyHash::Jenkins => hashkit::jenkins(key),
        }
    }

    /// The name twemproxy's configuration uses for this hash.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyHash::OneAtATime => "one_at_a_time",
            KeyHash::Md5 => "md5",
            KeyHash::Crc16 => "crc16",
            KeyHash::Crc32 => "crc32",
            KeyHash::Crc32a => "crc32a",
            KeyHash::Fnv1_64 => "fnv1_64",
            KeyHash::Fnv1a64 => "fnv1a_64",
            KeyHash::Fnv1_32 => "fnv1_32",
            KeyHash::Fnv1a32 => "fnv1a_32",
            KeyHash::Hsieh => "hsieh",
            KeyHash::Murmur => "murmur",
            KeyHash::Jenkins => "jenkins",
        }
    }
}

impl fmt::Display for KeyHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A key hash name twemproxy does not have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseKeyHashError(pub String);

impl fmt::Display for ParseKeyHashError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = KeyHash::ALL.iter().map(|h| h.as_str()).collect();
        write!(f, "unknown key hash {:?} (expected one of {})", self.0, names.join(", "))
    }
}

impl std::error::Error for ParseKeyHashError {}

impl FromStr for KeyHash {
    type Err = ParseKeyHashError;

    /// twemproxy's names, exactly (case matters, as in `conf_set_hash`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KeyHash::ALL.into_iter().find(|h| h.as_str() == s).ok_or_else(|| ParseKeyHashError(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_twemproxy_name_parses_and_prints_back() {
        for hash in KeyHash::ALL {
            assert_eq!(hash.as_str().parse::<KeyHash>(), Ok(hash));
            assert_eq!(hash.to_string(), hash.as_str());
        }
        // The names of nutcracker's HASH_CODEC, in its order.
        let twemproxy = "one_at_a_time md5 crc16 crc32 crc32a fnv1_64 fnv1a_64 fnv1_32 fnv1a_32 hsieh murmur jenkins";
        let ours: Vec<&str> = KeyHash::ALL.iter().map(|h| h.as_str()).collect();
        assert_eq!(ours.join(" "), twemproxy);
        assert!("MD5".parse::<KeyHash>().is_err());
        assert!("fnv1a64".parse::<KeyHash>().is_err());
        let error = "crc64".parse::<KeyHash>().unwrap_err().to_string();
        assert!(error.contains("crc64") && error.contains("jenkins"), "{error}");
        assert_eq!(KeyHash::default(), KeyHash::Md5);
    }

    // nutcracker's src/test_all.c (values from libmemcached's tests/hash_results.h).
    #[test]
    fn apple_hashes_as_in_twemproxys_own_tests() {
        let expect = [
            (KeyHash::OneAtATime, 2_297_466_611),
            (KeyHash::Md5, 3_195_025_439),
            (KeyHash::Crc16, 3_662_830_516),
            (KeyHash::Crc32, 10_542),
            (KeyHash::Crc32a, 2_838_417_488),
            (KeyHash::Fnv1_32, 67_176_023),
            (KeyHash::Fnv1a32, 280_767_167),
            (KeyHash::Fnv1_64, 473_199_127),
            (KeyHash::Fnv1a64, 1_488_911_807),
            (KeyHash::Hsieh, 3_738_850_110),
            (KeyHash::Jenkins, 1_442_444_624),
            (KeyHash::Murmur, 4_142_305_122),
        ];
        assert_eq!(expect.len(), KeyHash::ALL.len());
        for (hash, value) in expect {
            assert_eq!(hash.hash(b"apple"), value, "{hash}(\"apple\")");
        }
    }
}
