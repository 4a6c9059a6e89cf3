//! The PEM files every TLS side of memrelay reads (the client listener, the connections to the
//! servers, the HTTPS metrics endpoint), and the TLS versions an option allows. Errors name the
//! option and the file, so that a bad one is one clear line at start or reload.

use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{RootCertStore, SupportedProtocolVersion};

/// A certificate chain (leaf first) and its private key (PKCS#8, PKCS#1 or SEC1).
pub(crate) fn certified_key(
    cert: &Path,
    key: &Path,
    cert_option: &str,
    key_option: &str,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let certs = certificates(cert, cert_option)?;
    let bytes = own_file(key, key_option)?;
    let key = PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| format!("{key_option} {}: {e}", key.display()))?;
    Ok((certs, key))
}

/// The CA certificates of a bundle, as roots to verify a peer against.
pub(crate) fn roots(path: &Path, option: &str) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(path, option)? {
        roots.add(cert).map_err(|e| format!("{option} {}: {e}", path.display()))?;
    }
    Ok(roots)
}

static TLS13_ONLY: [&SupportedProtocolVersion; 1] = [&rustls::version::TLS13];
static TLS12_AND_13: [&SupportedProtocolVersion; 2] = [&rustls::version::TLS13, &rustls::version::TLS12];

/// The TLS versions spoken from `min_version` (12 or 13) up.
pub(crate) fn versions(min_version: u8) -> &'static [&'static SupportedProtocolVersion] {
    match min_version {
        13 => &TLS13_ONLY,
        _ => &TLS12_AND_13,
    }
}

/// Every certificate of a PEM file; none is an error.
fn certificates(path: &Path, option: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = own_file(path, option)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{option} {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{option} {}: no certificate in it", path.display()));
    }
    Ok(certs)
}

/// A PEM file's bytes: a regular file of at most [`crate::own_files::MAX_SETTINGS_FILE`].
fn own_file(path: &Path, option: &str) -> Result<Vec<u8>, String> {
    crate::own_files::read(path, crate::own_files::MAX_SETTINGS_FILE)
        .map_err(|e| format!("{option} {}: {e}", path.display()))
}
