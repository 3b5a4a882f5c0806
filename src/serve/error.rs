//! The API's errors: `{"error": {"code", "message"}}` with an HTTP status
//! that stands for the exit code the CLI gives for the same failure
//! (docs/api.md): 2 (usage) is 400, or 404 for what does not exist; 1
//! (failed) 422; 4 (canceled) and 5 (held by another process) 409; 6 (the
//! database unreachable) 503. Every error response of the server has this
//! shape, axum's own rejections included ([`normalize`]).

use crate::engine::EngineError;
use crate::store::StoreError;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid", message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, "conflict", message)
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    pub fn from_store(e: StoreError) -> ApiError {
        match e {
            StoreError::NotFound(_) => ApiError::not_found(e.to_string()),
            StoreError::Ambiguous { .. } => {
                ApiError::new(StatusCode::BAD_REQUEST, "ambiguous", e.to_string())
            }
            StoreError::Unreachable { .. } => ApiError::unavailable(e.to_string()),
            StoreError::Busy(_) => ApiError::unavailable(format!(
                "the database is locked by another process; nothing was done, try again ({e})"
            )),
            StoreError::Open { .. } => ApiError::unavailable(e.to_string()),
            other => ApiError::internal(other.to_string()),
        }
    }

    pub fn from_engine(e: EngineError) -> ApiError {
        match e {
            EngineError::Store(s) => ApiError::from_store(s),
            EngineError::Held { .. }
            | EngineError::LeaseLost { .. }
            | EngineError::ChildLost { .. } => {
                ApiError::new(StatusCode::CONFLICT, "held", e.to_string())
            }
            EngineError::Taken(_) | EngineError::Exists(_) => ApiError::conflict(e.to_string()),
            EngineError::NotResumable(_) => {
                ApiError::new(StatusCode::CONFLICT, "not_resumable", e.to_string())
            }
            EngineError::MissingInput(name) => ApiError::bad_request(format!(
                "missing required input `{name}`: give it in the request's `inputs` (`{{\"inputs\": {{\"{name}\": …}}}}`)"
            )),
            EngineError::Definition(_) | EngineError::Input(_) | EngineError::Restart(_) => {
                ApiError::bad_request(e.to_string())
            }
            EngineError::Internal(_) => ApiError::internal(e.to_string()),
        }
    }

    pub fn body(&self) -> serde_json::Value {
        json!({ "error": { "code": self.code, "message": self.message } })
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        ApiError::from_store(e)
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> ApiError {
        ApiError::from_engine(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, axum::Json(self.body())).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(super::headers::AUTHENTICATE),
            );
        }
        r
    }
}

/// An error response that is not JSON (axum's rejections: an unknown route,
/// a method not allowed, a body over the limit, a path that does not
/// decode) made one: its text becomes the message.
pub async fn normalize(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let r = next.run(req).await;
    let status = r.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return r;
    }
    // JSON already, or a page (the inspector's error pages, its sign-in).
    let shaped = r.headers().get(header::CONTENT_TYPE).is_some_and(|v| {
        v.as_bytes().starts_with(b"application/json") || v.as_bytes().starts_with(b"text/html")
    });
    if shaped {
        return r;
    }
    let (parts, body) = r.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let (code, message) = match status {
        StatusCode::NOT_FOUND => ("not_found", "no such route".to_string()),
        StatusCode::METHOD_NOT_ALLOWED => (
            "method_not_allowed",
            "the route does not take this method".to_string(),
        ),
        StatusCode::PAYLOAD_TOO_LARGE => (
            "too_large",
            "the request body is larger than the server takes".to_string(),
        ),
        StatusCode::REQUEST_TIMEOUT => ("timeout", "the request took too long".to_string()),
        _ if text.is_empty() => ("invalid", status.to_string()),
        _ => ("invalid", text),
    };
    let mut out = ApiError::new(status, code, message).into_response();
    for (k, v) in &parts.headers {
        if k == header::ALLOW || k == header::WWW_AUTHENTICATE {
            out.headers_mut().insert(k, v.clone());
        }
    }
    out
}
