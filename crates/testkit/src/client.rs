//! A blocking client that speaks raw protocol bytes, and helpers to read what comes back.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Read and write timeout of every [`Client`]: a test that waits longer has failed.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// The `(key, data)` of each `VALUE` block of a retrieval reply, in order.
pub fn parse_values(reply: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut values = Vec::new();
    let mut rest = reply;
    while rest.starts_with(b"VALUE ") {
        let newline = find(rest, b"\r\n").expect("VALUE line ends");
        let line = std::str::from_utf8(&rest[..newline]).expect("VALUE line is text");
        let fields: Vec<&str> = line.split(' ').collect();
        let len: usize = fields[3].parse().expect("VALUE length");
        let data = rest[newline + 2..newline + 2 + len].to_vec();
        assert_eq!(&rest[newline + 2 + len..newline + 4 + len], b"\r\n", "data block ends with CRLF");
        values.push((fields[1].to_string(), data));
        rest = &rest[newline + 4 + len..];
    }
    assert_eq!(rest, b"END\r\n", "a retrieval reply ends with one END: {}", show(reply));
    values
}

pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Bytes shown for an assertion message.
pub fn show(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(400)]).into_owned();
    if bytes.len() > 400 {
        format!("{text:?}... ({} bytes)", bytes.len())
    } else {
        format!("{text:?}")
    }
}

/// A raw-bytes protocol client.
pub struct Client {
    pub stream: TcpStream,
    /// Bytes read beyond the last reply returned.
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: &str) -> Client {
        let addr: SocketAddr = addr.parse().expect("address");
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Client { stream, buf: Vec::new() }
    }

    /// Connects to `addr` from the local address `source` (any of 127.0.0.0/8 on loopback: a
    /// client that looks like another peer).
    pub fn connect_from(addr: &str, source: &str) -> Client {
        let addr: SocketAddr = addr.parse().expect("address");
        let source: std::net::IpAddr = source.parse().expect("source address");
        // std cannot bind a socket before connecting it: libc does both.
        let stream = unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            assert!(fd >= 0, "socket");
            let to_sockaddr = |ip: std::net::IpAddr, port: u16| {
                let std::net::IpAddr::V4(v4) = ip else { panic!("IPv4 only") };
                libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: port.to_be(),
                    sin_addr: libc::in_addr { s_addr: u32::from(v4).to_be() },
                    sin_zero: [0; 8],
                }
            };
            let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            let local = to_sockaddr(source, 0);
            assert_eq!(libc::bind(fd, &local as *const _ as *const libc::sockaddr, len), 0, "bind {source}");
            let remote = to_sockaddr(addr.ip(), addr.port());
            assert_eq!(libc::connect(fd, &remote as *const _ as *const libc::sockaddr, len), 0, "connect {addr}");
            <TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd)
        };
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Client { stream, buf: Vec::new() }
    }

    pub fn set_read_timeout(&self, timeout: Duration) {
        self.stream.set_read_timeout(Some(timeout)).unwrap();
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap_or_else(|e| panic!("write: {e}"));
    }

    /// Reads more bytes into the buffer; `Ok(0)` at EOF.
    fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 64 * 1024];
        let n = self.stream.read(&mut chunk)?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// Bytes up to and including the first `terminator`; panics on EOF or timeout.
    pub fn read_until(&mut self, terminator: &[u8]) -> Vec<u8> {
        loop {
            if let Some(at) = find(&self.buf, terminator) {
                let rest = self.buf.split_off(at + terminator.len());
                return std::mem::replace(&mut self.buf, rest);
            }
            match self.fill() {
                Ok(0) => panic!("EOF waiting for {}; got {}", show(terminator), show(&self.buf)),
                Ok(_) => {}
                Err(e) => panic!("read waiting for {}: {e}; got {}", show(terminator), show(&self.buf)),
            }
        }
    }

    pub fn read_line(&mut self) -> Vec<u8> {
        self.read_until(b"\r\n")
    }

    /// Exactly `len` bytes.
    pub fn read_exact_reply(&mut self, len: usize) -> Vec<u8> {
        while self.buf.len() < len {
            match self.fill() {
                Ok(0) => panic!("EOF after {} of {len} bytes: {}", self.buf.len(), show(&self.buf)),
                Ok(_) => {}
                Err(e) => panic!("read after {} of {len} bytes: {e}; got {}", self.buf.len(), show(&self.buf)),
            }
        }
        let rest = self.buf.split_off(len);
        std::mem::replace(&mut self.buf, rest)
    }

    pub fn request(&mut self, bytes: &[u8], terminator: &[u8]) -> Vec<u8> {
        self.send(bytes);
        self.read_until(terminator)
    }

    /// Sends a request answered with one line and returns that line.
    pub fn line(&mut self, bytes: &[u8]) -> String {
        String::from_utf8(self.request(bytes, b"\r\n")).expect("reply line is text")
    }

    /// `get`/`gets` through this client: the parsed `VALUE`s.
    pub fn get(&mut self, keys: &str) -> Vec<(String, Vec<u8>)> {
        let reply = self.get_reply(&format!("get {keys}\r\n"));
        parse_values(&reply)
    }

    /// A retrieval reply in full (`VALUE`s then `END`), or an error line.
    pub fn get_reply(&mut self, request: &str) -> Vec<u8> {
        self.send(request.as_bytes());
        self.read_retrieval()
    }

    /// Reads one retrieval reply: `VALUE` blocks then `END`, or a single error line.
    pub fn read_retrieval(&mut self) -> Vec<u8> {
        let mut reply = Vec::new();
        loop {
            let line = self.read_line();
            reply.extend_from_slice(&line);
            if line.starts_with(b"VALUE ") {
                let text = String::from_utf8_lossy(&line).into_owned();
                let len: usize = text.trim_end().split(' ').nth(3).and_then(|n| n.parse().ok()).expect("VALUE length");
                reply.extend(self.read_exact_reply(len + 2));
            } else {
                return reply;
            }
        }
    }

    pub fn set(&mut self, key: &str, value: &[u8]) -> String {
        self.storage("set", key, value)
    }

    /// A storage command (`set`, `add`, ...) with flags 0 and no expiry; the reply line.
    pub fn storage(&mut self, command: &str, key: &str, value: &[u8]) -> String {
        let mut request = format!("{command} {key} 0 0 {}\r\n", value.len()).into_bytes();
        request.extend_from_slice(value);
        request.extend_from_slice(b"\r\n");
        self.line(&request)
    }

    /// Whether the peer closes the connection within `timeout` (EOF or reset), discarding any
    /// bytes it sends first. Returns those bytes if it closed, `None` if it stayed open.
    pub fn closed_within(&mut self, timeout: Duration) -> Option<Vec<u8>> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            match self.fill() {
                Ok(0) => return Some(std::mem::take(&mut self.buf)),
                Ok(_) => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => return None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Some(std::mem::take(&mut self.buf)),
            }
        }
    }

    pub fn shutdown_write(&self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }
}
