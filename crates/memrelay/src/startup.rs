//! Start-up and stop, the same for both engines: the router, the listener, the statistics thread
//! and the recorders that feed it, the signal handler; and [`Error`], one message per way
//! memrelay can fail to start or stop badly.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use mio::net::TcpListener;
use socket2::{Domain, Socket, Type};

use crate::access::Access;
use crate::client::local::LocalAnswers;
use crate::export::prometheus::Sources;
use crate::export::stats::{Shared, StatsThread};
use crate::generation::{Current, Generation};
use crate::measure;
use crate::measure::clock::WindowClock;
use crate::measure::in_system::InSystem;
use crate::measure::live::LiveTotals;
use crate::measure::metrics::{Recorder, Window};
use crate::reload;
use crate::settings::Settings;
use crate::upkeep::identities::IdentityFile;
use crate::upkeep::probe;
use crate::upkeep::spool::Spool;
use crate::upstream::health::Health;
use crate::upstream::registry::Registry;
use crate::upstream::tls::ServerTls;

/// Connections the kernel queues for accepting (capped by `net.core.somaxconn`).
const LISTEN_BACKLOG: i32 = 4096;

/// Why memrelay could not start, or stopped badly.
#[derive(Debug)]
pub enum Error {
    /// The servers do not make a ring (e.g. a name that is not `host:port`).
    Routing(String),
    /// The auth file or the access rules cannot be used.
    Access(String),
    /// The descriptor limit leaves no room for clients.
    Descriptors(String),
    /// A file of TLS to the servers cannot be used (the message names the option and file).
    ServerTls(String),
    Listen {
        addr: SocketAddr,
        source: io::Error,
    },
    /// The poller, its waker or the signal handler could not be set up.
    EventLoopSetup(io::Error),
    Thread {
        name: String,
        source: io::Error,
    },
    /// The statistics directory or files could not be written.
    Statistics(io::Error),
    /// An event loop failed while running.
    EventLoop(io::Error),
    /// A thread panicked (its message went to stderr).
    Panicked(String),
    /// The repair spool folder could not be opened or read.
    Spool {
        dir: std::path::PathBuf,
        source: io::Error,
    },
}

impl Error {
    /// Whether the configuration itself is refused (bad input: exit status 2), rather than the
    /// start failing on the machine (a port taken, no threads).
    pub fn is_configuration(&self) -> bool {
        matches!(self, Error::Routing(_) | Error::Access(_) | Error::ServerTls(_))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Routing(reason) => write!(f, "{reason}"),
            Error::Access(problem) | Error::ServerTls(problem) | Error::Descriptors(problem) => write!(f, "{problem}"),
            Error::Listen { addr, source } => write!(f, "cannot listen on {addr}: {source}"),
            Error::Spool { dir, source } => write!(f, "--repair-spool-dir {}: {source}", dir.display()),
            Error::EventLoopSetup(source) => write!(f, "cannot set up the event loop: {source}"),
            Error::Thread { name, source } => write!(f, "cannot start thread {name}: {source}"),
            Error::Statistics(source) => write!(f, "cannot write statistics: {source}"),
            Error::EventLoop(source) => write!(f, "event loop failed: {source}"),
            Error::Panicked(name) => write!(f, "the {name} thread panicked"),
        }
    }
}

impl std::error::Error for Error {}

