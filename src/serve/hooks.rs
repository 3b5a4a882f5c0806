//! `POST /hooks/NAME`: a webhook delivery, read off the request and
//! handed to the engine's use case (`engine::hooks`, which says what is
//! checked and started). Here: the body is at most 1 MiB (413, the
//! server's limit), a name no hook can have is not found, and the answer
//! is the start's view (201, or 200 for the instance a redelivery's dedupe
//! value started before) or a ping's.

use super::App;
use super::error::ApiError;
use crate::engine::hooks::{self, Delivered, Delivery};
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Map, Value};

/// The headers as a hook's expressions see them: names in lower case,
/// repeated values joined by `, `.
fn header_map(headers: &HeaderMap) -> Map<String, Value> {
    let mut h = Map::new();
    for name in headers.keys() {
        let values: Vec<&str> = headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        h.insert(
            name.as_str().to_ascii_lowercase(),
            Value::from(values.join(", ")),
        );
    }
    h
}

/// The query's parameters as a hook's expressions see them.
fn query_map(query: Option<&str>) -> Map<String, Value> {
    let mut q = Map::new();
    for (k, v) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        q.insert(k.into_owned(), Value::from(v.into_owned()));
    }
    q
}

pub async fn deliver(
    State(app): State<App>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    if crate::workflow::trigger::hook_name_problem(&name).is_some() {
        return Err(unknown(&name));
    }
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let signature = header("x-hub-signature-256");
    let idempotency = header("idempotency-key");
    let ping = headers
        .get("x-github-event")
        .is_some_and(|v| v.as_bytes() == b"ping");
    let (header_values, query_values) = (header_map(&headers), query_map(query.as_deref()));
    let hook = name.clone();
    let delivered = app
        .db
        .run(move |l| async move {
            let mut c = l.conn().await?;
            let d = Delivery {
                name: &name,
                body: &body,
                signature: signature.as_deref(),
                ping,
                headers: header_values,
                query: query_values,
                idempotency,
            };
            Ok(hooks::deliver(&mut c, d).await?)
        })
        .await?;
    Ok(match delivered {
        Delivered::Started(started) => super::actions::started_response(&started, None),
        Delivered::Ping => Json(crate::views::HookPing {
            hook: &hook,
            ping: "ok",
        })
        .into_response(),
    })
}

fn unknown(name: &str) -> ApiError {
    ApiError::not_found(format!(
        "no registered workflow has webhook `{}`",
        super::params::shown(name)
    ))
}
