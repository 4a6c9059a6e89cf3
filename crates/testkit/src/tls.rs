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
    Pki::new(dir, "memrelay test CA").issue("cert", "localhost", &["DNS:localhost", "IP:127.0.0.1"])
}

/// A certificate authority in `dir`: `ca.pem` and its key.
pub struct Pki {
    dir: PathBuf,
    ca: PathBuf,
}

impl Pki {
    /// A new CA named `name` in `dir` (created if missing).
    pub fn new(dir: &Path, name: &str) -> Pki {
        std::fs::create_dir_all(dir).unwrap();
        let pki = Pki { dir: dir.to_path_buf(), ca: dir.join("ca.pem") };
        openssl(&["-subj", &format!("/CN={name}")], &[("-keyout", &pki.dir.join("ca.key")), ("-out", &pki.ca)]);
        pki
    }

    /// The CA's certificate (PEM).
    pub fn ca(&self) -> &Path {
        &self.ca
    }

    /// A certificate the CA signed, for TLS servers and clients alike, written to `stem.pem`
    /// and `stem.key` (replacing what was there): subject CN `common_name` (none when empty) and
    /// the subject alternative names `sans` (`DNS:x`, `IP:1.2.3.4`). Returns both paths.
    pub fn issue(&self, stem: &str, common_name: &str, sans: &[&str]) -> (PathBuf, PathBuf) {
        let (cert, key) = (self.dir.join(format!("{stem}.pem")), self.dir.join(format!("{stem}.key")));
        let subject =
            if common_name.is_empty() { "/O=memrelay test".to_string() } else { format!("/CN={common_name}") };
        let mut args = vec![
            "-subj".to_string(),
            subject,
            "-addext".into(),
            "basicConstraints=critical,CA:FALSE".into(),
            "-addext".into(),
            "extendedKeyUsage=serverAuth,clientAuth".into(),
        ];
        if !sans.is_empty() {
            args.extend(["-addext".into(), format!("subjectAltName={}", sans.join(","))]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        openssl(&args, &[("-CA", &self.ca), ("-CAkey", &self.dir.join("ca.key")), ("-keyout", &key), ("-out", &cert)]);
        (cert, key)
    }
}

/// `openssl req -x509` with a new EC key and `args`, then each `(flag, path)`.
fn openssl(args: &[&str], paths: &[(&str, &Path)]) {
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
