//! The record pump of a non-blocking TLS connection to a server (the evented engine's shared
//! connections): plaintext requests go into the session and records out to the socket until it
//! would block; records come in from the socket, the session processes them (handshake messages
//! are answered at once) and the plaintext replies they carried go into the connection's input.
//! The handshake starts with the first records written once the TCP connect finished; requests
//! handed over before it is done wait in the session (bounded by its buffer limit).

use std::io::{self, Write};

use mio::net::TcpStream;
use rustls::ClientConnection;

use super::Peer;
use crate::buffer::{Filled, ReadBuffer};
use crate::upstream::failure::Failure;

/// TLS on one server connection: the server's [`Peer`] and the session of the current connection.
pub(crate) struct Pump {
    peer: Peer,
    conn: Option<ClientConnection>,
}

/// What one round of reading did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Round {
    /// Records came in (perhaps with plaintext, now in the input).
    Records,
    /// The socket has nothing more for now.
    Blocked,
    /// The server closed the connection (or the session, with close_notify).
    Closed,
}

impl Pump {
    pub fn new(peer: Peer) -> Pump {
        Pump { peer, conn: None }
    }

    /// A new session for a new connection.
    pub fn start(&mut self) -> Result<(), Failure> {
        self.conn = Some(self.peer.session()?);
        Ok(())
    }

    /// The connection is gone; so is its session.
    pub fn end(&mut self) {
        self.conn = None;
    }

    pub fn handshaking(&self) -> bool {
        self.conn.as_ref().is_some_and(|c| c.is_handshaking())
    }

    /// Records are waiting for the socket.
    pub fn wants_write(&self) -> bool {
        self.conn.as_ref().is_some_and(|c| c.wants_write())
    }

    /// Logs why a connected socket whose handshake did not finish failed (a TLS error was logged
    /// where it was found).
    pub fn failing(&self, failure: Failure) {
        if self.handshaking() && failure != Failure::Tls {
            self.peer.unfinished(failure);
        }
    }

    /// Hands as much of `plaintext` to the session as it takes and writes records until the
    /// socket would block; returns the bytes taken.
    pub fn write(&mut self, socket: &TcpStream, plaintext: &[u8]) -> Result<usize, Failure> {
        let Some(conn) = self.conn.as_mut() else { return Err(Failure::Reset) };
        let mut taken = 0;
        loop {
            // 0: the session's buffer is full until records go out.
            let n = conn.writer().write(&plaintext[taken..]).map_err(|e| Failure::from_io(&e))?;
            taken += n;
            let wrote = write_records(conn, socket)?;
            if taken == plaintext.len() && !conn.wants_write() || n == 0 && !wrote {
                return Ok(taken);
            }
        }
    }

    /// One read of records from the socket, processed; the plaintext they carried is moved into
    /// `input`, and what the session has to say (a handshake answer, an alert) is written.
    pub fn read(&mut self, socket: &TcpStream, input: &mut ReadBuffer) -> Result<Round, Failure> {
        let Some(conn) = self.conn.as_mut() else { return Err(Failure::Reset) };
        let eof = match conn.read_tls(&mut &*socket) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Round::Blocked),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(Round::Records),
            // An unfinished handshake is logged by the connection, which knows whether the TCP
            // connect had finished (a refused connect is no TLS matter).
            Err(e) => return Err(self.peer.io_failed(&e, false)),
        };
        if let Err(error) = conn.process_new_packets() {
            // The session queued an alert for the server: send it, then give up.
            let _ = conn.write_tls(&mut &*socket);
            return Err(self.peer.failed(&error));
        }
        loop {
            match input.read_from(&mut conn.reader()) {
                Ok(Filled::Bytes { .. }) => {}
                // close_notify.
                Ok(Filled::Eof) => return Ok(Round::Closed),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // The socket's EOF without close_notify, once the plaintext is read.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(Round::Closed),
                Err(e) => return Err(Failure::from_io(&e)),
            }
        }
        write_records(conn, socket)?;
        Ok(if eof { Round::Closed } else { Round::Records })
    }
}

/// Writes records until none wait or the socket would block; says whether any went out.
fn write_records(conn: &mut ClientConnection, socket: &TcpStream) -> Result<bool, Failure> {
    let mut wrote = false;
    while conn.wants_write() {
        match conn.write_tls(&mut &*socket) {
            Ok(0) => return Err(Failure::Reset),
            Ok(_) => wrote = true,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Failure::from_io(&e)),
        }
    }
    Ok(wrote)
}
