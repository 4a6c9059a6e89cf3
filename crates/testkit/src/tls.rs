//! TLS for tests: certificates made with the `openssl` command (a CA of the test's own and the
//! certificates it issues: EC P-256 keys, valid two days), and a real memcached that speaks TLS
//! (`memcached -Z`) with a plain listener beside it for reading its own counters.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::client::Client;
use crate::counters::parse_stats;
use crate::memcached::Memcached;
use crate::process::free_port;

/// A test CA (`ca.pem`, `ca.key`) and a certificate it signed for `localhost` and 127.0.0.1, with
/// its key (`cert.pem`, `cert.key`), in `dir`: returns the certificate and the key.
pub fn make_certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let issued = Ca::new(dir, "ca").issue(dir, "cert", "DNS:localhost,IP:127.0.0.1");
    (issued.cert, issued.key)
}

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

impl Ca {
    /// A new self-signed CA in `dir` (`NAME.pem`, `NAME.key`).
    pub fn new(dir: &Path, name: &str) -> Ca {
        let (cert, key) = (dir.join(format!("{name}.pem")), dir.join(format!("{name}.key")));
        openssl_req(&["-subj", &format!("/CN=memrelay test CA {name}")], &[("-keyout", &key), ("-out", &cert)]);
        Ca { cert, key }
    }

    /// A certificate this CA signs with the subject CN `name` and the subject alternative names
    /// `alt_names` (`DNS:localhost,IP:127.0.0.1`), in `dir` (`NAME.pem`, `NAME.key`).
    pub fn issue(&self, dir: &Path, name: &str, alt_names: &str) -> Issued {
        self.issue_as(dir, name, &format!("/CN={name}"), alt_names)
    }

    /// A certificate with any `subject` (`/CN=x`, `/O=y` for one without a common name) and
    /// `alt_names` (none when empty), for servers and clients alike, in `dir` (`STEM.pem`,
    /// `STEM.key`, replacing what was there).
    pub fn issue_as(&self, dir: &Path, stem: &str, subject: &str, alt_names: &str) -> Issued {
        let (cert, key) = (dir.join(format!("{stem}.pem")), dir.join(format!("{stem}.key")));
        let alt = format!("subjectAltName={alt_names}");
        let mut args = vec![
            "-subj",
            subject,
            "-addext",
            "basicConstraints=critical,CA:FALSE",
            "-addext",
            "extendedKeyUsage=serverAuth,clientAuth",
        ];
        if !alt_names.is_empty() {
            args.extend(["-addext", &alt]);
        }
        openssl_req(&args, &[("-CA", &self.cert), ("-CAkey", &self.key), ("-keyout", &key), ("-out", &cert)]);
        Issued { cert, key }
    }
}

/// `openssl req -x509` making a P-256 key and a certificate valid for two days, with `args`
/// and then each `(flag, path)`.
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

/// A memcached whose port speaks TLS only (`-Z`), with a plain (`notls:`) port beside it, on
/// which [`TlsMemcached::stats`] reads the server's own counters.
pub struct TlsMemcached {
    /// The TLS server; its `port` and `addr()` are the TLS port.
    pub server: Memcached,
    pub plain_port: u16,
}

impl TlsMemcached {
    /// `cert` and `key` as [`make_certificate`] made them; `options` more of memcached's `-o`
    /// TLS settings (`ssl_verify_mode=2`, `ssl_ca_cert=FILE`).
    pub fn start(cert: &Path, key: &Path, options: &[&str]) -> TlsMemcached {
        let plain_port = free_port();
        let mut settings = format!("ssl_chain_cert={},ssl_key={}", cert.display(), key.display());
        for option in options {
            settings.push(',');
            settings.push_str(option);
        }
        // memcached joins its `-l` options: the first (with `-p`) speaks TLS, this one not.
        let plain = format!("notls:127.0.0.1:{plain_port}");
        let server = Memcached::start_with(&["-Z", "-o", &settings, "-l", &plain]);
        TlsMemcached { server, plain_port }
    }

    /// The TLS address.
    pub fn addr(&self) -> String {
        self.server.addr()
    }

    /// A plain client on the `notls` port.
    pub fn plain_client(&self) -> Client {
        Client::connect(&format!("127.0.0.1:{}", self.plain_port))
    }

    /// The server's own `stats`, numeric values only (read on the plain port).
    pub fn stats(&self) -> HashMap<String, u64> {
        let reply = self.plain_client().request(b"stats\r\n", b"END\r\n");
        parse_stats(&String::from_utf8(reply).expect("stats reply is text"))
    }
}
