//! The HTTP endpoint Prometheus scrapes (`--metrics-listen`): `GET /metrics` answers the
//! OpenMetrics text of [`super::prometheus`]; anything else is 404. With `--metrics-auth-file`
//! a scrape must carry HTTP basic credentials of one of its users (Prometheus' `basic_auth`),
//! else it is answered 401 with a `WWW-Authenticate` challenge; the check comes before the path,
//! so nothing about the endpoint is learnt without them. Served by `tiny_http` on a thread of its
//! own, which stops with the shutdown flag.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;
use tiny_http::{Header, Response, Server};

use super::prometheus::render;
use crate::access::{Access, Reason};

/// How often the serving thread looks at the shutdown flag.
const POLL: Duration = Duration::from_millis(100);
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Binds the endpoint (the error says why it could not).
pub(crate) fn bind(addr: SocketAddr) -> std::io::Result<Server> {
    Server::http(addr).map_err(|e| std::io::Error::other(e.to_string()))
}

/// Answers scrapes until `shutdown` is set.
pub(crate) fn serve(server: Server, registry: Registry, access: Arc<Access>, shutdown: Arc<AtomicBool>) {
    let header = Header::from_bytes(&b"Content-Type"[..], CONTENT_TYPE.as_bytes()).expect("a valid header");
    let challenge =
        Header::from_bytes(&b"WWW-Authenticate"[..], &b"Basic realm=\"memrelay metrics\", charset=\"UTF-8\""[..])
            .expect("a valid header");
    while !shutdown.load(Ordering::Acquire) {
        let Ok(Some(request)) = server.recv_timeout(POLL) else { continue };
        let authorization =
            request.headers().iter().find(|h| h.field.equiv("Authorization")).map(|h| h.value.as_bytes());
        if !access.get().metrics_allowed(authorization) {
            let peer = request.remote_addr().copied();
            crate::access::count_denial(
                Reason::MetricsAuth,
                &crate::access::peer_name(peer),
                "GET without valid credentials",
            );
            let response =
                Response::from_string("credentials needed\n").with_status_code(401).with_header(challenge.clone());
            let _ = request.respond(response);
            continue;
        }
        let path = request.url().split('?').next().unwrap_or("");
        // A client that went away while we answered is no error of ours.
        let _ = if path == "/metrics" {
            request.respond(Response::from_string(render(&registry)).with_header(header.clone()))
        } else {
            request.respond(Response::from_string("only /metrics is served here\n").with_status_code(404))
        };
    }
}
