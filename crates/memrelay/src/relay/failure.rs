//! Why an exchange with a server failed, shared by both engines: says where the failure came
//! from for the client's `SERVER_ERROR` line. All of these may succeed on retry.

use std::fmt;
use std::io;

use memrelay_protocol::Status;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Connection refused or not yet retried after an earlier failure.
    Unavailable,
    Timeout,
    /// The server closed or reset the connection.
    Reset,
    /// The server sent something that is not a memcached reply.
    BadReply,
    /// The server is down (health): failed at once, without trying it.
    Down,
}

impl Failure {
    pub fn reason(self) -> &'static str {
        match self {
            Failure::Unavailable => "server unavailable",
            Failure::Timeout => "server timeout",
            Failure::Reset => "server closed the connection",
            Failure::BadReply => "invalid reply from server",
            Failure::Down => "server down",
        }
    }

    pub fn from_io(error: &io::Error) -> Failure {
        match error.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Failure::Timeout,
            io::ErrorKind::ConnectionRefused => Failure::Unavailable,
            _ => Failure::Reset,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

/// Which target's reply a replicated request relays: the first failure in target order (a
/// connection failure, or a server's own failure reply such as NOT_STORED), otherwise the
/// first target's success reply. `results` gives, per target, its reply status or its failure.
pub fn pick_reply(results: impl Iterator<Item = Result<Status, Failure>>) -> Option<(usize, Result<Status, Failure>)> {
    let mut first_success = None;
    for (i, result) in results.enumerate() {
        match result {
            Err(_) => return Some((i, result)),
            Ok(status) if !status.is_success() => return Some((i, result)),
            Ok(_) => {
                first_success.get_or_insert((i, result));
            }
        }
    }
    first_success
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_succeed_relays_the_first() {
        let results = [Ok(Status::Stored), Ok(Status::Stored)];
        assert_eq!(pick_reply(results.into_iter()), Some((0, Ok(Status::Stored))));
    }

    #[test]
    fn first_failure_wins() {
        let results = [Ok(Status::Stored), Ok(Status::NotStored), Err(Failure::Timeout)];
        assert_eq!(pick_reply(results.into_iter()), Some((1, Ok(Status::NotStored))));
        let results = [Ok(Status::Stored), Err(Failure::Reset), Ok(Status::NotStored)];
        assert_eq!(pick_reply(results.into_iter()), Some((1, Err(Failure::Reset))));
    }
}
