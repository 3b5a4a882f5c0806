//! A webhook delivery as a use case: what `POST /hooks/NAME` does once the
//! HTTP side has read the request (`serve/hooks.rs`), so the rules live
//! in the engine beside the other starts:
//!
//! 1. the hook must be registered (not found otherwise);
//! 2. `X-Hub-Signature-256: sha256=HEX` must be the HMAC-SHA256 of the
//!    body under the key in the environment variable the hook names,
//!    compared in constant time (a bad signature; a key not set where the
//!    server runs makes every delivery unverifiable: unavailable);
//! 3. the body must be JSON; the hook's `inputs` and `dedupe` are rendered
//!    from `body`, `headers` (names in lower case) and `query`;
//! 4. the instance's id stands for the dedupe value (default: the
//!    `Idempotency-Key` header), so a redelivery, even one at the same
//!    moment as the first, finds the instance the first made.
//!
//! Nothing is written for a refused delivery. GitHub's `ping` is answered
//! once its signature checks, and starts nothing.

use super::{EngineError, registry};
use crate::store::Store;
use crate::workflow::template;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::Sha256;

/// Why a delivery was refused, before anything was written.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("no registered workflow has webhook `{0}`")]
    Unknown(String),
    #[error("webhook `{name}` cannot verify deliveries: `{var}` is not set where the server runs")]
    KeyUnset { name: String, var: String },
    #[error("the X-Hub-Signature-256 header is missing or does not sign this body")]
    BadSignature,
    #[error("the body is not JSON: {0}")]
    NotJson(String),
    /// The hook's `inputs` or `dedupe` could not be rendered.
    #[error("webhook `{name}` {what}: {why}")]
    Render {
        name: String,
        what: &'static str,
        why: String,
    },
}

/// A delivery as the HTTP side read it.
#[derive(Debug)]
pub struct Delivery<'a> {
    /// The hook's name, from the path (checked by the caller to be one a
    /// hook can have; shown in errors).
    pub name: &'a str,
    pub body: &'a [u8],
    /// `X-Hub-Signature-256`.
    pub signature: Option<&'a str>,
    /// `X-GitHub-Event: ping`.
    pub ping: bool,
    /// The headers, names in lower case, repeated values joined by `, `.
    pub headers: Map<String, Value>,
    /// The query's parameters.
    pub query: Map<String, Value>,
    /// `Idempotency-Key`.
    pub idempotency: Option<String>,
}

/// What a delivery did.
#[derive(Debug)]
pub enum Delivered {
    /// A ping: nothing started.
    Ping,
    /// The instance it started, or the one its dedupe value started before.
    Started(Box<registry::Started>),
}

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

/// Delivers `d`: checks it and starts the hook's workflow (see the module
/// doc), reading the hook's key from this process's environment.
pub async fn deliver(store: &mut Store, d: Delivery<'_>) -> Result<Delivered, EngineError> {
    let name = d.name;
    let unknown = || EngineError::Hook(HookError::Unknown(name.to_string()));
    let Some(row) = store.hook(name).await? else {
        return Err(unknown());
    };
    let wf = registry::definition(store, &row).await?;
    let Some(hook) = wf.webhook.clone() else {
        return Err(unknown());
    };
    let Some(key) = std::env::var_os(&hook.secret).filter(|k| !k.is_empty()) else {
        return Err(EngineError::Hook(HookError::KeyUnset {
            name: name.to_string(),
            var: hook.secret.clone(),
        }));
    };
    use std::os::unix::ffi::OsStrExt as _;
    if !signed(key.as_bytes(), d.body, d.signature) {
        return Err(EngineError::Hook(HookError::BadSignature));
    }
    if d.ping {
        return Ok(Delivered::Ping);
    }
    let body: Value = serde_json::from_slice(d.body)
        .map_err(|e| EngineError::Hook(HookError::NotJson(e.to_string())))?;
    if let Some(at) = super::nul_in(&body) {
        return Err(EngineError::Hook(HookError::NotJson(format!(
            "`body{at}` holds a NUL character (U+0000), which wf does not store"
        ))));
    }
    let ctx = serde_json::json!({ "body": body, "headers": d.headers, "query": d.query });
    let render = |what, why: String| {
        EngineError::Hook(HookError::Render {
            name: name.to_string(),
            what,
            why,
        })
    };
    let rendered = template::render_tree(&Value::Object(hook.inputs.clone()), &ctx)
        .map_err(|e| render("inputs", e.to_string()))?;
    // Inputs a delivery left null (a field the body lacks) are not given:
    // the workflow's default, or a refusal, applies.
    let inputs: Map<String, Value> = match rendered {
        Value::Object(m) => m.into_iter().filter(|(_, v)| !v.is_null()).collect(),
        _ => Map::new(),
    };
    let dedupe = match &hook.dedupe {
        Some(t) => match t
            .render_value(&ctx)
            .map_err(|e| render("dedupe", e.to_string()))?
        {
            Value::Null => None,
            Value::String(s) if s.is_empty() => None,
            Value::String(s) => Some(s),
            other => Some(other.to_string()),
        },
        None => d.idempotency,
    };
    // The delivery, as the sender names it (GitHub's `X-GitHub-Delivery`,
    // else the dedupe value).
    let delivery = d
        .headers
        .get("x-github-delivery")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| dedupe.clone());
    let id = dedupe.map(|v| registry::keyed_id(&format!("hook {name}"), &v));
    let start = registry::Start {
        inputs,
        labels: vec![(registry::HOOK_LABEL.to_string(), name.to_string())],
        id,
        by: crate::vocab::Actor::Hook(name.to_string()),
        detail: delivery
            .map(|d| format!("delivery {d}"))
            .unwrap_or_default(),
    };
    match registry::start(store, &row, &wf, start).await {
        Ok(s) => Ok(Delivered::Started(Box::new(s))),
        // The dedupe value's instance, made from another body: still the
        // one instance of that value.
        Err(EngineError::Taken(existing)) => Ok(Delivered::Started(Box::new(registry::Started {
            instance: *existing,
            created: false,
        }))),
        Err(e) => Err(e),
    }
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
