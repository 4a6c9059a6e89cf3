//! The descriptor budget, read once at start: the soft limit is raised to the hard one, the
//! descriptors memrelay needs whatever the clients do are set aside (server connections of every
//! worker or loop, the repair thread's and the probe's, /metrics, listeners, pollers, files), and
//! the clients are capped below the rest, so that running out of descriptors is a clean
//! `SERVER_ERROR too many connections` to a new client, never a server connection that cannot
//! be opened (which once took a healthy server down for everyone).

use std::sync::OnceLock;

use crate::settings::{Engine, Settings};

/// The budget this process started with (what `stats` reports).
static IN_FORCE: OnceLock<Budget> = OnceLock::new();

/// The budget in force, once [`fit`] ran.
pub fn in_force() -> Option<Budget> {
    IN_FORCE.get().copied()
}

/// Descriptors set aside beyond the server connections: standard streams, listeners, pollers
/// and wakers, the stats files, the spool, /metrics' connections (capped at 64), a margin.
const FIXED: u64 = 128;

/// The budget at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// The descriptor limit in force (after raising the soft limit to the hard one).
    pub limit: u64,
    /// Descriptors kept for everything but clients.
    pub reserved: u64,
    /// Clients at most: `--max-clients`, or fewer when the limit leaves less.
    pub clients: usize,
}

impl Budget {
    /// What `--max-clients asked` comes to under this budget (what [`fit`] made of it at start).
    pub fn clients_for(&self, asked: usize) -> usize {
        asked.min(usize::try_from(self.limit.saturating_sub(self.reserved)).unwrap_or(usize::MAX))
    }
}

/// What `--max-clients asked` comes to under the budget in force (`asked` before [`fit`] ran):
/// a reload compares this, not what was asked, with the cap in force.
pub fn clients_for(asked: usize) -> usize {
    in_force().map_or(asked, |budget| budget.clients_for(asked))
}

/// Raises the soft descriptor limit to the hard one and fits `settings`' client cap below what
/// is left; an error when nothing is left for clients.
pub fn fit(settings: &mut Settings) -> Result<Budget, String> {
    let limit = raise_soft_limit();
    let per_server = match settings.engine.kind {
        Engine::Pool => settings.engine.workers,
        Engine::Evented => settings.engine.threads,
    };
    let budget = budget(settings.all_servers().count(), per_server, settings.limits.max_clients, limit)?;
    if budget.clients < settings.limits.max_clients {
        eprintln!(
            "memrelay: the descriptor limit is {limit}: at most {} clients (of --max-clients {}), {} descriptors kept \
             for servers and the rest",
            budget.clients, settings.limits.max_clients, budget.reserved
        );
        settings.limits.max_clients = budget.clients;
    }
    let _ = IN_FORCE.set(budget);
    Ok(budget)
}

/// The budget under a descriptor `limit` for `servers` servers, `per_server` engine threads
/// with a connection to each (pool workers or event loops) and at most `max_clients` clients.
pub fn budget(servers: usize, per_server: usize, max_clients: usize, limit: u64) -> Result<Budget, String> {
    // Each engine thread's connection to every server, the repair thread's and the probe's.
    let reserved = FIXED + servers as u64 * (per_server as u64 + 2);
    let clients = limit.saturating_sub(reserved).min(max_clients as u64) as usize;
    if clients == 0 {
        return Err(format!(
            "the descriptor limit ({limit}) leaves no room for clients: {reserved} are needed for {servers} servers \
             and memrelay itself; raise it (ulimit -n) or use fewer workers or threads"
        ));
    }
    Ok(Budget { limit, reserved, clients })
}

/// The soft `RLIMIT_NOFILE`, raised to the hard limit first where it is lower.
fn raise_soft_limit() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit.rlim_cur = limit.rlim_max;
            }
        }
    }
    limit.rlim_cur
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_capped_below_what_the_servers_and_memrelay_need() {
        // 3 servers × (32 pool workers + repair + probe) + 128 = 230 kept.
        let b = budget(3, 32, 16_384, 1024).unwrap();
        assert_eq!((b.reserved, b.clients), (230, 1024 - 230));
        assert_eq!(budget(3, 32, 16_384, 1_000_000).unwrap().clients, 16_384, "--max-clients when there is room");
        assert!(budget(3, 32, 16_384, 200).is_err(), "no room for any client");
        // What a reload asking the same (or more) comes to: the cap in force, not a change.
        assert_eq!((b.clients_for(16_384), b.clients_for(100_000), b.clients_for(10)), (b.clients, b.clients, 10));
    }
}
