//! The tracing pipeline every span of a run goes through: `tracing` spans,
//! turned into OpenTelemetry spans by `tracing-opentelemetry`, built and ended
//! by the OpenTelemetry SDK, and handed by the SDK to [`Recorder`], a span
//! processor that keeps them until the engine writes them into the same
//! SQLite transaction as the result they describe.
//!
//! Why a processor that records instead of one that exports: a span is only
//! worth exporting once what it describes is durable, and `wf trace` must show
//! it after a `kill -9`. So spans are stored first and exported afterwards
//! from the database (see [`super::export`]), with the ids the SDK gave them.
//!
//! The SDK picks every id through its [`IdGenerator`]. [`PinnableIds`] is the
//! standard random generator, except that [`rebuild`] can pin the next ids: a
//! span of a run or attempt whose process died is rebuilt by the next run
//! with the ids it was given (and already handed to step processes as
//! `TRACEPARENT`) and the start time stored when it began.

use super::otlp;
use crate::store::SpanRow;
use opentelemetry::trace::{
    Link, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState,
    Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    IdGenerator, RandomIdGenerator, Sampler, SdkTracer, SdkTracerProvider, SpanData, SpanProcessor,
};
use serde_json::{Map, Value, json};
use std::cell::Cell;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;

/// Spans the SDK ended and the engine has not stored yet.
static FINISHED: Mutex<Vec<SpanData>> = Mutex::new(Vec::new());

/// The SDK tracer behind the `tracing` layer, for [`rebuild`].
static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// Installs the pipeline as the global `tracing` subscriber (once per
/// process; later calls do nothing).
pub fn install() {
    TRACER.get_or_init(|| {
        let provider = SdkTracerProvider::builder()
            // Every run is recorded whole: the history is not a sample.
            .with_sampler(Sampler::AlwaysOn)
            .with_id_generator(PinnableIds::default())
            .with_span_processor(Recorder)
            .build();
        let tracer = provider.tracer_with_scope(otlp::scope());
        let layer = tracing_opentelemetry::layer()
            .with_tracer(tracer.clone())
            .with_location(false)
            .with_threads(false)
            .with_level(false)
            .with_target(false)
            .with_tracked_inactivity(false)
            // Only wf's own spans: a dependency's would be recorded for no run.
            .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
                meta.target().starts_with("wf")
            }));
        let subscriber = tracing_subscriber::registry().with(layer);
        // Fails only if a subscriber is already set (an embedding program's):
        // spans then go there, and nothing is recorded here.
        let _ = tracing::subscriber::set_global_default(subscriber);
        tracer
    });
}

/// The span processor that keeps ended spans for the engine.
#[derive(Debug)]
struct Recorder;

