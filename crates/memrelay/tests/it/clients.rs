//! Real client tools through memrelay, judged against the same tools on a real memcached:
//! libmemcached's conformance suite `memccapable -a` (every ASCII test a memcached passes must
//! pass through memrelay, in every mode), and `memcstat` / `memcping`, which parse `version`.
//! The tools come from Debian's `libmemcached-tools`, installed by `make deps`.
//!
//! Every test is a function of the engine's name and runs once per engine (see `common`).

use std::process::{Command, Output};

use crate::common::*;

engine_matrix!(memccapable_passes_as_on_memcached, libmemcached_tools_work);

/// Runs a libmemcached tool (bounded by its own timeout option where it has one).
fn tool(name: &str, args: &[&str]) -> Output {
    Command::new(name).args(args).output().unwrap_or_else(|e| panic!("{name}: {e} (run `make deps`)"))
}

/// The names of the tests memccapable's ASCII suite passed against `host:port`.
fn memccapable_passes(addr: &str) -> Vec<String> {
    let (host, port) = addr.rsplit_once(':').unwrap();
    let out = tool("memccapable", &["-h", host, "-p", port, "-t", "5", "-a"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    text.lines()
        .filter(|l| l.trim_end().ends_with("[pass]"))
        .map(|l| l.replace("[pass]", "").trim().to_string())
        .collect()
}

fn memccapable_passes_as_on_memcached(engine: &str) {
    let reference = Memcached::start();
    let expected = memccapable_passes(&reference.addr());
    assert!(expected.len() >= 20, "memccapable ran against memcached: {expected:?}");
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let refs: Vec<&Memcached> = servers.iter().collect();
    for mode in [&[][..], &["--sharded"][..], &["--distribution", "ketama", "--replication", "2"][..]] {
        let relay = Memrelay::start(engine, &refs, mode);
        assert_eq!(memccapable_passes(&relay.addr()), expected, "memccapable through memrelay {mode:?}");
    }
    // Pools and routes (issue 44): keys by their first letter over three pools (a replicated
    // one, a sharded one, the default), so that its multi-gets span pools.
    let more: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let hot = format!(
        "{{ name = \"hot\", servers = [\"{}\", \"{}\"], distribution = \"ketama\", replication = 2 }}",
        more[0].addr(),
        more[1].addr()
    );
    let main = format!("{{ name = \"main\", servers = [\"{}\"] }}", more[2].addr());
    let mut pools: Vec<String> =
        vec!["--distribution".into(), "ketama".into(), "--pool".into(), hot, "--pool".into(), main];
    for (i, first) in "abcdefghijklmnopqrstuvwxyz0123456789".chars().enumerate() {
        let pool = ["hot", "main", "default"][i % 3];
        pools.extend(["--route".into(), format!("{{ prefix = \"{first}\", pool = \"{pool}\" }}")]);
    }
    let pools: Vec<&str> = pools.iter().map(String::as_str).collect();
    let relay = Memrelay::start(engine, &refs, &pools);
    assert_eq!(memccapable_passes(&relay.addr()), expected, "memccapable through memrelay with pools and routes");
}

fn libmemcached_tools_work(engine: &str) {
    let server = Memcached::start();
    let relay = Memrelay::start(engine, &[&server], &[]);
    let servers = format!("--servers={}", relay.addr());
    let ping = tool("memcping", &[&servers]);
    assert!(ping.status.success(), "memcping: {}", String::from_utf8_lossy(&ping.stderr));
    let stat = tool("memcstat", &[&servers]);
    let text = String::from_utf8_lossy(&stat.stdout);
    assert!(stat.status.success() && text.contains("curr_connections"), "memcstat: {text}");
}
