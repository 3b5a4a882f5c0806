//! `wf trace --format json`: an array of runs, each with its spans
//! (docs/traces.md). Serialized straight from the stored rows, with no JSON
//! tree in between: 20,000 spans are a lot of small maps.

use crate::store::{InstanceRow, RunRow, RunTrace, SpanRow};
use crate::telemetry::tree;
use crate::vocab::{InstanceId, RunEnd, Timestamp};
use serde_json::Value;
use std::collections::BTreeMap;

/// A run and its spans.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TraceRunView<'a> {
    pub instance_id: &'a InstanceId,
    pub workflow: &'a str,
    pub run: i64,
    /// The run's outcome, or its root span's (`workflow.outcome`) when the
    /// run has no row.
    pub outcome: Option<RunEnd>,
    /// The run's trace and root span, and the span it is a child of
    /// (`TRACEPARENT`).
    pub trace_id: Option<&'a str>,
    pub span_id: Option<&'a str>,
    pub parent_span_id: Option<&'a str>,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    /// The root span's duration: the run's total.
    pub duration_ms: Option<f64>,
    pub spans: Vec<SpanView<'a>>,
}

/// A stored span. Ids are lowercase hex; times are RFC 3339 UTC with
/// nanoseconds.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SpanView<'a> {
    pub trace_id: &'a str,
    pub span_id: &'a str,
    pub parent_span_id: Option<&'a str>,
    pub name: &'a str,
    /// `internal` or `client`.
    pub kind: &'a str,
    pub start_ns: i64,
    pub end_ns: i64,
    pub start_time: String,
    pub end_time: String,
    pub duration_ms: f64,
    /// Start, in ms after the run's root span started (the waterfall of `tree`).
    pub offset_ms: f64,
    /// `unset`, `ok` or `error`.
    pub status: &'a str,
    pub status_message: Option<&'a str>,
    pub attributes: &'a Value,
    pub links: &'a Value,
}

/// The numbers of the runs `wf trace` shows: those with a row and those
/// with spans, in order.
pub fn run_numbers(runs: &[RunRow], spans: &[SpanRow]) -> Vec<i64> {
    let mut numbers: Vec<i64> = runs.iter().map(|r| r.number).collect();
    numbers.extend(spans.iter().map(|s| s.run));
    numbers.sort_unstable();
    numbers.dedup();
    numbers
}

impl<'a> TraceRunView<'a> {
    /// Every run of `inst` ([`run_numbers`]), from its rows, its spans and
    /// the trace identity stored for each run (`traces`, by run number; a
    /// run without one takes its root span's).
    pub fn all(
        inst: &'a InstanceRow,
        runs: &'a [RunRow],
        spans: &'a [SpanRow],
        traces: &'a BTreeMap<i64, RunTrace>,
    ) -> Vec<TraceRunView<'a>> {
        run_numbers(runs, spans)
            .into_iter()
            .map(|n| {
                let run = runs.iter().find(|r| r.number == n);
                let spans: Vec<&SpanRow> = spans.iter().filter(|s| s.run == n).collect();
                let root = spans.iter().find(|s| tree::is_root(s)).copied();
                let run_start = root
                    .map(|r| r.start_ns)
                    .or_else(|| spans.iter().map(|s| s.start_ns).min())
                    .unwrap_or(0);
                let (trace_id, span_id, parent_span_id) = match (traces.get(&n), root) {
                    (Some((t, s, p, _)), _) => (Some(t.as_str()), Some(s.as_str()), p.as_deref()),
                    (None, Some(r)) => (
                        Some(r.trace_id.as_str()),
                        Some(r.span_id.as_str()),
                        r.parent_span_id.as_deref(),
                    ),
                    (None, None) => (None, None, None),
                };
                let outcome = run.and_then(|r| r.outcome).or_else(|| {
                    root.and_then(|r| r.attributes.get("workflow.outcome"))
                        .and_then(Value::as_str)
                        .and_then(|o| o.parse().ok())
                });
                TraceRunView {
                    instance_id: &inst.id,
                    workflow: &inst.workflow,
                    run: n,
                    outcome,
                    trace_id,
                    span_id,
                    parent_span_id,
                    started_at: run.map(|r| r.started_at),
                    finished_at: run.and_then(|r| r.finished_at),
                    duration_ms: root.map(|r| ms(r.end_ns - r.start_ns)),
                    spans: spans.iter().map(|s| SpanView::new(s, run_start)).collect(),
                }
            })
            .collect()
    }
}

impl<'a> SpanView<'a> {
    /// `s`, of a run whose root span started at `run_start` (ns).
    pub fn new(s: &'a SpanRow, run_start: i64) -> SpanView<'a> {
        SpanView {
            trace_id: &s.trace_id,
            span_id: &s.span_id,
            parent_span_id: s.parent_span_id.as_deref(),
            name: &s.name,
            kind: &s.kind,
            start_ns: s.start_ns,
            end_ns: s.end_ns,
            start_time: rfc3339_ns(s.start_ns),
            end_time: rfc3339_ns(s.end_ns),
            duration_ms: ms(s.end_ns - s.start_ns),
            offset_ms: ms(s.start_ns - run_start),
            status: &s.status,
            status_message: s.status_message.as_deref(),
            attributes: &s.attributes,
            links: &s.links,
        }
    }
}

/// Nanoseconds as milliseconds (a negative span as 0).
fn ms(ns: i64) -> f64 {
    ns.max(0) as f64 / 1e6
}

fn rfc3339_ns(ns: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(ns).to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}