/// What every engine starts with: the router, the statistics thread and the channels its
/// recorders ship windows on, the running totals and the shutdown flag.
pub(crate) struct Runtime {
    /// The settings memrelay started with (a reload changes only the generation).
    pub settings: Arc<Settings>,
    /// Every server by stable id.
    pub registry: Arc<Registry>,
    /// TLS to the servers, when it is on (shared by every connection to a server).
    pub server_tls: Option<Arc<ServerTls>>,
    /// The servers and routing in force.
    pub current: Arc<Current>,
    pub health: Arc<Health>,
    pub live: Arc<LiveTotals>,
    /// Who may do what ([`crate::access`]).
    pub access: Arc<Access>,
    /// The TLS listener's configuration (`--tls-listen`), which a reload replaces.
    pub tls: Option<Arc<crate::client::tls::SharedConfig>>,
    /// Requests inside memrelay, one counter per recording thread.
    in_system: Arc<InSystem>,
    pub shutdown: Arc<AtomicBool>,
    clock: WindowClock,
    to_stats: Sender<Box<Window>>,
    recycled: Receiver<Box<Window>>,
    stats: JoinHandle<io::Result<()>>,
    /// Tells the stats thread to stop waiting for recorders whose threads are stuck.
    stop_stats: Arc<AtomicBool>,
    probe: JoinHandle<()>,
    repair: JoinHandle<()>,
    /// The spool thread and what tells it to make its last turn (`--repair-spool-dir`).
    spool: Option<(JoinHandle<()>, Arc<AtomicBool>)>,
}

