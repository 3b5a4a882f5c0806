//! A request's query string, read by hand: axum's `Query` refuses with a
//! text body, and the API's errors are JSON naming the parameter.

use super::error::ApiError;
use std::time::Duration;

pub struct Params(Vec<(String, String)>);

impl Params {
    pub fn parse(query: Option<&str>) -> Params {
        Params(
            form_urlencoded::parse(query.unwrap_or_default().as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn all(&self, name: &str) -> impl Iterator<Item = &str> {
        self.0
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// `?name`, `?name=1`, `?name=true`: true; `0`/`false`: false.
    pub fn flag(&self, name: &str) -> Result<bool, ApiError> {
        match self.get(name) {
            None => Ok(false),
            Some("" | "1" | "true") => Ok(true),
            Some("0" | "false") => Ok(false),
            Some(v) => Err(ApiError::bad_request(format!(
                "`{name}` is `{v}`: use true or false"
            ))),
        }
    }

    pub fn number(&self, name: &str) -> Result<Option<i64>, ApiError> {
        self.get(name)
            .map(|v| {
                v.parse::<i64>().map_err(|_| {
                    ApiError::bad_request(format!("`{name}` is `{v}`: a whole number is needed"))
                })
            })
            .transpose()
    }

    pub fn duration(&self, name: &str) -> Result<Option<Duration>, ApiError> {
        self.get(name)
            .map(|v| {
                crate::workflow::duration::parse(v)
                    .map_err(|e| ApiError::bad_request(format!("`{name}`: {e}")))
            })
            .transpose()
    }
}

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

/// The query parameters each route takes (by its matched path); a route
/// not named takes none. Every other parameter is refused, naming it,
/// before the route runs: a misspelt filter (`?stauts=failed`) would
/// otherwise answer as if no filter were given. (`?token=` signs a browser
/// in before any route: `auth::require`.)
const TAKES: &[(&str, &[&str])] = &[
    (
        "/api/v1/instances",
        &[
            "status", "workflow", "label", "since", "parent", "roots", "queue", "limit", "cursor",
        ],
    ),
    ("/api/v1/instances/{id}", &["attempts"]),
    ("/api/v1/instances/{id}/logs/{step}", &["attempt", "follow"]),
    ("/api/v1/instances/{id}/result", &["wait"]),
    (
        "/",
        &[
            "status", "workflow", "label", "parent", "since", "queue", "cursor", "fragment",
        ],
    ),
    ("/instances/{id}", &["fragment", "notice"]),
    ("/instances/{id}/logs/{step}", &["attempt"]),
    ("/instances/{id}/act/{action}", &["from"]),
];

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
        .map_or(&[], |(_, t)| t);
    let query = req.uri().query().unwrap_or_default().as_bytes();
    if let Some((k, _)) = form_urlencoded::parse(query).find(|(k, _)| !takes.contains(&&**k)) {
        let takes = if takes.is_empty() {
            "none".to_string()
        } else {
            takes.join(", ")
        };
        let e = ApiError::bad_request(format!(
            "unknown query parameter `{}` (this route takes: {takes})",
            shown(&k)
        ));
        return if path.starts_with("/api/") {
            e.into_response()
        } else {
            super::pages::error_page(&e)
        };
    }
    next.run(req).await
}
