//! Every key a server holds, from `lru_crawler metadump hash|all`, handed over one at a time as
//! the dump is read (a resync copies each before it reads the next), so memory stays bounded
//! whatever the server sends. A dump is bounded by what the server itself says it holds
//! ([`Bounds`]: keys, bytes, time, from its `curr_items` and the server timeout); one that goes
//! past them is a failed dump (the resync is tried again later), never an unbounded one.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::upstream::tls::{blocking, Peer};

/// The longest line of a metadump accepted (a key of 250 bytes escaped is 750).
const MAX_DUMP_LINE: usize = 4096;
/// Bytes a dump may take per key it may list: a line of the longest key escaped is under this.
const BYTES_PER_KEY: u64 = 1024;
/// Keys a dump may list beyond twice the server's `curr_items` (writes go on during the walk).
const SPARE_KEYS: u64 = 1000;
/// Keys per server timeout a dump may take, the copies made while it is read included: with the
/// default timeout (1 s), 10 ms a key, five times what two exchanges take at a 1 ms round trip.
const KEYS_PER_TIMEOUT: u64 = 100;

/// How a metadump walks the server's items.
#[derive(Clone, Copy)]
enum Walk {
    /// `lru_crawler metadump hash` (memcached 1.6.9 and later): the hash table, bucket by bucket,
    /// with its expansion held off, so every item present throughout the walk is listed once.
    Hash,
    /// `lru_crawler metadump all`: the LRUs. memcached calls it "(most of)" the items: one that
    /// moves between LRUs during the walk (the LRU maintainer moves the ones being read) can be
    /// missed, and a resync from it left a restarted replica without a key under load. Only for
    /// servers that do not know `hash`.
    Lru,
}

/// Why a dump did not give every key.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Dump {
    /// The server does not know the walk asked for (an older memcached: `BADCLASS`, an error).
    Refused,
    /// Busy crawler, a line too long or malformed, a timeout, a closed connection.
    Failed,
    /// More keys, bytes or time than the server's own item count allows.
    PastBounds(String),
    /// The caller stopped it (a copy failed, or memrelay is stopping).
    Stopped,
}

/// How far a dump may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bounds {
    pub keys: u64,
    pub bytes: u64,
    pub time: Duration,
}

impl Bounds {
    /// For a server that holds `items` (its `curr_items`) and answers within `timeout`.
    pub(crate) fn for_items(items: u64, timeout: Duration) -> Bounds {
        let keys = items.saturating_mul(2).saturating_add(SPARE_KEYS);
        let timeouts = 1 + keys / KEYS_PER_TIMEOUT;
        Bounds {
            keys,
            bytes: keys.saturating_mul(BYTES_PER_KEY),
            time: timeout.saturating_mul(u32::try_from(timeouts).unwrap_or(u32::MAX)),
        }
    }
}

/// Calls `on_key` with every key `addr` holds (false from it stops the dump): from a hash-table
/// walk, or where the server does not know that walk (memcached before 1.6.9), from the LRU
/// walk. The number of keys listed, or why not all were.
pub(crate) fn each_key(
    addr: SocketAddr,
    tls: Option<&Peer>,
    timeout: Duration,
    on_key: &mut dyn FnMut(Vec<u8>) -> bool,
) -> Result<u64, Dump> {
    match metadump(addr, tls, timeout, Walk::Hash, on_key) {
        Err(Dump::Refused) => metadump(addr, tls, timeout, Walk::Lru, on_key),
        other => other,
    }
}

fn failed<E>(_: E) -> Dump {
    Dump::Failed
}

