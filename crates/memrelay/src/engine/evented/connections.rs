//! An event loop's connections to the servers. Every server has one connection that new
//! requests go to, shared by all of the loop's clients. A connection paused for one client's
//! reply (that client stopped reading, and nobody else's request waits on the connection) takes
//! no new requests: the server's next requests go to another connection, opened for them (or a
//! spare one reused), so a paused connection holds up nobody but its own client. At most
//! [`MAX_PAUSED`] connections to a server are paused at once in a loop; a spare connection idle
//! for [`SPARE_IDLE`] is closed.
//!
//! Connections are numbered for good (a closed one keeps its number and is reused), and their
//! poll tokens count down from [`UPSTREAM_BASE`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::Token;

use super::upstream::Upstream;
use crate::generation::Generation;
use crate::upstream::registry::Registry;
use crate::upstream::tls::pump::Pump;
use crate::upstream::tls::ServerTls;

/// Connection tokens count down from here (above every client token).
const UPSTREAM_BASE: usize = usize::MAX - 16;

/// The most connections to one server a loop keeps paused for single clients' replies: a reply
/// that would pause one more cuts its client off instead (memcached's own connection limit is
/// not spent on clients that do not read).
pub(super) const MAX_PAUSED: usize = 8;

/// A connection beyond a server's first that has been idle this long is closed.
const SPARE_IDLE: Duration = Duration::from_secs(1);

pub(super) struct Connections {
    conns: Vec<Upstream>,
    /// Each server's connections, by id; the first is its first (never closed for being spare).
    of_server: Vec<Vec<usize>>,
    /// Each server's connection new requests go to.
    open: Vec<usize>,
    /// Each server's address.
    addrs: Vec<SocketAddr>,
    /// Connections with a batch to write at the end of the turn.
    dirty: Vec<usize>,
    /// Servers a reload retired whose connections are still to close.
    retiring: Vec<usize>,
    registry: Arc<Registry>,
    /// TLS to the servers, when it is on.
    server_tls: Option<Arc<ServerTls>>,
    max_value_len: usize,
    timeout: Duration,
}

impl Connections {
    pub fn new(registry: Arc<Registry>, server_tls: Option<Arc<ServerTls>>, max_value_len: usize) -> Connections {
        Connections {
            conns: Vec::new(),
            of_server: Vec::new(),
            open: Vec::new(),
            addrs: Vec::new(),
            dirty: Vec::new(),
            retiring: Vec::new(),
            registry,
            server_tls,
            max_value_len,
            timeout: Duration::from_secs(1),
        }
    }

    /// Takes up `config`: connections for the servers it added, its server timeout; the retired
    /// servers' connections close once nothing is outstanding on them.
    pub fn adopt(&mut self, config: &Generation, poll: &mio::Registry) {
        self.timeout = config.server_timeout;
        for server in self.of_server.len()..self.registry.len() {
            self.addrs.push(self.registry.addr(server));
            self.of_server.push(Vec::new());
            let first = self.connect(server);
            self.open.push(first);
        }
        for conn in &mut self.conns {
            conn.set_timeout(self.timeout);
        }
        self.retiring = (0..self.of_server.len()).filter(|id| !config.servers.contains(id)).collect();
        self.close_retired(poll);
    }

    /// A new connection to `server` (not connected until a request needs it).
    fn connect(&mut self, server: usize) -> usize {
        let id = self.conns.len();
        let addr = self.addrs[server];
        let tls = self.server_tls.as_ref().and_then(|tls| tls.peer(&self.registry.endpoint(server))).map(Pump::new);
        let mut conn = Upstream::new(server, addr, Token(UPSTREAM_BASE - id), self.max_value_len, tls);
        conn.set_timeout(self.timeout);
        self.conns.push(conn);
        self.of_server[server].push(id);
        id
    }

