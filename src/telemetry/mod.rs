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

use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::{SpanContext, TraceContextExt as _, TraceFlags, TraceState};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use std::collections::HashMap;

/// A caller's W3C trace context (`TRACEPARENT`, `TRACESTATE`), as the
/// OpenTelemetry propagator reads it: its sampled flag and `tracestate` are
/// carried to what wf starts, never forced.
pub fn extract(traceparent: &str, tracestate: Option<&str>) -> Option<SpanContext> {
    let mut carrier = HashMap::new();
    carrier.insert("traceparent".to_string(), traceparent.trim().to_string());
    if let Some(state) = tracestate.filter(|s| !s.trim().is_empty()) {
        carrier.insert("tracestate".to_string(), state.trim().to_string());
    }
    let cx = TraceContextPropagator::new().extract(&carrier);
    let sc = cx.span().span_context().clone();
    sc.is_valid().then_some(sc)
}

/// The W3C headers (`traceparent`, and `tracestate` when not empty) of span
/// `span_id` in trace `trace_id`, with the caller's flags and state.
pub fn inject(
    trace_id: &str,
    span_id: &str,
    flags: TraceFlags,
    state: &TraceState,
) -> Vec<(String, String)> {
    let (Ok(t), Ok(s)) = (
        opentelemetry::trace::TraceId::from_hex(trace_id),
        opentelemetry::trace::SpanId::from_hex(span_id),
    ) else {
        return Vec::new();
    };
    let sc = SpanContext::new(t, s, flags, true, state.clone());
    let cx = opentelemetry::Context::new().with_remote_span_context(sc);
    let mut carrier: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    let mut out: Vec<(String, String)> =
        carrier.into_iter().filter(|(_, v)| !v.is_empty()).collect();
    out.sort();
    out
}

/// Parses a W3C `traceparent` (through the propagator) into (trace_id, parent span_id).
pub fn parse_traceparent(s: &str) -> Option<(String, String)> {
    extract(s, None).map(|sc| (sc.trace_id().to_string(), sc.span_id().to_string()))
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
        let state = TraceState::from_key_value([("vendor", "abc")]).unwrap();
        let headers = inject(&t, &s, TraceFlags::NOT_SAMPLED, &state);
        assert_eq!(
            headers,
            [
                ("traceparent".to_string(), format!("00-{t}-{s}-00")),
                ("tracestate".to_string(), "vendor=abc".to_string()),
            ]
        );
        assert_eq!(parse_traceparent(&headers[0].1), Some((t, s)));
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