/// One walk of `addr` (over TLS with `tls`): its `curr_items` from `stats`, then `lru_crawler
/// metadump hash|all` (`key=<url-escaped> exp=… …` lines, then `END`) on the same connection.
fn metadump(
    addr: SocketAddr,
    tls: Option<&Peer>,
    timeout: Duration,
    walk: Walk,
    on_key: &mut dyn FnMut(Vec<u8>) -> bool,
) -> Result<u64, Dump> {
    let started = Instant::now();
    let stream = blocking::connect(addr, tls, timeout).map_err(failed)?;
    stream.set_write_timeout(Some(timeout)).map_err(failed)?;
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    let next_line = |reader: &mut BufReader<blocking::ServerStream>, line: &mut Vec<u8>, deadline: Instant| {
        line.clear();
        let left = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()).ok_or(Dump::Failed)?;
        reader.get_ref().set_read_timeout(Some(left.min(timeout))).map_err(failed)?;
        let n = reader.by_ref().take(MAX_DUMP_LINE as u64).read_until(b'\n', line).map_err(failed)?;
        if n == 0 || !line.ends_with(b"\n") {
            return Err(Dump::Failed);
        }
        Ok(n as u64)
    };

    send(&mut reader, b"stats\r\n")?;
    let mut items = None;
    for _ in 0..1000 {
        next_line(&mut reader, &mut line, started + timeout)?;
        let text = trim(&line);
        if text == b"END" {
            break;
        }
        if let Some(value) = text.strip_prefix(b"STAT curr_items ") {
            items = std::str::from_utf8(value).ok().and_then(|v| v.parse::<u64>().ok());
        }
    }
    let items = items.ok_or(Dump::Failed)?;
    let bounds = Bounds::for_items(items, timeout);
    let deadline = started + bounds.time;

    send(
        &mut reader,
        match walk {
            Walk::Hash => b"lru_crawler metadump hash\r\n",
            Walk::Lru => b"lru_crawler metadump all\r\n",
        },
    )?;
    let (mut keys, mut bytes) = (0u64, 0u64);
    loop {
        let past = |what: &str| Dump::PastBounds(format!("{what} (curr_items {items}: at most {bounds:?})"));
        bytes += next_line(&mut reader, &mut line, deadline).map_err(|error| match error {
            Dump::Failed if Instant::now() >= deadline => past("longer than its time"),
            error => error,
        })?;
        if bytes > bounds.bytes {
            return Err(past("more bytes than its bound"));
        }
        let text = trim(&line);
        if text == b"END" {
            return Ok(keys);
        }
        let Some(rest) = text.strip_prefix(b"key=") else {
            let refused = [&b"BADCLASS"[..], b"CLIENT_ERROR", b"ERROR"].iter().any(|e| text.starts_with(e));
            return Err(if keys == 0 && refused { Dump::Refused } else { Dump::Failed });
        };
        keys += 1;
        if keys > bounds.keys {
            return Err(past("more keys than its bound"));
        }
        let escaped = rest.split(|&b| b == b' ').next().unwrap_or_default();
        if !on_key(unescape(escaped).ok_or(Dump::Failed)?) {
            return Err(Dump::Stopped);
        }
    }
}

fn send(reader: &mut BufReader<blocking::ServerStream>, command: &[u8]) -> Result<(), Dump> {
    let stream = reader.get_mut();
    stream.write_all(command).map_err(failed)?;
    stream.flush().map_err(failed)
}

fn trim(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r\n").or_else(|| line.strip_suffix(b"\n")).unwrap_or(line)
}

