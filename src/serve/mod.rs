//! `wf serve`: the HTTP interface, beside the command line (`commands/`):
//! both call the engine and the store, neither calls the other. It serves
//! the API (`/api/v1`, the CLI's reads and actions with its JSON shapes),
//! webhooks that start registered workflows (`/hooks/NAME`), Prometheus
//! metrics (`/metrics`) and `/healthz`; with `--worker` it also runs a
//! worker in the process.
//!
//! - `db.rs`: how a request's job reaches the store on the server's thread.
//! - `auth.rs`: tokens, sessions, scopes, CSRF.
//! - `error.rs`: `{error: {code, message}}` and its HTTP statuses.
//! - `api.rs`: the API's reads (`instances.rs`: the instance list and its
//!   counts); `actions.rs`: its actions (`bulk.rs`: one over many
//!   instances); `body.rs`:
//!   their request bodies as types; `query.rs`: query strings and the
//!   inspector's forms as types; `params.rs`: the parameters each route
//!   takes, checked before it runs.
//! - `hooks.rs`: webhooks. `metrics.rs`: `/metrics`. `history.rs`: the
//!   whole history (backup, copy, import) for an `admin` token.
//! - `openapi/`: the OpenAPI document of the API, from the handlers' types.
//! - `access.rs`: the access log, request limits and timeouts.
//! - `tls.rs`: HTTPS through rustls; `listen.rs`: the connections.
//! - `pages/`: the web inspector, the history as pages.

mod access;
mod actions;
mod api;
pub mod auth;
mod body;
mod bulk;
mod db;
mod error;
mod follow;
mod headers;
mod history;
mod hooks;
mod instances;
mod listen;
mod metrics;
pub mod openapi;
mod pages;
mod params;
mod query;
mod tls;
mod upgrade;

use crate::engine::worker::{Options as WorkerOptions, Worker, WorkerEnd};
use crate::printer::Printer;
use crate::store::{Location, Store};
use axum::Router;
use axum::routing::{get, post};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The largest request body the API takes (a signal's payload, a start's
/// inputs).
pub const API_BODY_LIMIT: usize = 1024 * 1024;

/// The largest webhook body (docs/api.md).
pub const HOOK_BODY_LIMIT: usize = 1024 * 1024;

/// How long a request may take, but for the ones that wait or stream on
/// purpose (`result?wait=`, `logs?follow=1`), which bound themselves.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest `?wait=` of `result`.
pub const MAX_WAIT: Duration = Duration::from_secs(300);

/// How `wf serve` was asked to run.
pub struct Options {
    pub listen: SocketAddr,
    pub token: auth::Token,
    /// `--tls-cert` and `--tls-key`.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// `--worker`: a worker in the process, with these options.
    pub worker: Option<WorkerOptions>,
    /// `--session-ttl`: how long a browser session lasts unused.
    pub session_ttl: Duration,
}

/// What every handler shares.
#[derive(Clone)]
pub struct App {
    db: db::Db,
    token: auth::Token,
    tls: bool,
    /// The session cookie's name (`auth::cookie_name`).
    cookie: Arc<str>,
    /// How long a session lasts unused.
    session_ttl: Duration,
    /// When named tokens were last used (`auth::Usage`).
    usage: Arc<auth::Usage>,
    /// Set when the server stops: streams end, waits return.
    stopping: tokio::sync::watch::Receiver<bool>,
    /// Whether a worker runs in this process (`/metrics`).
    worker: bool,
    log: Arc<access::Log>,
}

/// Why the server stopped before it served.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {reason}")]
    Listen { addr: SocketAddr, reason: String },
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Engine(#[from] crate::engine::EngineError),
    #[error("cannot watch for signals: {0}")]
    Signals(std::io::Error),
}

/// How the server ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// SIGINT or SIGTERM: in-flight requests finished, the worker stopped.
    Stopped,
}