impl SpanProcessor for Recorder {
    fn on_start(&self, _span: &mut opentelemetry_sdk::trace::Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        // A span of no instance would never be taken.
        let of_an_instance = span
            .attributes
            .iter()
            .any(|kv| kv.key.as_str() == "workflow.instance.id");
        if of_an_instance && let Ok(mut finished) = FINISHED.lock() {
            finished.push(span);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}

thread_local! {
    static PINNED_TRACE: Cell<Option<TraceId>> = const { Cell::new(None) };
    static PINNED_SPAN: Cell<Option<SpanId>> = const { Cell::new(None) };
}

/// Random ids, unless [`rebuild`] pinned the next ones on this thread.
#[derive(Debug, Default)]
struct PinnableIds(RandomIdGenerator);

impl IdGenerator for PinnableIds {
    fn new_trace_id(&self) -> TraceId {
        PINNED_TRACE.take().unwrap_or_else(|| self.0.new_trace_id())
    }

    fn new_span_id(&self) -> SpanId {
        PINNED_SPAN.take().unwrap_or_else(|| self.0.new_span_id())
    }
}

/// Makes the next trace id handed out on this thread `trace_id` (a root
/// span whose trace must have a given id); [`unpin`] drops it if unused.
pub fn pin_trace_id(trace_id: &str) {
    if let Ok(trace) = TraceId::from_hex(trace_id) {
        PINNED_TRACE.set(Some(trace));
    }
}

pub fn unpin() {
    PINNED_TRACE.set(None);
    PINNED_SPAN.set(None);
}

/// The trace id of every run of an instance traced `per: instance`: the
/// first 16 bytes of the SHA-256 of its id, so anything that knows the id
/// can find the trace.
pub fn instance_trace_id(instance: &str) -> String {
    use sha2::Digest as _;
    hex::encode(&sha2::Sha256::digest(instance.as_bytes())[..16])
}

/// Takes the ended spans of `trace_id` that belong to `instance`.
pub fn take(trace_id: &str, instance: &str) -> Vec<SpanData> {
    let Ok(trace) = TraceId::from_hex(trace_id) else {
        return Vec::new();
    };
    let Ok(mut finished) = FINISHED.lock() else {
        return Vec::new();
    };
    let (mine, rest) = std::mem::take(&mut *finished).into_iter().partition(|s| {
        s.span_context.trace_id() == trace
            && s.attributes.iter().any(|kv| {
                kv.key.as_str() == "workflow.instance.id" && kv.value.as_str() == instance
            })
    });
    *finished = rest;
    mine
}

/// The span context of a stored span, as a parent or link target.
pub fn span_context(trace_id: &str, span_id: &str, remote: bool) -> Option<SpanContext> {
    let trace = TraceId::from_hex(trace_id).ok()?;
    let span = SpanId::from_hex(span_id).ok()?;
    Some(SpanContext::new(
        trace,
        span,
        TraceFlags::SAMPLED,
        remote,
        TraceState::NONE,
    ))
}

/// An OpenTelemetry context whose current span is `(trace_id, span_id)`:
/// the parent of a span whose parent is not a live `tracing` span.
pub fn parent_context(trace_id: &str, span_id: &str, remote: bool) -> Context {
    span_context(trace_id, span_id, remote)
        .map(|sc| Context::new().with_remote_span_context(sc))
        .unwrap_or_default()
}

/// The (trace id, span id) of a live `tracing` span, as hex.
pub fn ids(span: &tracing::Span) -> (String, String) {
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    (sc.trace_id().to_string(), sc.span_id().to_string())
}

/// A span whose process died before it ended, as its successor rebuilds it.
pub struct Rebuilt<'a> {
    pub trace_id: &'a str,
    pub span_id: &'a str,
    /// Its parent span (in the same trace), if any.
    pub parent: Option<&'a str>,
    pub name: String,
    pub start_ns: i64,
    pub attributes: Vec<KeyValue>,
    pub links: Vec<Link>,
    /// Its ERROR status message; empty: no error.
    pub error: &'a str,
    /// When it ended, if known (else now).
    pub end_ns: Option<i64>,
}

/// Builds and ends `span` through the SDK with its original ids and start
/// time, ended at `end_ns` (or now), with an ERROR status unless `error` is
/// empty. It is recorded like any other span ([`take`] returns it).
pub fn rebuild(span: Rebuilt<'_>) {
    let Some(tracer) = TRACER.get() else {
        return;
    };
    let (Ok(trace), Ok(id)) = (
        TraceId::from_hex(span.trace_id),
        SpanId::from_hex(span.span_id),
    ) else {
        return;
    };
    let parent = span
        .parent
        .map(|p| parent_context(span.trace_id, p, true))
        .unwrap_or_default();
    PINNED_TRACE.set(Some(trace));
    PINNED_SPAN.set(Some(id));
    let mut built = tracer
        .span_builder(span.name)
        .with_kind(SpanKind::Internal)
        .with_start_time(time(span.start_ns))
        .with_attributes(span.attributes)
        .with_links(span.links)
        .start_with_context(tracer, &parent);
    PINNED_TRACE.set(None);
    PINNED_SPAN.set(None);
    use opentelemetry::trace::Span as _;
    if !span.error.is_empty() {
        built.set_status(Status::error(span.error.to_string()));
    }
    match span.end_ns {
        Some(ns) => built.end_with_timestamp(time(ns)),
        None => built.end(),
    }
}

fn time(ns: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(u64::try_from(ns).unwrap_or(0))
}

fn nanos(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn json_value(v: &opentelemetry::Value) -> Value {
    use opentelemetry::{Array, Value as V};
    match v {
        V::Bool(b) => json!(b),
        V::I64(i) => json!(i),
        V::F64(f) => json!(f),
        V::String(s) => json!(s.as_str()),
        V::Array(Array::Bool(a)) => json!(a),
        V::Array(Array::I64(a)) => json!(a),
        V::Array(Array::F64(a)) => json!(a),
        V::Array(Array::String(a)) => json!(
            a.iter()
                .map(opentelemetry::StringValue::as_str)
                .collect::<Vec<_>>()
        ),
        other => json!(other.to_string()),
    }
}

fn json_attributes(attrs: &[KeyValue]) -> Value {
    let mut m = Map::new();
    for kv in attrs {
        m.insert(kv.key.to_string(), json_value(&kv.value));
    }
    Value::Object(m)
}

/// An ended span as the row that stores it (run `run` of its instance).
pub fn row(span: &SpanData, run: i64) -> SpanRow {
    let attributes = json_attributes(&span.attributes);
    let instance_id = attributes["workflow.instance.id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let (status, status_message) = match &span.status {
        Status::Error { description } => ("error", Some(description.to_string())),
        Status::Ok => ("ok", None),
        Status::Unset => ("unset", None),
    };
    let links = span
        .links
        .iter()
        .map(|l| {
            super::link(
                &l.span_context.trace_id().to_string(),
                &l.span_context.span_id().to_string(),
                json_attributes(&l.attributes),
            )
        })
        .collect();
    SpanRow {
        trace_id: span.span_context.trace_id().to_string(),
        span_id: span.span_context.span_id().to_string(),
        parent_span_id: (span.parent_span_id != SpanId::INVALID)
            .then(|| span.parent_span_id.to_string()),
        instance_id: instance_id.into(),
        run,
        name: span.name.to_string(),
        kind: match span.span_kind {
            SpanKind::Client => "client",
            SpanKind::Server => "server",
            SpanKind::Producer => "producer",
            SpanKind::Consumer => "consumer",
            SpanKind::Internal => "internal",
        }
        .into(),
        start_ns: nanos(span.start_time),
        end_ns: nanos(span.end_time),
        status: status.into(),
        status_message,
        attributes,
        links: Value::Array(links),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;

    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

    #[test]
    fn a_tracing_span_comes_out_as_a_row_with_the_ids_it_handed_out() {
        install();
        let instance = "live-instance";
        let parent = "00f067aa0ba902b7";
        let span = tracing::info_span!(
            parent: None,
            "attempt",
            otel.name = "flow/step",
            workflow.instance.id = instance,
            workflow.step.id = "step",
        );
        span.set_parent(parent_context(TRACE, parent, true))
            .expect("not started yet");
        let linked = span_context(
            "0af7651916cd43dd8448eb211c80319c",
            "b7ad6b7169203331",
            false,
        )
        .expect("valid ids");
        span.add_link_with_attributes(linked, vec![KeyValue::new("workflow.run", 1_i64)]);
        let (trace_id, span_id) = ids(&span);
        span.set_attribute("workflow.step.attempt", 2_i64);
        span.set_status(Status::error("exit 3"));
        let child = tracing::info_span!(
            parent: &span,
            "process",
            workflow.instance.id = instance,
            otel.kind = "client",
        );
        drop(child);
        drop(span);

        let spans = take(TRACE, instance);
        assert_eq!(spans.len(), 2, "the process and the attempt");
        assert!(take(TRACE, instance).is_empty(), "taken once");
        let rows: Vec<SpanRow> = spans.iter().map(|s| row(s, 7)).collect();
        let attempt = rows
            .iter()
            .find(|r| r.name == "flow/step")
            .expect("attempt");
        assert_eq!(
            (attempt.trace_id.as_str(), attempt.span_id.as_str()),
            (TRACE, span_id.as_str())
        );
        assert_eq!(trace_id, TRACE, "the parent's trace");
        assert_eq!(attempt.parent_span_id.as_deref(), Some(parent));
        assert_eq!((attempt.instance_id.as_str(), attempt.run), (instance, 7));
        assert_eq!(attempt.status, "error");
        assert_eq!(attempt.status_message.as_deref(), Some("exit 3"));
        assert_eq!(
            attempt.attributes,
            json!({"workflow.instance.id": instance, "workflow.step.id": "step",
                   "workflow.step.attempt": 2})
        );
        assert_eq!(attempt.links[0]["span_id"], "b7ad6b7169203331");
        assert_eq!(attempt.links[0]["attributes"], json!({"workflow.run": 1}));
        assert!(attempt.start_ns > 0 && attempt.end_ns >= attempt.start_ns);
        let process = rows.iter().find(|r| r.name == "process").expect("process");
        assert_eq!(process.parent_span_id.as_deref(), Some(span_id.as_str()));
        assert_eq!(process.kind, "client");
        assert_eq!(process.status, "unset");
    }

    #[test]
    fn spans_of_dependencies_or_of_no_instance_are_not_kept() {
        install();
        let instance = "foreign-instance";
        let foreign = tracing::info_span!(
            target: "h2::proto",
            parent: None,
            "connection",
            workflow.instance.id = instance
        );
        let (trace, _) = ids(&foreign);
        assert!(
            trace.chars().all(|c| c == '0'),
            "a dependency's span is not traced"
        );
        drop(foreign);
        let stray = tracing::info_span!(parent: None, "stray");
        let (stray_trace, _) = ids(&stray);
        drop(stray);
        assert!(take(&stray_trace, "").is_empty());
        let finished = FINISHED.lock().expect("lock");
        assert!(
            !finished
                .iter()
                .any(|s| s.span_context.trace_id().to_string() == stray_trace),
            "a span of no instance is dropped at once"
        );
    }

    #[test]
    fn a_rebuilt_span_keeps_its_ids_and_start() {
        install();
        let instance = "crashed-instance";
        let trace = "11111111111111111111111111111111";
        rebuild(Rebuilt {
            trace_id: trace,
            span_id: "2222222222222222",
            parent: None,
            name: "flow/workflow".into(),
            start_ns: 1_700_000_000_000_000_000,
            attributes: vec![
                KeyValue::new("workflow.instance.id", instance),
                KeyValue::new("workflow.outcome", "crashed"),
            ],
            links: Vec::new(),
            error: "died",
            end_ns: None,
        });
        rebuild(Rebuilt {
            trace_id: trace,
            span_id: "3333333333333333",
            parent: Some("2222222222222222"),
            name: "flow/step".into(),
            start_ns: 1_700_000_000_000_000_005,
            attributes: vec![KeyValue::new("workflow.instance.id", instance)],
            links: Vec::new(),
            error: "died",
            end_ns: None,
        });
        assert!(take(trace, "another-instance").is_empty());
        let rows: Vec<SpanRow> = take(trace, instance).iter().map(|s| row(s, 3)).collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].span_id, "2222222222222222");
        assert_eq!(rows[0].parent_span_id, None);
        assert_eq!(rows[0].start_ns, 1_700_000_000_000_000_000);
        assert_eq!(rows[1].span_id, "3333333333333333");
        assert_eq!(rows[1].parent_span_id.as_deref(), Some("2222222222222222"));
        assert_eq!(rows[1].trace_id, trace);
        assert!(
            rows.iter()
                .all(|r| r.status == "error" && r.end_ns > r.start_ns)
        );
        // The pin is spent: the next span gets fresh ids.
        let fresh = tracing::info_span!(parent: None, "fresh", workflow.instance.id = instance);
        let (fresh_trace, fresh_span) = ids(&fresh);
        assert_ne!(fresh_trace, trace);
        assert_ne!(fresh_span, "3333333333333333");
    }
}
