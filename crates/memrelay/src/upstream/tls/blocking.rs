//! Blocking connections to a server, plain or TLS (the pool's workers, the health probe, the
//! repair thread): [`ServerStream`] reads and writes as a `TcpStream` does, and [`connect`]
//! finishes the TLS handshake within the connect's time, so that a server that does not speak TLS
//! fails there, not in the middle of a request.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use rustls::{ClientConnection, StreamOwned};

use super::Peer;
use crate::upstream::failure::Failure;

/// A blocking connection to a server. The plain case stays a bare `TcpStream` (a match per call,
/// no indirection).
pub(crate) enum ServerStream {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

pub(crate) struct TlsStream {
    stream: StreamOwned<ClientConnection, TcpStream>,
    peer: Peer,
}

/// Connects to `addr` within `timeout`, TCP_NODELAY; with `tls`, the handshake too (within what
/// is left of `timeout`; the socket keeps that as its read and write timeouts).
pub(crate) fn connect(addr: SocketAddr, tls: Option<&Peer>, timeout: Duration) -> Result<ServerStream, Failure> {
    let deadline = Instant::now() + timeout;
    let socket = TcpStream::connect_timeout(&addr, timeout).map_err(|e| Failure::from_io(&e))?;
    socket.set_nodelay(true).map_err(|e| Failure::from_io(&e))?;
    let Some(peer) = tls else { return Ok(ServerStream::Plain(socket)) };
    let mut conn = peer.session()?;
    let mut socket = socket;
    // Bounded: each round either moves records or fails, and the deadline ends it.
    while conn.is_handshaking() {
        let left = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero());
        let Some(left) = left else {
            peer.unfinished(Failure::Timeout);
            return Err(Failure::Timeout);
        };
        socket.set_read_timeout(Some(left)).map_err(|e| Failure::from_io(&e))?;
        socket.set_write_timeout(Some(left)).map_err(|e| Failure::from_io(&e))?;
        match conn.complete_io(&mut socket) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(peer.io_failed(&e, true)),
        }
    }
    Ok(ServerStream::Tls(Box::new(TlsStream { stream: StreamOwned::new(conn, socket), peer: peer.clone() })))
}

impl ServerStream {
    /// The TCP socket underneath (timeouts, peeking).
    pub fn socket(&self) -> &TcpStream {
        match self {
            ServerStream::Plain(socket) => socket,
            ServerStream::Tls(tls) => tls.stream.get_ref(),
        }
    }

    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.socket().set_read_timeout(timeout)
    }

    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.socket().set_write_timeout(timeout)
    }

    /// The failure an I/O error on this connection stands for (a TLS session's error is logged).
    pub fn failure(&self, error: &io::Error) -> Failure {
        match self {
            ServerStream::Plain(_) => Failure::from_io(error),
            ServerStream::Tls(tls) => tls.peer.io_failed(error, false),
        }
    }
}

impl Read for ServerStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            ServerStream::Plain(socket) => socket.read(buf),
            ServerStream::Tls(tls) => match tls.stream.read(buf) {
                // The server closed without close_notify: for memcached that is a plain close.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
                other => other,
            },
        }
    }
}

impl Write for ServerStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            ServerStream::Plain(socket) => socket.write(buf),
            ServerStream::Tls(tls) => tls.stream.write(buf),
        }
    }

    /// With TLS, writes the records still waiting in the session.
    fn flush(&mut self) -> io::Result<()> {
        match self {
            ServerStream::Plain(socket) => socket.flush(),
            ServerStream::Tls(tls) => tls.stream.flush(),
        }
    }
}
