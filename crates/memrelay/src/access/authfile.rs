//! The users of memcached's ASCII authentication (`memcached -Y FILE`): one `user:password` per
//! line, the user everything before the first `:`, the password everything after it up to the
//! line's end (`\r` or `\n`; it may hold `:` and spaces). Read as memcached 1.6's
//! `authfile_load` reads it, so a file memcached takes means the same here; where memcached is
//! silent about a problem memrelay refuses the file instead (a line too long, which memcached
//! cuts at 255 bytes). memcached ignores the users past its 8th; memrelay takes up to
//! [`MAX_USERS`].
//!
//! memcached loads lines no login can match, because a login sends the user and the password
//! as two space-separated words: an empty user (`:pw`), an empty password (`alice:`), a password
//! with a space (`bob:two words`). memrelay loads them too (so the file means the same) and
//! names them in a warning ([`Users::unusable`]).

use std::path::Path;

/// memcached's `MAX_ENTRY_LEN` less the `\0` `fgets` keeps room for: a longer line is cut there
/// by memcached and refused here.
pub const MAX_LINE_LEN: usize = 255;
/// More users than any auth file should hold (memcached stops at 8): a bound on what a reload
/// reads into memory.
pub const MAX_USERS: usize = 100_000;

/// The users an auth file lists, in its order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Users {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Users {
    /// Reads the file at `path` (the error names it and the line).
    pub fn load(path: &Path) -> Result<Users, String> {
        let text = crate::own_files::read(path, crate::own_files::MAX_SETTINGS_FILE)
            .map_err(|e| format!("auth file {}: {e}", path.display()))?;
        Users::parse(&text).map_err(|e| format!("auth file {}: {e}", path.display()))
    }

    /// Reads an auth file's bytes. A line without `:` (an empty one too) is refused, as memcached
    /// refuses the whole file for it (`AUTHFILE_MALFORMED`).
    pub fn parse(text: &[u8]) -> Result<Users, String> {
        let mut entries = Vec::new();
        let mut rest = text;
        let mut number = 0;
        while !rest.is_empty() {
            number += 1;
            let end = rest.iter().position(|&b| b == b'\n').map_or(rest.len(), |n| n + 1);
            let (line, tail) = rest.split_at(end);
            rest = tail;
            if line.len() > MAX_LINE_LEN {
                return Err(format!("line {number} is longer than {MAX_LINE_LEN} bytes (memcached would cut it)"));
            }
            // memcached reads the user up to the first ':' but stops at a NUL (a C string).
            let Some(colon) = line.iter().take_while(|&&b| b != 0).position(|&b| b == b':') else {
                return Err(format!("line {number} is not `user:password`"));
            };
            let user = &line[..colon];
            let after = &line[colon + 1..];
            let password = &after[..after.iter().position(|&b| matches!(b, b'\n' | b'\r' | 0)).unwrap_or(after.len())];
            if entries.len() == MAX_USERS {
                return Err(format!("more than {MAX_USERS} users"));
            }
            entries.push((user.to_vec(), password.to_vec()));
        }
        Ok(Users { entries })
    }

    /// The user `user` is, when `password` is theirs (memcached's `authfile_check`: both compared
    /// whole, the first matching line wins).
    pub fn check(&self, user: &[u8], password: &[u8]) -> Option<&[u8]> {
        self.entries
            .iter()
            .find(|(u, p)| constant_time_eq(u, user) & constant_time_eq(p, password))
            .map(|(u, _)| &u[..])
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries no login can ever match, each as a warning (an empty user or password, a
    /// space in either: memcached's login is `user password`, two space-separated words).
    pub fn unusable(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        for (number, (user, password)) in self.entries.iter().enumerate() {
            let why = if user.is_empty() {
                "its user is empty"
            } else if password.is_empty() {
                "its password is empty"
            } else if user.contains(&b' ') || password.contains(&b' ') {
                "it holds a space (a login is two space-separated words)"
            } else {
                continue;
            };
            warnings.push(format!(
                "entry {} ({}) can never log in, as with memcached -Y: {why}",
                number + 1,
                user.escape_ascii()
            ));
        }
        warnings
    }

    /// The user names, in the file's order.
    pub fn names(&self) -> impl Iterator<Item = &[u8]> {
        self.entries.iter().map(|(u, _)| &u[..])
    }
}

/// Equal bytes, compared in time that depends on the lengths only (memcached's `safe_memcmp`),
/// so a password is not guessed byte by byte from response times.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_user_colon_password_as_memcached_reads_them() {
        let users = Users::parse(b"alice:secret\nbob:pa:ss word\r\ncarol:\nlast:nonewline").unwrap();
        assert_eq!(users.len(), 4);
        assert_eq!(users.check(b"alice", b"secret"), Some(&b"alice"[..]));
        // The password runs to the end of the line: colons and spaces are part of it.
        assert_eq!(users.check(b"bob", b"pa:ss word"), Some(&b"bob"[..]));
        assert_eq!(users.check(b"carol", b""), Some(&b"carol"[..]));
        assert_eq!(users.check(b"last", b"nonewline"), Some(&b"last"[..]));
        assert_eq!(users.check(b"alice", b"secre"), None);
        assert_eq!(users.check(b"alice", b"secret "), None);
        assert_eq!(users.check(b"bob", b"pa"), None);
        assert_eq!(users.names().collect::<Vec<_>>(), [&b"alice"[..], b"bob", b"carol", b"last"]);
        // Entries memcached loads but no login matches are named.
        let warnings = users.unusable();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("entry 2 (bob)") && warnings[0].contains("space"), "{warnings:?}");
        assert!(warnings[1].contains("entry 3 (carol)") && warnings[1].contains("empty"), "{warnings:?}");
        assert!(Users::parse(b":pw\n").unwrap().unusable()[0].contains("user is empty"));
    }

    #[test]
    fn malformed_files_are_refused_with_the_line() {
        assert!(Users::parse(b"alice:x\n\nbob:y\n").unwrap_err().contains("line 2"));
        assert!(Users::parse(b"alice:x\nnocolon\n").unwrap_err().contains("line 2"));
        assert!(Users::parse(b"al\0ice:x\n").unwrap_err().contains("line 1"));
        let long = format!("u:{}\n", "p".repeat(MAX_LINE_LEN));
        assert!(Users::parse(long.as_bytes()).unwrap_err().contains("longer than"));
        assert!(Users::parse(b"").unwrap().is_empty());
    }
}
