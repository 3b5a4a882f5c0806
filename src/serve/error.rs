//! The API's errors: `{"error": {"code", "message"}}` with the HTTP status
//! and code of their [`ErrorKind`], the same kind that gives the CLI's exit
//! code for the same failure (docs/api.md's table). Every error response
//! of the server has this shape, axum's own rejections included
//! ([`normalize`]).

use crate::engine::{EngineError, Unresumable};
use crate::error_kind::ErrorKind;
use crate::store::StoreError;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub kind: ErrorKind,
    pub message: String,
}

impl ApiError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ApiError {
        ApiError {
            kind,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::Invalid, message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::NotFound, message)
    }

    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::Conflict, message)
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::Unavailable, message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::Internal, message)
    }

    /// The HTTP status its kind answers with.
    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.kind.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    pub fn from_store(e: StoreError) -> ApiError {
        let message = match &e {
            StoreError::Busy(_) => format!(
                "the database is locked by another process; nothing was done, try again ({e})"
            ),
            _ => e.to_string(),
        };
        ApiError::new(ErrorKind::of_store(&e), message)
    }

    /// An engine error in the API's words: where the CLI's names a flag or
    /// a command, this names the request's field or route.
    pub fn from_engine(e: EngineError) -> ApiError {
        let kind = ErrorKind::of_engine(&e);
        let message = match e {
            EngineError::Store(s) => return ApiError::from_store(s),
            EngineError::MissingInput(name) => format!(
                "missing required input `{name}`: give it in the request's `inputs` (`{{\"inputs\": {{\"{name}\": …}}}}`)"
            ),
            EngineError::NotResumable {
                id,
                why: Unresumable::Failed(f),
            } => format!(
                "instance {id} failed{}: {}",
                f.error_words(),
                f.remedy.api_advice(&id)
            ),
            EngineError::HoldsHistory { target, rows } => format!(
                "{target} already holds history ({rows} rows); copy into an empty database, or continue an interrupted copy into it with `\"resume\": true`"
            ),
            // A name from the request, shown as every name from one is.
            EngineError::NotRegistered { name, registered } => format!(
                "no workflow is registered as `{}` ({})",
                super::params::shown(&name),
                crate::engine::registry::registered_words(&registered)
            ),
            e => e.to_string(),
        };
        ApiError::new(kind, message)
    }

    /// `{error: {code, message}}`; a control character the message quotes
    /// from the request (a NUL, a line break) is written as its escape,
    /// so that a message is one line of text.
    pub fn body(&self) -> serde_json::Value {
        let message: String = self
            .message
            .chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_debug().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect();
        json!({ "error": { "code": self.kind.code(), "message": message } })
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
        let mut r = (self.status(), axum::Json(self.body())).into_response();
        if self.status() == StatusCode::UNAUTHORIZED {
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
    let (kind, message) = match status {
        StatusCode::NOT_FOUND => (ErrorKind::NotFound, "no such route".to_string()),
        StatusCode::METHOD_NOT_ALLOWED => (
            ErrorKind::MethodNotAllowed,
            "the route does not take this method".to_string(),
        ),
        StatusCode::PAYLOAD_TOO_LARGE => (
            ErrorKind::TooLarge,
            "the request body is larger than the server takes".to_string(),
        ),
        StatusCode::REQUEST_TIMEOUT => {
            (ErrorKind::Timeout, "the request took too long".to_string())
        }
        _ if status.is_server_error() => (ErrorKind::Internal, status.to_string()),
        _ if text.is_empty() => (ErrorKind::Invalid, status.to_string()),
        _ => (ErrorKind::Invalid, text),
    };
    let mut out = ApiError::new(kind, message).into_response();
    for (k, v) in &parts.headers {
        if k == header::ALLOW || k == header::WWW_AUTHENTICATE {
            out.headers_mut().insert(k, v.clone());
        }
    }
    out
}
