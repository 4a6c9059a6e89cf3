//! Why an exchange with a server failed, shared by both engines: says where the failure came
//! from for the client's `SERVER_ERROR` line. All of these may succeed on retry.

use std::fmt;
use std::io;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Connection refused or not yet retried after an earlier failure.
    Unavailable,
    Timeout,
    /// The server closed or reset the connection.
    Reset,
    /// The server sent something that is not a memcached reply.
    BadReply,
    /// TLS to the server failed: its certificate did not verify, it does not speak TLS, or it
    /// ended the session with an alert ([`crate::upstream::tls`]; the reason is logged).
    Tls,
    /// The server is down (health): failed at once, without trying it.
    Down,
    /// The server is being brought up to date ([`crate::upstream::repair_set`]): a write is not sent to it
    /// but added to its repair set.
    Repairing,
    /// memrelay itself ran out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) while
    /// reaching the server: never the server's failure.
    Local,
    /// A reply that must be held whole grew past the most memrelay holds
    /// ([`crate::relay::stream`]): memrelay's refusal, not the server's failure.
    TooLarge,
    /// The client stopped taking the reply streaming to it (or left): the server's reply was cut
    /// off on memrelay's side, not the server's failure.
    ClientGone,
    /// Another server's part of the same merged reply failed ([`crate::relay::merge`]): this
    /// server's part, still arriving, was cut off with it on memrelay's side.
    Cut,
}

impl Failure {
    pub fn reason(self) -> &'static str {
        match self {
            Failure::Unavailable => "server unavailable",
            Failure::Timeout => "server timeout",
            Failure::Reset => "server closed the connection",
            Failure::BadReply => "invalid reply from server",
            Failure::Tls => "server TLS failed",
            Failure::Down => "server down",
            Failure::Repairing => "server being repaired",
            Failure::Local => "memrelay out of descriptors or memory",
            Failure::TooLarge => "reply too large",
            Failure::ClientGone => "client stopped reading",
            Failure::Cut => "reply cut off with another server's",
        }
    }

    pub fn from_io(error: &io::Error) -> Failure {
        if matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)) {
            return Failure::Local;
        }
        match error.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Failure::Timeout,
            io::ErrorKind::ConnectionRefused => Failure::Unavailable,
            _ => Failure::Reset,
        }
    }
}

impl Failure {
    /// Whether this counts against the server's health: not when nothing was sent to it (down,
    /// being repaired), when memrelay itself lacked the resources to reach it or refused to hold
    /// its reply, or when the client cut the reply off.
    pub fn is_the_servers(self) -> bool {
        !matches!(
            self,
            Failure::Down
                | Failure::Repairing
                | Failure::Local
                | Failure::TooLarge
                | Failure::ClientGone
                | Failure::Cut
        )
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}
