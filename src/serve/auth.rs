//! Who may call the server. Every route but `/healthz` and `/hooks/*`
//! (which check their own signature) needs the token: `Authorization:
//! Bearer TOKEN`, or the session cookie a browser gets by opening any page
//! with `?token=TOKEN` (it is then sent to the same page without it, as
//! Jupyter does). The token is `WF_SERVE_TOKEN`, else one generated at the
//! first start and kept in `$XDG_STATE_HOME/wf/serve-token` (mode 0600).
//! Tokens are compared in constant time; a refusal is the same whether or
//! not what was asked for exists. A request the cookie authenticates that
//! changes something must come from the server's own pages (`Origin`, or
//! `Sec-Fetch-Site`, names this site): no other site can make a browser
//! send one (CSRF).

use super::App;
use super::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use subtle::ConstantTimeEq;

/// The session cookie's name.
pub const COOKIE: &str = "wf_session";

/// The server's token (never printed by `Debug`).
#[derive(Clone)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(***)")
    }
}

impl Token {
    /// Whether `given` is the token (in constant time).
    pub fn matches(&self, given: &str) -> bool {
        let a = self.0.as_bytes();
        let b = given.as_bytes();
        a.len() == b.len() && bool::from(a.ct_eq(b))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Where the token came from.
#[derive(Debug)]
pub enum Source {
    /// `WF_SERVE_TOKEN`.
    Env,
    /// Read from this file.
    File(PathBuf),
    /// Generated now and kept in this file: print it, once.
    Generated(PathBuf),
}

/// Why the token could not be had.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("{path}: {reason}")]
    Io { path: String, reason: String },
    #[error("WF_SERVE_TOKEN is too short: use at least 16 characters")]
    Short,
}

/// The token file: `$XDG_STATE_HOME/wf/serve-token`, else
/// `~/.local/state/wf/serve-token`.
pub fn token_path() -> Option<PathBuf> {
    let non_empty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let state = non_empty("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| non_empty("HOME").map(|h| Path::new(&h).join(".local/state")))?;
    Some(state.join("wf").join("serve-token"))
}

/// The server's token and where it came from.
pub fn load() -> Result<(Token, Source), TokenError> {
    if let Some(t) = std::env::var("WF_SERVE_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
    {
        if t.len() < 16 {
            return Err(TokenError::Short);
        }
        return Ok((Token(t), Source::Env));
    }
    let path = token_path().ok_or_else(|| TokenError::Io {
        path: "serve-token".into(),
        reason: "neither XDG_STATE_HOME nor HOME is set: set WF_SERVE_TOKEN".into(),
    })?;
    let io = |e: std::io::Error| TokenError::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    match std::fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() => {
            return Ok((Token(text.trim().to_string()), Source::File(path)));
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let token = generate().map_err(io)?;
    // Created 0600 and written whole before anyone reads it: a second
    // server starting at the same moment reads the first one's.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io)?;
        f.write_all(token.as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)?;
    }
    match std::fs::hard_link(&tmp, &path) {
        Ok(()) => {
            let _ = std::fs::remove_file(&tmp);
            Ok((Token(token), Source::Generated(path)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let _ = std::fs::remove_file(&tmp);
            let text = std::fs::read_to_string(&path).map_err(io)?;
            Ok((Token(text.trim().to_string()), Source::File(path)))
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(io(e))
        }
    }
}

/// 32 random bytes from the operating system, as hex.
fn generate() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
    Ok(hex::encode(bytes))
}

/// How a request proved itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proof {
    Bearer,
    Cookie,
}

/// Who a request is (a request extension the middleware sets): the actor
/// its actions are recorded as, and what it may do.
#[derive(Debug, Clone)]
pub struct Principal {
    pub actor: crate::vocab::Actor,
    pub scope: crate::vocab::TokenScope,
}

impl Principal {
    /// The principal `proof` makes of the server's own token (`default`,
    /// an `admin` token).
    fn of_default(proof: Proof) -> Principal {
        let name = DEFAULT_NAME.to_string();
        Principal {
            actor: match proof {
                Proof::Bearer => crate::vocab::Actor::Token(name),
                Proof::Cookie => crate::vocab::Actor::Session(name),
            },
            scope: crate::vocab::TokenScope::Admin,
        }
    }
}

/// The name of the server's own token (`WF_SERVE_TOKEN`, the token file).
pub const DEFAULT_NAME: &str = "default";

/// The proof a request carries, if it is the token.
pub fn proof(token: &Token, headers: &HeaderMap) -> Option<Proof> {
    if let Some(v) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        && let Some(t) = v
            .strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("bearer "))
        && token.matches(t.trim())
    {
        return Some(Proof::Bearer);
    }
    for v in headers.get_all(header::COOKIE) {
        let Ok(v) = v.to_str() else { continue };
        for pair in v.split(';') {
            if let Some((k, val)) = pair.trim().split_once('=')
                && k == COOKIE
                && token.matches(val)
            {
                return Some(Proof::Cookie);
            }
        }
    }
    None
}

/// Whether a cookie-authenticated request comes from this site's pages.
fn same_site(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        return matches!(site, "same-origin" | "none");
    }
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    match headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        Some(origin) => {
            let origin_host = origin
                .split_once("://")
                .map_or(origin, |(_, rest)| rest)
                .trim_end_matches('/');
            host.is_some_and(|h| h.eq_ignore_ascii_case(origin_host))
        }
        // No browser sends a cross-site form or fetch without one of the two.
        None => true,
    }
}

