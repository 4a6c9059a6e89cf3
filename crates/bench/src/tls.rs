//! TLS to the servers (`--tls-ca`, `--tls-name`, `--tls-cert`, `--tls-key`): a rustls client
//! session per connection between the socket and the connection's buffers.
//!
//! Non-blocking like the plain path: the handshake is driven by the connect loop's events and is
//! done before the first measured request; afterwards [`TlsSession::read`] and
//! [`TlsSession::write`] behave as a non-blocking socket's read and write (`WouldBlock` when
//! nothing can move now), pulling and pushing records until the socket would block, so the
//! edge-triggered events of the plain path serve TLS too.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mio::net::TcpStream;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore};

/// The TLS options as given.
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// PEM: the CA bundle the servers' certificates must chain to.
    pub ca: PathBuf,
    /// The name every server's certificate must hold; `None`: the host of its address.
    pub name: Option<String>,
    /// PEM: a client certificate chain and its key, for servers that ask for one.
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// What every connection's session is made from.
#[derive(Debug, Clone)]
pub struct TlsClient {
    config: Arc<ClientConfig>,
    /// The name to verify, per configured server.
    names: Vec<ServerName<'static>>,
}

impl TlsClient {
    /// Loads the files and checks the names (errors name the option and the file).
    pub fn new(options: &TlsOptions, servers: &[String]) -> Result<TlsClient, String> {
        let mut roots = RootCertStore::empty();
        for cert in load_certs(&options.ca, "--tls-ca")? {
            roots.add(cert).map_err(|e| format!("--tls-ca {}: {e}", options.ca.display()))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS versions: {e}"))?
            .with_root_certificates(roots);
        let config = match (&options.cert, &options.key) {
            (Some(cert), Some(key)) => {
                let chain = load_certs(cert, "--tls-cert")?;
                let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("--tls-key {}: {e}", key.display()))?;
                builder.with_client_auth_cert(chain, key).map_err(|e| format!("--tls-cert/--tls-key: {e}"))?
            }
            (None, None) => builder.with_no_client_auth(),
            _ => return Err("--tls-cert and --tls-key go together".into()),
        };
        let mut names = Vec::with_capacity(servers.len());
        for server in servers {
            let name = match &options.name {
                Some(name) => name.as_str(),
                None => host_of(server),
            };
            let parsed = ServerName::try_from(name.to_string()).map_err(|_| match &options.name {
                Some(_) => format!("--tls-name {name:?} is neither a DNS name nor an IP address"),
                None => format!("--server {server}: its host {name:?} cannot be verified; give --tls-name"),
            })?;
            names.push(parsed);
        }
        Ok(TlsClient { config: Arc::new(config), names })
    }

    /// A new session for a connection to configured server `server`.
    pub fn session(&self, server: usize) -> Result<TlsSession, String> {
        let name = self.names[server].clone();
        ClientConnection::new(Arc::clone(&self.config), name)
            .map(|mut conn| {
                // The connection's output buffer bounds what waits (requests in flight).
                conn.set_buffer_limit(None);
                TlsSession { conn, closed: false }
            })
            .map_err(|e| format!("cannot start a TLS session: {e}"))
    }
}

fn load_certs(path: &Path, option: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| format!("{option} {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{option} {}: no certificate in it", path.display()));
    }
    Ok(certs)
}

/// The host part of `HOST:PORT` (`[v6]:port` too), the name a server's certificate must hold.
pub fn host_of(address: &str) -> &str {
    let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
    host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host)
}

/// One connection's TLS state.
pub struct TlsSession {
    conn: ClientConnection,
    /// The socket reached its end (records may still hold plaintext).
    closed: bool,
}

impl TlsSession {
    /// Moves the handshake on as far as the socket allows: true once it is complete and its
    /// last records are written. Errors say why (a certificate refused, the server left).
    pub fn handshake(&mut self, socket: &TcpStream) -> Result<bool, String> {
        self.pull(socket).map_err(|e| format!("TLS handshake failed: {e}"))?;
        self.push(socket).map_err(|e| format!("TLS handshake failed: {e}"))?;
        if self.closed && self.conn.is_handshaking() {
            return Err("TLS handshake failed: the server closed the connection".into());
        }
        Ok(!self.conn.is_handshaking() && !self.conn.wants_write())
    }

    /// Reads plaintext as a non-blocking socket reads: records are pulled until the socket would
    /// block; 0 when the server closed (with or without close_notify).
    pub fn read(&mut self, socket: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The socket ended without close_notify: a close like any other here.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            if self.closed {
                return Ok(0);
            }
            let pulled = self.pull(socket).map_err(|e| match e.kind() {
                io::ErrorKind::InvalidData => io::Error::new(e.kind(), format!("TLS: {e}")),
                _ => e,
            })?;
            if !pulled {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            // Answers the server's key updates, and sends a refusal's alert.
            self.push(socket)?;
        }
    }

    /// Takes all of `buf` (the output buffer bounds it) and writes records until the socket would
    /// block.
    pub fn write(&mut self, socket: &TcpStream, buf: &[u8]) -> io::Result<()> {
        self.conn.writer().write_all(buf)?;
        self.push(socket)
    }

    /// Whether records still wait for the socket (a writable event brings them out).
    pub fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// Writes waiting records until none wait or the socket would block.
    pub fn push(&mut self, socket: &TcpStream) -> io::Result<()> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut &*socket) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads records until the socket would block, ends, or rustls holds enough plaintext, and
    /// processes them; true if anything arrived. A refused record or certificate is an error
    /// (its alert is queued for [`TlsSession::push`]).
    fn pull(&mut self, socket: &TcpStream) -> io::Result<bool> {
        let mut arrived = false;
        while self.conn.wants_read() && !self.closed {
            match self.conn.read_tls(&mut &*socket) {
                Ok(0) => self.closed = true,
                Ok(_) => arrived = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            if let Err(e) = self.conn.process_new_packets() {
                let _ = self.push(socket);
                return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string()));
            }
        }
        Ok(arrived || self.closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_of_an_address_is_the_name_to_verify() {
        assert_eq!(host_of("localhost:11211"), "localhost");
        assert_eq!(host_of("127.0.0.1:11211"), "127.0.0.1");
        assert_eq!(host_of("[::1]:11211"), "::1");
        assert_eq!(host_of("cache"), "cache");
    }
}
