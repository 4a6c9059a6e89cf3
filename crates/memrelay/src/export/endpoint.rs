//! The HTTP endpoint Prometheus scrapes (`--metrics-listen`): `GET /metrics` answers the
//! OpenMetrics text of [`super::prometheus`]; anything else is 404. With `--metrics-auth-file`
//! a scrape must carry HTTP basic credentials of one of its users (Prometheus' `basic_auth`),
//! else it is answered 401 with a `WWW-Authenticate` challenge; the check comes before the path,
//! so nothing about the endpoint is learnt without them. Served by `tiny_http` on a thread of its
//! own, which stops with the shutdown flag; with `--metrics-tls-cert` the same answers go over
//! HTTPS instead (see [`super::https`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;
use tiny_http::{Header, Response, Server};

use super::prometheus::render;
use crate::access::{Access, Reason};

/// How often the serving thread looks at the shutdown flag.
pub(crate) const POLL: Duration = Duration::from_millis(100);
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub(crate) const CHALLENGE: &str = "Basic realm=\"memrelay metrics\", charset=\"UTF-8\"";

/// What a scrape is answered, whichever way it came.
pub(crate) struct Answer {
    pub status: u16,
    pub body: String,
    /// 200: the OpenMetrics content type; 401: the `WWW-Authenticate` challenge.
    pub kind: AnswerKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AnswerKind {
    Metrics,
    Challenge,
    Plain,
}

/// The answer to a request for `url` carrying `authorization` (the header's value) from `peer`;
/// a refusal is counted and logged as access refusals are.
pub(crate) fn answer(
    registry: &Registry,
    access: &Access,
    authorization: Option<&[u8]>,
    url: &str,
    peer: Option<SocketAddr>,
) -> Answer {
    if !access.get().metrics_allowed(authorization) {
        crate::access::count_denial(
            Reason::MetricsAuth,
            &crate::access::peer_name(peer),
            "GET without valid credentials",
        );
        return Answer { status: 401, body: "credentials needed\n".into(), kind: AnswerKind::Challenge };
    }
    let path = url.split('?').next().unwrap_or("");
    if path == "/metrics" {
        Answer { status: 200, body: render(registry), kind: AnswerKind::Metrics }
    } else {
        Answer { status: 404, body: "only /metrics is served here\n".into(), kind: AnswerKind::Plain }
    }
}

/// Binds the endpoint (the error says why it could not).
pub(crate) fn bind(addr: SocketAddr) -> std::io::Result<Server> {
    Server::http(addr).map_err(|e| std::io::Error::other(e.to_string()))
}

/// Answers scrapes until `shutdown` is set.
pub(crate) fn serve(server: Server, registry: Registry, access: Arc<Access>, shutdown: Arc<AtomicBool>) {
    let header = Header::from_bytes(&b"Content-Type"[..], CONTENT_TYPE.as_bytes()).expect("a valid header");
    let challenge = Header::from_bytes(&b"WWW-Authenticate"[..], CHALLENGE.as_bytes()).expect("a valid header");
    while !shutdown.load(Ordering::Acquire) {
        let Ok(Some(request)) = server.recv_timeout(POLL) else { continue };
        let authorization =
            request.headers().iter().find(|h| h.field.equiv("Authorization")).map(|h| h.value.as_bytes());
        let peer = request.remote_addr().copied();
        let answer = answer(&registry, &access, authorization, request.url(), peer);
        let mut response = Response::from_string(answer.body).with_status_code(answer.status);
        match answer.kind {
            AnswerKind::Metrics => response = response.with_header(header.clone()),
            AnswerKind::Challenge => response = response.with_header(challenge.clone()),
            AnswerKind::Plain => {}
        }
        // A client that went away while we answered is no error of ours.
        let _ = request.respond(response);
    }
}
