//! The black-box harness: real memcached servers, a real memrelay process in front of them, and
//! a client that speaks raw protocol bytes.
//!
//! - [`Memcached`]: one `memcached` on a free 127.0.0.1 port, its own `stats` read directly.
//! - [`Memrelay`]: the `memrelay` binary of this build with the given engine and servers.
//! - [`Client`]: a blocking TCP client with a read timeout, reading replies up to a terminator.
//!
//! No fixed ports: a port is found by binding port 0 and releasing it; a process that loses
//! the port to someone else exits and is started again on another one. A process is ready when
//! a socket *it* owns listens on its port (checked in /proc, so a stray connection never counts
//! as a request). Every process is killed when its guard drops, also when a test panics.
//!
//! Engines: every test is a function taking the engine's name; [`for_each_engine!`] calls a
//! suite macro with every engine in [`ENGINES`], so adding an engine there adds the whole suite.

#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Every engine the suite runs against. Keep in step with [`for_each_engine!`] (each test file
/// checks that they agree).
pub const ENGINES: &[&str] = &["pool", "evented"];

/// Calls `$suite!(module: "engine", ...)` once, with every engine of [`ENGINES`]. A test file
/// defines `$suite` to expand [`engine_tests!`] per engine with its list of tests.
macro_rules! for_each_engine {
    ($suite:ident) => {
        $suite!(pool: "pool", evented: "evented");
    };
}

/// `engine_tests!(module: "engine"; test_a, test_b)` makes `mod module` with one `#[test]` per
/// name, each calling `super::name("engine")`.
macro_rules! engine_tests {
    ($engine:ident: $name:literal; $($test:ident),* $(,)?) => {
        mod $engine {
            $(
                #[test]
                fn $test() {
                    super::$test($name)
                }
            )*
        }
    };
}

pub const IO_TIMEOUT: Duration = Duration::from_secs(10);
const START_TIMEOUT: Duration = Duration::from_secs(10);
const START_ATTEMPTS: usize = 10;
pub const MEMCACHED: &str = "/usr/bin/memcached";

/// A port nothing listens on right now (bound, then released).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().unwrap().port()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Socket inodes in LISTEN state on `port` (any local address), from /proc/net/tcp{,6}.
fn listening_inodes(port: u16) -> HashSet<u64> {
    let mut inodes = HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = fs::read_to_string(table) else { continue };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 10 || fields[3] != "0A" {
                continue;
            }
            let local_port = fields[1].rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok());
            if local_port == Some(port) {
                if let Ok(inode) = fields[9].parse() {
                    inodes.insert(inode);
                }
            }
        }
    }
    inodes
}

/// Whether process `pid` holds a socket listening on `port`.
fn owns_listener(pid: u32, port: u16) -> bool {
    let listening = listening_inodes(port);
    if listening.is_empty() {
        return false;
    }
    let Ok(entries) = fs::read_dir(format!("/proc/{pid}/fd")) else { return false };
    entries.flatten().any(|entry| {
        fs::read_link(entry.path())
            .ok()
            .and_then(|target| {
                let target = target.to_string_lossy().into_owned();
                target.strip_prefix("socket:[")?.strip_suffix(']')?.parse::<u64>().ok()
            })
            .is_some_and(|inode| listening.contains(&inode))
    })
}

enum Ready {
    Listening,
    Exited(ExitStatus),
}

/// Waits until `child` listens on `port` and accepts a connection, or exits.
fn wait_listening(child: &mut Child, port: u16, what: &str) -> Ready {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Ready::Exited(status);
        }
        if owns_listener(child.id(), port) && TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ready::Listening;
        }
        assert!(Instant::now() < deadline, "{what} did not listen on port {port} within {START_TIMEOUT:?}");
        thread::sleep(Duration::from_millis(5));
    }
}

fn kill_and_reap(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

// ---------------------------------------------------------------------------------------------

/// One memcached server on 127.0.0.1.
pub struct Memcached {
    pub port: u16,
    child: Option<Child>,
}

impl Memcached {
    pub fn start() -> Memcached {
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            if let Some(child) = Self::spawn(port) {
                return Memcached { port, child: Some(child) };
            }
        }
        panic!("memcached did not start after {START_ATTEMPTS} attempts");
    }

    /// Starts memcached on `port`; `None` if it exited (lost the port).
    fn spawn(port: u16) -> Option<Child> {
        let mut command = Command::new(MEMCACHED);
        command.args(["-l", "127.0.0.1", "-p", &port.to_string(), "-U", "0", "-m", "64", "-t", "1"]);
        if is_root() {
            command.args(["-u", "root"]);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {MEMCACHED}: {e} (run `make deps`)"));
        match wait_listening(&mut child, port, "memcached") {
            Ready::Listening => Some(child),
            Ready::Exited(_) => None,
        }
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kills the server (SIGKILL): its clients see resets or refused connections.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill_and_reap(&mut child);
        }
    }

    /// Starts the server again on the same port (empty, as a restarted memcached is).
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(child) = Self::spawn(self.port) {
                self.child = Some(child);
                return;
            }
            assert!(Instant::now() < deadline, "memcached could not listen again on port {}", self.port);
            thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn client(&self) -> Client {
        Client::connect(&self.addr())
    }

    /// The server's own `stats`, numeric values only.
    pub fn stats(&self) -> HashMap<String, u64> {
        let reply = self.client().request(b"stats\r\n", b"END\r\n");
        let text = String::from_utf8(reply).expect("stats reply is text");
        let mut stats = HashMap::new();
        for line in text.lines() {
            let mut fields = line.split(' ');
            if fields.next() == Some("STAT") {
                if let (Some(name), Some(value)) = (fields.next(), fields.next()) {
                    if let Ok(value) = value.parse() {
                        stats.insert(name.to_string(), value);
                    }
                }
            }
        }
        stats
    }

    /// The value the server itself holds for `key`.
    pub fn get_raw(&self, key: &str) -> Option<Vec<u8>> {
        let reply = self.client().request(format!("get {key}\r\n").as_bytes(), b"END\r\n");
        parse_values(&reply).into_iter().next().map(|(_, value)| value)
    }

    /// Stores `key` on this server only.
    pub fn set_raw(&self, key: &str, value: &[u8]) {
        let mut request = format!("set {key} 0 0 {}\r\n", value.len()).into_bytes();
        request.extend_from_slice(value);
        request.extend_from_slice(b"\r\n");
        assert_eq!(self.client().request(&request, b"\r\n"), b"STORED\r\n");
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        self.kill();
    }
}

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