/// Undoes memcached's URL escaping of a key (`%XX`).
fn unescape(escaped: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(escaped.len());
    let mut i = 0;
    while i < escaped.len() {
        if escaped[i] == b'%' {
            let hex = std::str::from_utf8(escaped.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(escaped[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;
    use std::thread;

    #[test]
    fn dump_keys_are_unescaped() {
        assert_eq!(unescape(b"user%3A42%20x").unwrap(), b"user:42 x");
        assert_eq!(unescape(b"plain").unwrap(), b"plain");
        assert_eq!(unescape(b"bad%4"), None);
    }

    const STATS: &str = "STAT pid 1\r\nSTAT curr_items 2\r\nEND\r\n";

    /// A server that answers `stats` and each metadump command its own way (an older memcached
    /// refusing `hash`, a busy crawler, a dump cut off): what no memcached installed here says.
    fn server(answers: &'static [(&'static str, &'static str)]) -> SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let mut stream = stream.unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                    let command = line.trim_end();
                    let answer = match command {
                        "stats" => STATS,
                        _ => answers.iter().find(|(c, _)| command == *c).map_or("ERROR\r\n", |a| a.1),
                    };
                    if stream.write_all(answer.as_bytes()).is_err() {
                        break;
                    }
                    line.clear();
                }
            }
        });
        addr
    }

    const TIMEOUT: Duration = Duration::from_secs(5);
    const KEYS: &str =
        "key=a exp=-1 la=1 cas=1 fetch=no cls=1 size=61\nkey=b%20c exp=-1 la=1 cas=2 fetch=no cls=1 size=61\nEND\r\n";

    fn every_key(addr: SocketAddr) -> Result<Vec<Vec<u8>>, Dump> {
        let mut keys = Vec::new();
        each_key(addr, None, TIMEOUT, &mut |key| {
            keys.push(key);
            true
        })?;
        Ok(keys)
    }

    #[test]
    fn the_hash_walk_is_asked_first_and_the_lru_walk_only_where_it_is_refused() {
        // memcached 1.6.9 and later: the hash walk answers, the LRU walk is never asked.
        let addr = server(&[("lru_crawler metadump hash", KEYS)]);
        assert_eq!(every_key(addr), Ok(vec![b"a".to_vec(), b"b c".to_vec()]));
        // Older: `hash` read as a class id list.
        let addr = server(&[
            ("lru_crawler metadump hash", "BADCLASS invalid class id\r\n"),
            ("lru_crawler metadump all", KEYS),
        ]);
        assert_eq!(every_key(addr), Ok(vec![b"a".to_vec(), b"b c".to_vec()]));
        // A busy crawler or a dump cut off is a failure (the resync is tried again), not a refusal.
        let addr = server(&[
            ("lru_crawler metadump hash", "BUSY currently processing crawler request\r\n"),
            ("lru_crawler metadump all", KEYS),
        ]);
        assert_eq!(every_key(addr), Err(Dump::Failed));
        let addr = server(&[
            ("lru_crawler metadump hash", "key=a exp=-1 la=1\nERROR\r\n"),
            ("lru_crawler metadump all", KEYS),
        ]);
        assert_eq!(every_key(addr), Err(Dump::Failed));
    }

    /// Item 3 of issue 43: a server that keeps sending keys grew memrelay by gigabytes (every key
    /// was collected before any was copied). Now each key is handed over as it is read, and the
    /// dump stops at the bound its `curr_items` sets.
    #[test]
    fn an_endless_dump_stops_at_its_bound() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            stream.write_all(STATS.as_bytes()).unwrap();
            reader.read_line(&mut line).unwrap();
            for i in 0u64.. {
                let key = format!("key=k{i} exp=-1 la=1 cas={i} fetch=no cls=1 size=61\n");
                if stream.write_all(key.as_bytes()).is_err() {
                    return;
                }
            }
        });
        let bounds = Bounds::for_items(2, TIMEOUT);
        let mut seen = 0u64;
        let result = each_key(addr, None, TIMEOUT, &mut |_| {
            seen += 1;
            true
        });
        assert!(matches!(&result, Err(Dump::PastBounds(why)) if why.starts_with("more keys")), "{result:?}");
        assert_eq!(seen, bounds.keys, "every key up to the bound handed over, none kept");
        assert_eq!(bounds, Bounds { keys: 1004, bytes: 1004 * 1024, time: TIMEOUT * 11 });
    }

    #[test]
    fn a_dump_slower_than_its_time_bound_fails() {
        // One key a while, never faster than the read timeout: only the dump's own bound ends it.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            stream.write_all(b"STAT curr_items 0\r\nEND\r\n").unwrap();
            reader.read_line(&mut line).unwrap();
            for i in 0.. {
                if stream.write_all(format!("key=k{i} exp=-1\n").as_bytes()).is_err() {
                    return;
                }
                thread::sleep(Duration::from_millis(10)); // far under the read timeout
            }
        });
        // Bounded by 1,000 keys and 11 timeouts (2.75 s); at most 275 keys come in that time.
        let timeout = Duration::from_millis(250);
        let result = each_key(addr, None, timeout, &mut |_| true);
        assert!(matches!(&result, Err(Dump::PastBounds(why)) if why.starts_with("longer")), "{result:?}");
    }
}
