//! TLS as configured: from clients (`--tls-*`), to the servers (`--server-tls-*`) and on the
//! metrics endpoint (`--metrics-tls-*`). The files are read where each side builds its rustls
//! configuration; these are only the settings.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// `--tls-listen`, `--tls-cert`, `--tls-key`, `--tls-min-version`, `--tls-client-ca`,
/// `--tls-client-auth`, `--tls-handshake-timeout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub listen: SocketAddr,
    /// PEM: the certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM: its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// Oldest TLS version taken: 12 or 13.
    pub min_version: u8,
    /// Client certificates are asked for and verified against this CA bundle (PEM).
    pub client_ca: Option<PathBuf>,
    /// With `client_ca`: a client without a certificate is still taken (as no identity).
    pub client_cert_optional: bool,
    /// A handshake not finished by then closes the connection.
    pub handshake_timeout: Duration,
}

/// `--server-tls-ca`, `--server-tls-cert`, `--server-tls-key`, `--server-tls-min-version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTlsSettings {
    /// PEM: the CA certificates a server's certificate must chain to.
    pub ca: PathBuf,
    /// PEM: a client certificate chain (leaf first) for servers that ask for one.
    pub cert: Option<PathBuf>,
    /// PEM: its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: Option<PathBuf>,
    /// Oldest TLS version spoken: 12 or 13.
    pub min_version: u8,
}

/// `--metrics-tls-cert` and `--metrics-tls-key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsTls {
    /// PEM: the certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM: its private key.
    pub key: PathBuf,
}
