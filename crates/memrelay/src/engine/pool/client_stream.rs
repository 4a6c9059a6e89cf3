//! A reply a pool worker streams to its client ([`crate::relay::stream`]): the worker reads the
//! server's reply and writes it to the client socket as it arrives. A worker is shared by every
//! client, so it waits on a slow client only while no other request waits for a worker, and then
//! for the server timeout at most (a client that takes nothing for that long is cut off). While
//! others wait, what the socket does not take is held (it goes to the net thread with the job),
//! up to what the client's byte budget leaves ([`crate::client::budget`]); past that the client is
//! cut off and the worker goes on to the others. Time spent waiting on the client does not count
//! against the server.

use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use memrelay_protocol::{Expect, Reply};
use mio::net::TcpStream;

use crate::relay::merge::{Merge, MergeMove, END};
use crate::relay::stream::{Move, Streaming, TOO_LARGE_LINE};
use crate::upstream::conn::ServerConn;
use crate::upstream::failure::Failure;

/// Streams the reply whose start is in `conn.input` to `client`. On failure the server
/// connection is dropped (it is out of step); [`Failure::ClientGone`] is the client's doing.
pub(super) fn stream_reply(
    conn: &mut ServerConn,
    client: &mut ClientSink,
    expect: Expect,
    deadline: Instant,
    timeout: Duration,
) -> Result<Reply, Failure> {
    let mut streaming = Streaming::new(expect, conn.max_value_len, crate::access::max_reply_bytes());
    let mut deadline = deadline;
    loop {
        let step = streaming.next(conn.input.pending());
        let (send, consume): (&[u8], usize) = match step {
            Move::Send(n) => (&conn.input.pending()[..n], n),
            Move::Refuse(n) => (TOO_LARGE_LINE, n),
            Move::Drop(n) => (&[], n),
            Move::Incomplete => {
                conn.read_more(&mut deadline)?;
                continue;
            }
            Move::Done(reply) if conn.input.is_empty() => {
                conn.streamed();
                return Ok(reply);
            }
            // Bytes past the reply were never asked for, or it is no reply.
            Move::Done(_) | Move::Invalid(_) => return Err(conn.abandon(Failure::BadReply)),
        };
        if !send.is_empty() {
            match client.send(send) {
                // The server is not late for the time the client took.
                Ok(true) => deadline = deadline.max(Instant::now() + timeout),
                Ok(false) => {}
                Err(failure) => return Err(conn.abandon(failure)),
            }
        }
        conn.input.consume(consume);
    }
}

/// Streams a split multi-get's parts to `client` merged in key order ([`Merge`]): part p is
/// the reply of server `targets[p]`, whose connection in `servers` has the request sent and
/// possibly the start of the reply read. A part is read only when the merge needs it, so the
/// later parts wait in their sockets. `ends[p]` says how each part ended: `Ok` when its reply
/// went through whole and its connection is in step, else why it was dropped. The result is
/// the merged reply's end, or the failure that cut it (the client's, or a part's).
pub(super) fn stream_merged(
    servers: &mut [ServerConn],
    targets: &[usize],
    merge: &mut Merge,
    client: &mut ClientSink,
    timeout: Duration,
    ends: &mut Vec<Result<(), Failure>>,
) -> Result<Reply, Failure> {
    ends.clear();
    ends.resize(targets.len(), Err(Failure::Cut));
    // The part last read, and its deadline: a server has the timeout from when its part's turn
    // came (the time it waited for the others and for the client is not its own), and keeps it
    // while its part is read on (so a server dribbling its part is failed after the timeout).
    let mut reading: Option<(usize, Instant)> = None;
    let result = loop {
        let step = merge.next(|p| servers[targets[p]].input.pending());
        let (part, send, consume): (usize, &[u8], usize) = match step {
            MergeMove::Send { part, n } => (part, &servers[targets[part]].input.pending()[..n], n),
            MergeMove::Refuse { part, n } => (part, TOO_LARGE_LINE, n),
            MergeMove::Drop { part, n } => (part, &[], n),
            MergeMove::End => (0, END, 0),
            MergeMove::Need(part) => {
                let mut deadline = match reading {
                    Some((last, deadline)) if last == part => deadline,
                    _ => Instant::now() + timeout,
                };
                if let Err(failure) = servers[targets[part]].read_more(&mut deadline) {
                    ends[part] = Err(failure);
                    break Err(failure);
                }
                reading = Some((part, deadline));
                continue;
            }
            MergeMove::Done(reply) => break Ok(reply),
            MergeMove::Invalid { part, .. } => {
                ends[part] = Err(servers[targets[part]].abandon(Failure::BadReply));
                break Err(Failure::BadReply);
            }
            MergeMove::Error { part, n } => {
                // An error line ends the server's reply: its connection is in step.
                servers[targets[part]].input.consume(n);
                break Err(Failure::Cut);
            }
        };
        if !send.is_empty() {
            match client.send(send) {
                // The client took time: the part being read has its timeout from now.
                Ok(true) => reading = None,
                Ok(false) => {}
                Err(failure) => break Err(failure),
            }
        }
        servers[targets[part]].input.consume(consume);
    };
    for (p, &server) in targets.iter().enumerate() {
        let conn = &mut servers[server];
        if merge.through(p) && conn.input.is_empty() {
            conn.streamed();
            ends[p] = Ok(());
        } else if merge.through(p) {
            // Bytes past its reply were never asked for.
            ends[p] = Err(conn.abandon(Failure::BadReply));
        } else if ends[p] == Err(Failure::Cut) {
            // Cut off mid-reply with the others: out of step.
            conn.abandon(Failure::Cut);
        }
    }
    result
}

