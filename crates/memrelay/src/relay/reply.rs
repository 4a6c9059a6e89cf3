//! The reply rules: how the client's reply is built once every target of its request has
//! answered, for both engines. A replicated request relays the first failure in target order or
//! else the first success ([`pick_reply`]); a split multi-get relays a failing target's error or
//! else merges the `VALUE` blocks back into key order with one `END` ([`coalesce`]); a failed
//! exchange becomes `SERVER_ERROR <reason> (<server>)`; a touching read the primary answered
//! first relays the primary's answer; `stats` groups are gathered ([`super::stats`]); a refused
//! value is answered `SERVER_ERROR object too large for cache`; `noreply` requests get nothing,
//! and quiet meta requests nothing but what quiet mode still sends.

use std::io::Write;
use std::net::SocketAddr;

use memrelay_protocol::request::TOO_LARGE;
use memrelay_protocol::{compose, value_block, Command, ErrorReply, Reply, Request, Status};

use crate::measure::metrics::Outcome;
use crate::relay::pick::{pick_reply, pick_reply_under, Picked};
use crate::routing::Plan;
use crate::settings::WritePolicy;
use crate::upstream::failure::Failure;

/// How one target's exchange went.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Answer<'a> {
    /// Its parsed reply and the bytes that start with it.
    Replied(Reply, &'a [u8]),
    Failed(Failure),
}

/// A request whose targets have all answered.
pub(crate) struct Finished<'a> {
    pub request: &'a Request,
    pub input: &'a [u8],
    pub plan: Plan,
    pub targets: &'a [usize],
    pub key_owner: &'a [usize],
    /// The answer is a warm read's ([`super::warm`]): a replica's meta reply to a text `get`.
    pub warm_read: bool,
    /// When a keyed write succeeds.
    pub policy: WritePolicy,
}

