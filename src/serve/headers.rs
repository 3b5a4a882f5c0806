//! The headers every answer of `wf serve` carries, whatever produced it (a
//! page, the API, an error, the fallback, a refusal by an outer layer):
//! a Content-Security-Policy that lets a page load only what the server
//! itself serves and run no inline script, `nosniff`, a same-origin
//! referrer, no framing by any site; and, on a 401, how to authenticate
//! (`WWW-Authenticate`). One layer, outermost, so that no route can forget.

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

/// What a page may load and run: only what this server serves; no inline
/// script (the one script is `/assets/wf.js`), no inline `<style>`, no
/// plugin, no other origin for anything, no `<base>`, forms posted here
/// only, never framed. Inline `style` attributes are let through
/// (`style-src-attr`): the trace waterfall places its bars with them, and
/// an attribute runs no code.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     style-src-attr 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; \
     font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
     frame-ancestors 'none'";

/// What a 401 says about how to authenticate (RFC 6750): a bearer token
/// (or the inspector's sign-in, which makes a session).
pub const AUTHENTICATE: &str = "Bearer";

/// Adds the headers to whatever the inner layers answered (keeping one a
/// route set itself).
pub async fn secure(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    let mut set = |name: HeaderName, value: &'static str| {
        if !h.contains_key(&name) {
            h.insert(name, HeaderValue::from_static(value));
        }
    };
    set(header::CONTENT_SECURITY_POLICY, CSP);
    set(header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(header::REFERRER_POLICY, "same-origin");
    set(header::X_FRAME_OPTIONS, "DENY");
    if res.status() == StatusCode::UNAUTHORIZED {
        res.headers_mut()
            .entry(header::WWW_AUTHENTICATE)
            .or_insert(HeaderValue::from_static(AUTHENTICATE));
    }
    res
}
