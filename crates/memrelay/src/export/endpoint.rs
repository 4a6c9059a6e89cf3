//! What a scrape of `/metrics` is answered, over HTTP or HTTPS alike ([`super::server`] serves
//! it): `GET /metrics` gets the OpenMetrics text of [`super::prometheus`]; any other path 404.
//! With `--metrics-auth-file` a scrape must carry HTTP basic credentials of one of its users
//! (Prometheus' `basic_auth`), else it is answered 401 with a `WWW-Authenticate` challenge; the
//! check comes before the path, so nothing about the endpoint is learnt without them.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE as CONTENT_TYPE_HEADER, WWW_AUTHENTICATE};
use hyper::{Request, Response, StatusCode};
use prometheus_client::registry::Registry;

use super::prometheus::render;
use crate::access::{Access, Reason};

pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";
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

/// The HTTP response to `request` (its body is never read: a scrape has none).
pub(crate) fn respond<B>(
    registry: &Registry,
    access: &Access,
    request: &Request<B>,
    peer: SocketAddr,
) -> Response<Full<Bytes>> {
    let authorization = request.headers().get(AUTHORIZATION).map(HeaderValue::as_bytes);
    let answer = answer(registry, access, authorization, request.uri().path(), Some(peer));
    response(answer)
}

/// `answer` as an HTTP response (no step here can fail).
fn response(answer: Answer) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(answer.body)));
    *response.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    match answer.kind {
        AnswerKind::Metrics => {
            headers.insert(CONTENT_TYPE_HEADER, HeaderValue::from_static(CONTENT_TYPE));
        }
        AnswerKind::Challenge => {
            headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static(CHALLENGE));
            headers.insert(CONTENT_TYPE_HEADER, HeaderValue::from_static(TEXT));
        }
        AnswerKind::Plain => {
            headers.insert(CONTENT_TYPE_HEADER, HeaderValue::from_static(TEXT));
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_become_responses_with_their_headers() {
        let metrics = response(Answer { status: 200, body: "# EOF\n".into(), kind: AnswerKind::Metrics });
        assert_eq!(metrics.status(), 200);
        assert_eq!(metrics.headers()[CONTENT_TYPE_HEADER], CONTENT_TYPE);
        let challenge = response(Answer { status: 401, body: String::new(), kind: AnswerKind::Challenge });
        assert_eq!(challenge.status(), 401);
        assert_eq!(challenge.headers()[WWW_AUTHENTICATE], CHALLENGE);
        let missing = response(Answer { status: 404, body: String::new(), kind: AnswerKind::Plain });
        assert_eq!(missing.status(), 404);
        assert_eq!(missing.headers()[CONTENT_TYPE_HEADER], TEXT);
    }
}