impl Finished<'_> {
    /// Writes the client's reply to `out` (cleared first) and says what it held, and where the
    /// reply is: in `out`, or a target's answer relayed as it came ([`ReplyBytes::Relayed`],
    /// not copied). `answer(i)` is target i's answer; `addr(s)` names server s; `cursors` is
    /// scratch.
    pub fn reply<'b>(
        &self,
        answer: impl Fn(usize) -> Answer<'b>,
        addr: impl Fn(usize) -> SocketAddr,
        cursors: &mut Vec<usize>,
        out: &mut Vec<u8>,
    ) -> (Outcome, ReplyBytes) {
        out.clear();
        let mut relayed = None;
        let keys = self.request.key_count as u32;
        let mut outcome = Outcome { keys, ..Outcome::default() };
        if self.warm_read {
            let replied = match answer(0) {
                Answer::Replied(reply, bytes) => Some((reply, bytes)),
                Answer::Failed(_) => None,
            };
            let hit =
                super::warm::client_reply(self.request.key(self.input), replied.as_ref().map(|(r, b)| (r, *b)), out);
            (outcome.hits, outcome.misses) = (u32::from(hit), u32::from(!hit));
            return (outcome, ReplyBytes::Composed);
        }
        let chosen = if self.plan == Plan::Split {
            // The first target answering keys whose reply is an error or whose exchange failed,
            // if any (a server that only touched keys for a `gat` does not fail it).
            let answers_keys = |i: usize| self.key_owner.contains(&self.targets[i]);
            (0..self.targets.len()).find(|&i| match answer(i) {
                Answer::Replied(reply, _) => reply.status.is_error() && answers_keys(i),
                Answer::Failed(_) => answers_keys(i),
            })
        } else {
            let statuses = (0..self.targets.len()).map(|i| match answer(i) {
                Answer::Replied(reply, _) => Ok(reply.status),
                Answer::Failed(failure) => Err(failure),
            });
            if self.plan == Plan::PrimaryFirst && is_touching_read(self.request.command) {
                // The replicas were only touched: the primary's answer is the reply.
                Some(0)
            } else if self.policy.repairs() && self.request.command.is_keyed_write() {
                let statuses: Vec<_> = statuses.collect();
                match pick_reply_under(self.policy, &statuses) {
                    Picked::Target(i) => Some(i),
                    Picked::TooFew => {
                        too_few(self.request.command, statuses.len(), &statuses, out);
                        outcome.error = true;
                        if self.request.noreply {
                            out.clear();
                        }
                        return (outcome, ReplyBytes::Composed);
                    }
                }
            } else {
                pick_reply(statuses).map(|(i, _)| i)
            }
        };
        let mut status = None;
        match chosen.map(|i| (i, answer(i))) {
            Some((_, Answer::Replied(reply, _)))
                if self.request.command == Command::Stats && reply.status == Status::End =>
            {
                // Every server answered its list: one list of them all.
                let bodies = (0..self.targets.len()).filter_map(|i| match answer(i) {
                    Answer::Replied(reply, bytes) => Some(&bytes[..reply.body_end]),
                    Answer::Failed(_) => None,
                });
                super::stats::gather(self.request.key(self.input), bodies, out);
            }
            Some((i, Answer::Replied(reply, _))) => {
                status = Some(reply.status);
                relayed = Some(ReplyBytes::Relayed { target: i, len: reply.answer_len() });
                outcome.error = reply.status.is_error();
                if self.request.command.is_retrieval() && reply.status == Status::End {
                    outcome.hits = reply.items;
                    outcome.misses = keys.saturating_sub(reply.items);
                } else if self.request.command == Command::MetaGet {
                    outcome.hits = u32::from(matches!(reply.status, Status::Value | Status::Done));
                    outcome.misses = u32::from(reply.status == Status::Miss);
                }
            }
            Some((i, Answer::Failed(failure))) => {
                server_error(failure, addr(self.targets[i]), out);
                outcome.error = true;
            }
            None if self.plan == Plan::Split => {
                let servers = self.targets.iter().copied().max().map_or(0, |s| s + 1);
                cursors.clear();
                cursors.resize(servers, 0);
                let body = |server: usize| {
                    let i = self.targets.iter().position(|&t| t == server).expect("every owner is a target");
                    match answer(i) {
                        Answer::Replied(reply, bytes) => &bytes[..reply.body_end],
                        Answer::Failed(_) => &[][..],
                    }
                };
                let hits = coalesce(self.request.keys(self.input), self.key_owner, body, cursors, out);
                out.extend_from_slice(compose::END);
                outcome.hits = hits;
                outcome.misses = keys - hits;
            }
            None => {}
        }
        if self.request.too_large.is_some() {
            // The servers were asked to remove the old value; the reply is the refusal.
            relayed = None;
            out.clear();
            ErrorReply::Server(TOO_LARGE).write_to(out);
            outcome.error = true;
            status = Some(Status::ServerError);
        }
        let len = match relayed {
            Some(ReplyBytes::Relayed { len, .. }) => len,
            _ => out.len(),
        };
        if len > crate::access::max_reply_bytes() {
            // `--max-reply-bytes`: one request may not make memrelay send more than this.
            relayed = None;
            out.clear();
            ErrorReply::Server(REPLY_TOO_LARGE).write_to(out);
            outcome.error = true;
            status = Some(Status::ServerError);
            let what = format!("{} of {} keys", self.request.command.name(), self.request.key_count);
            crate::access::count_denial(crate::access::Reason::ReplyTooLarge, "a client", &what);
        }
        if self.request.noreply || status.is_some_and(|s| self.request.quiet_drops(s)) {
            relayed = None;
            out.clear();
        }
        (outcome, relayed.unwrap_or(ReplyBytes::Composed))
    }
}

/// Where a finished request's reply is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplyBytes {
    /// In the buffer the reply was composed into.
    Composed,
    /// The first `len` bytes of target `target`'s answer, exactly as it came: an engine sends
    /// them from where they are rather than copying a large value once more.
    Relayed { target: usize, len: usize },
}

