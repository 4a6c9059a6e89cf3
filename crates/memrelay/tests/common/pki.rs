//! Test certificates: a CA of the test's own and certificates it issues, made with the
//! `openssl` command (EC P-256 keys, valid two days) into a directory the test owns.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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
