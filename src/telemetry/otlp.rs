//! Stored spans ([`SpanRow`]) in the OpenTelemetry data model: as SDK
//! [`SpanData`] (what exporters take) and as one OTLP
//! `ExportTraceServiceRequest` (what `wf trace --format otlp` prints as
//! OTLP/JSON). Both keep the trace and span ids exactly as stored, so a
//! trace printed twice, or printed and exported live, has the same ids.
//!
//! The OTLP request is built from the `SpanData` with the
//! `opentelemetry-proto` transform the OTLP exporter itself uses, so the JSON
//! printed and the protobuf sent over the wire are the same message.

use crate::store::SpanRow;
use opentelemetry::trace::{
    Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{Array, InstrumentationScope, KeyValue, StringValue, Value as OtelValue};
use opentelemetry_proto::tonic::trace::v1::Span as ProtoSpan;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use serde_json::Value;
use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The instrumentation scope name of every span `wf` records.
pub const SCOPE: &str = "wf";

/// A stored span that cannot be expressed in OTLP.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    #[error("corrupt span record: {what} `{value}` is not a valid {kind}")]
    BadId {
        what: &'static str,
        value: String,
        kind: &'static str,
    },
    #[error("cannot encode OTLP/JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cannot write OTLP/JSON: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Store(#[from] crate::store::StoreError),
}

/// The resource every exported span belongs to: the SDK's standard
/// detection (`OTEL_RESOURCE_ATTRIBUTES`, `telemetry.sdk.*`), with
/// `service.name` from `OTEL_SERVICE_NAME`, else `wf`.
pub fn resource() -> Resource {
    let detected = Resource::builder().build();
    let from_env = std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let from_attributes = detected
        .get(&opentelemetry::Key::from_static_str("service.name"))
        .map(|v| v.to_string())
        .filter(|s| !s.is_empty() && !s.starts_with("unknown_service"));
    let name = from_env.or(from_attributes).unwrap_or_else(|| "wf".into());
    let mut builder = Resource::builder().with_service_name(name);
    if detected
        .get(&opentelemetry::Key::from_static_str("service.version"))
        .is_none()
    {
        builder = builder.with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ));
    }
    builder.build()
}

/// The instrumentation scope: `wf` with the crate version.
pub fn scope() -> InstrumentationScope {
    InstrumentationScope::builder(SCOPE)
        .with_version(env!("CARGO_PKG_VERSION"))
        .build()
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn trace_id(what: &'static str, s: &str) -> Result<TraceId, OtlpError> {
    let bad = || OtlpError::BadId {
        what,
        value: s.to_string(),
        kind: "trace id (32 hex digits)",
    };
    if !is_hex(s, 32) {
        return Err(bad());
    }
    TraceId::from_hex(s).map_err(|_| bad())
}

fn span_id(what: &'static str, s: &str) -> Result<SpanId, OtlpError> {
    let bad = || OtlpError::BadId {
        what,
        value: s.to_string(),
        kind: "span id (16 hex digits)",
    };
    if !is_hex(s, 16) {
        return Err(bad());
    }
    SpanId::from_hex(s).map_err(|_| bad())
}

fn time(ns: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(u64::try_from(ns).unwrap_or(0))
}

/// One stored attribute value as an OpenTelemetry value; `None` for null.
fn value(v: &Value) -> Option<OtelValue> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(b) => OtelValue::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => OtelValue::I64(i),
            None => OtelValue::F64(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => OtelValue::String(s.clone().into()),
        Value::Array(items) if items.iter().all(Value::is_string) => {
            OtelValue::Array(Array::String(
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|s| StringValue::from(s.to_string()))
                    .collect(),
            ))
        }
        other => OtelValue::String(other.to_string().into()),
    })
}

/// A stored JSON object of attributes as key-values (in stored order).
pub fn attributes(attrs: &Value) -> Vec<KeyValue> {
    attrs
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some(KeyValue::new(k.clone(), value(v)?)))
                .collect()
        })
        .unwrap_or_default()
}

fn links(row: &SpanRow) -> Result<Vec<Link>, OtlpError> {
    let Some(items) = row.links.as_array() else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(items.len());
    for l in items {
        let trace = trace_id("link trace_id", l["trace_id"].as_str().unwrap_or(""))?;
        let span = span_id("link span_id", l["span_id"].as_str().unwrap_or(""))?;
        // A link to the context a `wf signal` was sent under points outside wf.
        let remote = l["attributes"].get("wf.event.name").is_some();
        let ctx = SpanContext::new(trace, span, TraceFlags::SAMPLED, remote, TraceState::NONE);
        out.push(Link::new(ctx, attributes(&l["attributes"]), 0));
    }
    Ok(out)
}