impl ReplyBytes {
    /// Appends relayed bytes to `out` (the composed reply is there already).
    pub fn copy_into<'b>(self, answer: impl Fn(usize) -> Answer<'b>, out: &mut Vec<u8>) {
        if let ReplyBytes::Relayed { target, len } = self {
            if let Answer::Replied(_, bytes) = answer(target) {
                out.extend_from_slice(&bytes[..len]);
            }
        }
    }
}

/// What a reply over `--max-reply-bytes` becomes.
pub(crate) const REPLY_TOO_LARGE: &str = "reply too large";

/// Reads whose copies only touched the replicas (`gat`, `gats`, `mg` with `T`).
fn is_touching_read(command: Command) -> bool {
    matches!(command, Command::Gat | Command::Gats | Command::MetaGet)
}

/// Whether the primary did what a [`Plan::PrimaryFirst`] request asked, so the copies follow: a
/// value stored, an item found, a meta command done.
pub(crate) fn primary_took(reply: &Reply) -> bool {
    match reply.status {
        // `Noop`: a quiet request the server did and said nothing about.
        Status::Stored | Status::Done | Status::Value | Status::Noop => true,
        Status::End => reply.items > 0,
        _ => false,
    }
}

/// What a keyed write answers when too few replicas took it for the policy: what the clients
/// handle as an ordinary refusal where one exists (`NOT_STORED`, meta `NS`: every client
/// library tested keeps its connection and its server on it, see tests/clients/REPLIES.md);
/// otherwise `SERVER_ERROR`. Nothing for `noreply` (the caller clears it).
fn too_few(command: Command, targets: usize, statuses: &[Result<Status, Failure>], out: &mut Vec<u8>) {
    out.clear();
    let answered = statuses.iter().filter(|s| s.is_ok()).count();
    match command {
        c if c.is_storage() => out.extend_from_slice(b"NOT_STORED\r\n"),
        Command::MetaSet => out.extend_from_slice(b"NS\r\n"),
        _ => {
            let _ = write!(out, "SERVER_ERROR too few replicas answered ({answered} of {targets})\r\n");
        }
    }
}

/// `SERVER_ERROR <reason> (<server>)`; formatting only on the failure path.
pub(crate) fn server_error(failure: Failure, addr: SocketAddr, out: &mut Vec<u8>) {
    out.clear();
    let _ = write!(out, "SERVER_ERROR {} ({addr})\r\n", failure.reason());
}

/// Appends to `out`, in the order `keys` were asked for, the `VALUE` block each server returned
/// for it. `body(s)` is server s's reply without its `END`; `cursors` (one per server, zeroed by
/// the caller) track how far each body has been consumed. A server answers its keys in the
/// order asked and leaves misses out, so a key's block, if any, is at its server's cursor.
/// Returns the number of hits.
pub(crate) fn coalesce<'a>(
    keys: impl Iterator<Item = &'a [u8]>,
    key_owner: &[usize],
    body: impl Fn(usize) -> &'a [u8],
    cursors: &mut [usize],
    out: &mut Vec<u8>,
) -> u32 {
    let mut hits = 0;
    for (key, &server) in keys.zip(key_owner) {
        let rest = &body(server)[cursors[server]..];
        if let Some((key_range, len)) = value_block(rest) {
            if &rest[key_range] == key {
                out.extend_from_slice(&rest[..len]);
                cursors[server] += len;
                hits += 1;
            }
        }
    }
    hits
}

#[cfg(test)]
mod tests {
    use super::*;
    use memrelay_protocol::{parse_request, Limits, Parse};

    fn parse(line: &[u8]) -> Request {
        let Parse::Complete(request) = parse_request(line, &Limits::default()) else { panic!() };
        request
    }

    fn reply(bytes: &[u8]) -> Reply {
        let expect = if bytes.starts_with(b"VALUE") || bytes.starts_with(b"END") {
            memrelay_protocol::Expect::Values
        } else {
            memrelay_protocol::Expect::Line
        };
        match memrelay_protocol::ReplyParser::new(expect).parse(bytes) {
            Parse::Complete(reply) => reply,
            other => panic!("{other:?}"),
        }
    }

