//! memcached's ASCII authentication, as a client of `memcached -Y` speaks it: before anything
//! else the client sends `set <any key> <flags> <exptime> <n>\r\n<user> <password>\r\n` and is
//! answered `STORED` (in) or `CLIENT_ERROR authentication failure`; every other request of an
//! unauthenticated connection is answered `CLIENT_ERROR unauthenticated`. Read exactly as
//! memcached 1.6.18's `try_read_command_asciiauth` reads it (the block's first two space-separated
//! words are the user and the password) (the installed memcached is the
//! reference of the tests), with one bound memcached 1.6.18 lacks and later versions add: a
//! token over 16 KiB is refused (`CLIENT_ERROR auth token too long`) instead of buffered.
//!
//! This module only reads the attempt: the password is checked by the caller, after the
//! [`super::throttle`] has decided whether this address may have one checked at all.

use memrelay_protocol::safe_strtoul;

/// The longest `user password` token taken (later memcached's `MAX_AUTH_REQ_LEN`).
pub const MAX_TOKEN_LEN: u32 = 16384;
/// A line without a newline past this many bytes closes the connection (memcached's 2048).
const MAX_LINE: usize = 2048;

pub const STORED: &str = "STORED";
pub const UNAUTHENTICATED: &str = "unauthenticated";
pub const FAILURE: &str = "authentication failure";
pub const TOO_LONG: &str = "auth token too long";
pub const BAD_TERMINATION: &str = "bad command line termination";
pub const BAD_FORMAT: &str = "bad authentication token format";

/// What the start of an unauthenticated connection's bytes hold.
#[derive(Debug, PartialEq, Eq)]
pub enum Login<'a> {
    /// Not enough bytes to decide.
    Wait,
    /// A user and password to check (answered [`STORED`] or `CLIENT_ERROR` [`FAILURE`]); consume
    /// `consumed` bytes.
    Credentials { user: &'a [u8], password: &'a [u8], consumed: usize },
    /// Answer `CLIENT_ERROR <reason>` (no password to check), consume `consumed` bytes.
    Refuse { reason: &'static str, consumed: usize },
    /// Junk without a newline: close the connection (memcached does).
    Close,
}

/// Reads one authentication attempt (or whatever else the client sent) from `pending`.
pub fn login(pending: &[u8]) -> Login<'_> {
    if pending.len() < 2 {
        return Login::Wait;
    }
    let Some(newline) = pending.iter().position(|&b| b == b'\n') else {
        return if pending.len() > MAX_LINE { Login::Close } else { Login::Wait };
    };
    let line_len = newline + 1;
    let refuse = |reason, consumed| Login::Refuse { reason, consumed };
    // memcached tokenizes the line as a C string (a NUL ends it) with its `\r` left in.
    let line = &pending[..newline];
    let line = &line[..line.iter().position(|&b| b == 0).unwrap_or(line.len())];
    let tokens: Vec<&[u8]> = line.split(|&b| b == b' ').filter(|t| !t.is_empty()).take(5).collect();
    let size = match tokens[..] {
        [b"set", _, _, _, size] => safe_strtoul(size),
        _ => None,
    };
    let Some(size) = size else { return refuse(UNAUTHENTICATED, line_len) };
    if size > MAX_TOKEN_LEN {
        return refuse(TOO_LONG, line_len);
    }
    let block = size as usize + 2;
    let Some(data) = pending.get(line_len..line_len + block) else { return Login::Wait };
    let consumed = line_len + block;
    if !data.ends_with(b"\r\n") {
        return refuse(BAD_TERMINATION, consumed);
    }
    // memcached ends the block at its `\r\n` (and at a NUL: a C string) and reads it with the
    // command tokenizer: the user is the first space-separated word, the password the second
    // (runs of spaces are one separator; leading and trailing spaces and further words are left
    // out). Fewer than two words is a bad format; an empty user or password can never be sent.
    let token = &data[..block - 2];
    let token = &token[..token.iter().position(|&b| b == 0).unwrap_or(token.len())];
    let mut words = token.split(|&b| b == b' ').filter(|w| !w.is_empty());
    let (Some(user), Some(password)) = (words.next(), words.next()) else { return refuse(BAD_FORMAT, consumed) };
    Login::Credentials { user, password, consumed }
}

