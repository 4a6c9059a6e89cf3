//! Measuring a network link between two machines: `--link-listen` on one end, `--link-probe`
//! on the other (the lab runs them over SSH to record each role-to-role link of an experiment).
//!
//! The probe connects (TCP_NODELAY) and sends `PINGS` one-byte pings, each echoed by the
//! listener: the round trip is the smallest and the median of those samples (the first few
//! include slow start and wake-ups; the minimum is the link's own). Then it sends 64 KiB
//! chunks for `--link-seconds`, shuts its side down, and the listener answers with the count
//! of bytes it received: bandwidth = bytes / (time until that answer), so data still in the
//! sockets' buffers counts only once it has crossed. One JSON line on stdout:
//! `{"rtt_min_us", "rtt_median_us", "pings", "bytes", "seconds", "mbit_per_s"}`.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use serde::Serialize;

/// Round-trip samples per probe.
pub const PINGS: usize = 50;
const CHUNK: usize = 64 * 1024;
const PING: u8 = b'P';
const BULK: u8 = b'B';

/// What a probe measured.
#[derive(Debug, Clone, Serialize)]
pub struct LinkMeasurement {
    pub rtt_min_us: f64,
    pub rtt_median_us: f64,
    pub pings: usize,
    pub bytes: u64,
    pub seconds: f64,
    pub mbit_per_s: f64,
}

/// Answers one probe on `listen` (waiting at most `wait` for it); prints the port it listens on
/// first (`listening <port>`), so a caller may ask for port 0. A connection that closes before
/// its first byte (someone checking that the port listens) is not the probe: it waits on.
pub fn listen(listen: &str, wait: Duration) -> io::Result<()> {
    let listener = TcpListener::bind(listen)?;
    println!("listening {}", listener.local_addr()?.port());
    io::stdout().flush()?;
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + wait;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                if answer(stream, wait)? {
                    return Ok(());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "no probe connected"));
            }
            Err(e) => return Err(e),
        }
    }
}

/// One connection: echo the pings, count the bulk bytes, send the count. False when the peer
/// closed before sending anything.
fn answer(mut stream: TcpStream, wait: Duration) -> io::Result<bool> {
    stream.set_nonblocking(false)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(wait))?;
    let mut byte = [0u8; 1];
    let mut first = true;
    loop {
        if stream.read(&mut byte)? == 0 {
            if first {
                return Ok(false);
            }
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the probe left mid-way"));
        }
        first = false;
        match byte[0] {
            PING => stream.write_all(&byte)?,
            BULK => break,
            other => {
                return Err(io::Error::new(io::ErrorKind::InvalidData, format!("unexpected byte {other}")));
            }
        }
    }
    let mut received: u64 = 0;
    let mut buffer = vec![0u8; CHUNK];
    loop {
        let n = stream.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        received += n as u64;
    }
    stream.write_all(&received.to_be_bytes())?;
    Ok(true)
}

/// Probes the listener at `target`: round trips, then a bulk transfer of `seconds`.
pub fn probe(target: &str, seconds: f64, connect_timeout: Duration) -> io::Result<LinkMeasurement> {
    let address = target
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{target} resolves to nothing")))?;
    let mut stream = TcpStream::connect_timeout(&address, connect_timeout)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(connect_timeout.max(Duration::from_secs(10))))?;
    let mut samples = Vec::with_capacity(PINGS);
    let mut byte = [PING];
    for _ in 0..PINGS {
        let sent = Instant::now();
        stream.write_all(&[PING])?;
        stream.read_exact(&mut byte)?;
        samples.push(sent.elapsed().as_secs_f64() * 1e6);
    }
    samples.sort_by(f64::total_cmp);
    stream.write_all(&[BULK])?;
    let chunk = vec![b'x'; CHUNK];
    let started = Instant::now();
    let sending = Duration::from_secs_f64(seconds.max(0.01));
    while started.elapsed() < sending {
        stream.write_all(&chunk)?;
    }
    stream.shutdown(std::net::Shutdown::Write)?;
    let mut count = [0u8; 8];
    stream.read_exact(&mut count)?;
    let elapsed = started.elapsed().as_secs_f64();
    let bytes = u64::from_be_bytes(count);
    Ok(LinkMeasurement {
        rtt_min_us: samples[0],
        rtt_median_us: samples[samples.len() / 2],
        pings: samples.len(),
        bytes,
        seconds: elapsed,
        mbit_per_s: bytes as f64 * 8.0 / elapsed / 1e6,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listener_counts_every_byte_the_probe_sent() {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let address = format!("127.0.0.1:{port}");
        let server = {
            let address = address.clone();
            std::thread::spawn(move || listen(&address, Duration::from_secs(30)))
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        // A connection that closes at once (a check that the port listens) is not the probe.
        while TcpStream::connect(&address).is_err() {
            assert!(Instant::now() < deadline, "the listener never listened");
            std::thread::sleep(Duration::from_millis(5));
        }
        let measured = loop {
            match probe(&address, 0.05, Duration::from_secs(5)) {
                Ok(m) => break m,
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(e) => panic!("{e}"),
            }
        };
        server.join().unwrap().unwrap();
        assert_eq!(measured.pings, PINGS);
        assert!(measured.rtt_min_us <= measured.rtt_median_us);
        // The listener's count is what crossed; the probe wrote whole chunks.
        assert!(measured.bytes > 0 && measured.bytes % CHUNK as u64 == 0);
    }
}
