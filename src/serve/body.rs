//! The API's request bodies as types: each route's body is a struct that
//! refuses fields it does not know (`deny_unknown_fields`) and values of
//! the wrong type, with a 400 that names the field; an empty body is `{}`.
//! One reader ([`json`]) for every route, so none of them takes a body it
//! then ignores.

use super::error::ApiError;
use bytes::Bytes;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// `POST /api/v1/workflows/{name}/instances`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartBody {
    /// The inputs by name (a JSON value each, read as `--input` reads text).
    #[serde(default)]
    pub inputs: Option<Map<String, Value>>,
    /// Labels to add (names starting with `wf.` are wf's own).
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
}

/// `POST /api/v1/db/copy`: the database to copy the history into (a path
/// on the server, or a `postgres://` URL), and whether to continue an
/// interrupted copy.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CopyBody {
    pub to: String,
    #[serde(default)]
    pub resume: Option<bool>,
}

/// `POST /api/v1/tokens`: a named token and its scope.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenBody {
    pub name: String,
    pub scope: crate::vocab::TokenScope,
}

/// `POST /api/v1/instances/{id}/signal`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignalBody {
    pub event: String,
    #[serde(default)]
    pub data: Value,
}

/// `POST /api/v1/instances/{id}/resume`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeBody {
    /// Fire a timer that is not due yet (`wf resume --now`).
    #[serde(default)]
    pub now: Option<bool>,
    /// Run `cache:` steps without looking for a kept result (`wf resume
    /// --no-cache`).
    #[serde(default)]
    pub no_cache: Option<bool>,
}

/// `POST /api/v1/instances/{id}/restart`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestartBody {
    pub from: String,
    #[serde(default, rename = "as")]
    pub as_id: Option<String>,
}

/// The body of a route that takes none (cancel, terminate, retry): empty,
/// or `{}`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoBody {}

/// A route's body as its `T`, the extractor every API route with a body
/// takes: its rejection is the API's error ([`json`]'s 400 naming the
/// field, or 413 for a body over the limit).
#[derive(Debug)]
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> axum::extract::FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    crate::error_kind::ErrorKind::TooLarge,
                    "the request body is larger than the server takes",
                )
            } else {
                ApiError::bad_request(format!("the body could not be read: {}", e.body_text()))
            }
        })?;
        json(&bytes).map(Body)
    }
}

/// `body` as a route's `T`: empty is `{}`; anything but a JSON object, an
/// unknown field or a value of the wrong type is a 400 naming it.
pub fn json<T: DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    let value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Object(Map::new())
    } else {
        serde_json::from_slice::<Value>(body)
            .map_err(|e| ApiError::bad_request(format!("the body is not JSON: {e}")))?
    };
    if !value.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if path == "." || inner.starts_with("unknown field") || inner.starts_with("missing field") {
            ApiError::bad_request(format!("the body: {inner}"))
        } else {
            ApiError::bad_request(format!("the body's `{path}`: {inner}"))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message<T: DeserializeOwned + std::fmt::Debug>(body: &str) -> String {
        json::<T>(&Bytes::from(body.to_string()))
            .expect_err(body)
            .message
    }

    #[test]
    fn names_what_it_refuses() {
        assert!(message::<NoBody>(r#"{"reason": "x"}"#).contains("unknown field `reason`"));
        assert!(message::<NoBody>("garbage").starts_with("the body is not JSON"));
        assert_eq!(message::<NoBody>("[1]"), "the body must be a JSON object");
        assert!(message::<ResumeBody>(r#"{"now": "yes"}"#).contains("`now`"));
        assert!(message::<SignalBody>("{}").contains("missing field `event`"));
        assert!(message::<StartBody>(r#"{"labels": {"a": 1}}"#).contains("`labels.a`"));
        assert!(message::<RestartBody>(r#"{"from": "a", "as": 3}"#).contains("`as`"));
    }

    #[test]
    fn takes_what_it_knows() {
        json::<NoBody>(&Bytes::new()).expect("empty");
        json::<NoBody>(&Bytes::from_static(b" {} ")).expect("{}");
        let r: RestartBody = json(&Bytes::from_static(br#"{"from": "a", "as": "b"}"#)).expect("ok");
        assert_eq!((r.from.as_str(), r.as_id.as_deref()), ("a", Some("b")));
        let s: StartBody = json(&Bytes::from_static(br#"{"inputs": null}"#)).expect("null");
        assert!(s.inputs.is_none());
    }
}

/// `POST /api/v1/instances/{id}/upgrade` and
/// `POST /api/v1/workflows/{name}/upgrade` (`wf upgrade`'s flags).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpgradeBody {
    /// Steps renamed: OLD (in the instance's definition) to NEW (`--map`).
    #[serde(default)]
    pub map: Option<BTreeMap<String, String>>,
    /// Run a new step that comes before a completed one at the next
    /// resume, instead of refusing (`--allow-gaps`).
    #[serde(default)]
    pub allow_gaps: Option<bool>,
    /// Upgrade their children too (`--children`).
    #[serde(default)]
    pub children: Option<bool>,
    /// Answer the plans; write nothing (`--dry-run`).
    #[serde(default)]
    pub dry_run: Option<bool>,
}

/// `POST /api/v1/bulk/{action}`: the instances, by id or by the list's
/// filters (one of the two), and what the action asks besides.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulkBody {
    /// Instance ids (any unique prefixes).
    #[serde(default)]
    pub ids: Option<Vec<String>>,
    /// Every instance these filters match (at most 1000).
    #[serde(default)]
    pub filter: Option<BulkFilter>,
    /// Answer the plans; change nothing.
    #[serde(default)]
    pub dry_run: Option<bool>,
    /// Why (a cancel's, recorded with its action).
    #[serde(default)]
    pub reason: Option<String>,
}

/// The list's filters, as `GET /api/v1/instances` takes them.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulkFilter {
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub workflow: Option<String>,
    /// `NAME=VALUE` each; all of them.
    #[serde(default)]
    pub label: Option<Vec<String>>,
    /// Created within this long (`1h`).
    #[serde(default)]
    pub since: Option<String>,
    #[serde(default)]
    pub queue: Option<String>,
    /// An id prefix.
    #[serde(default)]
    pub id: Option<String>,
    /// Words of the error.
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub parent: Option<String>,
    #[serde(default)]
    pub roots: Option<bool>,
}