/// The middleware in front of every route that needs the token.
pub async fn require(State(app): State<App>, req: Request, next: Next) -> Response {
    // A sign-in link: `?token=TOKEN` on a page.
    if req.method() == Method::GET
        && let Some(resp) = sign_in(&app, &req)
    {
        return resp;
    }
    let mut req = req;
    match proof(&app.token, req.headers()) {
        Some(Proof::Bearer) => {
            req.extensions_mut()
                .insert(Principal::of_default(Proof::Bearer));
            next.run(req).await
        }
        Some(Proof::Cookie) => {
            let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
            if !safe && !same_site(req.headers()) {
                return ApiError::new(
                    crate::error_kind::ErrorKind::CrossSite,
                    "a request from another site may not change anything here",
                )
                .into_response();
            }
            req.extensions_mut()
                .insert(Principal::of_default(Proof::Cookie));
            next.run(req).await
        }
        None => refuse(&req),
    }
}

/// The session cookie's `Set-Cookie` value.
pub fn session_cookie(app: &App) -> String {
    format!(
        "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict{}",
        app.token.as_str(),
        if app.tls { "; Secure" } else { "" }
    )
}

/// Where a sign-in may send the browser: `next` when it is a path of this
/// site, else `/`. A path is `/` and then visible ASCII only: no `//` or
/// `/\` (another host to a browser), and no whitespace or control
/// character anywhere (browsers drop tabs and line feeds from a URL, so
/// `/\t/evil.example` would become `//evil.example`; and a header cannot
/// hold a line feed). The one check of `next`, wherever it comes from.
pub fn local_next(next: &str) -> &str {
    let visible = next.bytes().all(|b| b.is_ascii_graphic());
    let mut after = next.bytes().skip(1);
    let other_host = matches!(after.next(), Some(b'/' | b'\\'));
    if next.starts_with('/') && visible && !other_host && !next.contains('\\') {
        next
    } else {
        "/"
    }
}

/// The refusal of a request without the token: the sign-in page for a
/// browser asking for a page, the JSON error for anything else; the same
/// whether or not what was asked for exists.
pub fn refuse(req: &Request) -> Response {
    if !wants_page(req) {
        return unauthorized().into_response();
    }
    let next = req
        .uri()
        .path_and_query()
        .map_or("/", axum::http::uri::PathAndQuery::as_str);
    let page = super::pages::signin(local_next(next));
    (StatusCode::UNAUTHORIZED, axum::response::Html(page)).into_response()
}

/// Whether `req` is a browser's asking for a page (a GET that accepts
/// HTML): its errors are pages, not JSON.
pub fn wants_page(req: &Request) -> bool {
    req.method() == Method::GET
        && req
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("text/html"))
}

/// The one refusal of a request without the token.
pub fn unauthorized() -> ApiError {
    ApiError::new(
        crate::error_kind::ErrorKind::Unauthorized,
        "this server needs its token: `Authorization: Bearer TOKEN`",
    )
}

/// `GET /page?token=TOKEN`: sets the session cookie and sends the browser
/// to the page without the token in its address. A wrong token is refused.
fn sign_in(app: &App, req: &Request) -> Option<Response> {
    let query = req.uri().query()?;
    let mut given = None;
    let mut rest = form_urlencoded::Serializer::new(String::new());
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        if k == "token" {
            given = Some(v.into_owned());
        } else {
            rest.append_pair(&k, &v);
        }
    }
    let given = given?;
    if !app.token.matches(&given) {
        return Some(unauthorized().into_response());
    }
    let rest = rest.finish();
    let to = if rest.is_empty() {
        req.uri().path().to_string()
    } else {
        format!("{}?{rest}", req.uri().path())
    };
    let mut r = Redirect::to(&to).into_response();
    if let Ok(v) = session_cookie(app).parse() {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::local_next;

    #[test]
    fn next_is_a_path_of_this_site_or_home() {
        for ok in ["/", "/instances/abc?status=failed", "/queues#k", "/a/%2F/b"] {
            assert_eq!(local_next(ok), ok);
        }
        for bad in [
            "//evil.example",
            "/\\evil.example",
            "/\t/evil.example",
            "/\n/evil.example",
            "/a\r\nSet-Cookie: x=1",
            "/ space",
            "https://evil.example/",
            "evil",
            "",
            "/ü",
        ] {
            assert_eq!(local_next(bad), "/", "{bad:?}");
        }
    }
}
