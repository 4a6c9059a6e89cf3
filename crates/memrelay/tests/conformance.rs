//! The same bytes to a real memcached and to memrelay (three servers behind it), replies compared
//! byte for byte: scripts where memrelay claims to answer exactly as memcached 1.6 does. Each
//! script is followed by a barrier with a reply no script gives, so a silent request (`noreply`)
//! shows as nothing before it.
//!
//! Every test is a function of the engine's name and runs once per engine (see `common`).

#[macro_use]
mod common;

use common::*;

macro_rules! suite {
    ($($engine:ident: $name:literal),* $(,)?) => {
        $(
            engine_tests!($engine: $name; scripts_answer_as_memcached);
        )*

        #[test]
        fn every_engine_has_a_suite() {
            assert_eq!(&[$($name),*][..], ENGINES);
        }
    };
}
for_each_engine!(suite);

const SCRIPTS: &[&[u8]] = &[
    // noreply: no reply line, errors included (memcached suppresses them too).
    b"set k 0 0 1 noreply\r\nx\r\n",
    b"set k x 0 1 noreply\r\nx\r\n",
    b"incr k abc noreply\r\n",
    b"delete k 5 noreply\r\n",
    b"set k 0 0 -1 noreply\r\n",
    b"touch k x noreply\r\n",
    b"flush_all noreply\r\n",
    b"verbosity noreply\r\n",
    b"verbosity 1 noreply\r\n",
    // Argument counts, extra tokens, numbers as memcached reads them.
    b"set k 0 0\r\n",
    b"set k 0 0 1 extra\r\nx\r\n",
    b"set k 99999999999 0 1\r\nx\r\nget k\r\n",
    b"set k 0 0 1\t\r\nx\r\nget k\r\n",
    b"incr k\r\n",
    b"incr n 1 2\r\n",
    b"delete k 5\r\n",
    b"delete k 0\r\n",
    b"flush_all -1\r\n",
    b"flush_all 0 0 0\r\n",
    b"verbosity 1\r\n",
    b"verbosity 1 2 3\r\n",
    // memrelay's own answers where they match memcached's.
    b"stats noreply\r\n",
    b"stats nosuchgroup\r\n",
    b"stats reset\r\n",
    // A NUL ends the line.
    b"get k\0 k2\r\n",
    b"set n 0 0 2\r\n10\r\nincr n 18446744073709551615\r\ndecr n 18446744073709551616\r\n",
];

/// The barrier after each script: its reply is unlike any script's.
const BARRIER: &[u8] = b"set __end__ 0 0 7\r\nthe-end\r\nget __end__\r\n";
const BARRIER_REPLY: &[u8] = b"STORED\r\nVALUE __end__ 0 7\r\nthe-end\r\nEND\r\n";

/// The script's replies: everything before the barrier's.
fn run(client: &mut Client, script: &[u8]) -> Vec<u8> {
    client.send(script);
    client.send(BARRIER);
    let mut reply = client.read_until(BARRIER_REPLY);
    reply.truncate(reply.len() - BARRIER_REPLY.len());
    reply
}

fn scripts_answer_as_memcached(engine: &str) {
    let reference = Memcached::start();
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::start()).collect();
    let refs: Vec<&Memcached> = servers.iter().collect();
    let relay = Memrelay::start(engine, &refs, &[]);
    for script in SCRIPTS {
        // Fresh connections and the same starting state on both sides.
        let reset = b"set k 0 0 1\r\nv\r\nset n 0 0 1\r\n5\r\n";
        let (mut direct, mut proxied) = (reference.client(), relay.client());
        run(&mut direct, reset);
        run(&mut proxied, reset);
        let want = run(&mut direct, script);
        let got = run(&mut proxied, script);
        assert_eq!(show(&got), show(&want), "script {}", show(script));
    }
}