/// The routes, with their layers.
pub fn router(app: App) -> Router {
    // Routes that answer at once: bounded by REQUEST_TIMEOUT (408).
    let quick = Router::new()
        .route("/api/v1/instances", get(instances::list))
        .route("/api/v1/instances/counts", get(instances::counts))
        .route("/api/v1/instances/{id}", get(api::inspect))
        .route("/api/v1/instances/{id}/attempts", get(api::attempts))
        .route("/api/v1/instances/{id}/logs", get(api::logs))
        .route("/api/v1/instances/{id}/trace", get(api::trace))
        .route("/api/v1/instances/{id}/events", get(api::events))
        .route("/api/v1/instances/{id}/definitions", get(api::definitions))
        .route("/api/v1/instances/{id}/compare", get(api::compare))
        .route("/api/v1/instances/{id}/signal", post(actions::signal))
        .route("/api/v1/instances/{id}/cancel", post(actions::cancel))
        .route("/api/v1/instances/{id}/terminate", post(actions::terminate))
        .route("/api/v1/instances/{id}/resume", post(actions::resume))
        .route("/api/v1/instances/{id}/retry", post(actions::retry))
        .route("/api/v1/instances/{id}/restart", post(actions::restart))
        .route("/api/v1/instances/{id}/upgrade", post(upgrade::instance))
        .route("/api/v1/bulk/{action}", post(bulk::api))
        .route("/api/v1/queues", get(api::queues))
        .route("/api/v1/queues/{key}", get(api::queue))
        .route("/api/v1/db/check", get(api::db_check))
        .route("/api/v1/db/actions", get(api::db_actions))
        .route("/api/v1/schedules", get(api::schedules))
        .route("/api/v1/workflows", get(api::workflows))
        .route("/api/v1/workflows/{name}", get(api::workflow))
        .route("/api/v1/workflows/{name}/instances", post(actions::start))
        .route("/api/v1/workflows/{name}/upgrade", post(upgrade::workflow))
        .route("/api/v1/openapi.json", get(openapi::document))
        .route("/api/v1/tokens", get(api::tokens).post(actions::add_token))
        .route(
            "/api/v1/tokens/{name}",
            axum::routing::delete(actions::revoke_token),
        )
        .route("/metrics", get(metrics::scrape))
        .merge(pages::routes())
        .layer(timeout());
    // Routes that wait or stream on purpose, and bound themselves
    // (`result?wait=` at most MAX_WAIT; a log stream ends with its attempt
    // or the server).
    let waiting = Router::new()
        .route("/api/v1/instances/{id}/logs/{step}", get(api::step_logs))
        .route("/api/v1/instances/{id}/result", get(api::result))
        // A whole history moves as long as it takes.
        .route("/api/v1/db/backup", get(history::backup))
        .route("/api/v1/db/copy", post(history::copy));
    let import = Router::new()
        .route("/api/v1/db/import", post(history::import))
        .layer(axum::extract::DefaultBodyLimit::max(
            history::IMPORT_BODY_LIMIT,
        ));
    let api = quick
        .merge(waiting)
        .layer(axum::extract::DefaultBodyLimit::max(API_BODY_LIMIT))
        .merge(import)
        .route_layer(axum::middleware::from_fn(params::known))
        .route_layer(axum::middleware::from_fn_with_state(
            app.clone(),
            auth::require,
        ));
    let open = Router::new()
        .merge(pages::open_routes())
        .route("/healthz", get(api::healthz))
        .route(
            "/hooks/{name}",
            post(hooks::deliver).layer(axum::extract::DefaultBodyLimit::max(HOOK_BODY_LIMIT)),
        )
        .layer(timeout());
    Router::new()
        .merge(api)
        .merge(open)
        .fallback(access::fallback)
        .layer(axum::middleware::from_fn(error::normalize))
        // gzip for a client that asks (pages, JSON, the trace); never for
        // server-sent events, whose chunks must go out as they come.
        .layer(tower_http::compression::CompressionLayer::new())
        .layer(axum::middleware::from_fn(params::no_nul))
        .layer(axum::middleware::from_fn(access::refuse_large))
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            access::layer,
        ))
        // Outermost: every answer carries them, refusals of the layers
        // above included.
        .layer(axum::middleware::from_fn(headers::secure))
        .with_state(app)
}

