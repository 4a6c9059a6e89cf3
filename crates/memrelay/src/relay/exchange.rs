//! The per-request policy, once for both engines: a pure state machine that says, for one
//! client request, which servers to ask in each round and when the answers are enough to build
//! the client's reply. The engines only schedule it: the pool worker loops over the steps with
//! its blocking connections, the evented loop calls [`Exchange::next`] when a round's last
//! answer arrives, the fuzzing entry point asks [`Exchange::start`] where the bytes go.
//!
//! ```text
//!  start ──▶ Send{0} ──answers──▶ next ──▶ Send{0}   failover to the key's next replica (first round only)
//!    │                              │      Send{0}   a split read routed again without the servers that failed it
//!    │ (local)                      │      Send{0}   a win-flag mg asked again of the primary  (last round)
//!    ▼                              │      Send{0}   a cold server's miss asked of a replica   (last round)
//!  Local                            │      Send{1}   the copies after the primary took it     (last round)
//!                                   ▼
//!                                 Finish ──▶ finish: repair marks, the reply rules; write_back
//! ```
//!
//! Decisions both engines now share (docs/ARCHITECTURE.md explains each):
//! - Failover (`--failover`, or a repairing write policy) walks replicas only in the request's
//!   own first round; a win-flag re-ask, a warm read or the copies that fail are answered from
//!   what failed (`SERVER_ERROR`, or the cold server's miss).
//! - A touching read (`gat`, `gats`, `mg … T`) sent to the primary first does not fail over: the
//!   primary's answer is the reply, and a failure is `SERVER_ERROR`.
//! - Every round has its own deadline (the server timeout from when it is sent), the copies too.
//! - The gate: a keyed write under a repairing policy is not sent to a server being repaired (the
//!   repair thread is its only writer until it is up to date) and a down server is not asked;
//!   neither counts as that server's failure, and the key of a write the gate stopped is marked
//!   for repair, a warm read's write-back included.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use memrelay_protocol::{Command, Request, Status};

use super::merge::Merge;
use super::reply::{primary_took, Answer, Finished, ReplyBytes};
use super::rewrite::{Outgoing, Stage};
use super::{next_failover, warm, win};
use crate::measure::metrics::Outcome;
use crate::routing::{placement_key, Plan, RouteBuf, Router};
use crate::settings::WritePolicy;
use crate::upstream::failure::Failure;
use crate::upstream::Servers;

/// What the engine does next for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// memrelay answers it itself.
    Local,
    /// Send the request to `targets()[from..]` (the answers of the targets before `from` are
    /// kept), each through [`Exchange::gate`], and wait for their answers until `deadline`.
    Send { from: usize, deadline: Instant },
    /// Every answer needed is in: [`Exchange::finish`].
    Finish,
}

/// Which round the answers in hand are from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Round {
    /// The request's own exchange, or a failover or re-route of it.
    First,
    /// A re-ask, a warm read or the copies: their answers finish the request.
    Last,
}

/// One request's way through the servers. Reused from request to request (its buffers stay).
#[derive(Debug)]
pub(crate) struct Exchange {
    plan: Plan,
    route: RouteBuf,
    /// Scratch for a split read routed again.
    reroute: RouteBuf,
    stage: Stage,
    round: Round,
    /// The key that places the request (base64 decoded), computed once.
    key: Vec<u8>,
    /// Its write policy, computed once; `keyed_write` whether the request is a write it governs.
    policy: WritePolicy,
    keyed_write: bool,
    /// The read round robin's number when the request was routed.
    rr: usize,
    failover: bool,
    /// How long a server has to answer one round.
    timeout: Duration,
    /// Failover retries so far, and the server the walk starts from.
    attempts: usize,
    first: usize,
    /// The servers a split read was routed again without (they failed it).
    avoided: Vec<usize>,
    /// A warm read under way: the cold server its miss came from.
    warming: Option<usize>,
    replicas: Vec<usize>,
    /// Bytes of the answer went to the client as they arrived ([`super::stream`]): the
    /// answer is the reply, there is no further round.
    streamed: bool,
    /// Gutter servers stand in for down ones ([`super::gutter`]): the TTL their writes get,
    /// and which targets they are.
    gutter_ttl: Option<u32>,
    gutter_servers: Vec<usize>,
}

