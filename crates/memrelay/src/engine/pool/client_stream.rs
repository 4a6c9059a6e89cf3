//! A reply a pool worker streams to its client ([`crate::relay::stream`]): the worker reads the
//! server's reply and writes it to the client socket as it arrives, waiting on the socket when
//! the client reads slowly, so a slow client slows the read from the server and never grows
//! memrelay's memory. Time spent waiting on the client does not count against the server. A
//! worker is shared by every client, so it waits on one for the server timeout at most (not the
//! evented engine's [`crate::relay::stream::CLIENT_PATIENCE`]): a client that takes nothing for
//! that long is cut off and the worker goes on to the others.

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
    client: &TcpStream,
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
            if let Err(failure) = write_waiting(client, send, timeout) {
                return Err(conn.abandon(failure));
            }
            // The server is not late for the time the client took.
            deadline = deadline.max(Instant::now() + timeout);
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
    client: &TcpStream,
    timeout: Duration,
    ends: &mut Vec<Result<(), Failure>>,
) -> Result<Reply, Failure> {
    ends.clear();
    ends.resize(targets.len(), Err(Failure::Cut));
    let result = loop {
        let step = merge.next(|p| servers[targets[p]].input.pending());
        let (part, send, consume): (usize, &[u8], usize) = match step {
            MergeMove::Send { part, n } => (part, &servers[targets[part]].input.pending()[..n], n),
            MergeMove::Refuse { part, n } => (part, TOO_LARGE_LINE, n),
            MergeMove::Drop { part, n } => (part, &[], n),
            MergeMove::End => (0, END, 0),
            MergeMove::Need(part) => {
                // The server has the timeout from now: the time its part waited for the others
                // and for the client is not its own.
                let mut deadline = Instant::now() + timeout;
                if let Err(failure) = servers[targets[part]].read_more(&mut deadline) {
                    ends[part] = Err(failure);
                    break Err(failure);
                }
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
            if let Err(failure) = write_waiting(client, send, timeout) {
                break Err(failure);
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

/// Writes all of `bytes` to the non-blocking `socket`, waiting up to `patience` each time it
/// is full.
fn write_waiting(mut socket: &TcpStream, mut bytes: &[u8], patience: Duration) -> Result<(), Failure> {
    while !bytes.is_empty() {
        match socket.write(bytes) {
            Ok(0) => return Err(Failure::ClientGone),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if !writable_within(socket, patience) {
                    return Err(Failure::ClientGone);
                }
            }
            Err(_) => return Err(Failure::ClientGone),
        }
    }
    Ok(())
}

/// Waits until `socket` takes bytes again; false once the client has taken nothing from its
/// socket for `patience` (a client reading a byte at a time makes progress long before the
/// socket reports room).
fn writable_within(socket: &TcpStream, patience: Duration) -> bool {
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