/// A stored span as SDK span data, ids unchanged.
pub fn span_data(row: &SpanRow) -> Result<SpanData, OtlpError> {
    let trace = trace_id("trace_id", &row.trace_id)?;
    let span = span_id("span_id", &row.span_id)?;
    let parent = match row.parent_span_id.as_deref().filter(|p| !p.is_empty()) {
        Some(p) => span_id("parent_span_id", p)?,
        None => SpanId::INVALID,
    };
    // Only a run's root has a parent outside wf: the caller's TRACEPARENT.
    let is_root = row.attributes.get("workflow.run").is_some() && row.name.ends_with("/workflow");
    let status = match row.status.as_str() {
        "error" => Status::error(row.status_message.clone().unwrap_or_default()),
        "ok" => Status::Ok,
        _ => Status::Unset,
    };
    let mut span_links = SpanLinks::default();
    span_links.links = links(row)?;
    Ok(SpanData {
        span_context: SpanContext::new(trace, span, TraceFlags::SAMPLED, false, TraceState::NONE),
        parent_span_id: parent,
        parent_span_is_remote: is_root && parent != SpanId::INVALID,
        span_kind: match row.kind.as_str() {
            "client" => SpanKind::Client,
            "server" => SpanKind::Server,
            "producer" => SpanKind::Producer,
            "consumer" => SpanKind::Consumer,
            _ => SpanKind::Internal,
        },
        name: row.name.clone().into(),
        start_time: time(row.start_ns),
        end_time: time(row.end_ns.max(row.start_ns)),
        attributes: attributes(&row.attributes),
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: span_links,
        status,
        instrumentation_scope: scope(),
    })
}

/// Stored spans as SDK span data, in the order given.
pub fn span_data_all(rows: &[SpanRow]) -> Result<Vec<SpanData>, OtlpError> {
    rows.iter().map(span_data).collect()
}

/// Writes one OTLP/JSON `ExportTraceServiceRequest` (hex ids, camelCase,
/// int64 as strings; compact, as on the wire) holding the spans `each` feeds
/// to its callback, under `resource` and the `wf` scope. Spans are converted
/// and written one at a time, so memory stays flat however many there are.
/// No spans: no resource spans at all.
///
/// Each span goes through the `opentelemetry-proto` transform the OTLP
/// exporter itself uses, so what is printed and what is sent over the wire
/// are the same message.
pub fn write_request<W: Write>(
    out: &mut W,
    resource: &Resource,
    each: impl FnOnce(&mut dyn FnMut(SpanRow) -> Result<(), OtlpError>) -> Result<(), OtlpError>,
) -> Result<(), OtlpError> {
    let mut request = RequestWriter::new(out, resource);
    each(&mut |row| request.span(row))?;
    request.finish()
}

/// [`write_request`] one span at a time, for spans that come from an
/// `async` source.
pub struct RequestWriter<'a, W: Write> {
    out: &'a mut W,
    resource: ResourceAttributesWithSchema,
    first: bool,
    trailer: String,
}

impl<'a, W: Write> RequestWriter<'a, W> {
    pub fn new(out: &'a mut W, resource: &Resource) -> Self {
        RequestWriter {
            out,
            resource: ResourceAttributesWithSchema::from(resource),
            first: true,
            trailer: String::new(),
        }
    }

    pub fn span(&mut self, row: SpanRow) -> Result<(), OtlpError> {
        let data = span_data(&row)?;
        let out = &mut *self.out;
        if self.first {
            self.first = false;
            // The envelope, from the same transform, with this span taken out.
            let mut rs = group_spans_by_resource_and_scope(vec![data.clone()], &self.resource)
                .pop()
                .unwrap_or_default();
            let mut resource = rs.resource.take().unwrap_or_default();
            // Resource attributes come out of a hash map: sorted, the output is stable.
            resource.attributes.sort_by(|a, b| a.key.cmp(&b.key));
            let scope = rs.scope_spans.pop().unwrap_or_default();
            out.write_all(b"{\"resourceSpans\":[{\"resource\":")?;
            serde_json::to_writer(&mut *out, &resource)?;
            out.write_all(b",\"scopeSpans\":[{\"scope\":")?;
            serde_json::to_writer(&mut *out, &scope.scope.unwrap_or_default())?;
            out.write_all(b",\"schemaUrl\":")?;
            serde_json::to_writer(&mut *out, &scope.schema_url)?;
            out.write_all(b",\"spans\":[")?;
            self.trailer = format!(
                "]}}],\"schemaUrl\":{}}}]}}",
                serde_json::to_string(&rs.schema_url)?
            );
        } else {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut *out, &ProtoSpan::from(data))?;
        Ok(())
    }

