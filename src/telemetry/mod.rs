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

/// A W3C `traceparent`: the one type wf writes one with (a child's first
/// run under its parent's attempt, a run linked to the event that woke
/// it) and reads one back through, both through the propagator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: opentelemetry::trace::TraceId,
    pub span_id: opentelemetry::trace::SpanId,
    pub flags: TraceFlags,
}

impl TraceParent {
    /// Span `span_id` of trace `trace_id` (hex, as stored), sampled.
    pub fn of(trace_id: &str, span_id: &str) -> Option<TraceParent> {
        Some(TraceParent {
            trace_id: opentelemetry::trace::TraceId::from_hex(trace_id).ok()?,
            span_id: opentelemetry::trace::SpanId::from_hex(span_id).ok()?,
            flags: TraceFlags::SAMPLED,
        })
    }

    /// A `traceparent` header's value, if it is a valid one.
    pub fn parse(s: &str) -> Option<TraceParent> {
        let sc = extract(s, None)?;
        Some(TraceParent {
            trace_id: sc.trace_id(),
            span_id: sc.span_id(),
            flags: sc.trace_flags(),
        })
    }

    /// As the span context of a remote parent (or link).
    pub fn context(&self) -> SpanContext {
        SpanContext::new(
            self.trace_id,
            self.span_id,
            self.flags,
            true,
            TraceState::default(),
        )
    }
}

impl std::fmt::Display for TraceParent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers = inject(
            &self.trace_id.to_string(),
            &self.span_id.to_string(),
            self.flags,
            &TraceState::default(),
        );
        let value = headers
            .iter()
            .find(|(k, _)| k == "traceparent")
            .map(|(_, v)| v.as_str());
        f.write_str(value.unwrap_or_default())
    }
}

/// The runs a span's stored links (`SpanRow::links`) point to: a run's
/// root links to the root of the run before it, with `workflow.run`.
pub fn linked_runs(links: &Value) -> Vec<i64> {
    links
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|l| l.get("attributes")?.get("workflow.run")?.as_i64())
        .collect()
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
        let parsed = TraceParent::parse(&headers[0].1).expect("valid");
        assert_eq!(
            (parsed.trace_id.to_string(), parsed.span_id.to_string()),
            (t.clone(), s.clone())
        );
        assert_eq!(
            TraceParent::parse("00-00000000000000000000000000000000-0000000000000001-01"),
            None
        );
        assert_eq!(TraceParent::parse("garbage"), None);
        let ours = TraceParent::of(&t, &s).expect("hex");
        assert_eq!(ours.to_string(), format!("00-{t}-{s}-01"));
        assert_eq!(TraceParent::parse(&ours.to_string()), Some(ours));
        assert_eq!(TraceParent::of("zz", &s), None);
        let links = json!([
            link(&t, &s, json!({"workflow.run": 1})),
            link(&t, &s, json!({}))
        ]);
        assert_eq!(linked_runs(&links), vec![1]);
        assert!(linked_runs(&json!(null)).is_empty());
    }
}
