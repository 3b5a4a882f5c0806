//! Who may call the server, and as whom. Every route but `/healthz`,
//! `/signin` and `/hooks/*` (which check their own signature) needs a
//! token: `Authorization: Bearer TOKEN`, or the session cookie a browser
//! gets by signing in (opening any page with `?token=TOKEN`, which then
//! sends it to the same page without it, as Jupyter does, or the sign-in
//! form). A token is the server's own (`WF_SERVE_TOKEN`, else one
//! generated at the first start and kept in
//! `$XDG_STATE_HOME/wf/serve-token`, mode 0600: an `admin` token named
//! `default`, compared in constant time) or a named one of the database
//! (`wf serve token add`, found by its hash on every request, so a
//! revocation holds from the next request on every server). A session is
//! a random id of its own (never the token) in a cookie named after the
//! port the server listens on, kept as its hash; it ends after
//! `--session-ttl` idle, at `POST /signout`, and with its token. Each
//! request runs as a [`Principal`]: the actor its actions record and the
//! scope it may act with (a route that needs more answers 403 naming the
//! scope). A refusal is the same whether or not what was asked for
//! exists. A request the cookie authenticates that changes something must
//! come from the server's own pages (`Origin`, or `Sec-Fetch-Site`, names
//! this site): no other site can make a browser send one (CSRF).

use super::App;
use super::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use subtle::ConstantTimeEq;

use crate::engine::tokens;
use crate::vocab::{Actor, TokenScope};

/// The server's token (never printed by `Debug`), with its hash: what a
/// session it signed in keeps (`engine::tokens::hash`), made once.
#[derive(Clone)]
pub struct Token {
    text: String,
    hash: String,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(***)")
    }
}

impl Token {
    fn new(text: String) -> Token {
        Token {
            hash: tokens::hash(&text),
            text,
        }
    }