impl Default for Exchange {
    fn default() -> Exchange {
        Exchange {
            plan: Plan::Local,
            route: RouteBuf::default(),
            reroute: RouteBuf::default(),
            stage: Stage::Request,
            round: Round::First,
            key: Vec::new(),
            policy: WritePolicy::All,
            keyed_write: false,
            rr: 0,
            failover: false,
            timeout: Duration::ZERO,
            attempts: 0,
            first: 0,
            avoided: Vec::new(),
            warming: None,
            replicas: Vec::new(),
            streamed: false,
            gutter_ttl: None,
            gutter_servers: Vec::new(),
        }
    }
}

impl Exchange {
    /// Routes `request` (whose bytes are `input`; `rr` the read round robin's number) at `now`
    /// and says the first step. `failover`: failed reads try the key's next replica; `timeout`:
    /// how long the servers have to answer each round.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        &mut self,
        request: &Request,
        input: &[u8],
        rr: usize,
        router: &Router,
        (failover, timeout): (bool, Duration),
        servers: &impl Servers,
        now: Instant,
    ) -> Step {
        self.reset(request, input, router, timeout);
        self.rr = rr;
        self.failover = failover && router.fails_over(&self.key);
        let mut plan = if router.repairs() {
            router.route_avoiding(request, input, rr, &mut self.route, &|s| servers.is_repairing(s))
        } else {
            router.route(request, input, rr, &mut self.route)
        };
        if router.has_gutters() {
            self.divert(request, input, router, &mut plan, servers);
        }
        self.set_plan(plan);
        match plan {
            Plan::Local => Step::Local,
            Plan::PrimaryFirst => {
                // The primary first; the copies follow once it took the request.
                self.route.targets.truncate(1);
                self.send(0, now)
            }
            _ => self.send(0, now),
        }
    }

    /// Sends what `plan` would send to a down server to its key's gutter ([`Router::divert`]);
    /// a keyed write under a repairing policy marks the down servers it no longer goes to, as
    /// the gate would have.
    fn divert(&mut self, request: &Request, input: &[u8], router: &Router, plan: &mut Plan, servers: &impl Servers) {
        let replicas = matches!(plan, Plan::Replicate | Plan::PrimaryFirst) && self.keyed_write;
        let before = if replicas { self.route.targets.clone() } else { Vec::new() };
        let repairing = |s| servers.is_repairing(s);
        let down = |s| servers.is_down(s);
        let diverted = (&mut *plan, &mut self.route);
        self.gutter_ttl = router.divert(request, input, diverted, &down, &repairing, &mut self.gutter_servers);
        if self.gutter_ttl.is_none() {
            return;
        }
        super::gutter::count();
        if self.keyed_write && self.policy.repairs() {
            for &server in before.iter().filter(|&&s| servers.is_down(s) && !self.route.targets.contains(&s)) {
                servers.missed(server, &self.key);
            }
        }
    }

    /// A request of one server that failed there (refused, timed out, reset) goes to its key's
    /// gutter once, as the last round; the failed server of a write under a repairing policy
    /// is marked as the gate would have.
    fn ask_the_gutter<'b>(
        &mut self,
        answer: &impl Fn(usize) -> Answer<'b>,
        router: &Router,
        servers: &impl Servers,
        now: Instant,
    ) -> Option<Step> {
        let one_server = match self.plan {
            Plan::Forward(_) => true,
            Plan::Replicate | Plan::PrimaryFirst => self.keyed_write && self.route.targets.len() == 1,
            Plan::Split | Plan::Local => false,
        };
        let failed = matches!(answer(0), Answer::Failed(f) if f != Failure::Repairing);
        if !one_server || !failed || self.stage != Stage::Request || self.gutter_ttl.is_some() {
            return None;
        }
        let gutter = router.gutter_of(&self.key)?;
        let failed_server = self.route.targets[0];
        let standing_in = router.gutter_server(gutter, &self.key, &|s| servers.is_repairing(s));
        if self.keyed_write && self.policy.repairs() {
            servers.missed(failed_server, &self.key);
        }
        if let Plan::Forward(_) = self.plan {
            self.plan = Plan::Forward(standing_in);
        }
        self.route.targets[0] = standing_in;
        self.gutter_ttl = Some(gutter.ttl);
        self.gutter_servers.clear();
        self.gutter_servers.push(standing_in);
        self.round = Round::Last;
        super::gutter::count();
        Some(self.send(0, now))
    }

    /// A request of no client to one server (a warm read's write-back): one round, its answer
    /// dropped, a miss of a gated write marked for repair like any other.
    pub fn start_to(
        &mut self,
        server: usize,
        request: &Request,
        input: &[u8],
        router: &Router,
        timeout: Duration,
        now: Instant,
    ) -> Step {
        self.reset(request, input, router, timeout);
        self.set_plan(Plan::Forward(server));
        self.round = Round::Last;
        self.send(0, now)
    }

    fn reset(&mut self, request: &Request, input: &[u8], router: &Router, timeout: Duration) {
        self.timeout = timeout;
        self.stage = Stage::Request;
        self.round = Round::First;
        self.attempts = 0;
        self.avoided.clear();
        self.warming = None;
        self.failover = false;
        self.streamed = false;
        self.gutter_ttl = None;
        self.gutter_servers.clear();
        self.key.clear();
        self.key.extend_from_slice(&placement_key(request, input));
        self.policy = router.write_policy_of(request, input);
        self.keyed_write = request.command.is_keyed_write();
    }

    /// Puts `plan` in force; a forward has its one server as target 0 and starts a failover
    /// walk there.
    fn set_plan(&mut self, plan: Plan) {
        self.plan = plan;
        if let Plan::Forward(server) = plan {
            self.route.targets.clear();
            self.route.targets.push(server);
            self.first = server;
            self.attempts = 0;
        }
    }

    /// A round of `from..` sent at `now`: every round has its own deadline, the copies too.
    fn send(&self, from: usize, now: Instant) -> Step {
        Step::Send { from, deadline: now + self.timeout }
    }

    pub fn plan(&self) -> Plan {
        self.plan
    }

    /// The servers of the current round, in target order.
    pub fn targets(&self) -> &[usize] {
        &self.route.targets
    }

    /// The bytes each target gets are composed from this.
    pub fn outgoing<'a>(&'a self, request: &'a Request, input: &'a [u8]) -> Outgoing<'a> {
        Outgoing {
            request,
            input,
            plan: self.plan,
            stage: self.stage,
            key_owner: &self.route.key_owner,
            touches: &self.route.touches,
            gutter: self.gutter_ttl.map(|ttl| (ttl, &self.gutter_servers[..])),
        }
    }

    /// Whether target `i` fails at once instead of being sent: a keyed write under a repairing
    /// policy to a server being repaired, or any request to a server that is down.
    pub fn gate(&self, i: usize, servers: &impl Servers) -> Option<Failure> {
        let server = self.route.targets[i];
        if self.keyed_write && self.policy.repairs() && servers.is_repairing(server) {
            Some(Failure::Repairing)
        } else if servers.is_down(server) {
            Some(Failure::Down)
        } else {
            None
        }
    }

    /// Whether the answer of this round's one target may go to the client as it arrives: a
    /// read forwarded to one server whose reply the client gets as the server wrote it (no
    /// merge, no pick among replicas, no rewrite, no second look at a value: not a warm read,
    /// not an `mg` whose win flags may send it to the primary).
    pub fn may_stream(&self, request: &Request) -> bool {
        let reads_values =
            matches!(request.command, Command::Get | Command::Gets | Command::Gat | Command::Gats | Command::MetaGet);
        reads_values
            && matches!(self.plan, Plan::Forward(_))
            && self.stage == Stage::Request
            && !request.noreply
            && !win::applies(request, self.plan)
    }

    /// Whether this round's answers, a split `get`/`gets` whose servers each answer only keys,
    /// may go to the client as they arrive, merged in key order ([`super::merge`]).
    pub fn may_merge_stream(&self, request: &Request) -> bool {
        matches!(request.command, Command::Get | Command::Gets)
            && self.plan == Plan::Split
            && self.stage == Stage::Request
            && !request.noreply
            && self.route.touches.is_empty()
    }

    /// The merge of this split read's answers, in the client's key order.
    pub fn merge(&self, request: &Request, input: &[u8], max_value_len: usize) -> Merge {
        let limit = crate::access::max_reply_bytes();
        Merge::new(request.keys(input), &self.route.targets, &self.route.key_owner, max_value_len, limit)
    }

    /// The engine began to send the answer to the client: whatever follows (its end, or a
    /// failure that cuts it), there is no other round and nothing more to write.
    pub fn note_streamed(&mut self) {
        self.streamed = true;
    }

    pub fn streamed(&self) -> bool {
        self.streamed
    }

    /// Every target of the round has answered (`answer(i)` is target i's answer): the next
    /// step. `budget` limits warm reads; `now` is the time the round ended.
    #[allow(clippy::too_many_arguments)]
    pub fn next<'b>(
        &mut self,
        request: &Request,
        input: &[u8],
        answer: impl Fn(usize) -> Answer<'b>,
        router: &Router,
        servers: &impl Servers,
        budget: &mut warm::Budget,
        now: Instant,
    ) -> Step {
        if self.round == Round::Last || self.streamed {
            return Step::Finish;
        }
        if self.failover && request.command.is_read() {
            if self.plan == Plan::Split && self.reroute_split(request, input, &answer, router, servers) {
                return self.send(0, now);
            }
            if matches!(self.plan, Plan::Forward(_)) && matches!(answer(0), Answer::Failed(_)) {
                router.replicas(&self.key, &mut self.replicas);
                let repairing = |s| servers.is_repairing(s);
                if let Some(next) = next_failover(&self.replicas, self.first, &mut self.attempts, repairing) {
                    self.route.targets[0] = next;
                    return self.send(0, now);
                }
            }
        }
        if router.has_gutters() {
            if let Some(step) = self.ask_the_gutter(&answer, router, servers, now) {
                return step;
            }
        }
        // With `random` no server is the key's own: the answer drawn stands, as in twemproxy.
        if win::applies(request, self.plan) && !router.is_random(&self.key) {
            // A balanced mg a replica answered with win/stale flags: the primary's answer counts.
            if let Answer::Replied(reply, bytes) = answer(0) {
                if win::carries_win_flags(&reply, bytes) {
                    let repairing = |s| servers.is_repairing(s);
                    let primary = router.primary_avoiding(&self.key, &repairing, &mut self.replicas);
                    if primary != self.route.targets[0] {
                        self.route.targets[0] = primary;
                        self.round = Round::Last;
                        return self.send(0, now);
                    }
                }
            }
        }
        if warm::applies(request, self.plan) {
            // A miss on a server that restarted a short while ago: ask a replica that has the key.
            let cold = self.route.targets[0];
            if let Answer::Replied(reply, _) = answer(0) {
                if warm::missed(&reply) && servers.is_cold(cold) {
                    let other = warm::replica(router, servers, &self.key, cold, &mut self.replicas);
                    if let Some(other) = other.filter(|_| budget.take(now)) {
                        self.stage = Stage::WarmRead;
                        self.warming = Some(cold);
                        self.route.targets[0] = other;
                        self.round = Round::Last;
                        return self.send(0, now);
                    }
                }
            }
        }
        // With `random` the server drawn is the only one: another draw would copy to a stranger.
        if self.plan == Plan::PrimaryFirst
            && !router.is_random(&self.key)
            && matches!(answer(0), Answer::Replied(reply, _) if primary_took(&reply))
        {
            // The copies go to the key's other replicas; the server that took it stays target 0
            // with its answer, whichever replica stood in for the primary.
            let leader = self.route.targets[0];
            router.write_targets(&self.key, &mut self.route.targets);
            self.route.targets.retain(|&s| s != leader);
            self.route.targets.insert(0, leader);
            if self.route.targets.len() > 1 {
                self.stage = Stage::Copies;
                self.round = Round::Last;
                return self.send(1, now);
            }
        }
        Step::Finish
    }

    /// A split read that a server answering keys failed is routed again, all of it, without the
    /// servers that failed (at most once per server; not when some key has no other server
    /// left). True when there is a new route to send.
    fn reroute_split<'b>(
        &mut self,
        request: &Request,
        input: &[u8],
        answer: &impl Fn(usize) -> Answer<'b>,
        router: &Router,
        servers: &impl Servers,
    ) -> bool {
        let before = self.avoided.len();
        for (i, &server) in self.route.targets.iter().enumerate() {
            let answers_keys = self.route.key_owner.contains(&server);
            if matches!(answer(i), Answer::Failed(_)) && answers_keys && !self.avoided.contains(&server) {
                self.avoided.push(server);
            }
        }
        if self.avoided.len() == before {
            return false;
        }
        let avoided = &self.avoided;
        let avoid = |s| servers.is_repairing(s) || avoided.contains(&s);
        let plan = router.route_avoiding(request, input, self.rr, &mut self.reroute, &avoid);
        let answering = match &plan {
            Plan::Forward(server) => std::slice::from_ref(server),
            _ => &self.reroute.key_owner[..],
        };
        if answering.iter().any(|s| avoided.contains(s)) {
            return false;
        }
        std::mem::swap(&mut self.route, &mut self.reroute);
        self.set_plan(plan);
        true
    }

    /// Builds the client's reply from the last round's answers ([`Finished::reply`]: into `out`,
    /// or where a target's answer relayed as it came is), after marking for repair the key of a
    /// write that a target missed (failed, gated or timed out). `addr(s)` names server s;
    /// `cursors` is scratch.
    #[allow(clippy::too_many_arguments)]
    pub fn finish<'b>(
        &self,
        request: &Request,
        input: &[u8],
        answer: impl Fn(usize) -> Answer<'b>,
        addr: impl Fn(usize) -> SocketAddr,
        servers: &impl Servers,
        cursors: &mut Vec<usize>,
        out: &mut Vec<u8>,
    ) -> (Outcome, ReplyBytes) {
        if self.keyed_write && self.policy.repairs() {
            for (i, &server) in self.route.targets.iter().enumerate() {
                if matches!(answer(i), Answer::Failed(_)) {
                    servers.missed(server, &self.key);
                }
            }
        }
        if self.streamed {
            return (streamed_outcome(request, answer(0), out), ReplyBytes::Composed);
        }
        let finished = Finished {
            request,
            input,
            plan: self.plan,
            targets: &self.route.targets,
            key_owner: &self.route.key_owner,
            warm_read: self.stage == Stage::WarmRead,
            policy: self.policy,
        };
        finished.reply(answer, addr, cursors, out)
    }

    /// After a warm read whose replica had the value: the cold server and, in `out`, the `ms`
    /// that writes the value back there (fire and forget, [`Exchange::start_to`]).
    pub fn write_back(&self, answer: Answer<'_>, out: &mut Vec<u8>) -> Option<usize> {
        let cold = self.warming?;
        let Answer::Replied(reply, bytes) = answer else { return None };
        out.clear();
        warm::write_back(&self.key, &reply, bytes, out).then_some(cold)
    }

    /// Whether the request is a write the client's next request must not overtake (its copies
    /// are still to come).
    pub fn holds_back_later_requests(&self) -> bool {
        self.plan == Plan::PrimaryFirst
    }
}

