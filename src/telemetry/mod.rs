//! Traces: each run of an instance is one trace whose root span links to the
//! previous run's root; each step attempt is a child span with the process,
//! HTTP call and state commit beneath it. Spans are built here as plain
//! records and stored with the results they describe (so `wf trace` works after
//! a crash); `otlp` turns them into the OpenTelemetry protocol, and `export`
//! sends them live when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.

pub mod export;
pub mod otlp;
pub mod tree;

use crate::store::SpanRow;
use serde_json::{Map, Value, json};

/// A random, non-zero 128-bit trace id as 32 lowercase hex digits.
pub fn new_trace_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A random, non-zero 64-bit span id as 16 lowercase hex digits.
pub fn new_span_id() -> String {
    new_trace_id()[..16].to_string()
}

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

/// The attributes every span carries.
pub fn base_attributes(workflow: &str, instance: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("workflow.name".into(), json!(workflow));
    m.insert("workflow.instance.id".into(), json!(instance));
    m
}

/// A span link to another span, as stored in `SpanRow::links`.
pub fn link(trace_id: &str, span_id: &str, attributes: Value) -> Value {
    json!({ "trace_id": trace_id, "span_id": span_id, "attributes": attributes })
}

/// A span under construction; `finish` gives the row to store.
pub struct Span {
    row: SpanRow,
}

impl Span {
    pub fn new(
        trace_id: &str,
        span_id: &str,
        parent: Option<&str>,
        name: &str,
        start_ns: i64,
    ) -> Span {
        Span {
            row: SpanRow {
                trace_id: trace_id.into(),
                span_id: span_id.into(),
                parent_span_id: parent.map(String::from),
                instance_id: String::new(),
                run: 0,
                name: name.into(),
                kind: "internal".into(),
                start_ns,
                end_ns: start_ns,
                status: "unset".into(),
                status_message: None,
                attributes: Value::Object(Map::new()),
                links: Value::Array(Vec::new()),
            },
        }
    }

    pub fn instance(mut self, workflow: &str, instance: &str, run: i64) -> Span {
        self.row.instance_id = instance.into();
        self.row.run = run;
        if let Value::Object(m) = &mut self.row.attributes {
            m.extend(base_attributes(workflow, instance));
        }
        self
    }

    pub fn kind(mut self, kind: &str) -> Span {
        self.row.kind = kind.into();
        self
    }

    pub fn attr(mut self, key: &str, value: impl Into<Value>) -> Span {
        if let Value::Object(m) = &mut self.row.attributes {
            m.insert(key.into(), value.into());
        }
        self
    }

    pub fn link(mut self, link: Value) -> Span {
        if let Value::Array(a) = &mut self.row.links {
            a.push(link);
        }
        self
    }

    pub fn error(mut self, message: &str) -> Span {
        self.row.status = "error".into();
        self.row.status_message = Some(message.into());
        self
    }

    pub fn finish(mut self, end_ns: i64) -> SpanRow {
        self.row.end_ns = end_ns.max(self.row.start_ns);
        self.row
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trip() {
        let t = new_trace_id();
        let s = new_span_id();
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
