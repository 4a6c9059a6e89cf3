//! A small rustls client for the TLS tests (from clients: `tls.rs`, `tls_identity.rs`; to the
//! servers: `server_tls.rs`); the certificates are the test kit's ([`Ca`]).

use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use memrelay_testkit::{free_port, show, Issued, Memcached};

use super::Memrelay;

/// memrelay (evented) with its plain listener and a TLS one (`cert`, `key`), and `extra`
/// options; returns it and the TLS port.
pub fn start_tls_relay(cert: &Path, key: &Path, servers: &[&Memcached], extra: &[&str]) -> (Memrelay, u16) {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut args =
        vec!["--tls-listen", &listen, "--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()];
    args.extend_from_slice(extra);
    (Memrelay::start("evented", servers, &args), port)
}

/// A rustls client connection to `127.0.0.1:port` whose certificate must carry `name` and chain
/// to `ca`; it presents `identity` when given.
pub fn rustls_connect(
    port: u16,
    ca: &Path,
    name: &str,
    identity: Option<&Issued>,
) -> rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    for der in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(der.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match identity {
        Some(issued) => {
            let chain = CertificateDer::pem_file_iter(&issued.cert).unwrap().map(Result::unwrap).collect();
            builder.with_client_auth_cert(chain, PrivateKeyDer::from_pem_file(&issued.key).unwrap()).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    let name = rustls::pki_types::ServerName::try_from(name.to_string()).unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let socket = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    rustls::StreamOwned::new(conn, socket)
}

/// A rustls client connection to memrelay's TLS port, trusting the CA `ca` (for `localhost`).
pub fn rustls_client(port: u16, ca: &Path) -> rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream> {
    rustls_connect(port, ca, "localhost", None)
}

/// Reads until what came ends with `end` (panics at EOF or after the read timeout).
pub fn read_until(stream: &mut impl Read, end: &[u8]) -> Vec<u8> {
    let mut got = Vec::new();
    let mut chunk = [0u8; 16384];
    while !got.ends_with(end) {
        let n = stream.read(&mut chunk).expect("read over TLS");
        assert!(n > 0, "EOF after {}", show(&got));
        got.extend_from_slice(&chunk[..n]);
    }
    got
}
