//! The black-box harness: real memcached servers (from the shared `memrelay-testkit`), a real
//! memrelay process of this build in front of them, and a client that speaks raw protocol bytes.
//!
//! - [`Memrelay`]: the `memrelay` binary of this build with the given engine and servers.
//! - Everything else (`Memcached`, `Client`, free ports, counters, fake servers) is the test kit's,
//!   re-exported here so every test module reads `use crate::common::*`.
//! - [`certs`]: test certificates (the `openssl` command) and a rustls client.
//!
//! Every process is killed when its guard drops, also when a test panics.
//!
//! Engines: every test is a function taking the engine's name; [`engine_matrix!`] runs a module's
//! list of them once per engine of [`ENGINES`], so adding an engine there adds every suite.

use std::fs::{self, File};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

pub use memrelay_testkit::*;

/// Test certificates and a rustls client (TLS from clients and to the servers).
pub mod certs;

/// Every engine the suite runs against, in the order [`engine_matrix!`] makes their modules (one
/// test below checks that the two agree).
pub const ENGINES: &[&str] = &["pool", "evented"];

/// `engine_matrix!(test_a, test_b)` makes, for every engine of [`ENGINES`], `mod <engine>` with
/// one `#[test]` per name, each calling `super::<name>("<engine>")`: a module's engine suite is
/// its functions of the engine's name and one call of this macro, so adding an engine here adds
/// every suite.
macro_rules! engine_matrix {
    // The one list of engines; the other arms get it from here.
    (@with_engines $arm:ident $($rest:tt)*) => {
        engine_matrix! { @$arm [pool: "pool", evented: "evented"] $($rest)* }
    };
    (@modules [$($engine:ident: $name:literal),*] $tests:tt) => {
        $(engine_matrix!(@module $engine: $name $tests);)*
    };
    (@module $engine:ident: $name:literal [$($test:ident),*]) => {
        mod $engine {
            $(
                #[test]
                fn $test() {
                    super::$test($name)
                }
            )*
        }
    };
    (@names [$($engine:ident: $name:literal),*]) => {
        &[$($name),*]
    };
    ($($test:ident),* $(,)?) => {
        engine_matrix!(@with_engines modules [$($test),*]);
    };
}

#[test]
fn the_engine_matrix_runs_every_engine() {
    let matrix: &[&str] = engine_matrix!(@with_engines names);
    assert_eq!(matrix, ENGINES);
}

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
        Self::start_addrs_with(engine, servers, extra_args, |_| {})
    }

    /// Starts memrelay with at most `nofile` descriptors (soft and hard limit).
    pub fn start_with_nofile(engine: &str, servers: &[&Memcached], extra_args: &[&str], nofile: u64) -> Memrelay {
        use std::os::unix::process::CommandExt;
        let addrs: Vec<String> = servers.iter().map(|s| s.addr()).collect();
        Self::start_addrs_with(engine, &addrs, extra_args, |command| {
            // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
            unsafe {
                command.pre_exec(move || {
                    let limit = libc::rlimit { rlim_cur: nofile, rlim_max: nofile };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        })
    }

    fn start_addrs_with(
        engine: &str,
        servers: &[String],
        extra_args: &[&str],
        customize: impl Fn(&mut Command),
    ) -> Memrelay {
        let dir = tempfile::tempdir().expect("tempdir");
        let stderr_path = dir.path().join("stderr");
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            let mut command = memrelay_command(engine, port, servers, extra_args);
            customize(&mut command);
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

/// The memrelay binary the tests run: MEMRELAY_TEST_BIN runs the suite against another build (to
/// show a test failing on an older tree); by default, this build's binary.
pub fn memrelay_binary() -> std::ffi::OsString {
    std::env::var_os("MEMRELAY_TEST_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_memrelay").into())
}

pub fn memrelay_command(engine: &str, port: u16, servers: &[String], extra_args: &[&str]) -> Command {
    let mut command = Command::new(memrelay_binary());
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
    let mut child = Command::new(memrelay_binary())
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

/// One line of memrelay's `stats`: the value of `name`, or empty when it has none.
pub fn stat_of(client: &mut Client, name: &str) -> String {
    client.send(b"stats\r\n");
    let reply = String::from_utf8(client.read_until(b"END\r\n")).unwrap();
    let prefix = format!("STAT {name} ");
    reply.lines().find_map(|l| l.strip_prefix(&prefix).map(str::to_string)).unwrap_or_default()
}