/// The outcome of a request whose answer went to the client as it arrived (`out` stays
/// empty): a complete reply counts its hits, a cut one (the server failed mid-stream, the
/// client stopped reading, `--max-reply-bytes` was crossed) is an error.
fn streamed_outcome(request: &Request, answer: Answer<'_>, out: &mut Vec<u8>) -> Outcome {
    out.clear();
    let keys = request.key_count as u32;
    let mut outcome = Outcome { keys, error: true, ..Outcome::default() };
    if let Answer::Replied(reply, _) = answer {
        outcome.error = reply.status.is_error();
        let hits =
            if request.command == Command::MetaGet { u32::from(reply.status == Status::Value) } else { reply.items };
        outcome.hits = hits;
        outcome.misses = keys.saturating_sub(hits);
    }
    outcome
}

/// Table tests of the policy, no sockets: each decision the two engines once made differently
/// (docs/ARCHITECTURE.md, "The per-request policy") and the meta requests that write.
#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use memrelay_protocol::{parse_request, Expect, Limits, Parse, Reply, ReplyParser};

    use super::*;
    use crate::settings::KeyHash;
    use crate::settings::{Distribution, Endpoint, ReadFrom, Routing, WritePolicy};

    const TIMEOUT: Duration = Duration::from_secs(1);

    #[derive(Default)]
    struct Fake {
        down: Vec<usize>,
        cold: Vec<usize>,
        repairing: Vec<usize>,
        missed: RefCell<Vec<(usize, Vec<u8>)>>,
    }

    impl Servers for Fake {
        fn is_down(&self, s: usize) -> bool {
            self.down.contains(&s)
        }
        fn is_cold(&self, s: usize) -> bool {
            self.cold.contains(&s)
        }
        fn is_repairing(&self, s: usize) -> bool {
            self.repairing.contains(&s)
        }
        fn missed(&self, s: usize, key: &[u8]) {
            self.missed.borrow_mut().push((s, key.to_vec()));
        }
    }

    /// Three servers, every key on each (`--distribution all`), under `policy`.
    fn router(policy: WritePolicy) -> Router {
        let servers: Vec<Endpoint> = (1..=3).map(Endpoint::local).collect();
        let routing = Routing {
            sharded: false,
            distribution: Distribution::All,
            hash: KeyHash::Md5,
            hash_tag: None,
            replication: 1,
            read_from: ReadFrom::Primary,
            failover: true,
            write_policy: policy,
        };
        Router::new(&routing, &servers).unwrap()
    }

    fn parse(bytes: &[u8]) -> Request {
        let Parse::Complete(request) = parse_request(bytes, &Limits::default()) else { panic!("{bytes:?}") };
        request
    }

    /// One round's answers: a reply's bytes, or a failure.
    enum Said {
        Reply(Expect, &'static [u8]),
        Failed(Failure),
    }

    fn answers(said: &[Said]) -> Vec<Result<(Reply, &'static [u8]), Failure>> {
        said.iter()
            .map(|s| match s {
                Said::Reply(expect, bytes) => match ReplyParser::new(*expect).parse(bytes) {
                    Parse::Complete(reply) => Ok((reply, *bytes)),
                    other => panic!("{other:?}"),
                },
                Said::Failed(failure) => Err(*failure),
            })
            .collect()
    }

    fn answer_of<'a>(answers: &'a [Result<(Reply, &'static [u8]), Failure>]) -> impl Fn(usize) -> Answer<'a> + 'a {
        move |i| match answers[i] {
            Ok((reply, bytes)) => Answer::Replied(reply, bytes),
            Err(failure) => Answer::Failed(failure),
        }
    }

    fn addr(server: usize) -> SocketAddr {
        format!("127.0.0.1:{}", server + 1).parse().unwrap()
    }

    /// Runs `next` on one round's answers at `now`.
    fn next(ex: &mut Exchange, line: &[u8], router: &Router, servers: &Fake, said: &[Said], now: Instant) -> Step {
        let request = parse(line);
        let answers = answers(said);
        ex.next(&request, line, answer_of(&answers), router, servers, &mut warm::Budget::default(), now)
    }

    fn finish(ex: &Exchange, line: &[u8], servers: &Fake, said: &[Said]) -> Vec<u8> {
        let request = parse(line);
        let answers = answers(said);
        let mut out = Vec::new();
        let (_, bytes) = ex.finish(&request, line, answer_of(&answers), addr, servers, &mut Vec::new(), &mut out);
        bytes.copy_into(answer_of(&answers), &mut out);
        out
    }

    fn start(ex: &mut Exchange, line: &[u8], rr: usize, router: &Router, servers: &Fake, now: Instant) -> Step {
        ex.start(&parse(line), line, rr, router, (true, TIMEOUT), servers, now)
    }

    fn primary(router: &Router, key: &[u8]) -> usize {
        let mut replicas = Vec::new();
        router.replicas(key, &mut replicas);
        replicas[0]
    }

    #[test]
    fn a_win_flag_re_ask_whose_primary_fails_is_a_server_error_not_a_walk() {
        // Once: the evented engine walked the replicas from the re-ask (with 3, it answered a
        // third replica's reply); the pool answered SERVER_ERROR.
        let (router, servers, now) = (router(WritePolicy::All), Fake::default(), Instant::now());
        let line = b"mg k v\r\n";
        let primary = primary(&router, b"k");
        let mut ex = Exchange::default();
        let rr =
            (0..3).find(|&rr| router.route(&parse(line), line, rr, &mut RouteBuf::default()) != Plan::Forward(primary));
        assert!(matches!(start(&mut ex, line, rr.unwrap(), &router, &servers, now), Step::Send { from: 0, .. }));
        let replica = ex.targets()[0];
        assert_ne!(replica, primary);
        let step = next(&mut ex, line, &router, &servers, &[Said::Reply(Expect::Meta, b"VA 1 W\r\nx\r\n")], now);
        assert!(matches!(step, Step::Send { from: 0, .. }));
        assert_eq!(ex.targets(), [primary], "asked again of the primary");
        let failed = [Said::Failed(Failure::Timeout)];
        assert_eq!(next(&mut ex, line, &router, &servers, &failed, now), Step::Finish, "no walk after a re-ask");
        let reply = finish(&ex, line, &servers, &failed);
        assert_eq!(reply, format!("SERVER_ERROR server timeout (127.0.0.1:{})\r\n", primary + 1).into_bytes());
    }

    #[test]
    fn a_warm_read_whose_replica_fails_answers_the_cold_servers_miss() {
        // Once: the pool answered END; the evented engine with --failover kept asking replicas.
        let router = router(WritePolicy::All);
        let now = Instant::now();
        let line = b"get k\r\n";
        let mut ex = Exchange::default();
        let servers = Fake { cold: vec![0], ..Fake::default() };
        start(&mut ex, line, 0, &router, &servers, now);
        assert_eq!(ex.targets(), [0]);
        let step = next(&mut ex, line, &router, &servers, &[Said::Reply(Expect::Values, b"END\r\n")], now);
        assert!(matches!(step, Step::Send { from: 0, .. }));
        assert_ne!(ex.targets(), [0], "the miss is asked of a replica");
        let failed = [Said::Failed(Failure::Reset)];
        assert_eq!(next(&mut ex, line, &router, &servers, &failed, now), Step::Finish);
        assert_eq!(finish(&ex, line, &servers, &failed), b"END\r\n");
    }

    #[test]
    fn a_one_key_touching_read_does_not_fail_over_even_after_a_reused_forward() {
        // Once: only the evented engine failed over, from a `first_target` a reused slot kept
        // from an earlier request, and the copies then put the primary back as target 0
        // carrying another replica's answer.
        let (router, servers, now) = (router(WritePolicy::All), Fake::default(), Instant::now());
        let mut ex = Exchange::default();
        let other = b"get other\r\n";
        start(&mut ex, other, 2, &router, &servers, now);
        for line in [&b"gat 100 k\r\n"[..], b"gats 100 k\r\n", b"mg k T30 v\r\n"] {
            start(&mut ex, line, 0, &router, &servers, now);
            assert_eq!(ex.plan(), Plan::PrimaryFirst, "{line:?}");
            let primary = primary(&router, b"k");
            assert_eq!(ex.targets(), [primary]);
            let failed = [Said::Failed(Failure::Timeout)];
            assert_eq!(next(&mut ex, line, &router, &servers, &failed, now), Step::Finish, "{line:?}");
            let reply = finish(&ex, line, &servers, &failed);
            assert!(reply.starts_with(b"SERVER_ERROR server timeout"), "{line:?}: {reply:?}");
        }
    }

    #[test]
    fn the_copies_get_a_deadline_of_their_own() {
        // Once: the pool gave the copies what was left of the primary's deadline, the evented
        // engine a fresh one.
        let (router, servers) = (router(WritePolicy::All), Fake::default());
        let line = b"cas k 0 0 1 5\r\nx\r\n";
        let mut ex = Exchange::default();
        let t0 = Instant::now();
        let Step::Send { from: 0, deadline } = start(&mut ex, line, 0, &router, &servers, t0) else { panic!() };
        assert_eq!(deadline, t0 + TIMEOUT);
        let t1 = t0 + TIMEOUT * 9 / 10;
        let step = next(&mut ex, line, &router, &servers, &[Said::Reply(Expect::Line, b"STORED\r\n")], t1);
        assert_eq!(step, Step::Send { from: 1, deadline: t1 + TIMEOUT });
        assert_eq!(ex.targets().len(), 3);
        assert_eq!(ex.targets()[0], primary(&router, b"k"), "the primary keeps its answer as target 0");
    }

    #[test]
    fn with_random_a_cas_is_one_servers_and_copied_nowhere() {
        let servers: Vec<Endpoint> = (1..=3).map(Endpoint::local).collect();
        let routing = Routing {
            sharded: false,
            distribution: Distribution::Random,
            hash: KeyHash::Md5,
            hash_tag: None,
            replication: 1,
            read_from: ReadFrom::Primary,
            failover: false,
            write_policy: WritePolicy::All,
        };
        let router = Router::new(&routing, &servers).unwrap();
        let (fake, now) = (Fake::default(), Instant::now());
        for line in [&b"cas k 0 0 1 5\r\nx\r\n"[..], b"ms k 1 C5\r\nx\r\n"] {
            for _ in 0..20 {
                let mut ex = Exchange::default();
                assert!(matches!(start(&mut ex, line, 0, &router, &fake, now), Step::Send { from: 0, .. }));
                assert_eq!(ex.targets().len(), 1, "{line:?}");
                let took = [Said::Reply(Expect::Line, b"STORED\r\n")];
                let took = if line.starts_with(b"ms") { [Said::Reply(Expect::Meta, b"HD\r\n")] } else { took };
                assert_eq!(next(&mut ex, line, &router, &fake, &took, now), Step::Finish, "{line:?}");
                assert_eq!(ex.targets().len(), 1, "{line:?}");
            }
        }
    }

    #[test]
    fn a_write_back_to_a_server_being_repaired_is_held_back_and_its_key_marked() {
        // Once: the evented engine failed it fast and marked the key; the pool sent it anyway.
        let router = router(WritePolicy::Majority);
        let servers = Fake { repairing: vec![1], ..Fake::default() };
        let line = b"ms k 1 F0 T0 ME\r\nx\r\n";
        let mut ex = Exchange::default();
        let step = ex.start_to(1, &parse(line), line, &router, TIMEOUT, Instant::now());
        assert!(matches!(step, Step::Send { from: 0, .. }));
        assert_eq!(ex.gate(0, &servers), Some(Failure::Repairing));
        let gated = [Said::Failed(Failure::Repairing)];
        assert_eq!(next(&mut ex, line, &router, &servers, &gated, Instant::now()), Step::Finish);
        finish(&ex, line, &servers, &gated);
        assert_eq!(*servers.missed.borrow(), [(1, b"k".to_vec())]);
        // A down server is not asked either; an up one is.
        let down = Fake { down: vec![1], ..Fake::default() };
        assert_eq!(ex.gate(0, &down), Some(Failure::Down));
        assert_eq!(ex.gate(0, &Fake::default()), None);
    }

    #[test]
    fn an_autovivifying_mg_creates_the_item_on_every_replica() {
        // Once: `mg k N100 v` went to the primary alone, so a later `append` was NOT_STORED
        // while the primary took it, and reads differed by replica.
        let (router, servers, now) = (router(WritePolicy::All), Fake::default(), Instant::now());
        for line in [&b"mg k N100 v\r\n"[..], b"mg k N100\r\n", b"mg k N100 T5 s v\r\n"] {
            let mut ex = Exchange::default();
            start(&mut ex, line, 1, &router, &servers, now);
            assert_eq!(ex.plan(), Plan::PrimaryFirst, "{line:?}");
            let primary = primary(&router, b"k");
            assert_eq!(ex.targets(), [primary]);
            let created = [Said::Reply(Expect::Meta, b"VA 0 W\r\n\r\n")];
            assert!(matches!(next(&mut ex, line, &router, &servers, &created, now), Step::Send { from: 1, .. }));
            assert_eq!(ex.targets().len(), 3, "the copies go to every other replica");
            let request = parse(line);
            let mut copy = Vec::new();
            ex.outgoing(&request, line).compose_for(ex.targets()[1], &mut copy);
            let copy = String::from_utf8(copy).unwrap();
            assert!(copy.starts_with("mg k ") && copy.contains("N100") && !copy.contains(" v"), "{copy}");
            let all = [
                created[0].clone_said(),
                Said::Reply(Expect::Meta, b"HD W\r\n"),
                Said::Reply(Expect::Meta, b"HD W\r\n"),
            ];
            assert_eq!(next(&mut ex, line, &router, &servers, &all, now), Step::Finish);
            assert_eq!(finish(&ex, line, &servers, &all), b"VA 0 W\r\n\r\n", "the primary's answer");
        }
        // Recache coordination without a miss creating anything stays on the primary alone.
        let mut ex = Exchange::default();
        start(&mut ex, b"mg k R30 v\r\n", 1, &router, &servers, now);
        assert_eq!(ex.plan(), Plan::Forward(primary(&router, b"k")));
    }

    impl Said {
        fn clone_said(&self) -> Said {
            match self {
                Said::Reply(expect, bytes) => Said::Reply(*expect, bytes),
                Said::Failed(failure) => Said::Failed(*failure),
            }
        }
    }
}