impl Runtime {
    /// Starts the statistics thread for `recorders` recording threads, the probe thread, the
    /// metrics endpoint, and reloads on SIGHUP from `reload`.
    pub fn start(
        settings: Settings,
        recorders: usize,
        shutdown: Arc<AtomicBool>,
        reload: Option<reload::Source>,
    ) -> Result<Runtime, Error> {
        let settings = Arc::new(settings);
        let registry = Arc::new(Registry::new(&[]));
        let current = Arc::new(Current::new(Generation::build(&settings, &registry, 1).map_err(Error::Routing)?));
        let access = Arc::new(Access::new(&settings.access).map_err(Error::Access)?);
        let server_tls = ServerTls::new(settings.server_tls_settings()).map_err(Error::ServerTls)?.map(Arc::new);
        if !access.get().is_open() {
            eprintln!("memrelay: access: {}", access.get().describe());
        }
        let tls = match &settings.tls {
            Some(tls) => Some(Arc::new(crate::client::tls::SharedConfig::new(tls).map_err(Error::Access)?)),
            None => None,
        };
        let clock = WindowClock { start: Instant::now(), length: settings.measurement.window };
        let (to_stats, stats_in) = crossbeam_channel::unbounded();
        let (recycle_out, recycled) = crossbeam_channel::unbounded();
        let live = LiveTotals::new(settings.all_servers().count());
        let in_system = InSystem::new(recorders, clock.start);
        let stats = StatsThread::new(
            Arc::clone(&settings),
            clock,
            recorders,
            stats_in,
            recycle_out,
            Shared { live: Arc::clone(&live), registry: Arc::clone(&registry), in_system: Arc::clone(&in_system) },
        )
        .map_err(Error::Statistics)?;
        let sampler = measure::in_system::spawn_sampler(Arc::clone(&in_system), clock, Arc::clone(&shutdown))
            .map_err(|source| Error::Thread { name: "sampler".into(), source })?;
        drop(sampler); // it ends with the shutdown flag
        let stop_stats = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&stop_stats);
        let stats = spawn("stats", move || stats.run(stop))?;
        let health = Arc::new(Health::new(Arc::clone(&registry), settings.health));
        let probe = {
            // With a spool, a server that restarted while memrelay was down is told now.
            let file = settings.repair_spool.as_deref().map(IdentityFile::in_dir);
            let mut known = probe::Known::from(file, &registry);
            if settings.repair_spool.is_some() {
                let generation = current.get();
                let (servers, timeout) = (&generation.servers, generation.server_timeout);
                probe::first_look(&health, &registry, server_tls.as_deref(), servers, timeout, &mut known);
            }
            let (health, shutdown) = (Arc::clone(&health), Arc::clone(&shutdown));
            let (registry, current, tls) = (Arc::clone(&registry), Arc::clone(&current), server_tls.clone());
            spawn("probe", move || probe::run(health, registry, current, tls, shutdown, known))?
        };
        // Read back before any client is accepted: reads must already avoid those servers.
        let spool = match &settings.repair_spool {
            Some(dir) => {
                let spool = Spool::open(dir, &registry, &current.get().servers, health.repair())
                    .map_err(|source| Error::Spool { dir: dir.clone(), source })?;
                let stop = Arc::new(AtomicBool::new(false));
                let (health, stop_thread) = (Arc::clone(&health), Arc::clone(&stop));
                let (registry, current) = (Arc::clone(&registry), Arc::clone(&current));
                let handle =
                    spawn("spool", move || crate::upkeep::spool::run(spool, registry, current, health, stop_thread))?;
                Some((handle, stop))
            }
            None => None,
        };
        let repair = {
            let (health, shutdown) = (Arc::clone(&health), Arc::clone(&shutdown));
            let (registry, current, tls) = (Arc::clone(&registry), Arc::clone(&current), server_tls.clone());
            let max_value_len = settings.limits.max_value_size;
            spawn("repair", move || {
                crate::upkeep::repair::run(health, registry, current, tls, shutdown, max_value_len)
            })?
        };
        if let Some(addr) = settings.measurement.metrics_listen {
            let metrics_tls = match &settings.measurement.metrics_tls {
                Some(tls) => Some(crate::export::https::server_config(tls).map_err(Error::Access)?),
                None => None,
            };
            let limits = crate::export::server::Limits {
                connections: crate::export::server::connection_cap(),
                deadline: settings.measurement.metrics_timeout,
            };
            let endpoint = crate::export::server::Endpoint::bind(addr, metrics_tls, limits)
                .map_err(|source| Error::Listen { addr, source })?;
            let sources = Sources {
                live: Arc::clone(&live),
                health: Arc::clone(&health),
                registry: Arc::clone(&registry),
                current: Arc::clone(&current),
            };
            let registry = crate::export::prometheus::registry(sources);
            let (access, shutdown) = (Arc::clone(&access), Arc::clone(&shutdown));
            spawn("metrics", move || endpoint.serve(registry, access, shutdown))?;
        }
        if let Some(source) = reload {
            let target = reload::Target {
                started: Arc::clone(&settings),
                registry: Arc::clone(&registry),
                current: Arc::clone(&current),
                access: Arc::clone(&access),
                tls: tls.clone(),
            };
            reload::watch(source, target, Arc::clone(&shutdown)).map_err(Error::EventLoopSetup)?;
            crate::signals::redeliver_early_hangup();
        }
        Ok(Runtime {
            settings,
            registry,
            server_tls,
            current,
            health,
            live,
            access,
            tls,
            in_system,
            shutdown,
            clock,
            to_stats,
            recycled,
            stats,
            stop_stats,
            probe,
            repair,
            spool,
        })
    }

    /// The recorder of recording thread `thread` (numbered from 0).
    pub fn recorder(&self, thread: usize) -> Recorder {
        Recorder::new(
            thread as u16,
            self.clock,
            self.settings.all_servers().count(),
            self.settings.measurement.request_log_sample,
            self.to_stats.clone(),
            self.recycled.clone(),
            Arc::clone(&self.in_system),
        )
    }

    /// The answers to `version`, `stats` and the like; `threads` is what `stats` reports.
    pub fn local_answers(&self, threads: usize) -> LocalAnswers {
        LocalAnswers::new(
            Arc::clone(&self.live),
            Arc::clone(&self.health),
            Arc::clone(&self.registry),
            Arc::clone(&self.current),
            threads,
            Arc::clone(&self.access),
        )
    }

    /// On SIGINT/SIGTERM: sets the shutdown flag and calls `wake`.
    pub fn on_signal(&self, wake: impl Fn() + Send + 'static) -> Result<(), Error> {
        crate::signals::on_signal(Arc::clone(&self.shutdown), wake).map_err(Error::EventLoopSetup)
    }

    /// Called once the engines acknowledge no more writes: waits for the repair thread, makes the
    /// spool thread write its last turn, and waits for the statistics thread to write the summary
    /// once every recorder is gone, or until `by`: then it writes what it has (a thread still
    /// holding a recorder is stuck in an exchange past the shutdown grace).
    pub fn finish(self, by: Instant) -> Result<(), Error> {
        let Runtime { to_stats, recycled, stats, stop_stats, probe, repair, spool, .. } = self;
        drop((to_stats, recycled));
        // The probe and repair threads see the shutdown flag within a turn (or one exchange's
        // timeout: a resync stops at its next key).
        wait_until_finished(&probe, by);
        wait_until_finished(&repair, by);
        if repair.is_finished() && repair.join().is_err() {
            return Err(Error::Panicked("repair".into()));
        }
        if let Some((handle, stop)) = spool {
            stop.store(true, Ordering::Release);
            // Its last turn is a write per server: given a while even past `by`, since it holds
            // the records of the writes acknowledged last.
            wait_until_finished(&handle, by.max(Instant::now() + SPOOL_LAST_TURN));
            if !handle.is_finished() {
                eprintln!("memrelay: the repair spool's last write did not finish within {SPOOL_LAST_TURN:?}");
            } else if handle.join().is_err() {
                return Err(Error::Panicked("spool".into()));
            }
        }
        wait_until_finished(&stats, by);
        stop_stats.store(true, Ordering::Release);
        match stats.join() {
            Ok(result) => result.map_err(Error::Statistics),
            Err(_) => Err(Error::Panicked("stats".into())),
        }
    }
}