    /// The reply as the client gets it (a relayed answer copied after what was composed).
    fn reply_of<'b>(finished: &Finished, answer: impl Fn(usize) -> Answer<'b>, out: &mut Vec<u8>) -> Outcome {
        let (outcome, bytes) = finished.reply(&answer, addr, &mut Vec::new(), out);
        bytes.copy_into(answer, out);
        outcome
    }

    fn addr(server: usize) -> SocketAddr {
        format!("127.0.0.1:{}", 11211 + server).parse().unwrap()
    }

    #[test]
    fn coalesce_restores_key_order_with_misses_and_repeats() {
        // Keys a b c a over two servers: a, c on server 0; b, a on server 1. b misses.
        let keys: [&[u8]; 4] = [b"a", b"b", b"c", b"a"];
        let owner = [0, 1, 0, 1];
        let server0 = b"VALUE a 0 1\r\n1\r\nVALUE c 0 1\r\n3\r\n".as_slice();
        let server1 = b"VALUE a 0 1\r\n1\r\n".as_slice();
        let mut out = Vec::new();
        let mut cursors = [0, 0];
        let hits =
            coalesce(keys.into_iter(), &owner, |s| if s == 0 { server0 } else { server1 }, &mut cursors, &mut out);
        assert_eq!(hits, 3);
        assert_eq!(out, b"VALUE a 0 1\r\n1\r\nVALUE c 0 1\r\n3\r\nVALUE a 0 1\r\n1\r\n");
    }

    #[test]
    fn replicated_write_relays_the_first_failure_in_target_order() {
        let line = b"set k 0 0 1\r\nx\r\n";
        let request = parse(line);
        let replies: [&[u8]; 3] = [b"STORED\r\n", b"NOT_STORED\r\n", b"STORED\r\n"];
        let finished = Finished {
            request: &request,
            input: line,
            plan: Plan::Replicate,
            targets: &[2, 0, 1],
            key_owner: &[],
            warm_read: false,
            policy: WritePolicy::All,
        };
        let answer = |i: usize| Answer::Replied(reply(replies[i]), replies[i]);
        let mut out = Vec::new();
        let outcome = reply_of(&finished, answer, &mut out);
        assert_eq!(out, b"NOT_STORED\r\n");
        // NOT_STORED is the server's answer, not an error reply.
        assert!(!outcome.error);
        let failed = |i: usize| if i == 2 { Answer::Failed(Failure::Timeout) } else { answer(0) };
        reply_of(&finished, failed, &mut out);
        assert_eq!(out, b"SERVER_ERROR server timeout (127.0.0.1:11212)\r\n");
    }

    #[test]
    fn split_get_merges_in_key_order_and_noreply_is_silent() {
        let line = b"get a b c\r\n";
        let request = parse(line);
        let bodies: [&[u8]; 2] = [b"VALUE a 0 1\r\n1\r\nVALUE c 0 1\r\n3\r\nEND\r\n", b"END\r\n"];
        let finished = Finished {
            request: &request,
            input: line,
            plan: Plan::Split,
            targets: &[1, 0],
            key_owner: &[1, 0, 1],
            warm_read: false,
            policy: WritePolicy::All,
        };
        let answer = |i: usize| Answer::Replied(reply(bodies[i]), bodies[i]);
        let mut out = Vec::new();
        let outcome = reply_of(&finished, answer, &mut out);
        assert_eq!(out, b"VALUE a 0 1\r\n1\r\nVALUE c 0 1\r\n3\r\nEND\r\n");
        assert_eq!((outcome.hits, outcome.misses), (2, 1));

        let line = b"delete k noreply\r\n";
        let request = parse(line);
        let finished = Finished {
            request: &request,
            input: line,
            plan: Plan::Replicate,
            targets: &[0],
            key_owner: &[],
            warm_read: false,
            policy: WritePolicy::All,
        };
        reply_of(&finished, |_| Answer::Failed(Failure::Reset), &mut out);
        assert!(out.is_empty());
    }
}