    pub fn finish(self) -> Result<(), OtlpError> {
        if self.first {
            self.out.write_all(b"{\"resourceSpans\":[]}")?;
        } else {
            self.out.write_all(self.trailer.as_bytes())?;
        }
        self.out.write_all(b"\n")?;
        self.out.flush()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row() -> SpanRow {
        SpanRow {
            trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".into(),
            span_id: "00f067aa0ba902b7".into(),
            parent_span_id: Some("1111111111111111".into()),
            instance_id: "i1".into(),
            run: 2,
            name: "flow/workflow".into(),
            kind: "internal".into(),
            start_ns: 1_700_000_000_000_000_001,
            end_ns: 1_700_000_000_500_000_000,
            status: "error".into(),
            status_message: Some("boom".into()),
            attributes: json!({"workflow.name": "flow", "workflow.run": 2, "ratio": 0.5, "ok": true}),
            links: json!([{"trace_id": "0af7651916cd43dd8448eb211c80319c",
                           "span_id": "b7ad6b7169203331", "attributes": {"workflow.run": 1}}]),
        }
    }

    /// `rows` through [`write_request`], parsed back.
    fn written(rows: Vec<SpanRow>, resource: &Resource) -> Value {
        let mut out = Vec::new();
        write_request(&mut out, resource, |feed| {
            for r in rows {
                feed(r)?;
            }
            Ok(())
        })
        .expect("written");
        serde_json::from_slice(&out).expect("one JSON document")
    }

    #[test]
    fn json_keeps_ids_and_follows_otlp_json() {
        let mut second = row();
        second.span_id = "00f067aa0ba902b8".into();
        let v = written(
            vec![row(), second],
            &Resource::builder_empty().with_service_name("svc").build(),
        );
        assert_eq!(v["resourceSpans"].as_array().map(Vec::len), Some(1));
        assert_eq!(
            v["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["spanId"],
            "00f067aa0ba902b8"
        );
        let rs = &v["resourceSpans"][0];
        assert_eq!(rs["resource"]["attributes"][0]["key"], "service.name");
        assert_eq!(rs["scopeSpans"][0]["scope"]["name"], "wf");
        let s = &rs["scopeSpans"][0]["spans"][0];
        assert_eq!(s["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(s["spanId"], "00f067aa0ba902b7");
        assert_eq!(s["parentSpanId"], "1111111111111111");
        assert_eq!(s["startTimeUnixNano"], "1700000000000000001");
        assert_eq!(s["kind"], 1);
        assert_eq!(s["status"]["code"], 2);
        assert_eq!(s["status"]["message"], "boom");
        // Sampled, and the root's parent (TRACEPARENT) is remote.
        assert_eq!(s["flags"], 0x301);
        let attr = |k: &str| {
            s["attributes"]
                .as_array()
                .and_then(|a| a.iter().find(|kv| kv["key"] == k))
                .map(|kv| kv["value"].clone())
                .unwrap_or(Value::Null)
        };
        assert_eq!(attr("workflow.run"), json!({"intValue": "2"}));
        assert_eq!(attr("ratio"), json!({"doubleValue": 0.5}));
        assert_eq!(attr("ok"), json!({"boolValue": true}));
        assert_eq!(s["links"][0]["spanId"], "b7ad6b7169203331");
    }

    #[test]
    fn bad_ids_are_errors_not_panics() {
        let mut r = row();
        r.span_id = "xyz".into();
        assert!(matches!(span_data(&r), Err(OtlpError::BadId { .. })));
        let mut r = row();
        r.links = json!([{"trace_id": "short", "span_id": "b7ad6b7169203331"}]);
        assert!(span_data(&r).is_err());
    }

    #[test]
    fn no_spans_is_an_empty_request() {
        assert_eq!(
            written(Vec::new(), &resource()),
            json!({"resourceSpans": []})
        );
    }
}
