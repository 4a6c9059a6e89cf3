//! Which target's reply a replicated request relays ([`pick_reply`]), and under a write policy
//! that repairs replicas, whether enough of them answered ([`pick_reply_under`]).

use memrelay_protocol::Status;

use crate::settings::WritePolicy;
use crate::upstream::failure::Failure;

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

/// What a keyed write answers under a write policy that repairs ([`crate::upstream::repair_set`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Picked {
    /// Relay this target's reply.
    Target(usize),
    /// Too few replicas answered for the policy.
    TooFew,
}

/// The reply of a keyed write under `policy`: the targets whose exchange failed are left out
/// (the repair brings them up to date) as long as more than half of the targets answered, or,
/// with [`WritePolicy::Primary`], the first target (the key's primary) did; among those that
/// answered, the first failure reply or else the first success is relayed, as [`pick_reply`]
/// does. Results are in target order, the primary first.
pub fn pick_reply_under(policy: WritePolicy, results: &[Result<Status, Failure>]) -> Picked {
    let answered = results.iter().filter(|r| r.is_ok()).count();
    let majority = answered * 2 > results.len();
    let enough = match policy {
        WritePolicy::All => answered == results.len(),
        WritePolicy::Majority => majority,
        WritePolicy::Primary => majority || results.first().is_some_and(Result::is_ok),
    };
    if !enough {
        return Picked::TooFew;
    }
    let answers = results.iter().enumerate().filter(|(_, r)| r.is_ok()).map(|(i, r)| (i, *r));
    let mut first_success = None;
    for (i, result) in answers {
        match result {
            Ok(status) if !status.is_success() => return Picked::Target(i),
            _ => {
                first_success.get_or_insert(i);
            }
        }
    }
    first_success.map_or(Picked::TooFew, Picked::Target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_count_the_replicas_that_answered() {
        use Failure::{Down, Timeout};
        use Status::{NotStored, Stored};
        let one_down = [Ok(Stored), Err(Down), Ok(Stored)];
        assert_eq!(pick_reply_under(WritePolicy::Majority, &one_down), Picked::Target(0));
        assert_eq!(pick_reply_under(WritePolicy::Primary, &one_down), Picked::Target(0));
        assert_eq!(pick_reply_under(WritePolicy::All, &one_down), Picked::TooFew);
        // Two of three gone: only the primary policy takes it, and only with the primary.
        let two_down = [Ok(Stored), Err(Down), Err(Timeout)];
        assert_eq!(pick_reply_under(WritePolicy::Majority, &two_down), Picked::TooFew);
        assert_eq!(pick_reply_under(WritePolicy::Primary, &two_down), Picked::Target(0));
        let primary_down = [Err(Down), Ok(Stored), Err(Down)];
        assert_eq!(pick_reply_under(WritePolicy::Primary, &primary_down), Picked::TooFew);
        // Of two replicas, one is not a majority.
        assert_eq!(pick_reply_under(WritePolicy::Majority, &[Ok(Stored), Err(Down)]), Picked::TooFew);
        // A server's own refusal among those that answered is still the reply.
        let refused = [Ok(Stored), Err(Down), Ok(NotStored)];
        assert_eq!(pick_reply_under(WritePolicy::Majority, &refused), Picked::Target(2));
    }

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
