//! Test certificates made with the `openssl` command (a CA, certificates it signs for the names
//! a test wants), and a small rustls client: for TLS from clients (`tls.rs`) and to the servers
//! (`server_tls.rs`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use memrelay_testkit::show;

/// A test CA: `NAME.pem` and `NAME.key` in a directory.
pub struct Ca {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A certificate and its private key (PEM files).
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Runs `openssl req -x509` making a P-256 key and a certificate valid for two days.
fn openssl_req(args: &[&str], paths: &[(&str, &Path)]) {
    let mut command = Command::new("openssl");
    command.args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"]);
    command.args(args);
    for (flag, path) in paths {
        command.arg(flag).arg(path);
    }
    let status = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl (the command) is needed to make test certificates");
    assert!(status.success(), "openssl req {args:?} failed");
}

impl Ca {
    /// A new self-signed CA in `dir` (`NAME.pem`, `NAME.key`).
    pub fn new(dir: &Path, name: &str) -> Ca {
        let (cert, key) = (dir.join(format!("{name}.pem")), dir.join(format!("{name}.key")));
        openssl_req(&["-subj", &format!("/CN=memrelay test CA {name}")], &[("-keyout", &key), ("-out", &cert)]);
        Ca { cert, key }
    }

    /// A certificate this CA signs, for the subject alternative names `alt_names`
    /// (`DNS:localhost,IP:127.0.0.1`), in `dir` (`NAME.pem`, `NAME.key`).
    pub fn issue(&self, dir: &Path, name: &str, alt_names: &str) -> Issued {
        let (cert, key) = (dir.join(format!("{name}.pem")), dir.join(format!("{name}.key")));
        openssl_req(
            &[
                "-subj",
                &format!("/CN={name}"),
                "-addext",
                &format!("subjectAltName={alt_names}"),
                "-addext",
                "basicConstraints=critical,CA:FALSE",
            ],
            &[("-CA", &self.cert), ("-CAkey", &self.key), ("-keyout", &key), ("-out", &cert)],
        );
        Issued { cert, key }
    }
}

/// A test CA (`ca.pem`) and a certificate it signed for `localhost` and 127.0.0.1, with its key,
/// in `dir`: returns the certificate and the key.
pub fn make_certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let ca = Ca::new(dir, "ca");
    let issued = ca.issue(dir, "cert", "DNS:localhost,IP:127.0.0.1");
    (issued.cert, issued.key)
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
