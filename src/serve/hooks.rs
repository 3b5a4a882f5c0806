//! `POST /hooks/NAME`: a webhook starts the registered workflow whose
//! `on.webhook.name` is NAME, as GitHub (and most senders) deliver them:
//!
//! 1. the body is at most 1 MiB (413), and the hook must exist (404);
//! 2. `X-Hub-Signature-256: sha256=HEX` must be the HMAC-SHA256 of the
//!    body under the key in the server's environment variable the hook
//!    names, compared in constant time (401);
//! 3. the body must be JSON (400); the hook's `inputs` and `dedupe` are
//!    rendered from `body`, `headers` (names in lower case) and `query`
//!    (400 if they cannot be, or the inputs do not fit the workflow);
//! 4. the instance's id stands for the dedupe value (default: the
//!    `Idempotency-Key` header), so a redelivery, even one sent at the same
//!    moment as the first, finds the instance the first made (200) instead
//!    of making another (201). Without either, every delivery starts one.
//!
//! Nothing is written for a refused request. GitHub's `ping` (sent when a
//! hook is made) is answered once its signature checks, and starts nothing.

use super::App;
use super::error::ApiError;
use crate::engine::registry;
use crate::error_kind::ErrorKind;
use crate::workflow::template;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value, json};
use sha2::Sha256;

/// Whether `signature` (`sha256=HEX`) is the HMAC-SHA256 of `body` under
/// `key`; compared in constant time (`Mac::verify_slice`).
pub fn signed(key: &[u8], body: &[u8], signature: Option<&str>) -> bool {
    let Some(hex_sig) = signature.and_then(|s| s.trim().strip_prefix("sha256=")) else {
        return false;
    };
    let Ok(given) = hex::decode(hex_sig) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&given).is_ok()
}

/// The request as the hook's expressions see it.
fn context(body: Value, headers: &HeaderMap, query: Option<&str>) -> Value {
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
    let mut q = Map::new();
    for (k, v) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        q.insert(k.into_owned(), Value::from(v.into_owned()));
    }
    json!({ "body": body, "headers": h, "query": q })
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
    let signature = headers
        .get("x-hub-signature-256")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let ping = headers
        .get("x-github-event")
        .is_some_and(|v| v.as_bytes() == b"ping");
    let idempotency = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let hook_name = name.clone();
    let started = app
        .db
        .run(move |l| async move {
            let mut c = l.conn().await?;
            let Some(row) = c.hook(&name).await? else {
                return Err(unknown(&name));
            };
            let wf = registry::definition(&c, &row).await?;
            let Some(hook) = wf.webhook.clone() else {
                return Err(unknown(&name));
            };
            let Some(key) = std::env::var_os(&hook.secret).filter(|k| !k.is_empty()) else {
                return Err(ApiError::new(
                    ErrorKind::Unavailable,
                    format!(
                        "webhook `{name}` cannot verify deliveries: `{}` is not set where the server runs",
                        hook.secret
                    ),
                ));
            };
            use std::os::unix::ffi::OsStrExt as _;
            if !signed(key.as_bytes(), &body, signature.as_deref()) {
                return Err(ApiError::new(
                    ErrorKind::BadSignature,
                    "the X-Hub-Signature-256 header is missing or does not sign this body",
                ));
            }
            if ping {
                return Ok(None);
            }
            let body: Value = serde_json::from_slice(&body)
                .map_err(|e| ApiError::bad_request(format!("the body is not JSON: {e}")))?;
            let ctx = context(body, &headers, query.as_deref());
            let rendered = template::render_tree(&Value::Object(hook.inputs.clone()), &ctx)
                .map_err(|e| ApiError::bad_request(format!("webhook `{name}` inputs: {e}")))?;
            let inputs = match rendered {
                Value::Object(m) => m,
                _ => Map::new(),
            };
            // Inputs a delivery left null (a field the body lacks) are not
            // given: the workflow's default, or a refusal, applies.
            let inputs: Map<String, Value> =
                inputs.into_iter().filter(|(_, v)| !v.is_null()).collect();
            let dedupe = match &hook.dedupe {
                Some(t) => {
                    let v = t.render_value(&ctx).map_err(|e| {
                        ApiError::bad_request(format!("webhook `{name}` dedupe: {e}"))
                    })?;
                    match v {
                        Value::Null => None,
                        Value::String(s) if s.is_empty() => None,
                        Value::String(s) => Some(s),
                        other => Some(other.to_string()),
                    }
                }
                None => idempotency,
            };
            let id = dedupe.map(|d| registry::keyed_id(&format!("hook {name}"), &d));
            let start = registry::Start {
                inputs,
                labels: vec![(registry::HOOK_LABEL.to_string(), name.clone())],
                id: id.clone(),
            };
            let started = match registry::start(&mut c, &row, &wf, start).await {
                Ok(s) => s,
                // The dedupe value's instance, made from another body:
                // still the one instance of that value.
                Err(crate::engine::EngineError::Taken(existing)) => registry::Started {
                    instance: *existing,
                    created: false,
                },
                Err(e) => return Err(e.into()),
            };
            Ok(Some(started))
        })
        .await?;
    Ok(match started {
        Some(started) => super::actions::started_response(&started, None),
        None => Json(crate::views::HookPing {
            hook: &hook_name,
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

#[cfg(test)]
mod tests {
    use super::signed;

    /// GitHub's documented example ("Validating webhook deliveries").
    #[test]
    fn githubs_example_signature_checks() {
        let key = b"It's a Secret to Everybody";
        let body = b"Hello, World!";
        let sig = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert!(signed(key, body, Some(sig)));
        assert!(!signed(key, b"Hello, World?", Some(sig)));
        assert!(!signed(b"another", body, Some(sig)));
        assert!(!signed(key, body, Some(&sig[..sig.len() - 2])));
        assert!(!signed(key, body, Some("sha1=757107ea")));
        assert!(!signed(key, body, Some("sha256=not-hex")));
        assert!(!signed(key, body, None));
    }
}
