//! The server's connections, served with hyper directly rather than
//! `axum::serve`, which sets no timer, so a client that sends its headers
//! a byte a minute would hold its connection for ever: here a request's
//! headers must arrive within [`HEADER_TIMEOUT`]. HTTP/1.1 with keep-alive;
//! each request gets its peer's address ([`Peer`]). Stopping: no new
//! connection is taken, each open one finishes the request it is serving
//! and closes, and [`serve`] returns once all have.

use super::access::Peer;
use super::tls;
use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tower::ServiceExt as _;

/// How long a client has to send a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection's stream, plain or TLS.
trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

/// Where connections come from.
pub enum Incoming {
    Plain(TcpListener),
    Tls(tls::Listener),
}

impl Incoming {
    async fn next(&mut self) -> Option<(Box<dyn Io>, SocketAddr)> {
        match self {
            Incoming::Plain(l) => loop {
                match l.accept().await {
                    Ok((s, peer)) => {
                        let _ = s.set_nodelay(true);
                        return Some((Box::new(s), peer));
                    }
                    // Out of file descriptors, say: breathe, then go on.
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            },
            Incoming::Tls(l) => l
                .next()
                .await
                .map(|(s, peer)| (Box::new(s) as Box<dyn Io>, peer)),
        }
    }
}

/// Serves `router` on `incoming` until `stop` turns true, then lets the
/// open connections finish.
pub async fn serve(mut incoming: Incoming, router: Router, mut stop: watch::Receiver<bool>) {
    // Each connection's task holds a sender; when all are dropped, all ended.
    let (open_tx, mut open_rx) = mpsc::channel::<()>(1);
    loop {
        let (io, peer) = tokio::select! {
            c = incoming.next() => match c {
                Some(c) => c,
                None => break,
            },
            _ = stop.wait_for(|s| *s) => break,
        };
        let svc = router.clone().map_request(
            move |mut req: axum::http::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(ConnectInfo(Peer(peer)));
                req.map(axum::body::Body::new)
            },
        );
        let open = open_tx.clone();
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .keep_alive(true);
            let conn = builder
                .serve_connection(TokioIo::new(io), TowerToHyperService::new(svc))
                .with_upgrades();
            let mut conn = std::pin::pin!(conn);
            let stopped = tokio::select! {
                _ = conn.as_mut() => false,
                r = stop.wait_for(|s| *s) => r.is_ok(),
            };
            if stopped {
                conn.as_mut().graceful_shutdown();
                let _ = conn.await;
            }
            drop(open);
        });
    }
    drop(open_tx);
    let _ = open_rx.recv().await;
}