/// The listening sockets of `copies` event loops: non-blocking, `SO_REUSEADDR` (a restart can
/// bind while old connections linger), a backlog for bursts. With several loops each gets its own
/// socket on the address with `SO_REUSEPORT`, so the kernel spreads connections evenly over the
/// loops. Before that, a plain bind checks that the port is free: a second memrelay on the same
/// port fails to start instead of silently taking a share of the connections (only a process
/// binding in the instant between the check and the bind could slip in).
pub(crate) fn listen(addr: SocketAddr, copies: usize) -> Result<Vec<TcpListener>, Error> {
    let socket = |reuse_port: bool| -> io::Result<Socket> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
        socket.set_reuse_address(true)?;
        socket.set_reuse_port(reuse_port)?;
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        Ok(socket)
    };
    let bind = || -> io::Result<Vec<TcpListener>> {
        if copies == 1 {
            let only = socket(false)?;
            only.listen(LISTEN_BACKLOG)?;
            return Ok(vec![TcpListener::from_std(only.into())]);
        }
        drop(socket(false)?);
        (0..copies)
            .map(|_| {
                let shared = socket(true)?;
                shared.listen(LISTEN_BACKLOG)?;
                Ok(TcpListener::from_std(shared.into()))
            })
            .collect()
    };
    bind().map_err(|source| Error::Listen { addr, source })
}

/// How long a stop waits for the spool thread's last write at least.
const SPOOL_LAST_TURN: Duration = Duration::from_secs(5);

/// Starts a named thread.
pub(crate) fn spawn<T: Send + 'static>(
    name: &str,
    body: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>, Error> {
    thread::Builder::new().name(name.into()).spawn(body).map_err(|source| Error::Thread { name: name.into(), source })
}

/// Waits until `handle`'s thread has ended, or `by`.
pub(crate) fn wait_until_finished<T>(handle: &JoinHandle<T>, by: Instant) {
    while !handle.is_finished() && Instant::now() < by {
        thread::sleep(Duration::from_millis(5));
    }
}

/// Joins an engine thread that returns an event loop's result.
pub(crate) fn join(name: &str, handle: JoinHandle<io::Result<()>>) -> Result<(), Error> {
    match handle.join() {
        Ok(result) => result.map_err(Error::EventLoop),
        Err(_) => Err(Error::Panicked(name.into())),
    }
}