#[cfg(test)]
mod tests {
    use super::super::authfile::Users;
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Reply {
        Stored,
        ClientError(&'static str),
    }

    fn users() -> Users {
        Users::parse(b"alice:secret\nbob:two-words\nops:ops pw\nempty:\n:nouser\n").unwrap()
    }

    fn answer(bytes: &[u8]) -> (Reply, usize, Option<Vec<u8>>) {
        let users = users();
        match login(bytes) {
            Login::Credentials { user, password, consumed } => match users.check(user, password) {
                Some(user) => (Reply::Stored, consumed, Some(user.to_vec())),
                None => (Reply::ClientError(FAILURE), consumed, None),
            },
            Login::Refuse { reason, consumed } => (Reply::ClientError(reason), consumed, None),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_set_carrying_user_and_password_logs_in() {
        let request = b"set auth 0 0 12\r\nalice secret\r\nget a\r\n";
        assert_eq!(answer(request), (Reply::Stored, 31, Some(b"alice".to_vec())));
        // The user and password are the block's first two space-separated words.
        assert_eq!(answer(b"set x 1 2 13\r\nbob two-words\r\n").2, Some(b"bob".to_vec()));
        assert_eq!(answer(b"set x 0 0 13\r\nalice  secret\r\n").2, Some(b"alice".to_vec()));
        assert_eq!(answer(b"set x 0 0 14\r\n alice secret \r\n").2, Some(b"alice".to_vec()));
        assert_eq!(answer(b"set x 0 0 18\r\nalice secret extra\r\n").2, Some(b"alice".to_vec()));
        assert_eq!(answer(b"set x 0 0 14\r\nalice secret\0x\r\n").2, Some(b"alice".to_vec()));
        // Extra tokens (noreply) and a bare `\n` line end are read as memcached reads them.
        assert_eq!(answer(b"set x 0 0 12 noreply\nalice secret\r\n").0, Reply::Stored);
    }

    #[test]
    fn everything_else_gets_memcacheds_answers() {
        let unauthenticated = Reply::ClientError(UNAUTHENTICATED);
        assert_eq!(answer(b"get a\r\n"), (unauthenticated, 7, None));
        assert_eq!(answer(b"set a 0 0\r\n"), (unauthenticated, 11, None));
        assert_eq!(answer(b"sets a 0 0 1\r\n").0, unauthenticated);
        assert_eq!(answer(b"set a 0 0 x\r\n").0, unauthenticated);
        assert_eq!(answer(b"set a 0 0 12\r\nalice secreT\r\n"), (Reply::ClientError(FAILURE), 28, None));
        assert_eq!(answer(b"set a 0 0 11\r\nalicesecret\r\n").0, Reply::ClientError(BAD_FORMAT));
        assert_eq!(answer(b"set a 0 0 3\r\na b\n\n").0, Reply::ClientError(BAD_TERMINATION));
        // A password with a space, an empty password or user: memcached's file holds them, its
        // tokenizer never sends them.
        assert_eq!(answer(b"set a 0 0 10\r\nops ops pw\r\n").0, Reply::ClientError(FAILURE));
        assert_eq!(answer(b"set a 0 0 6\r\nempty \r\n").0, Reply::ClientError(BAD_FORMAT));
        assert_eq!(answer(b"set a 0 0 7\r\n nouser\r\n").0, Reply::ClientError(BAD_FORMAT));
        assert_eq!(answer(b"set a 0 0 3\r\n   \r\n").0, Reply::ClientError(BAD_FORMAT));
        assert_eq!(answer(b"set a 0 0 99999\r\n"), (Reply::ClientError(TOO_LONG), 17, None));
    }

    #[test]
    fn partial_input_waits_and_junk_closes() {
        assert_eq!(login(b"s"), Login::Wait);
        assert_eq!(login(b"set a 0 0 12\r\nalice"), Login::Wait);
        assert_eq!(login(&[b'x'; 2049]), Login::Close);
        assert_eq!(login(&[b'x'; 2048]), Login::Wait);
    }
}
