//! Where a key goes: `get __memrelay__.route(OP,KEY)` asked of a running memrelay, and
//! `memrelay route OP KEY` of a configuration file (mcrouter answers
//! `get __mcrouter__.route(OP,KEY)` the same way). Both route a request of `OP` for `KEY` with
//! the [`Router`] in force and list the servers it would be sent to, in the order they would be
//! asked: a write's replicas (its primary first), a read's server and then, where its pool fails
//! over, the key's other replicas in turn.
//!
//! A read that rotates over every server of its pool (`distribution = "all"`) goes to the one
//! whose turn it is; the answer lists the pool's servers from the first turn on. Where the key
//! has a gutter, its server there comes in place of the servers that are down, and last for a
//! request of one server (it is asked when that server fails).

use memrelay_protocol::{parse_request, Limits, Parse};

use super::{Plan, RouteBuf, Router};

/// The key of a `get` that asks where a key goes: `__memrelay__.route(OP,KEY)`.
pub const QUERY_PREFIX: &[u8] = b"__memrelay__.route(";

/// The operation and key of a `__memrelay__.route(OP,KEY)` key, if it is one.
pub fn query(key: &[u8]) -> Option<(&[u8], &[u8])> {
    let inner = key.strip_prefix(QUERY_PREFIX)?.strip_suffix(b")")?;
    let comma = inner.iter().position(|&b| b == b',')?;
    Some((&inner[..comma], &inner[comma + 1..]))
}

/// The servers (ids) a request of `op` for `key` would go to, in the order they would be asked;
/// the error says why there are none (an unknown operation, a key memcached would refuse).
pub fn servers_for(router: &Router, op: &[u8], key: &[u8], down: &dyn Fn(usize) -> bool) -> Result<Vec<usize>, String> {
    let key_text = String::from_utf8_lossy(key);
    let op_text = String::from_utf8_lossy(op).to_lowercase();
    let line = match op_text.as_str() {
        "get" | "gets" | "delete" | "mg" | "md" | "ma" => format!("{op_text} {key_text}\r\n"),
        "set" | "add" | "replace" | "append" | "prepend" => format!("{op_text} {key_text} 0 0 1\r\nx\r\n"),
        "cas" => format!("cas {key_text} 0 0 1 1\r\nx\r\n"),
        "ms" => format!("ms {key_text} 1\r\nx\r\n"),
        "incr" | "decr" => format!("{op_text} {key_text} 1\r\n"),
        "touch" => format!("touch {key_text} 0\r\n"),
        "gat" | "gats" => format!("{op_text} 0 {key_text}\r\n"),
        _ => {
            return Err(format!(
                "unknown operation `{}` (get, gets, gat, gats, set, add, replace, append, prepend, cas, delete, incr, decr, touch, mg, ms, md, ma)",
                crate::shown(&op_text, 40)
            ))
        }
    };
    let request = match parse_request(line.as_bytes(), &Limits::default()) {
        Parse::Complete(request) if request.key_count == 1 && request.key(line.as_bytes()) == key => request,
        _ => return Err(format!("`{}` is not a key memcached takes", crate::shown(&key_text, 60))),
    };
    let mut out = RouteBuf::default();
    let mut plan = router.route(&request, line.as_bytes(), 0, &mut out);
    let mut diverted = Vec::new();
    let gutter_used = router.divert(&request, line.as_bytes(), (&mut plan, &mut out), down, &|_| false, &mut diverted);
    let mut servers = match plan {
        Plan::Forward(first) if gutter_used.is_some() => vec![first],
        Plan::Forward(first) => {
            let mut servers = vec![first];
            let mut replicas = Vec::new();
            if request.command.is_read() && router.fails_over(key) {
                router.replicas(key, &mut replicas);
            } else if router.reads_in_turn(key) && request.command.is_read() {
                replicas.extend_from_slice(router.pool_servers(router.pool_of(key).0));
            }
            let at = replicas.iter().position(|&s| s == first).unwrap_or(0);
            replicas.rotate_left(at);
            servers.extend(replicas.into_iter().filter(|&s| s != first));
            servers
        }
        Plan::Replicate | Plan::PrimaryFirst | Plan::Split => out.targets,
        Plan::Local => return Err(format!("memrelay answers `{op_text}` itself")),
    };
    if let Some(gutter) = router.gutter_of(key).filter(|_| gutter_used.is_none() && servers.len() == 1) {
        servers.push(router.gutter_server(gutter, key, &|_| false));
    }
    Ok(servers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{Distribution, Endpoint, NamedPool, PrefixRoute, ReadFrom, Routing, WritePolicy};
    use crate::KeyHash;

    fn routing(distribution: Distribution, replication: usize, failover: bool) -> Routing {
        Routing {
            sharded: false,
            distribution,
            hash: KeyHash::Md5,
            hash_tag: None,
            replication,
            read_from: ReadFrom::Primary,
            failover,
            write_policy: WritePolicy::All,
        }
    }

    #[test]
    fn the_query_key_names_an_operation_and_a_key() {
        assert_eq!(query(b"__memrelay__.route(set,a,b)"), Some((&b"set"[..], &b"a,b"[..])));
        assert_eq!(query(b"__memrelay__.route(get,k)"), Some((&b"get"[..], &b"k"[..])));
        assert_eq!(query(b"__memrelay__.route(getk)"), None);
        assert_eq!(query(b"__memrelay__.route(get,k"), None);
        assert_eq!(query(b"k"), None);
    }

    #[test]
    fn writes_list_every_replica_and_reads_the_failover_order() {
        // Default pool: 3 servers, ketama, 2 copies, failover; `hot`: 2 servers with every key.
        let servers: Vec<Endpoint> = (1..=3).map(Endpoint::local).collect();
        let hot = NamedPool {
            name: "hot".into(),
            servers: (4..=5).map(Endpoint::local).collect(),
            routing: routing(Distribution::All, 1, false),
        };
        let route: PrefixRoute = r#"{ prefix = "hot:", pool = "hot" }"#.parse().unwrap();
        let default = routing(Distribution::Ketama, 2, true);
        let router = Router::of_pools((&default, &servers), &[hot], (&[route], None), &[0, 1, 2, 3, 4]).unwrap();
        let ask = |op: &[u8], key: &[u8]| servers_for(&router, op, key, &|_| false);
        let mut replicas = Vec::new();
        router.replicas(b"k", &mut replicas);
        assert_eq!(replicas.len(), 2);
        assert_eq!(ask(b"set", b"k").unwrap(), replicas);
        assert_eq!(ask(b"get", b"k").unwrap(), replicas);
        assert_eq!(ask(b"delete", b"k").unwrap(), replicas);
        let mut hot_set = ask(b"set", b"hot:1").unwrap();
        hot_set.sort_unstable();
        assert_eq!(hot_set, [3, 4]);
        assert_eq!(ask(b"get", b"hot:1").unwrap().len(), 2);
        assert!(ask(b"frob", b"k").unwrap_err().contains("unknown operation"));
        assert!(ask(b"get", b"two words").unwrap_err().contains("not a key"));
    }
}
