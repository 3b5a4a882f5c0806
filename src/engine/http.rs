//! Runs one attempt of an `http:` step with reqwest (rustls): sends the
//! rendered request, maps the response or the failure to an outcome
//! (`http.<status>`, `http.connect`, `timeout`), honours `Retry-After`, and
//! builds the `{status, headers, body, json}` output.

use super::output;
use super::{AttemptResult, Failure};
use crate::vocab::ErrorType;
use crate::workflow::Redirects;
use opentelemetry::trace::Status;
use serde_json::{Map, Value};
use std::time::Duration;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// Everything needed to send the request, already rendered.
#[derive(Debug, Clone)]
pub struct HttpJob {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub query: Vec<(String, String)>,
    /// Body bytes and whether they are JSON (sets Content-Type).
    pub body: Option<(Vec<u8>, bool)>,
    pub expect_status: Option<Vec<u16>>,
    pub timeout: Option<Duration>,
    pub follow_redirects: Redirects,
    /// The request holds a secret (in a header, the URL or the body): it
    /// never follows a redirect to another origin.
    pub carries_secret: bool,
}

/// Most redirects one request follows.
const MAX_REDIRECTS: usize = 10;

impl HttpJob {
    /// The URL as sent, `query:` parameters included (`url.full`).
    pub fn full_url(&self) -> String {
        match reqwest::Url::parse(&self.url) {
            Ok(mut u) if !self.query.is_empty() => {
                u.query_pairs_mut().extend_pairs(self.query.iter());
                u.to_string()
            }
            _ => self.url.clone(),
        }
    }
}

/// A client shared by every HTTP step of a process (connection reuse).
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .user_agent(concat!("wf/", env!("CARGO_PKG_VERSION")))
        // Redirects are followed by `send`, which knows what the request carries.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_default()
}

