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
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartBody {
    /// The inputs by name, a JSON value each (read as `--input` reads
    /// text): those the workflow declares (`GET /api/v1/workflows/{name}`'s
    /// `inputs`); one it does not, or a missing required one, is a 400.
    #[serde(default)]
    #[schema(schema_with = schemas::inputs)]
    pub inputs: Option<Map<String, Value>>,
    /// Labels to add (names starting with `wf.` are wf's own).
    #[serde(default)]
    #[schema(schema_with = schemas::labels)]
    pub labels: Option<BTreeMap<String, String>>,
}

/// `POST /api/v1/db/copy`: the database to copy the history into (a path
/// on the server, or a `postgres://` URL), and whether to continue an
/// interrupted copy.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CopyBody {
    /// A SQLite file's path on the server, or a `postgres://` URL.
    #[schema(min_length = 1)]
    pub to: String,
    /// Continue an interrupted copy into a target that holds part of it.
    #[serde(default)]
    pub resume: Option<bool>,
}

/// `POST /api/v1/tokens`: a named token and its scope.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenBody {
    /// 1 to 63 letters, digits, `-`, `_` or `.`, starting with a letter or
    /// digit (`default` is the server's own).
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$", example = "deployer")]
    pub name: String,
    pub scope: crate::vocab::TokenScope,
}

/// `POST /api/v1/instances/{id}/signal`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalBody {
    /// The event's name: not blank, and not `child:…` (the ends of child
    /// instances, which wf delivers itself).
    #[schema(schema_with = schemas::event)]
    pub event: String,
    /// Its data: any JSON (`null` when absent).
    #[serde(default)]
    pub data: Value,
}

/// `POST /api/v1/instances/{id}/resume`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
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
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RestartBody {
    /// The step to run again, with everything downstream of it.
    pub from: String,
    /// Restart a copy with this id instead of the instance itself.
    #[serde(default, rename = "as")]
    #[schema(value_type = Option<crate::vocab::InstanceId>)]
    pub as_id: Option<String>,
}

/// The body of a route that takes none (cancel, terminate, retry): empty,
/// or `{}`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
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

/// `body` as a route's `T`: empty (no byte) is `{}`; anything but a JSON object, an
/// unknown field or a value of the wrong type is a 400 naming it.
pub fn json<T: DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    let value = if body.is_empty() {
        Value::Object(Map::new())
    } else {
        serde_json::from_slice::<Value>(body)
            .map_err(|e| ApiError::bad_request(format!("the body is not JSON: {e}")))?
    };
    if !value.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    // Free JSON (a signal's `data`, the `inputs`) is kept as JSON text,
    // where a NUL is the escape `\u0000`: it may hold one. Every other
    // string names or labels something kept as text, which may not.
    let nul = value
        .as_object()
        .and_then(|m| crate::engine::nul_in_fields(m, &["data", "inputs"]));
    if let Some(at) = nul {
        return Err(ApiError::bad_request(format!(
            "the body's `{}` holds a NUL character (U+0000), which wf does not store",
            at.trim_start_matches('.')
        )));
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

/// The schemas a field's type cannot say alone.
mod schemas {
    use utoipa::openapi::schema::{AllOfBuilder, ObjectBuilder, Schema, Type};

    /// A string that matches every one of `patterns`.
    fn matching(description: &str, patterns: &[&str]) -> Schema {
        let mut all = AllOfBuilder::new()
            .schema_type(Type::String)
            .description(Some(description));
        for p in patterns {
            all = all.item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some(*p)),
            );
        }
        all.build().into()
    }

    /// Labels to set (or `null`: none), each name one that may be set: 1
    /// to 63 letters, digits, `_`, `.`, `-`, not starting with `wf.`
    /// (written without a lookahead, which JSON Schema's patterns need
    /// not support).
    pub fn labels() -> Schema {
        ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::SchemaType::from_iter([
                Type::Object,
                Type::Null,
            ]))
            .property_names(Some(matching(
                "A label's name: letters, digits, `_`, `.`, `-`; not `wf.…`",
                &["^[A-Za-z0-9_.-]{1,63}$", "^([^w]|w[^f]|wf[^.]|.{1,2}$)"],
            )))
            .additional_properties(Some(ObjectBuilder::new().schema_type(Type::String)))
            .into()
    }

    /// Inputs by name, each any JSON value (or `null`: none).
    pub fn inputs() -> Schema {
        ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::SchemaType::from_iter([
                Type::Object,
                Type::Null,
            ]))
            .property_names(Some(ObjectBuilder::new().schema_type(Type::String)))
            .additional_properties(Some(
                ObjectBuilder::new().schema_type(utoipa::openapi::schema::SchemaType::AnyValue),
            ))
            .into()
    }

    /// An event's name: not blank, not `child:…`.
    pub fn event() -> Schema {
        matching(
            "An event's name: not blank, not `child:…`",
            &[
                "\\S",
                "^([^c]|c[^h]|ch[^i]|chi[^l]|chil[^d]|child[^:]|[\\s\\S]{0,5}$)",
            ],
        )
    }
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
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
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
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkBody {
    /// Instance ids (any unique prefixes).
    #[serde(default)]
    #[schema(value_type = Option<Vec<crate::vocab::InstanceId>>)]
    pub ids: Option<Vec<String>>,
    /// Every instance these filters match (at most 1000). Read as an
    /// object ([`BulkFilter::of`]): serde would take a struct from an
    /// array too, which the document does not allow.
    #[serde(default)]
    #[schema(value_type = Option<BulkFilter>)]
    pub filter: Option<Map<String, Value>>,
    /// Answer the plans; change nothing.
    #[serde(default)]
    pub dry_run: Option<bool>,
    /// Why (a cancel's, recorded with its action).
    #[serde(default)]
    pub reason: Option<String>,
}

impl BulkFilter {
    /// The filter a body's `filter` object holds, or the 400 naming the
    /// field it refuses.
    pub fn of(m: Map<String, Value>) -> Result<BulkFilter, ApiError> {
        serde_path_to_error::deserialize(Value::Object(m)).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner().to_string();
            if path == "." {
                ApiError::bad_request(format!("the body's `filter`: {inner}"))
            } else {
                ApiError::bad_request(format!("the body's `filter.{path}`: {inner}"))
            }
        })
    }
}

/// The list's filters, as `GET /api/v1/instances` takes them.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkFilter {
    #[serde(default)]
    #[schema(value_type = Option<crate::vocab::ShownStatus>)]
    pub status: Option<String>,
    #[serde(default)]
    pub workflow: Option<String>,
    /// `NAME=VALUE` each; all of them.
    #[serde(default)]
    #[schema(value_type = Option<super::query::LabelFilters>)]
    pub label: Option<Vec<String>>,
    /// Created within this long (`1h`).
    #[serde(default)]
    #[schema(value_type = Option<super::query::Span>)]
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