    /// Closes the retired servers' connections that have nothing outstanding.
    pub fn close_retired(&mut self, poll: &mio::Registry) {
        let (conns, of_server) = (&mut self.conns, &self.of_server);
        self.retiring.retain(|&server| {
            let mut open = false;
            for &id in &of_server[server] {
                open |= !conns[id].close_if_idle(poll);
            }
            open
        });
    }

    /// Whether a reload retired servers whose connections are still open.
    pub fn retiring(&self) -> bool {
        !self.retiring.is_empty()
    }

    /// The connection a new request to `server` goes on: its open connection, unless that is
    /// paused for one client's reply (then another one, reused or new).
    pub fn for_request(&mut self, server: usize) -> usize {
        let open = self.open[server];
        if self.conns[open].takes_requests() {
            return open;
        }
        let spare = self.of_server[server].iter().copied().find(|&id| self.conns[id].takes_requests());
        let id = spare.unwrap_or_else(|| self.connect(server));
        self.open[server] = id;
        id
    }

    /// Whether one more connection to `server` may pause for a client's reply.
    pub fn may_pause(&self, server: usize) -> bool {
        self.of_server[server].iter().filter(|&&id| !self.conns[id].takes_requests()).count() < MAX_PAUSED
    }

    pub fn get(&self, id: usize) -> &Upstream {
        &self.conns[id]
    }

    pub fn get_mut(&mut self, id: usize) -> &mut Upstream {
        &mut self.conns[id]
    }

    /// The connection a poll token belongs to.
    pub fn of_token(&self, Token(token): Token) -> Option<usize> {
        let id = UPSTREAM_BASE.checked_sub(token)?;
        (token <= UPSTREAM_BASE && id < self.conns.len()).then_some(id)
    }

    /// Every connection's id.
    pub fn ids(&self) -> std::ops::Range<usize> {
        0..self.conns.len()
    }

    /// Each server's address, by id.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Connection `id` has a batch to write at the end of the turn.
    pub fn mark_dirty(&mut self, id: usize) {
        if !self.dirty.contains(&id) {
            self.dirty.push(id);
        }
    }

    /// A connection with a batch to write, if any is left.
    pub fn next_dirty(&mut self) -> Option<usize> {
        self.dirty.pop()
    }

    /// Requests queued and not yet written, on every connection.
    pub fn unsent(&self) -> usize {
        self.conns.iter().map(Upstream::unsent).sum()
    }

    /// Requests are outstanding on some connection.
    pub fn busy(&self) -> bool {
        self.conns.iter().any(Upstream::busy)
    }

    /// Gives idle connections' batch buffers back and closes spare connections idle for
    /// [`SPARE_IDLE`]; says whether a buffer was given back.
    pub fn tidy(&mut self, now: Instant, poll: &mio::Registry) -> bool {
        let mut shrunk = false;
        for conn in &mut self.conns {
            shrunk |= conn.shrink_if_idle(now);
        }
        for server in 0..self.of_server.len() {
            for i in 1..self.of_server[server].len() {
                let id = self.of_server[server][i];
                if self.spare_close_at(server, id).is_some_and(|at| at <= now) {
                    self.conns[id].close_if_idle(poll);
                }
            }
        }
        shrunk
    }

    /// When spare connection `id` of `server` closes: one beyond the server's first, not the one
    /// new requests go to, connected and idle.
    fn spare_close_at(&self, server: usize, id: usize) -> Option<Instant> {
        let first = self.of_server[server].first() == Some(&id);
        if first || self.open[server] == id {
            return None;
        }
        self.conns[id].idle_since().map(|since| since + SPARE_IDLE)
    }

    /// When the connections next need the loop without an event: a deadline, a buffer to give
    /// back, a spare to close.
    pub fn next_timer(&self) -> Option<Instant> {
        let conns = self.conns.iter().flat_map(|c| [c.next_deadline(), c.shrink_at()]).flatten();
        let spares = self
            .of_server
            .iter()
            .enumerate()
            .flat_map(|(server, ids)| ids.iter().filter_map(move |&id| self.spare_close_at(server, id)));
        conns.chain(spares).min()
    }
}
