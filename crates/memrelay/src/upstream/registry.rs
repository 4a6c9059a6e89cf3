//! Every server memrelay has known since it started, each with a stable **id**: its place in an
//! append-only list. A reload that keeps a server (the same address) keeps its id, so its
//! connections, health, counters and histograms carry on; a new address gets the next id; a
//! server the configuration dropped keeps its id, retired, so that requests still in flight to it
//! finish and its counters stay readable. Everything kept per server (connections, health,
//! windows) is indexed by id and never shrinks.

use std::net::SocketAddr;
use std::sync::RwLock;

use crate::settings::Endpoint;

/// Distinct server addresses one process can know: a bound on what per-server state may grow
/// to over any number of reloads (`--server` takes at most as many at once).
pub const MAX_SERVER_IDS: usize = 1024;

#[derive(Debug)]
pub struct Registry {
    known: RwLock<Vec<Endpoint>>,
}

impl Registry {
    /// A registry whose ids 0, 1, ... are `servers` in order.
    pub fn new(servers: &[Endpoint]) -> Registry {
        Registry { known: RwLock::new(servers.to_vec()) }
    }

    /// The ids of `servers`: the id an address already has, or the next one. A known address
    /// takes the new name and weight. Nothing changes when the error says the ids ran out.
    pub fn ids_for(&self, servers: &[Endpoint]) -> Result<Vec<usize>, String> {
        let mut known = self.known.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        let new = servers.iter().filter(|s| !known.iter().any(|k| k.addr == s.addr)).count();
        if known.len() + new > MAX_SERVER_IDS {
            return Err(format!(
                "{new} new server addresses would pass the {MAX_SERVER_IDS} one process can know; restart memrelay"
            ));
        }
        let mut ids = Vec::with_capacity(servers.len());
        for server in servers {
            let id = match known.iter().position(|k| k.addr == server.addr) {
                Some(id) => {
                    known[id] = server.clone();
                    id
                }
                None => {
                    known.push(server.clone());
                    known.len() - 1
                }
            };
            ids.push(id);
        }
        Ok(ids)
    }

    /// Servers known so far (ids are below this).
    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    pub fn name(&self, id: usize) -> String {
        self.read()[id].name.clone()
    }

    pub fn addr(&self, id: usize) -> SocketAddr {
        self.read()[id].addr
    }

    /// The server as last configured (its address as written names it for TLS).
    pub fn endpoint(&self, id: usize) -> Endpoint {
        self.read()[id].clone()
    }

    /// Every server's name, by id.
    pub fn names(&self) -> Vec<String> {
        self.read().iter().map(|s| s.name.clone()).collect()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Endpoint>> {
        self.known.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_keeps_its_id_and_a_new_one_gets_the_next() {
        let registry = Registry::new(&[Endpoint::local(1), Endpoint::local(2)]);
        let mut renamed = Endpoint::local(2);
        renamed.name = "b".into();
        assert_eq!(registry.ids_for(&[renamed, Endpoint::local(3)]).unwrap(), vec![1, 2]);
        assert_eq!(registry.names(), vec!["127.0.0.1:1", "b", "127.0.0.1:3"]);
        // Dropping server 1 and bringing it back later: the same id.
        assert_eq!(registry.ids_for(&[Endpoint::local(1)]).unwrap(), vec![0]);
        assert_eq!(registry.len(), 3);
    }

    #[test]
    fn ids_are_bounded_and_running_out_changes_nothing() {
        let registry = Registry::new(&[Endpoint::local(1)]);
        let many: Vec<Endpoint> = (2..=MAX_SERVER_IDS as u16 + 1).map(Endpoint::local).collect();
        let error = registry.ids_for(&many).unwrap_err();
        assert!(error.contains("restart memrelay"), "{error}");
        assert_eq!(registry.len(), 1);
        assert_eq!(registry.ids_for(&many[..MAX_SERVER_IDS - 1]).unwrap().len(), MAX_SERVER_IDS - 1);
    }
}