fn timeout() -> tower_http::timeout::TimeoutLayer {
    tower_http::timeout::TimeoutLayer::with_status_code(
        axum::http::StatusCode::REQUEST_TIMEOUT,
        REQUEST_TIMEOUT,
    )
}

/// Serves until SIGINT or SIGTERM: then in-flight requests finish, streams
/// end, and the worker (`--worker`) stops as `wf worker` does.
pub async fn run(
    location: Location,
    opts: Options,
    printer: &Printer,
) -> Result<Ended, ServeError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt()).map_err(ServeError::Signals)?;
    let mut term = signal(SignalKind::terminate()).map_err(ServeError::Signals)?;
    // The schema is made (or migrated) once, before the first request.
    let store = Store::open(&location).await?;
    let tls = match &opts.tls {
        Some((cert, key)) => Some(tls::acceptor(cert, key)?),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .map_err(|e| ServeError::Listen {
            addr: opts.listen,
            reason: e.to_string(),
        })?;
    let addr = listener.local_addr().unwrap_or(opts.listen);
    let (stop_tx, stopping) = tokio::sync::watch::channel(false);
    let stopping_rx = stopping.clone();
    let (db, local, jobs) = db::channel(location.clone(), printer.clone());
    let app = App {
        db,
        token: opts.token.clone(),
        tls: tls.is_some(),
        cookie: auth::cookie_name(addr.port()).into(),
        session_ttl: opts.session_ttl,
        usage: Arc::default(),
        stopping,
        worker: opts.worker.is_some(),
        log: Arc::new(access::Log::new(printer.is_quiet())),
    };
    let routes = router(app);
    let scheme = if tls.is_some() { "https" } else { "http" };
    printer.info(&format!(
        "serving {} on {scheme}://{addr} (API {scheme}://{addr}/api/v1, metrics /metrics)",
        location.describe()
    ));
    let local_set = tokio::task::LocalSet::new();
    let dispatcher = local_set.spawn_local(db::dispatch(local.clone(), jobs));
    let shutdown = async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        let _ = stop_tx.send(true);
    };
    let worker = match opts.worker {
        Some(options) => {
            let concurrency = options.concurrency;
            let worker =
                Worker::new(store, location.clone(), options).map_err(ServeError::Signals)?;
            printer.info(&format!(
                "worker on {} (concurrency {concurrency})",
                location.describe()
            ));
            Some(worker)
        }
        None => {
            drop(store);
            None
        }
    };
    let served = local_set
        .run_until(async move {
            let log = crate::worker_log::WorkerLog {
                printer,
                json: false,
            };
            let incoming = match tls {
                Some(acceptor) => listen::Incoming::Tls(tls::Listener::new(listener, acceptor)),
                None => listen::Incoming::Plain(listener),
            };
            let server = async {
                shutdown.await;
            };
            let serving = listen::serve(incoming, routes, stopping_rx);
            let working = async {
                match worker {
                    Some(w) => w.run(&log).await.map(Some),
                    None => Ok(None),
                }
            };
            let ((), (), worked) = tokio::join!(server, serving, working);
            // The runs the server drove itself stop on the same signal.
            let background: Vec<_> = local.background.borrow_mut().drain(..).collect();
            for t in background {
                let _ = t.await;
            }
            dispatcher.abort();
            worked
        })
        .await;
    match served? {
        Some(WorkerEnd::Stopped | WorkerEnd::Swept { .. }) | None => Ok(Ended::Stopped),
    }
}