    /// Whether `given` is the token (in constant time).
    pub fn matches(&self, given: &str) -> bool {
        let a = self.text.as_bytes();
        let b = given.as_bytes();
        a.len() == b.len() && bool::from(a.ct_eq(b))
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Its SHA-256, as hex.
    pub fn hash(&self) -> &str {
        &self.hash
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
        return Ok((Token::new(t), Source::Env));
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
            return Ok((Token::new(text.trim().to_string()), Source::File(path)));
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
            Ok((Token::new(token), Source::Generated(path)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let _ = std::fs::remove_file(&tmp);
            let text = std::fs::read_to_string(&path).map_err(io)?;
            Ok((Token::new(text.trim().to_string()), Source::File(path)))
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

/// Who a request is (a request extension the middleware sets): the actor
/// its actions are recorded as, and what it may do.
#[derive(Debug, Clone)]
pub struct Principal {
    pub actor: Actor,
    pub scope: TokenScope,
    /// The session's id, for a request its cookie authenticated (none: a
    /// bearer token).
    pub session: Option<String>,
}

/// The cookie a browser keeps its session in: named after the port the
/// server listens on, so two servers of one host (which share its
/// cookies) keep their own sign-ins.
pub fn cookie_name(port: u16) -> String {
    format!("wf_session_{port}")
}

/// The bearer token a request carries, if any.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    v.strip_prefix("Bearer ")
        .or_else(|| v.strip_prefix("bearer "))
        .map(str::trim)
}

/// The value of cookie `name` a request carries, if any.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The token named `name` with scope `scope` that `token` is, if it is the
/// server's own or a named one: `(name, hash of its text, scope)`.
async fn token_of(
    app: &App,
    token: &str,
) -> Result<Option<(String, String, TokenScope)>, ApiError> {
    if app.token.matches(token) {
        return Ok(Some((
            tokens::DEFAULT.to_string(),
            app.token.hash().to_string(),
            TokenScope::Admin,
        )));
    }
    let token = token.to_string();
    let found = app
        .db
        .run(move |l| async move {
            let c = l.conn().await?;
            Ok::<_, ApiError>(tokens::find(&c, &token).await?)
        })
        .await?;
    if let Some(row) = &found {
        app.usage.used(app, &row.name);
    }
    Ok(found.map(|r| (r.name, r.hash, r.scope)))
}

/// Who the request is, as the token or session it carries says; `None`
/// when it carries neither (or one no longer valid).
pub async fn identify(app: &App, headers: &HeaderMap) -> Result<Option<Principal>, ApiError> {
    if let Some(t) = bearer(headers) {
        return Ok(token_of(app, t).await?.map(|(name, _, scope)| Principal {
            actor: Actor::Token(name),
            scope,
            session: None,
        }));
    }
    let Some(id) = cookie(headers, &app.cookie).map(str::to_string) else {
        return Ok(None);
    };
    let ttl = app.session_ttl;
    let sid = id.clone();
    let found = app
        .db
        .run(move |l| async move {
            let mut c = l.conn().await?;
            Ok::<_, ApiError>(tokens::session(&mut c, &sid, ttl).await?)
        })
        .await?;
    let Some(found) = found else { return Ok(None) };
    // A session of the server's own token lasts while that token is the
    // server's; of a named one, while the database keeps that token.
    let scope = if found.row.token == tokens::DEFAULT {
        (found.row.token_hash == app.token.hash()).then_some(TokenScope::Admin)
    } else {
        found.scope
    };
    let Some(scope) = scope else { return Ok(None) };
    app.usage.seen(app, &found.row);
    Ok(Some(Principal {
        actor: Actor::Session(found.row.token.clone()),
        scope,
        session: Some(id),
    }))
}

/// The scope a request needs: managing tokens and moving the whole
/// history (a backup, a copy, an import) need `admin`; any other reading
/// `read`; any other change `operate`. Signing out needs nothing more
/// than a session.
pub fn needed(method: &Method, path: &str) -> TokenScope {
    let admin = path.starts_with("/api/v1/tokens")
        || matches!(
            path,
            "/api/v1/db/backup" | "/api/v1/db/copy" | "/api/v1/db/import" | "/database/copy"
        );
    if admin {
        TokenScope::Admin
    } else if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) || path == "/signout"
    {
        TokenScope::Read
    } else {
        TokenScope::Operate
    }
}

/// The refusal of a request whose token's scope is short of `needed`.
pub fn forbidden(who: &Principal, needed: TokenScope, method: &Method, path: &str) -> ApiError {
    ApiError::new(
        crate::error_kind::ErrorKind::Forbidden,
        format!(
            "{method} {path} needs the `{needed}` scope; {} has `{}`",
            match &who.actor {
                Actor::Token(n) => format!("token `{n}`"),
                Actor::Session(n) => format!("this session (token `{n}`)"),
                other => other.to_string(),
            },
            who.scope
        ),
    )
}

/// When named tokens and sessions were last used, written at most once a
/// minute each (a token's last write kept here, a session's read with it):
/// a request costs no write.
#[derive(Debug, Default)]
pub struct Usage {
    tokens: std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>,
}

/// How often a token's or a session's last use is written.
const USAGE_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

impl Usage {
    /// Token `name` was used now: written if it was not within a minute.
    fn used(&self, app: &App, name: &str) {
        let now = std::time::Instant::now();
        {
            let Ok(mut seen) = self.tokens.lock() else {
                return;
            };
            if seen
                .get(name)
                .is_some_and(|at| now.duration_since(*at) < USAGE_EVERY)
            {
                return;
            }
            seen.insert(name.to_string(), now);
        }
        let used = vec![(name.to_string(), crate::vocab::Timestamp::now())];
        app.db.spawn(move |l| async move {
            if let Ok(mut c) = l.conn().await {
                let _ = c.touch_tokens(&used).await;
            }
        });
    }

    /// Session `row` was used now: written if its last use is a minute old.
    fn seen(&self, app: &App, row: &crate::store::SessionRow) {
        let now_ms = crate::vocab::Timestamp::now().ms();
        if now_ms - row.seen_ms < i64::try_from(USAGE_EVERY.as_millis()).unwrap_or(60_000) {
            return;
        }
        let seen = vec![(row.hash.clone(), now_ms)];
        app.db.spawn(move |l| async move {
            if let Ok(mut c) = l.conn().await {
                let _ = c.touch_sessions(&seen).await;
            }
        });
    }
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

/// The middleware in front of every route that needs the token: finds
/// who the request is, refuses a cross-site change made with the cookie
/// and a request its scope does not cover, and hands the [`Principal`] to
/// the route.
pub async fn require(State(app): State<App>, req: Request, next: Next) -> Response {
    // A sign-in link: `?token=TOKEN` on a page.
    let uri = req.uri().clone();
    if req.method() == Method::GET
        && let Some(resp) = sign_in(&app, &uri).await
    {
        return resp;
    }
    let who = match identify(&app, req.headers()).await {
        Ok(Some(who)) => who,
        Ok(None) => return refuse(&req),
        Err(e) => return e.into_response(),
    };
    let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let by_cookie = who.session.is_some();
    if by_cookie && !safe && !same_site(req.headers()) {
        return ApiError::new(
            crate::error_kind::ErrorKind::CrossSite,
            "a request from another site may not change anything here",
        )
        .into_response();
    }
    let need = needed(req.method(), req.uri().path());
    if who.scope < need {
        let e = forbidden(&who, need, req.method(), req.uri().path());
        if wants_page(&req) || by_cookie {
            return super::pages::error_page(&e);
        }
        return e.into_response();
    }
    let mut req = req;
    req.extensions_mut().insert(who);
    next.run(req).await
}

/// A new session for `token`, if it is a token of this server: the
/// `Set-Cookie` value that carries its id.
pub async fn start_session(app: &App, token: &str) -> Result<Option<String>, ApiError> {
    let Some((name, hash, _)) = token_of(app, token).await? else {
        return Ok(None);
    };
    let id = app
        .db
        .run(move |l| async move {
            let mut c = l.conn().await?;
            Ok::<_, ApiError>(tokens::open_session(&mut c, &name, &hash).await?)
        })
        .await?;
    Ok(Some(session_cookie(app, &id, "")))
}

/// The session cookie's `Set-Cookie` value holding `value`, with `more`
/// attributes: HttpOnly, SameSite=Strict, and Secure under TLS.
fn session_cookie(app: &App, value: &str, more: &str) -> String {
    format!(
        "{}={value}; Path=/; HttpOnly; SameSite=Strict{more}{}",
        app.cookie,
        if app.tls { "; Secure" } else { "" }
    )
}

/// The `Set-Cookie` value that makes a browser forget its session.
pub fn ended_cookie(app: &App) -> String {
    session_cookie(app, "", "; Max-Age=0")
}

/// `POST /signout`: ends the request's session (and any idle past the
/// TTL), forgets the cookie, and sends the browser to the sign-in page.
pub async fn sign_out(
    State(app): State<App>,
    axum::extract::Extension(who): axum::extract::Extension<Principal>,
) -> Response {
    if let Some(id) = who.session {
        let ttl = app.session_ttl;
        let ended = app
            .db
            .run(move |l| async move {
                let mut c = l.conn().await?;
                Ok::<_, ApiError>(tokens::end_session(&mut c, &id, ttl).await?)
            })
            .await;
        if let Err(e) = ended {
            return e.into_response();
        }
    }
    let mut r = Redirect::to("/signin").into_response();
    if let Ok(v) = ended_cookie(&app).parse() {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
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

/// `GET /page?token=TOKEN`: starts a session and sends the browser to
/// the page without the token in its address. A wrong token is refused.
async fn sign_in(app: &App, uri: &axum::http::Uri) -> Option<Response> {
    let query = uri.query()?;
    let (given, to) = {
        let mut given = None;
        let mut rest = form_urlencoded::Serializer::new(String::new());
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            if k == "token" {
                given = Some(v.into_owned());
            } else {
                rest.append_pair(&k, &v);
            }
        }
        let rest = rest.finish();
        let to = if rest.is_empty() {
            uri.path().to_string()
        } else {
            format!("{}?{rest}", uri.path())
        };
        (given?, to)
    };
    let cookie = match start_session(app, &given).await {
        Ok(Some(c)) => c,
        Ok(None) => return Some(unauthorized().into_response()),
        Err(e) => return Some(e.into_response()),
    };
    let mut r = Redirect::to(&to).into_response();
    if let Ok(v) = cookie.parse() {
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
