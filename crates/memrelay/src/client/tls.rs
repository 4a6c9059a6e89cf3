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
//!
//! Client certificates (`--tls-client-ca`): verified against the CA, required or optional; the
//! certificate's name (its subject CN, else its first DNS, e-mail or URI name) becomes the
//! connection's identity for the access rules, as a login does. A handshake that has not
//! finished within `--tls-handshake-timeout` is closed, so half-open handshakes cost a socket
//! for a bounded time. The certificate files are read again on SIGHUP ([`SharedConfig`]):
//! connections accepted afterwards use the new ones, established ones keep theirs.

use std::io::{self, Read, Write};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use mio::net::TcpStream;
use rustls::server::WebPkiClientVerifier;
use rustls::{ServerConfig, ServerConnection};

use super::io::{ClientIo, ReadLimit};
use crate::settings::TlsSettings;
use crate::tls_files;

/// The rustls configuration `settings` describe (the error names the file and the problem).
pub fn server_config(settings: &TlsSettings) -> Result<Arc<ServerConfig>, String> {
    let (certs, key) = tls_files::certified_key(&settings.cert, &settings.key, "--tls-cert", "--tls-key")?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(tls_files::versions(settings.min_version))
        .map_err(|e| format!("TLS versions: {e}"))?;
    let builder = match &settings.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let roots = tls_files::roots(ca, "--tls-client-ca")?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if settings.client_cert_optional { verifier.allow_unauthenticated() } else { verifier };
            builder.with_client_cert_verifier(
                verifier.build().map_err(|e| format!("--tls-client-ca {}: {e}", ca.display()))?,
            )
        }
    };
    let config = builder.with_single_cert(certs, key).map_err(|e| format!("--tls-cert/--tls-key: {e}"))?;
    Ok(Arc::new(config))
}

/// The listener's configuration, shared by every event loop and replaced whole by a reload
/// (SIGHUP reads the certificate files again).
#[derive(Debug)]
pub struct SharedConfig {
    settings: TlsSettings,
    current: RwLock<Arc<ServerConfig>>,
}

impl SharedConfig {
    pub fn new(settings: &TlsSettings) -> Result<SharedConfig, String> {
        Ok(SharedConfig { settings: settings.clone(), current: RwLock::new(server_config(settings)?) })
    }

    pub fn settings(&self) -> &TlsSettings {
        &self.settings
    }

    /// The configuration a new connection takes.
    pub fn get(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Puts a configuration built by [`server_config`] in force for connections accepted from now.
    pub fn replace(&self, config: Arc<ServerConfig>) {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = config;
    }
}

/// The identity a client certificate names: its subject's common name, else its first DNS,
/// e-mail or URI subject alternative name. None when it has none that is one word of at most
/// 250 bytes (the form an access rule's identity takes).
pub fn certificate_identity(der: &[u8]) -> Option<String> {
    use x509_parser::extensions::GeneralName;
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let common_name = cert.subject().iter_common_name().find_map(|cn| cn.as_str().ok().map(str::to_owned));
    let alternative = || {
        let names = cert.subject_alternative_name().ok()??;
        names.value.general_names.iter().find_map(|name| match name {
            GeneralName::DNSName(s) | GeneralName::RFC822Name(s) | GeneralName::URI(s) => Some(s.to_string()),
            _ => None,
        })
    };
    common_name
        .or_else(alternative)
        .filter(|name| !name.is_empty() && name.len() <= 250 && !name.contains(|c: char| c == ' ' || c.is_control()))
}

/// One client's TLS state.
pub(crate) struct TlsSession {
    conn: ServerConnection,
    /// Writable events are asked for (records wait for the socket).
    wants_writable: bool,
    /// When the handshake must have finished.
    pub deadline: Instant,
    /// The certificate's identity was handed out (it is, once, after the handshake).
    identity_taken: bool,
    /// Why the handshake failed (rustls' words), until it is taken to be counted.
    failure: Option<String>,
}

impl TlsSession {
    pub fn new(config: Arc<ServerConfig>, deadline: Instant) -> Option<TlsSession> {
        ServerConnection::new(config).ok().map(|conn| TlsSession {
            conn,
            wants_writable: false,
            deadline,
            identity_taken: false,
            failure: None,
        })
    }

    pub fn handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// Once the handshake is done: `Some` the first time, with the identity the client's
    /// certificate names (`Ok(None)` when it sent none; `Err(())` when it sent one that names
    /// no usable identity: the connection has none, and gets what the rules give no identity).
    #[allow(clippy::result_unit_err)]
    pub fn take_identity(&mut self) -> Option<Result<Option<String>, ()>> {
        if self.identity_taken || self.conn.is_handshaking() {
            return None;
        }
        self.identity_taken = true;
        Some(match self.conn.peer_certificates().and_then(|chain| chain.first()) {
            None => Ok(None),
            Some(leaf) => certificate_identity(leaf).map(Some).ok_or(()),
        })
    }

    /// Why the handshake failed, once.
    pub fn take_failure(&mut self) -> Option<String> {
        self.failure.take()
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
                if let Err(error) = self.conn.process_new_packets() {
                    // rustls queued an alert for the peer; send it and give up.
                    self.failure = Some(error.to_string());
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
