//! What happens between a routed request and the client's reply, the same for both engines:
//! the bytes each target gets ([`rewrite`]), why an exchange failed ([`failure`]), how the reply
//! is built from the targets' answers ([`reply`]), or streamed as they arrive ([`stream`], [`merge`]), and which replica a failed read tries next
//! ([`failover_target`]). Pure functions: the engines only schedule the exchanges.

pub(crate) mod exchange;
pub mod gutter;
pub(crate) mod merge;
pub(crate) mod pick;
pub(crate) mod reply;
pub(crate) mod rewrite;
pub(crate) mod stats;
pub(crate) mod stream;
pub(crate) mod warm;
pub(crate) mod win;

/// The server a failed read tries next: the key's replicas in ring order after the one tried
/// first, each once (the same order ketama moves a lost server's keys in). `attempt` counts the
/// retries so far, from 1; `None` once every replica was tried.
pub(crate) fn failover_target(replicas: &[usize], first: usize, attempt: usize) -> Option<usize> {
    let start = replicas.iter().position(|&s| s == first)?;
    (attempt < replicas.len()).then(|| replicas[(start + attempt) % replicas.len()])
}

/// The next server a failed read tries after `attempt` retries (advanced past the servers
/// skipped): [`failover_target`]'s walk without the servers being repaired, which may still hold
/// values that acknowledged writes replaced.
pub(crate) fn next_failover(
    replicas: &[usize],
    first: usize,
    attempt: &mut usize,
    repairing: impl Fn(usize) -> bool,
) -> Option<usize> {
    loop {
        *attempt += 1;
        let next = failover_target(replicas, first, *attempt)?;
        if !repairing(next) {
            return Some(next);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failover_skips_the_replicas_being_repaired() {
        let replicas = [4, 1, 7, 2];
        let mut attempt = 0;
        assert_eq!(next_failover(&replicas, 1, &mut attempt, |s| s == 7), Some(2));
        assert_eq!(attempt, 2);
        assert_eq!(next_failover(&replicas, 1, &mut attempt, |s| s == 4), None);
        let mut attempt = 0;
        assert_eq!(next_failover(&replicas, 1, &mut attempt, |_| true), None, "every one repaired");
    }

    #[test]
    fn failover_walks_the_ring_after_the_first_replica_once() {
        let replicas = [4, 1, 7];
        let walk: Vec<_> = (1..5).map_while(|a| failover_target(&replicas, 1, a)).collect();
        assert_eq!(walk, [7, 4]);
        assert_eq!(failover_target(&replicas, 4, 1), Some(1));
        assert_eq!(failover_target(&[3], 3, 1), None);
        assert_eq!(failover_target(&replicas, 9, 1), None);
    }
}
