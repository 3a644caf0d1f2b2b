//! What every request passes before a page handler sees it: a `Host` the
//! inspector answers to (`crate::hosts`: loopback names from loopback
//! peers, and the names the operator allowed, against DNS rebinding and
//! forged hosts), same-origin writes, the CSRF cookie, and headers that
//! keep the browser from running anything but our own scripts.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::Inspector;

/// Name of the cookie that carries the CSRF token, followed by `_PORT`
/// once the inspector serves on a port: cookies are shared by every port
/// of a host, so two inspectors on one machine would otherwise overwrite
/// each other's token.
pub const CSRF_COOKIE: &str = "mnemo_csrf";

/// Only our own files run or style the page; nothing is framed, and forms
/// post only back here.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

fn host_allowed(inspector: &Inspector, host: &str, peer: Option<SocketAddr>) -> bool {
    inspector.inner.hosts.allows(host, peer)
}

/// The middleware: refuses unknown hosts and cross-origin writes, then
/// adds the security headers and the CSRF cookie to the response.
pub async fn check(State(inspector): State<Inspector>, request: Request, next: Next) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("")
        .to_owned();
    if !host_allowed(&inspector, &host, peer) {
        return refuse(
            StatusCode::MISDIRECTED_REQUEST,
            "this inspector answers only to loopback host names from this machine and to the \
             names given with --allowed-host NAME[:PORT]",
        );
    }
    let safe = matches!(*request.method(), Method::GET | Method::HEAD);
    if !safe && !same_origin(request.headers(), &host) {
        return refuse(
            StatusCode::FORBIDDEN,
            "cross-origin write refused: the Origin header must be this inspector's",
        );
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Not "no-referrer": under it a browser sends `Origin: null` on our own
    // form posts, and the origin check above would refuse them.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    let cookie = format!(
        "{}={}; Path=/; HttpOnly; SameSite=Strict",
        inspector.csrf_cookie(),
        inspector.csrf()
    );
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        headers.append(header::SET_COOKIE, v);
    }
    response
}

/// A write must come from a page of this inspector: browsers send `Origin`
/// on every POST, and it must name the host the request went to.
fn same_origin(headers: &HeaderMap, host: &str) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) else {
        return false;
    };
    origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(|o| o.eq_ignore_ascii_case(host))
}

/// Whether a write carries this process's CSRF token both in its form
/// (`form_token`) and in its cookie (which only a same-site page sends).
pub fn token_ok(inspector: &Inspector, headers: &HeaderMap, form_token: &str) -> bool {
    let secret = inspector.csrf().as_bytes();
    let name = inspector.csrf_cookie();
    let cookie_ok = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .any(|(k, v)| k == name && bool::from(v.as_bytes().ct_eq(secret)));
    cookie_ok && bool::from(form_token.as_bytes().ct_eq(secret))
}

fn refuse(code: StatusCode, message: &'static str) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_must_name_the_requested_host() {
        let mut h = HeaderMap::new();
        assert!(!same_origin(&h, "127.0.0.1:8787"));
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:8787"),
        );
        assert!(same_origin(&h, "127.0.0.1:8787"));
        assert!(!same_origin(&h, "127.0.0.1:9999"));
        h.insert(header::ORIGIN, HeaderValue::from_static("null"));
        assert!(!same_origin(&h, "127.0.0.1:8787"));
    }
}
