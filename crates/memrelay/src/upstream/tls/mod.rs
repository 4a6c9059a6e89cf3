//! TLS from memrelay to its memcached servers (`--server-tls-ca` and friends), for every
//! connection memrelay makes to a server: the evented engine's shared non-blocking connections
//! ([`pump`]) and the blocking ones of the pool's workers, the health probe and the repair
//! thread ([`blocking`]).
//!
//! One rustls [`ClientConfig`] per distinct TLS setting (the top level's, each pool's own) is
//! built at start ([`ServerTls`]); each server whose setting is TLS gets a [`Peer`]: its
//! configuration and the name the server's certificate must carry, the host part of its address
//! as written (`localhost:11211` -> the DNS name `localhost`, `127.0.0.1:11211` -> the IP
//! address 127.0.0.1). A server of a pool without TLS gets none: plain text.
//!
//! A TLS failure (a certificate that does not verify, a server that does not speak TLS, a fatal
//! alert) is a server failure like a refused connection: [`Failure::Tls`], counted and judged
//! by health as any other; its reason goes to the log, one line a second at most.

pub(crate) mod blocking;
pub(crate) mod pump;

use std::io;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection};

use crate::log_limit::OncePerSecond;
use crate::settings::{Endpoint, ServerTlsSettings};
use crate::tls_files;
use crate::upstream::failure::Failure;

/// The rustls configuration `settings` describe (the error names the option, the file and the
/// problem).
pub fn client_config(settings: &ServerTlsSettings) -> Result<Arc<ClientConfig>, String> {
    let roots = tls_files::roots(&settings.ca, "--server-tls-ca")?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(tls_files::versions(settings.min_version))
        .map_err(|e| format!("--server-tls-min-version: {e}"))?
        .with_root_certificates(roots);
    let mut config = match (&settings.cert, &settings.key) {
        (None, None) => builder.with_no_client_auth(),
        (Some(cert), Some(key)) => {
            let (chain, key_der) = tls_files::certified_key(cert, key, "--server-tls-cert", "--server-tls-key")?;
            builder.with_client_auth_cert(chain, key_der).map_err(|e| {
                format!("--server-tls-cert {} / --server-tls-key {}: {e}", cert.display(), key.display())
            })?
        }
        (Some(_), None) => return Err("--server-tls-cert needs --server-tls-key".into()),
        (None, Some(_)) => return Err("--server-tls-key needs --server-tls-cert".into()),
    };
    // No session resumption: connections are long-lived, and memcached (OpenSSL with client
    // certificates required and no session id context) answers a resumed session with an
    // internal_error alert, which would fail every connection after the first.
    config.resumption = rustls::client::Resumption::disabled();
    Ok(Arc::new(config))
}

/// The name a server's certificate must carry: the host part of `address` (`host:port`,
/// `[v6]:port`), as a DNS name or an IP address.
pub fn server_name(address: &str) -> Result<ServerName<'static>, String> {
    let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    ServerName::try_from(host.to_string())
        .map_err(|_| format!("`{host}` is neither a DNS name nor an IP address a certificate can carry"))
}

/// TLS to the servers: one configuration per TLS setting, shared by every connection under it.
#[derive(Debug)]
pub(crate) struct ServerTls {
    configs: Vec<(ServerTlsSettings, Arc<ClientConfig>)>,
}

impl ServerTls {
    /// The configurations of `settings` (the distinct settings of the servers); None when no
    /// server speaks TLS. The error names the option, the file and the problem.
    pub fn new<'a>(settings: impl IntoIterator<Item = &'a ServerTlsSettings>) -> Result<Option<ServerTls>, String> {
        let mut configs = Vec::new();
        for one in settings {
            configs.push((one.clone(), client_config(one)?));
        }
        Ok((!configs.is_empty()).then_some(ServerTls { configs }))
    }

    /// What connections to `server` need (its name was checked at start, with the options);
    /// None for a server of a pool without TLS.
    pub fn peer(&self, server: &Endpoint) -> Option<Peer> {
        let wanted = server.tls.as_ref()?;
        let (_, config) = self.configs.iter().find(|(known, _)| known == wanted)?;
        Some(Peer { config: Arc::clone(config), name: server_name(&server.address).ok(), label: server.name.clone() })
    }
}

/// TLS to one server: the configuration and the name its certificate must carry.
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    config: Arc<ClientConfig>,
    /// None if the address has no host a certificate can carry (refused at start; a failure
    /// here, not a panic).
    name: Option<ServerName<'static>>,
    /// How logs name the server.
    label: String,
}

impl Peer {
    /// A new session: the handshake starts with the first records written.
    pub fn session(&self) -> Result<ClientConnection, Failure> {
        let Some(name) = self.name.clone() else {
            self.log(&format!("TLS: `{}` has no host name a certificate can carry", self.label));
            return Err(Failure::Tls);
        };
        ClientConnection::new(Arc::clone(&self.config), name).map_err(|e| self.failed(&e))
    }

    /// A TLS failure: logged (rate-limited), and [`Failure::Tls`].
    pub fn failed(&self, error: &rustls::Error) -> Failure {
        // What a plain memcached's answer to a ClientHello (`ERROR`) looks like as a record.
        let hint = match error {
            rustls::Error::InvalidMessage(_) => " (the server does not speak TLS?)",
            _ => "",
        };
        self.log(&format!("TLS failed: {error}{hint}"));
        Failure::Tls
    }

    /// A failure on a TLS connection while `handshaking` or after: the reason is logged when it is
    /// the TLS session's (inside the I/O error), or when the handshake did not finish.
    pub fn io_failed(&self, error: &io::Error, handshaking: bool) -> Failure {
        if let Some(tls) = error.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
            return self.failed(tls);
        }
        let failure = Failure::from_io(error);
        if handshaking {
            self.unfinished(failure);
        }
        failure
    }

    /// The handshake did not finish (`failure`: a timeout, the server closed the connection).
    pub fn unfinished(&self, failure: Failure) {
        self.log(&format!("TLS handshake did not finish: {failure}"));
    }

    fn log(&self, what: &str) {
        static LOG: OncePerSecond = OncePerSecond::new();
        let Some(others) = LOG.admit() else { return };
        let others = if others > 0 { format!(" ({others} more since the last line)") } else { String::new() };
        eprintln!("memrelay: server {}: {what}{others}", self.label);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_is_the_host_part_of_the_address() {
        assert_eq!(server_name("localhost:11211").unwrap(), ServerName::try_from("localhost").unwrap());
        assert_eq!(server_name("127.0.0.1:11211").unwrap(), ServerName::try_from("127.0.0.1").unwrap());
        assert!(matches!(server_name("[::1]:11211").unwrap(), ServerName::IpAddress(_)));
        assert!(matches!(server_name("cache-1.example:1").unwrap(), ServerName::DnsName(_)));
        assert!(server_name("bad host!:1").is_err());
    }
}
