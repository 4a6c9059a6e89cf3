//! `/metrics` over HTTPS (`--metrics-tls-cert`, `--metrics-tls-key`): the rustls configuration
//! [`super::server`] hands to its `tokio-rustls` acceptor. The same rustls 0.23 (ring provider)
//! as the client listener's TLS and TLS to the servers: no second TLS stack in the process.

use std::sync::Arc;

use rustls::ServerConfig;

use crate::settings::MetricsTls;

/// The rustls configuration (the error names the option and the file).
pub fn server_config(tls: &MetricsTls) -> Result<Arc<ServerConfig>, String> {
    let (certs, key) = crate::tls_files::certified_key(&tls.cert, &tls.key, "--metrics-tls-cert", "--metrics-tls-key")?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS versions: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("--metrics-tls-cert/--metrics-tls-key: {e}"))?;
    Ok(Arc::new(config))
}