async fn send(
    client: reqwest::Client,
    job: HttpJob,
    mut interrupt: super::stop::StopSignal,
) -> AttemptResult {
    let limit = output::output_limit();
    let Ok(method) = reqwest::Method::from_bytes(job.method.as_bytes()) else {
        return AttemptResult::failed(Failure::new(
            ErrorType::HttpRequest,
            format!("invalid method `{}`", job.method),
        ));
    };
    let url = match reqwest::Url::parse(&job.url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => u,
        Ok(u) => {
            return AttemptResult::failed(Failure::new(
                ErrorType::HttpRequest,
                format!("unsupported URL scheme `{}` in {}", u.scheme(), job.url),
            ));
        }
        Err(e) => {
            return AttemptResult::failed(Failure::new(
                ErrorType::HttpRequest,
                format!("invalid URL `{}`: {e}", job.url),
            ));
        }
    };
    let exchange = async {
        let mut method = method;
        let mut url = url;
        let mut body = job.body.clone();
        let mut headers = job.headers.clone();
        let mut first = true;
        let mut hops = 0;
        loop {
            let mut req = client.request(method.clone(), url.clone());
            if first && !job.query.is_empty() {
                req = req.query(&job.query);
            }
            for (k, v) in &headers {
                req = req.header(k.as_str(), v.as_str());
            }
            if let Some((bytes, is_json)) = &body {
                if *is_json
                    && !headers
                        .iter()
                        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
                {
                    req = req.header("content-type", "application/json");
                }
                req = req.body(bytes.clone());
            }
            if let Some(t) = job.timeout {
                req = req.timeout(t);
            }
            let resp = req.send().await.map_err(Exchange::Request)?;
            let status = resp.status();
            let location = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .and_then(|l| resp.url().join(l).ok());
            let follow = match (&location, job.follow_redirects) {
                (Some(_), _) if !status.is_redirection() => None,
                (None, _) | (_, Redirects::Never) => None,
                (Some(next), policy) => {
                    let from = resp.url().origin();
                    let same = next.origin() == from;
                    if !same && (job.carries_secret || policy == Redirects::SameOrigin) {
                        return Err(Exchange::Refused(format!(
                            "{} {} redirected ({status}) to another origin, {}, which is not followed {}",
                            job.method,
                            job.url,
                            next.origin().ascii_serialization(),
                            if job.carries_secret {
                                "by a request that carries a secret"
                            } else {
                                "(`follow_redirects: same-origin`)"
                            }
                        )));
                    }
                    Some((next.clone(), same))
                }
            };
            let Some((next, same_origin)) = follow else {
                let headers = resp.headers().clone();
                let mut data = Vec::new();
                let mut resp = resp;
                while let Some(chunk) = resp.chunk().await.map_err(Exchange::Request)? {
                    data.extend_from_slice(&chunk);
                    if data.len() > limit {
                        return Ok((status.as_u16(), headers, data, true));
                    }
                }
                return Ok((status.as_u16(), headers, data, false));
            };
            hops += 1;
            if hops > MAX_REDIRECTS {
                return Err(Exchange::Refused(format!(
                    "{} {} was redirected more than {MAX_REDIRECTS} times",
                    job.method, job.url
                )));
            }
            // 303, and 301/302 after a POST, continue as a GET without a
            // body (as browsers and curl do); 307/308 keep both.
            let code = status.as_u16();
            if code == 303 || (matches!(code, 301 | 302) && method == reqwest::Method::POST) {
                if method != reqwest::Method::HEAD {
                    method = reqwest::Method::GET;
                }
                body = None;
                headers.retain(|(k, _)| {
                    !k.eq_ignore_ascii_case("content-type")
                        && !k.eq_ignore_ascii_case("content-length")
                });
            }
            if !same_origin {
                headers.retain(|(k, _)| {
                    !["authorization", "cookie", "proxy-authorization"]
                        .iter()
                        .any(|h| k.eq_ignore_ascii_case(h))
                });
            }
            url = next;
            first = false;
        }
    };
    let result = tokio::select! {
        r = exchange => r,
        () = interrupt.fired() => {
            return AttemptResult { interrupted: true, ..AttemptResult::failed(Failure::new(ErrorType::Interrupted, "interrupted".into())) };
        }
    };
    let (status, headers, body, over) = match result {
        Ok(r) => r,
        Err(Exchange::Refused(message)) => {
            return AttemptResult::failed(Failure::new(ErrorType::HttpRedirect, message));
        }
        Err(Exchange::Request(e)) => {
            let f = if e.is_timeout() {
                Failure::new(
                    ErrorType::Timeout,
                    format!(
                        "no response within {}",
                        crate::workflow::duration::human(job.timeout.unwrap_or_default())
                    ),
                )
            } else if e.is_connect() {
                Failure::new(
                    ErrorType::HttpConnect,
                    format!("cannot connect to {}: {}", job.url, root_cause(&e)),
                )
            } else if e.is_builder() || e.is_request() && e.status().is_none() && !e.is_body() {
                Failure::new(
                    ErrorType::HttpConnect,
                    format!("request to {} failed: {}", job.url, root_cause(&e)),
                )
            } else {
                Failure::new(
                    ErrorType::HttpConnect,
                    format!(
                        "reading the response from {} failed: {}",
                        job.url,
                        root_cause(&e)
                    ),
                )
            };
            return AttemptResult::failed(f);
        }
    };
    let mut result = AttemptResult {
        stdout: body.clone(),
        exit_code: None,
        ..AttemptResult::default()
    };
    if over {
        result.outcome = Err(Failure::new(
            ErrorType::OutputLimit,
            format!("response body exceeded the output limit of {limit} bytes"),
        ));
        return result;
    }
    let mut header_map = Map::new();
    for (name, value) in &headers {
        let v = String::from_utf8_lossy(value.as_bytes()).into_owned();
        match header_map.get_mut(name.as_str()) {
            Some(Value::String(existing)) => {
                existing.push_str(", ");
                existing.push_str(&v);
            }
            _ => {
                header_map.insert(name.as_str().to_string(), Value::String(v));
            }
        }
    }
    let text = String::from_utf8_lossy(&body).into_owned();
    let json = serde_json::from_str::<Value>(&text).unwrap_or(Value::Null);
    let mut out = Map::new();
    out.insert("status".into(), Value::from(status));
    out.insert("headers".into(), Value::Object(header_map));
    out.insert("body".into(), Value::String(text));
    out.insert("json".into(), json);
    let ok = match &job.expect_status {
        Some(codes) => codes.contains(&status),
        None => (200..300).contains(&status),
    };
    if ok {
        result.outcome = Ok(Value::Object(out));
    } else {
        if status == 429 || status == 503 {
            result.retry_after = headers
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(parse_retry_after);
        }
        let snippet: String = String::from_utf8_lossy(&body).chars().take(200).collect();
        let snippet = snippet.split_whitespace().collect::<Vec<_>>().join(" ");
        result.outcome = Err(Failure::new(
            ErrorType::Http(status),
            if snippet.is_empty() {
                format!("{} {} returned {status}", job.method, job.url)
            } else {
                format!("{} {} returned {status}: {snippet}", job.method, job.url)
            },
        ));
    }
    result
}

/// Why an exchange produced no response to report.
enum Exchange {
    Request(reqwest::Error),
    /// A redirect wf does not follow, or too many of them.
    Refused(String),
}

/// Sends the request; `span` (the HTTP client span, whose id went out as the
/// request's `traceparent`) gets the response status, and on failure
/// `error.type` and an ERROR status. It ends when this returns.
pub async fn run(
    client: reqwest::Client,
    job: HttpJob,
    span: tracing::Span,
    interrupt: super::stop::StopSignal,
) -> AttemptResult {
    let result = send(client, job, interrupt).await;
    match &result.outcome {
        Ok(out) => {
            if let Some(code) = out["status"].as_i64() {
                span.set_attribute("http.response.status_code", code);
            }
        }
        Err(f) => {
            // The HTTP conventions: a response status as the error type
            // (`503`); wf's own `http.503` stays on the attempt's span.
            let error_type = match f.error_type {
                ErrorType::Http(code) => {
                    span.set_attribute("http.response.status_code", i64::from(code));
                    code.to_string()
                }
                _ => f.error_type.to_string(),
            };
            span.set_attribute("error.type", error_type);
            span.set_status(Status::error(f.message.clone()));
        }
    }
    result
}

/// `Retry-After` as seconds or an HTTP date.
pub fn parse_retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    let delta = when.with_timezone(&chrono::Utc) - chrono::Utc::now();
    delta.to_std().ok()
}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}