// ---------------------------------------------------------------------------------------------

/// A running memrelay.
pub struct Memrelay {
    pub port: u16,
    child: Option<Child>,
    stderr_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Memrelay {
    pub fn start(engine: &str, servers: &[&Memcached], extra_args: &[&str]) -> Memrelay {
        let addrs: Vec<String> = servers.iter().map(|s| s.addr()).collect();
        Self::start_addrs(engine, &addrs, extra_args)
    }

    /// Starts memrelay in front of arbitrary addresses (dead ports, fake servers).
    pub fn start_addrs(engine: &str, servers: &[String], extra_args: &[&str]) -> Memrelay {
        let dir = tempfile::tempdir().expect("tempdir");
        let stderr_path = dir.path().join("stderr");
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            let mut command = memrelay_command(engine, port, servers, extra_args);
            let stderr = File::create(&stderr_path).expect("stderr file");
            let mut child = command
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(stderr)
                .spawn()
                .expect("cannot start memrelay");
            match wait_listening(&mut child, port, "memrelay") {
                Ready::Listening => return Memrelay { port, child: Some(child), stderr_path, _dir: dir },
                Ready::Exited(status) => {
                    let stderr = fs::read_to_string(&stderr_path).unwrap_or_default();
                    // Lost the port race: try another port. Anything else is a failure.
                    assert!(stderr.contains("cannot listen"), "memrelay exited at start ({status}): {stderr}");
                }
            }
        }
        panic!("memrelay did not start after {START_ATTEMPTS} attempts");
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn client(&self) -> Client {
        Client::connect(&self.addr())
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("memrelay is running").id()
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.pid() as libc::pid_t, libc::SIGTERM) };
        assert_eq!(rc, 0, "kill(SIGTERM) failed");
    }

    /// Waits for the process to exit (after [`Memrelay::terminate`]), within `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        let child = self.child.as_mut().expect("memrelay is running");
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                self.child = None;
                return status;
            }
            assert!(Instant::now() < deadline, "memrelay did not exit within {timeout:?} of SIGTERM");
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGTERM, then the exit status (within 10 s).
    pub fn stop(&mut self) -> ExitStatus {
        self.terminate();
        self.wait(Duration::from_secs(10))
    }

    /// What memrelay wrote on stderr so far.
    pub fn stderr(&self) -> String {
        fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }
}

impl Drop for Memrelay {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill_and_reap(&mut child);
        }
    }
}

pub fn memrelay_command(engine: &str, port: u16, servers: &[String], extra_args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_memrelay"));
    command.args(["--engine", engine, "--listen", &format!("127.0.0.1:{port}")]);
    for server in servers {
        command.args(["--server", server]);
    }
    command.args(extra_args);
    command
}

/// Runs memrelay with exactly `args` (it is expected to exit by itself): status and stderr.
pub fn run_memrelay(args: &[&str]) -> (ExitStatus, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_memrelay"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(&path).expect("stderr file"))
        .spawn()
        .expect("cannot start memrelay");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > deadline {
            kill_and_reap(&mut child);
            panic!("memrelay {args:?} did not exit by itself");
        }
        thread::sleep(Duration::from_millis(5));
    };
    (status, fs::read_to_string(&path).unwrap_or_default())
}

// ---------------------------------------------------------------------------------------------

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

/// A fake server that answers every `get` with `END` after `delay`, and tells when it has a
/// request.
pub fn slow_server(delay: Duration) -> (String, std::sync::mpsc::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (told, tell) = std::sync::mpsc::channel();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let told = told.clone();
            thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while let Some(at) = find(&buf, b"\r\n") {
                        buf.drain(..at + 2);
                        let _ = told.send(());
                        thread::sleep(delay);
                        if stream.write_all(b"END\r\n").is_err() {
                            return;
                        }
                    }
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    (addr, tell)
}

/// Polls `condition` every few milliseconds until it holds or `timeout` passes.
pub fn wait_for(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// `after[name] - before[name]` (missing counts as 0).
pub fn delta(before: &HashMap<String, u64>, after: &HashMap<String, u64>, name: &str) -> u64 {
    after.get(name).copied().unwrap_or(0) - before.get(name).copied().unwrap_or(0)
}

/// Raises this process's open-file limit (inherited by the processes it starts) to `want`,
/// or the hard limit if lower. Returns the new soft limit.
pub fn raise_nofile(want: u64) -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a valid pointer.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        if limit.rlim_cur < want as libc::rlim_t {
            limit.rlim_cur = (want as libc::rlim_t).min(limit.rlim_max);
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
        }
    }
    limit.rlim_cur as u64
}
