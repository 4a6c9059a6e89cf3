//! What a scrape of `/metrics` is answered, over HTTP or HTTPS alike ([`super::server`] serves
//! it): `GET` (or `HEAD`) `/metrics` gets the OpenMetrics text of [`super::prometheus`]; any
//! other method 405 (with `Allow: GET, HEAD`), any other path 404. With `--metrics-auth-file` a
//! scrape must carry HTTP basic credentials of one of its users (Prometheus' `basic_auth`), else
//! it is answered 401 with a `WWW-Authenticate` challenge; the check comes before the path, so
//! nothing about the endpoint is learnt without them. Wrong credentials are throttled per peer
//! address as logins on the memcached port are ([`crate::access::throttle::SCRAPES`]): an
//! address out of checks is answered 429 (`Retry-After: 1`) without its credentials being
//! looked at.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{
    HeaderValue, ALLOW, AUTHORIZATION, CONTENT_TYPE as CONTENT_TYPE_HEADER, RETRY_AFTER, WWW_AUTHENTICATE,
};
use hyper::{Method, Request, Response, StatusCode};
use prometheus_client::registry::Registry;

use super::prometheus::render;
use crate::access::throttle::SCRAPES;
use crate::access::{Access, Reason, Scrape};

pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";
pub(crate) const CHALLENGE: &str = "Basic realm=\"memrelay metrics\", charset=\"UTF-8\"";
const METHODS: &str = "GET, HEAD";

/// What a scrape is answered, whichever way it came.
pub(crate) struct Answer {
    pub status: u16,
    pub body: String,
    /// 200: the OpenMetrics content type; 401: the `WWW-Authenticate` challenge; 405: `Allow`;
    /// 429: `Retry-After`.
    pub kind: AnswerKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AnswerKind {
    Metrics,
    Challenge,
    MethodNotAllowed,
    Throttled,
    Plain,
}

/// The answer to a `method` request for `url` carrying `authorization` (the header's value) from
/// `peer`; a refusal is counted and logged as access refusals are.
pub(crate) fn answer(
    registry: &Registry,
    access: &Access,
    method: &Method,
    authorization: Option<&[u8]>,
    url: &str,
    peer: Option<SocketAddr>,
) -> Answer {
    // Before the credentials: no guess is checked through another method.
    if method != Method::GET && method != Method::HEAD {
        return Answer {
            status: 405,
            body: "only GET and HEAD are served here\n".into(),
            kind: AnswerKind::MethodNotAllowed,
        };
    }
    let refuse =
        |what: String| crate::access::count_denial(Reason::MetricsAuth, &crate::access::peer_name(peer), &what);
    let scrape = access.get().metrics_scrape(authorization, peer.map(|p| p.ip()), &SCRAPES, std::time::Instant::now());
    match scrape {
        Scrape::Allowed => {}
        Scrape::NoCredentials => {
            refuse(format!("{method} without credentials"));
            return Answer { status: 401, body: "credentials needed\n".into(), kind: AnswerKind::Challenge };
        }
        Scrape::Refused { failures } => {
            refuse(format!("{method} with wrong credentials ({failures} from this address lately)"));
            return Answer { status: 401, body: "credentials needed\n".into(), kind: AnswerKind::Challenge };
        }
        Scrape::Throttled => {
            refuse(format!("{method} answered 429 unchecked: this address failed too often (throttled)"));
            return Answer { status: 429, body: "too many failed attempts\n".into(), kind: AnswerKind::Throttled };
        }
    }
    let path = url.split('?').next().unwrap_or("");
    if path == "/metrics" {
        Answer { status: 200, body: render(registry), kind: AnswerKind::Metrics }
    } else {
        Answer { status: 404, body: "only /metrics is served here\n".into(), kind: AnswerKind::Plain }
    }
}

/// The HTTP response to `request` (its body is never read: a scrape has none; hyper leaves the
/// body out of a `HEAD` answer).
pub(crate) fn respond<B>(
    registry: &Registry,
    access: &Access,
    request: &Request<B>,
    peer: SocketAddr,
) -> Response<Full<Bytes>> {
    let authorization = request.headers().get(AUTHORIZATION).map(HeaderValue::as_bytes);
    let answer = answer(registry, access, request.method(), authorization, request.uri().path(), Some(peer));
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
        AnswerKind::MethodNotAllowed => {
            headers.insert(ALLOW, HeaderValue::from_static(METHODS));
            headers.insert(CONTENT_TYPE_HEADER, HeaderValue::from_static(TEXT));
        }
        AnswerKind::Throttled => {
            // One check comes back per refill.
            headers.insert(RETRY_AFTER, HeaderValue::from_static("1"));
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
        let method = response(Answer { status: 405, body: String::new(), kind: AnswerKind::MethodNotAllowed });
        assert_eq!(method.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(method.headers()[ALLOW], METHODS);
        let throttled = response(Answer { status: 429, body: String::new(), kind: AnswerKind::Throttled });
        assert_eq!(throttled.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(throttled.headers()[RETRY_AFTER], "1");
    }
}
