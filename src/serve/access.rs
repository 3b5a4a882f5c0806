//! The access log: a line on stderr per request, `key=value` fields
//! (`peer`, `method`, `path`, `status`, `ms`). The query string is never
//! logged (a sign-in link carries the token in it), nor any header.

use super::App;
use super::error::ApiError;
use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::io::Write as _;
use std::net::SocketAddr;

/// The address a request came from (both listeners', plain and TLS).
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub SocketAddr);

impl
    axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, tokio::net::TcpListener>>
    for Peer
{
    fn connect_info(s: axum::serve::IncomingStream<'_, tokio::net::TcpListener>) -> Peer {
        Peer(*s.remote_addr())
    }
}

#[derive(Debug)]
pub struct Log {
    quiet: bool,
}

impl Log {
    pub fn new(quiet: bool) -> Log {
        Log { quiet }
    }

    fn line(&self, peer: Option<SocketAddr>, method: &str, path: &str, status: u16, ms: f64) {
        if self.quiet {
            return;
        }
        // The path as received, its control characters escaped: a request
        // cannot forge a line of the log.
        let path: String = path.escape_debug().collect();
        let peer = peer.map_or_else(|| "-".to_string(), |p| p.to_string());
        let _ = writeln!(
            std::io::stderr().lock(),
            "access peer={peer} method={method} path=\"{path}\" status={status} ms={ms:.1}"
        );
    }
}

pub async fn layer(State(app): State<App>, req: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let peer = req.extensions().get::<ConnectInfo<Peer>>().map(|c| c.0.0);
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let r = next.run(req).await;
    app.log.line(
        peer,
        &method,
        &path,
        r.status().as_u16(),
        started.elapsed().as_secs_f64() * 1000.0,
    );
    r
}

/// A route that does not exist: the same 401 as any other without the
/// token (nothing tells a caller without it which routes exist), 404 with it.
pub async fn fallback(State(app): State<App>, req: Request) -> Response {
    match super::auth::identify(&app, req.headers()).await {
        Ok(Some(_)) => {}
        Ok(None) => return super::auth::refuse(&req),
        Err(e) => return e.into_response(),
    }
    let e = ApiError::not_found(format!("no route {} {}", req.method(), req.uri().path()));
    if super::auth::wants_page(&req) {
        return super::pages::error_page(&e);
    }
    e.into_response()
}

/// The most of a too-large body read (and thrown away) before answering
/// 413: a client that sends it all then reads the answer instead of
/// finding the connection closed under its write.
const DRAIN_AT_MOST: u64 = 64 * 1024 * 1024;

/// A body whose `Content-Length` is over the server's limit is refused
/// before any route reads it (413); what the client sends of it is read
/// and dropped, up to [`DRAIN_AT_MOST`], so that it sees the answer.
pub async fn refuse_large(req: Request, next: Next) -> Response {
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let limit = if req.uri().path() == "/api/v1/db/import" {
        super::history::IMPORT_BODY_LIMIT
    } else {
        super::API_BODY_LIMIT.max(super::HOOK_BODY_LIMIT)
    };
    match declared {
        Some(n) if n > limit as u64 => {
            if n <= DRAIN_AT_MOST {
                use futures_util::StreamExt as _;
                let mut stream = req.into_body().into_data_stream();
                let drained = tokio::time::timeout(super::REQUEST_TIMEOUT, async {
                    while let Some(Ok(_)) = stream.next().await {}
                });
                let _ = drained.await;
            }
            ApiError::new(
                crate::error_kind::ErrorKind::TooLarge,
                "the request body is larger than the server takes",
            )
            .into_response()
        }
        _ => next.run(req).await,
    }
}
