//! The bytes a target server gets for a request. They are always composed from the parsed
//! request (`compose::request`), never relayed as the client sent them: a server then reads
//! exactly the request memrelay parsed, so no spelling of a request (odd separators, bytes after
//! a NUL, over-long lines, signs in numbers) can make a server see a different request, or two,
//! and shift replies onto other clients sharing the connection.
//!
//! On top of that: `noreply` is always removed (the servers must answer so the connection stays
//! in step and the client's next request sees the write), a split multi-get becomes one sub-get
//! per server, and a `cas` that the primary stored is copied to the other replicas as a plain
//! `set` (the token means nothing there).

use memrelay_protocol::{compose, Command, Expect, Request};

use crate::routing::Plan;

/// What one target of a request is sent.
pub(crate) struct Outgoing<'a> {
    pub request: &'a Request,
    /// The request's bytes as they arrived (its ranges index them).
    pub input: &'a [u8],
    pub plan: Plan,
    /// The copies of a stored `cas` are under way.
    pub copying: bool,
    /// For a split: the server of each key.
    pub key_owner: &'a [usize],
}

impl Outgoing<'_> {
    /// Appends the bytes for `server` to `out`.
    pub fn compose_for(&self, server: usize, out: &mut Vec<u8>) {
        let request = self.request;
        if self.copying {
            let data = &self.input[request.data.clone()];
            let key = request.key(self.input);
            compose::storage(out, Command::Set, key, request.flags, request.exptime, data, 0, false);
        } else if self.plan == Plan::Split {
            let keys = request.keys(self.input).zip(self.key_owner).filter(|(_, &owner)| owner == server);
            compose::retrieval(out, request.command, keys.map(|(key, _)| key));
        } else {
            compose::request(out, request, self.input, false);
        }
    }

    /// The shape of the reply the target sends.
    pub fn expect(&self) -> Expect {
        if self.copying {
            Expect::Line
        } else {
            expect_for(self.request.command)
        }
    }
}

/// The shape of the reply a server sends to this command.
pub fn expect_for(command: Command) -> Expect {
    match command {
        Command::Get | Command::Gets => Expect::Values,
        Command::Stats => Expect::Stats,
        _ => Expect::Line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memrelay_protocol::{parse_request, Limits, Parse};

    fn composed(line: &[u8], plan: Plan, copying: bool, key_owner: &[usize], server: usize) -> Vec<u8> {
        let Parse::Complete(request) = parse_request(line, &Limits::default()) else { panic!("{line:?}") };
        let mut out = Vec::new();
        Outgoing { request: &request, input: line, plan, copying, key_owner }.compose_for(server, &mut out);
        out
    }

    #[test]
    fn requests_are_composed_canonically_without_noreply() {
        let cases: [(&[u8], &[u8]); 6] = [
            (b"set  k 0 0 1 noreply\r\nx\r\n", b"set k 0 0 1\r\nx\r\n"),
            (b"incr k 18446744073709551615 noreply\r\n", b"incr k 18446744073709551615\r\n"),
            (b"delete k 0\r\n", b"delete k\r\n"),
            (b"touch k -1\r\n", b"touch k -1\r\n"),
            (b"get a\0 victim\r\n", b"get a\r\n"),
            (b"flush_all 0 noreply\r\n", b"flush_all\r\n"),
        ];
        for (line, want) in cases {
            assert_eq!(composed(line, Plan::Replicate, false, &[], 0), want, "{:?}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn sub_gets_and_cas_copies() {
        assert_eq!(composed(b"get a b c\r\n", Plan::Split, false, &[1, 0, 1], 1), b"get a c\r\n");
        assert_eq!(composed(b"cas k 3 9 1 77\r\nx\r\n", Plan::Cas, true, &[], 0), b"set k 3 9 1\r\nx\r\n");
    }
}
