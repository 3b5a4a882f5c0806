//! What every route's request is checked for before it runs: its query
//! parameters (each route takes those of its parameters' struct,
//! `serve::query`; any other is refused, naming it), and an instance id
//! from a path. Also how a name from a request is shown in an error.

use super::error::ApiError;
use super::query::fields;
use super::{api, instances, pages};

/// A name from a request (an id, a field, a parameter) as an error shows
/// it: its first 64 characters, escaped, so that no request can make an
/// answer long or put a line break in it.
pub fn shown(name: &str) -> String {
    name.chars()
        .take(64)
        .collect::<String>()
        .escape_debug()
        .to_string()
}

/// The refusal of a form's field that is not one of the form's own.
pub fn unknown_form_field(name: &str) -> String {
    format!("unknown form field `{}`", shown(name))
}

/// An instance id (or unique prefix) from a path: what an id can hold, at
/// most 128 characters; anything else is refused before the store is asked.
pub fn instance_ref(id: &str) -> Result<String, ApiError> {
    if id.is_empty()
        || id.len() > 128
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(ApiError::not_found(format!(
            "no instance matches `{}`",
            shown(id)
        )));
    }
    Ok(id.to_string())
}

/// The query parameters each route takes (by its matched path): those of
/// the struct its handler reads them into; a route not named takes none. Every other parameter is refused, naming it,
/// before the route runs: a misspelt filter (`?stauts=failed`) would
/// otherwise answer as if no filter were given. (`?token=` signs a browser
/// in before any route: `auth::require`.)
/// The names a route's parameters struct takes ([`fields`]).
type Takes = fn() -> &'static [&'static str];

const TAKES: &[(&str, Takes)] = &[
    ("/api/v1/instances", fields::<instances::ListParams>),
    ("/api/v1/instances/counts", fields::<instances::CountParams>),
    ("/api/v1/instances/{id}", fields::<api::InspectParams>),
    (
        "/api/v1/instances/{id}/logs/{step}",
        fields::<api::LogsParams>,
    ),
    ("/api/v1/instances/{id}/result", fields::<api::ResultParams>),
    ("/api/v1/db/actions", fields::<api::ActionsQuery>),
    ("/api/v1/queues/{key}", fields::<api::QueueParams>),
    (
        "/api/v1/instances/{id}/compare",
        fields::<api::CompareParams>,
    ),
    ("/", fields::<pages::list::ListParams>),
    ("/bulk", fields::<pages::bulk::BulkParams>),
    ("/instances/{id}", fields::<pages::instance::PageParams>),
    (
        "/instances/{id}/logs/{step}",
        fields::<pages::instance::LogsParams>,
    ),
    (
        "/instances/{id}/act/{action}",
        fields::<pages::act::ConfirmParams>,
    ),
    ("/instances/{id}/compare", fields::<api::CompareParams>),
];

/// Refuses (400) a request whose path holds an encoded NUL character
/// (`%00`): no name wf keeps holds one, and PostgreSQL could not even be
/// asked about it.
pub async fn no_nul(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let path = req.uri().path().as_bytes();
    if path.windows(3).any(|w| w == b"%00") {
        let e = ApiError::bad_request(
            "the path holds a NUL character (%00), which no name wf keeps holds",
        );
        return if req.uri().path().starts_with("/api/") || req.uri().path().starts_with("/hooks/") {
            e.into_response()
        } else {
            super::pages::error_page(&e)
        };
    }
    next.run(req).await
}

/// Refuses (400) a request with a query parameter its route does not take
/// ([`TAKES`]): the JSON error, or a page for a page's route.
pub async fn known(
    matched: Option<axum::extract::MatchedPath>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let Some(path) = matched.as_ref().map(axum::extract::MatchedPath::as_str) else {
        return next.run(req).await;
    };
    // Assets and the metrics take what they are given (a cache-busting
    // suffix, a scraper's own parameters).
    if path.starts_with("/assets/") || path == "/metrics" {
        return next.run(req).await;
    }
    let takes: &[&str] = TAKES
        .iter()
        .find(|(p, _)| *p == path)
        .map_or(&[], |(_, t)| t());
    let query = req.uri().query().unwrap_or_default().as_bytes();
    if let Some((k, _)) = form_urlencoded::parse(query).find(|(k, _)| !takes.contains(&&**k)) {
        let e = ApiError::bad_request(super::query::unknown_parameter(&k, takes));
        return if path.starts_with("/api/") {
            e.into_response()
        } else {
            super::pages::error_page(&e)
        };
    }
    next.run(req).await
}
