//! The web inspector: the history as pages, served by `wf serve` beside the
//! API, from the same engine functions. Server-rendered HTML (maud escapes
//! everything it is given), one stylesheet and one small script embedded
//! in the binary; every page reads without JavaScript, and with it the
//! list and an instance refresh themselves and a running attempt's output
//! streams in (`assets/wf.js`).
//!
//! - `shell.rs`: the page around each page (head, navigation), the sign-in
//!   page, the assets.
//! - `list.rs`: the instances, filtered, a page at a time (`/`).
//! - `instance.rs`: an instance (`/instances/{id}`): header, the step graph
//!   (`graph.rs`), steps and attempts, the trace waterfall (`trace.rs`),
//!   events, children; an attempt's logs (`/instances/{id}/logs/{step}`).
//! - `act.rs`: the actions, each a confirmation page and a form posted to
//!   the server (signal, cancel, terminate, resume, retry, restart);
//!   `bulk.rs`: cancel, retry or resume many instances at once.
//! - `registry.rs`: registered workflows and the form that starts one;
//!   queues.
//! - `database.rs`: the history's check (`/database`).

pub(super) mod act;
pub(super) mod bulk;
mod compare;
mod database;
mod graph;
pub(super) mod instance;
pub(super) mod list;
mod registry;
mod search;
mod shell;
mod trace;
mod yaml;

use super::App;
use super::error::ApiError;
use axum::Router;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;

/// The pages' routes (behind the token, as the API's are).
pub fn routes() -> Router<App> {
    Router::new()
        .route("/", get(list::page))
        .route("/instances/{id}", get(instance::page))
        .route("/instances/{id}/logs/{step}", get(instance::logs))
        .route("/instances/{id}/compare", get(compare::page_of))
        .route(
            "/instances/{id}/act/{action}",
            get(act::confirm).post(act::act),
        )
        .route("/bulk", get(bulk::confirm).post(bulk::act))
        .route("/workflows", get(registry::workflows))
        .route(
            "/workflows/{name}/start",
            get(registry::start_form).post(registry::start),
        )
        .route("/queues", get(registry::queues))
        .route("/queues/{key}", get(registry::queue))
        .route("/database", get(database::page_of))
        .route("/database/copy", axum::routing::post(database::copy))
        .route("/signout", axum::routing::post(super::auth::sign_out))
}

/// The routes open to anyone: the assets and the sign-in form.
pub fn open_routes() -> Router<App> {
    Router::new()
        .route("/assets/{file}", get(shell::asset))
        .route("/signin", get(shell::signin_page).post(shell::signin))
}

/// What an instance page says after an action sent the browser there
/// (`?notice=CODE`): one of a fixed set, so that a link cannot make the
/// page say what the server never said; an unknown code says nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice {
    Signaled,
    /// Delivered, but the definition never waits for an event of that name.
    SignaledUnawaited,
    Canceling,
    Restarting,
    Resuming,
    Started,
    StartedBefore,
    Upgraded,
}

impl Notice {
    const ALL: [Notice; 8] = [
        Notice::Signaled,
        Notice::SignaledUnawaited,
        Notice::Canceling,
        Notice::Restarting,
        Notice::Resuming,
        Notice::Started,
        Notice::StartedBefore,
        Notice::Upgraded,
    ];

    /// Its word in the address.
    pub fn code(self) -> &'static str {
        match self {
            Notice::Signaled => "signaled",
            Notice::SignaledUnawaited => "signaled-unawaited",
            Notice::Canceling => "canceling",
            Notice::Restarting => "restarting",
            Notice::Resuming => "resuming",
            Notice::Started => "started",
            Notice::StartedBefore => "started-before",
            Notice::Upgraded => "upgraded",
        }
    }

    /// What the page says.
    pub fn text(self) -> &'static str {
        match self {
            Notice::Signaled => "Event delivered.",
            Notice::SignaledUnawaited => {
                "Event delivered; this instance's definition never waits for an event of that \
                 name (the event is kept)."
            }
            Notice::Canceling => "Asked to cancel.",
            Notice::Restarting => "Restarting.",
            Notice::Resuming => "Resuming.",
            Notice::Started => "Started: recorded for the workers.",
            Notice::StartedBefore => "That key started this instance before.",
            Notice::Upgraded => {
                "Upgraded: the instance is on the registered definition; new and changed steps \
                 run at its next resume."
            }
        }
    }

    pub fn of_code(code: &str) -> Option<Notice> {
        Notice::ALL.into_iter().find(|n| n.code() == code)
    }
}

/// The sign-in page (for `auth`), `next` the page to go on to.
pub fn signin(next: &str) -> String {
    shell::page("Sign in", shell::Nav::None, shell::signin_body(next, false)).into_string()
}

/// An error as a page: its message, and the way back.
pub fn error_page(e: &ApiError) -> Response {
    let body = maud::html! {
        h1 { "Error " (e.status().as_u16()) }
        p.notice.error { (e.message) }
        p { a href="/" { "Instances" } }
    };
    (
        e.status(),
        Html(shell::page("Error", shell::Nav::None, body).into_string()),
    )
        .into_response()
}

/// A page, or its error as a page.
pub fn respond(r: Result<maud::Markup, ApiError>) -> Response {
    match r {
        Ok(m) => (StatusCode::OK, Html(m.into_string())).into_response(),
        Err(e) => error_page(&e),
    }
}
