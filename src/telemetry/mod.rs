//! Traces: each run of an instance is one trace whose root span links to the
//! previous run's root; each step attempt is a child span with the process,
//! HTTP call and state commit beneath it. The engine opens them as `tracing`
//! spans; `recorder` carries them through `tracing-opentelemetry` and the
//! OpenTelemetry SDK to the engine, which stores them with the results they
//! describe (so `wf trace` works after a crash); `otlp` turns stored spans
//! back into the OpenTelemetry protocol, `tree` into `wf trace`'s tree, and
//! `export` sends them live when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.

pub mod export;
pub mod otlp;
pub mod recorder;
pub mod tree;

use serde_json::{Value, json};

/// Now, in unix nanoseconds.
pub fn now_ns() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
}

/// W3C `traceparent` for a span.
pub fn traceparent(trace_id: &str, span_id: &str) -> String {
    format!("00-{trace_id}-{span_id}-01")
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && s.bytes().any(|b| b != b'0')
}

/// Parses a W3C `traceparent` into (trace_id, parent span_id).
pub fn parse_traceparent(s: &str) -> Option<(String, String)> {
    let mut parts = s.trim().split('-');
    let version = parts.next()?;
    let trace = parts.next()?.to_ascii_lowercase();
    let span = parts.next()?.to_ascii_lowercase();
    let flags = parts.next()?;
    if version.len() != 2
        || version == "ff"
        || flags.len() != 2
        || !is_hex(&trace, 32)
        || !is_hex(&span, 16)
    {
        return None;
    }
    Some((trace, span))
}

/// A span link to another span, as stored in `SpanRow::links`.
pub fn link(trace_id: &str, span_id: &str, attributes: Value) -> Value {
    json!({ "trace_id": trace_id, "span_id": span_id, "attributes": attributes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trip() {
        let t = "4bf92f3577b34da6a3ce929d0e0e4736".to_string();
        let s = "00f067aa0ba902b7".to_string();
        assert_eq!(parse_traceparent(&traceparent(&t, &s)), Some((t, s)));
        assert_eq!(
            parse_traceparent("00-00000000000000000000000000000000-0000000000000001-01"),
            None
        );
        assert_eq!(parse_traceparent("garbage"), None);
        assert_eq!(
            parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
                .map(|p| p.1),
            Some("00f067aa0ba902b7".into())
        );
    }
}
