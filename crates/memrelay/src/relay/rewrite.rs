//! Request rewrites: the bytes a target server gets for a request, when they are not the
//! request as it arrived. `noreply` is removed (the servers must answer so that the client's next
//! request sees the write), a split multi-get becomes one sub-get per server, and a `cas` that the
//! primary stored is copied to the other replicas as a plain `set` (the token means nothing there).

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
    /// The bytes for `server`: the request as it arrived, or a rewrite composed into `scratch`.
    pub fn bytes_for<'s>(&'s self, server: usize, scratch: &'s mut Vec<u8>) -> &'s [u8] {
        let request = self.request;
        if self.copying {
            scratch.clear();
            let data = &self.input[request.data.clone()];
            let key = request.key(self.input);
            compose::storage(scratch, Command::Set, key, request.flags, request.exptime, data, 0, false);
            scratch
        } else if self.plan == Plan::Split {
            scratch.clear();
            let keys = request.keys(self.input).zip(self.key_owner).filter(|(_, &owner)| owner == server);
            compose::retrieval(scratch, request.command, keys.map(|(key, _)| key));
            scratch
        } else if request.noreply && without_noreply(request, self.input, scratch) {
            scratch
        } else {
            self.input
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

/// Writes `request` without `noreply` into `out` (cleared first): the servers must answer so
/// that the client's next request sees the write. False when the command has nothing to rewrite.
pub fn without_noreply(request: &Request, input: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    let key = request.key(input);
    match request.command {
        c if c.is_storage() => {
            let data = &input[request.data.clone()];
            compose::storage(out, c, key, request.flags, request.exptime, data, request.number, false)
        }
        Command::Incr | Command::Decr => compose::keyed(out, request.command, key, Some(request.number as i64), false),
        Command::Touch => compose::keyed(out, Command::Touch, key, Some(request.exptime), false),
        Command::Delete => compose::keyed(out, Command::Delete, key, None, false),
        Command::FlushAll => {
            let delay = (request.number > 0).then_some(request.number);
            compose::keyless(out, Command::FlushAll, delay, false)
        }
        _ => return false,
    }
    true
}
