//! TLS from clients (evented engine only): a second listener beside the plain one, whose
//! connections speak the same protocol inside TLS (rustls). The session's bytes go through a
//! [`rustls::ServerConnection`] between the socket and the [`ClientIo`] buffers, so parsing,
//! access control and everything after see plain requests, as from a plain client.
//!
//! Non-blocking: a readable event pulls TLS records until the socket would block, processes
//! them (handshake messages are answered at once) and moves the plaintext into the client's
//! input; a flush hands the client's output to rustls (whose send buffer bounds it) and writes
//! records until the socket would block. The pool engine, whose workers write replies to the
//! client socket themselves, does not take it.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mio::net::TcpStream;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection};

use super::io::{ClientIo, ReadLimit};

/// `--tls-listen`, `--tls-cert`, `--tls-key`, `--tls-min-version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub listen: SocketAddr,
    /// PEM: the certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM: its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// Oldest TLS version taken: 12 or 13.
    pub min_version: u8,
}

/// The rustls configuration `settings` describe (the error names the file and the problem).
pub fn server_config(settings: &TlsSettings) -> Result<Arc<ServerConfig>, String> {
    let (certs, key) = load_certified_key(&settings.cert, &settings.key, "--tls-cert", "--tls-key")?;
    let versions: &[&rustls::SupportedProtocolVersion] = match settings.min_version {
        13 => &[&rustls::version::TLS13],
        _ => &[&rustls::version::TLS13, &rustls::version::TLS12],
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(|e| format!("TLS versions: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("--tls-cert/--tls-key: {e}"))?;
    Ok(Arc::new(config))
}

/// A PEM certificate chain (leaf first) and its private key (PKCS#8, PKCS#1 or SEC1); the
/// error names the option and the file.
pub(crate) fn load_certified_key(
    cert: &Path,
    key: &Path,
    cert_option: &str,
    key_option: &str,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| format!("{cert_option} {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("{cert_option} {}: no certificate in it", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{key_option} {}: {e}", key.display()))?;
    Ok((certs, key))
}

/// One client's TLS state.
pub(crate) struct TlsSession {
    conn: ServerConnection,
    /// Writable events are asked for (records wait for the socket).
    wants_writable: bool,
}

impl TlsSession {
    pub fn new(config: &Arc<ServerConfig>) -> Option<TlsSession> {
        ServerConnection::new(Arc::clone(config)).ok().map(|conn| TlsSession { conn, wants_writable: false })
    }

    /// Reads records until the socket would block (or the peer closed), answers the handshake,
    /// and moves the plaintext into `io` (see [`ClientIo::read`]); true when reading paused at
    /// `limit` (plaintext may wait in rustls: the engine reads again when it resumes).
    pub fn read(&mut self, socket: &TcpStream, io: &mut ClientIo, to_eof: bool, limit: ReadLimit) -> bool {
        let mut socket_eof = false;
        loop {
            // Records in, as long as rustls takes them.
            while self.conn.wants_read() && !socket_eof {
                match self.conn.read_tls(&mut &*socket) {
                    Ok(0) => socket_eof = true,
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        io.broken = true;
                        return false;
                    }
                }
                if self.conn.process_new_packets().is_err() {
                    // rustls queued an alert for the peer; send it and give up.
                    let _ = self.conn.write_tls(&mut &*socket);
                    io.broken = true;
                    return false;
                }
            }
            let before = io.pending().len();
            let paused = io.read(Plaintext(&mut self.conn), to_eof || socket_eof, limit_copy(&limit));
            if paused {
                return true;
            }
            // Handshake answers (and key updates) go out now.
            let _ = self.write_records(socket);
            let progressed = io.pending().len() > before;
            if socket_eof || io.eof || io.broken || !self.conn.wants_read() && !progressed {
                if socket_eof && !io.eof {
                    io.eof = true;
                }
                return false;
            }
            if !progressed {
                return false;
            }
        }
    }

    /// Hands what the client's output holds to rustls and writes records until the socket would
    /// block. Returns `Some(want)` when the need for writable events changed.
    pub fn flush(&mut self, socket: &TcpStream, io: &mut ClientIo) -> Option<bool> {
        // rustls takes plaintext up to its send buffer's bound; records out make room again.
        loop {
            let _ = io.flush(Plaintext(&mut self.conn));
            let wrote = self.write_records(socket);
            if io.broken || (io.flushed() && !self.conn.wants_write()) || !wrote {
                break;
            }
        }
        let want = (self.conn.wants_write() || !io.flushed()) && !io.broken;
        (want != self.wants_writable).then(|| {
            self.wants_writable = want;
            want
        })
    }

    /// Says goodbye (close_notify), as far as the socket takes it.
    pub fn close(&mut self, socket: &TcpStream) {
        self.conn.send_close_notify();
        let _ = self.write_records(socket);
    }

    /// Writes records until none wait or the socket would block; says whether any went out.
    fn write_records(&mut self, socket: &TcpStream) -> bool {
        let mut wrote = false;
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut &*socket) {
                Ok(0) => break,
                Ok(_) => wrote = true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // WouldBlock: writable events bring us back; a failed socket is found by reads.
                Err(_) => break,
            }
        }
        wrote
    }
}

fn limit_copy(limit: &ReadLimit) -> ReadLimit {
    match limit {
        ReadLimit::Bytes(n) => ReadLimit::Bytes(*n),
        ReadLimit::None => ReadLimit::None,
    }
}

/// The plaintext rustls has decrypted, read as a non-blocking socket reads: `WouldBlock` when
/// there is none yet, 0 at the peer's close_notify.
struct Plaintext<'a>(&'a mut ServerConnection);

impl Read for Plaintext<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.reader().read(buf)
    }
}

impl Write for Plaintext<'_> {
    /// A full send buffer reads as a socket that would block (not as a closed one).
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.0.writer().write(buf)? {
            0 if !buf.is_empty() => Err(io::ErrorKind::WouldBlock.into()),
            n => Ok(n),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