/// Where a streamed reply goes: the client's socket as it takes bytes; what it does not take is
/// held (in order) while other requests wait for a worker, else waited for.
pub(super) struct ClientSink<'a> {
    pub socket: &'a TcpStream,
    /// What the socket has not taken yet, in order: the net thread sends it after the worker.
    pub held: &'a mut Vec<u8>,
    /// The most that may be held before the client is cut off: what its budget leaves.
    pub room: usize,
    /// Whether other requests wait for a worker now.
    pub others_wait: &'a dyn Fn() -> bool,
    /// How long the client may take nothing while the worker waits on it.
    pub patience: Duration,
}

impl ClientSink<'_> {
    /// Sends `bytes` after what is held. Returns whether the worker waited on the client;
    /// [`Failure::ClientGone`] when it is gone, took nothing for the patience, or would make
    /// memrelay hold more than its room (then it is counted as cut off).
    pub fn send(&mut self, mut bytes: &[u8]) -> Result<bool, Failure> {
        let mut waited = false;
        loop {
            if !self.held.is_empty() {
                let taken = write_now(self.socket, self.held)?;
                self.held.drain(..taken);
            }
            if self.held.is_empty() {
                let taken = write_now(self.socket, bytes)?;
                bytes = &bytes[taken..];
                if bytes.is_empty() {
                    return Ok(waited);
                }
            }
            // The socket is full.
            if (self.others_wait)() {
                if self.held.len() + bytes.len() > self.room {
                    crate::client::budget::count_cut_off();
                    return Err(Failure::ClientGone);
                }
                self.held.extend_from_slice(bytes);
                return Ok(waited);
            }
            if !writable_within(self.socket, self.patience, self.others_wait) {
                return Err(Failure::ClientGone);
            }
            waited = true;
        }
    }
}

/// Writes what the non-blocking `socket` takes of `bytes` now; how much it took.
fn write_now(mut socket: &TcpStream, bytes: &[u8]) -> Result<usize, Failure> {
    let mut taken = 0;
    while taken < bytes.len() {
        match socket.write(&bytes[taken..]) {
            Ok(0) => return Err(Failure::ClientGone),
            Ok(n) => taken += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(_) => return Err(Failure::ClientGone),
        }
    }
    Ok(taken)
}

/// Waits until `socket` takes bytes again, or other requests come to wait for a worker (true
/// either way); false once the client has taken nothing from its socket for `patience` (a
/// client reading a byte at a time makes progress long before the socket reports room).
fn writable_within(socket: &TcpStream, patience: Duration, others_wait: &dyn Fn() -> bool) -> bool {
    let fd = socket.as_raw_fd();
    let mut until = Instant::now() + patience;
    let mut queued = unsent_in_socket(fd);
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let mut poll = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
        let millis = libc::c_int::try_from(left.min(PROGRESS_CHECK).as_millis().max(1)).unwrap_or(1);
        // SAFETY: one valid pollfd for a socket this job holds open.
        match unsafe { libc::poll(&mut poll, 1, millis) } {
            n if n > 0 => return poll.revents & (libc::POLLERR | libc::POLLHUP) == 0,
            0 => {}
            _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            _ => return false,
        }
        if others_wait() {
            return true;
        }
        let now_queued = unsent_in_socket(fd);
        if now_queued < queued {
            // The client took bytes: it is slow, not gone.
            until = Instant::now() + patience;
        }
        queued = now_queued;
    }
}

/// How often a wait on a client checks whether it took bytes.
const PROGRESS_CHECK: Duration = Duration::from_millis(100);

/// Bytes in the socket's send queue not yet acknowledged by the client (SIOCOUTQ).
fn unsent_in_socket(fd: std::os::fd::RawFd) -> usize {
    let mut queued: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (SIOCOUTQ) writes one int for a socket this job holds open.
    let ok = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut queued) } == 0;
    if ok {
        usize::try_from(queued).unwrap_or(0)
    } else {
        0
    }
}
