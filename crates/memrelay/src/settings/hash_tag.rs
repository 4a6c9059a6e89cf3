//! A pool's hash tag (twemproxy's `hash_tag:`): two bytes that delimit the part of a key that is
//! hashed, so that related keys (`user:{42}:name`, `user:{42}:mail`) land on the same server.
//! Read from nutcracker 0.5.0's `server_pool_idx` (`src/nc_server.c`) and `conf_set_hashtag`.

use std::fmt;
use std::str::FromStr;

/// The two delimiting bytes, `{}` for instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HashTag {
    open: u8,
    close: u8,
}

impl HashTag {
    /// The bytes of `key` that are hashed, as nutcracker picks them: after the *first* opening
    /// byte, up to the first closing byte after it, if at least one byte lies between them;
    /// otherwise (no opening byte, no closing byte after it, or an empty tag such as `{}`) the
    /// whole key.
    pub fn hashed_part<'k>(&self, key: &'k [u8]) -> &'k [u8] {
        let Some(open) = key.iter().position(|&b| b == self.open) else { return key };
        let inside = &key[open + 1..];
        match inside.iter().position(|&b| b == self.close) {
            Some(len) if len > 0 => &inside[..len],
            _ => key,
        }
    }
}

impl FromStr for HashTag {
    type Err = String;

    /// Exactly two bytes, as twemproxy checks it (`value->len != 2`): "{}", "[]", "::".
    fn from_str(text: &str) -> Result<Self, String> {
        match *text.as_bytes() {
            [open, close] => Ok(HashTag { open, close }),
            _ => Err(format!(
                "a hash tag is exactly two characters (bytes), the opening and the closing one, like \"{{}}\", not {text:?} ({} bytes)",
                text.len()
            )),
        }
    }
}

impl fmt::Display for HashTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&[self.open, self.close]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part<'k>(tag: &str, key: &'k str) -> &'k str {
        let tag: HashTag = tag.parse().unwrap();
        std::str::from_utf8(tag.hashed_part(key.as_bytes())).unwrap()
    }

    // Expected parts read from server_pool_idx: tag_start = first `open`; tag_end = first
    // `close` after it; used only when tag_end - tag_start > 1.
    #[test]
    fn the_hashed_part_is_what_nutcracker_hashes() {
        assert_eq!(part("{}", "user:{42}:name"), "42");
        assert_eq!(part("{}", "{42}"), "42");
        assert_eq!(part("{}", "plain"), "plain");
        assert_eq!(part("{}", "no:{end"), "no:{end"); // no closing byte
        assert_eq!(part("{}", "no}:{end"), "no}:{end"); // a closing byte only before the opening one
        assert_eq!(part("{}", "empty:{}:tag"), "empty:{}:tag"); // nothing between
        assert_eq!(part("{}", "a{}b{c}"), "a{}b{c}"); // only the first opening byte counts
        assert_eq!(part("{}", "a{b{c}d}"), "b{c"); // the first closing byte after it
        assert_eq!(part("{}", "x{y}z{w}"), "y");
        assert_eq!(part("::", "a:b:c"), "b"); // the same byte opens and closes
        assert_eq!(part("::", "a::c"), "a::c");
        assert_eq!(part("[]", "[k]"), "k");
    }

    #[test]
    fn a_tag_is_exactly_two_bytes() {
        assert_eq!("{}".parse::<HashTag>().unwrap().to_string(), "{}");
        for bad in ["", "{", "{}}", "abc"] {
            let error = bad.parse::<HashTag>().unwrap_err();
            assert!(error.contains("exactly two"), "{error}");
        }
        // twemproxy counts bytes: "é" is two of them (0xc3 0xa9), "é}" three.
        assert!("é".parse::<HashTag>().is_ok());
        assert!("é}".parse::<HashTag>().is_err());
    }
}
