//! The run's spans: its root, one per attempt (started before the attempt
//! is recorded, so its id can travel with the attempt), `wf.commit` under
//! the attempts a commit makes durable, and the ended spans turned into
//! writes with secrets masked.
//!
//! A successful attempt's span stays open until the commit that makes its
//! result durable has returned: that commit is part of the attempt, and
//! its `wf.commit` span lies within it (docs/traces.md). The attempt's span is
//! then stored by the next commit; if wf dies before that one, the next
//! run rebuilds the span from the attempt's row (`drive::open::rebuild_spans`).

use super::*;
use crate::engine::redact::Redactor;
use crate::engine::scheduler::SpanIds;
use crate::vocab::{AttemptOutcome, RunEnd, ShownKey, UnitKeyBuf};

impl<'o> Runner<'o> {
    /// Stores the spans of this run that ended since the last call (masking
    /// secrets), except those in `skip`.
    pub(super) fn flush_spans(&mut self, skip: &[String]) {
        let run = (self.trace.0.as_str(), self.id.as_str(), self.run);
        let spans = ended_spans(run, &self.wf.name, Some(self.sched.redactor()), skip);
        self.sched.extend_writes(spans);
    }

    /// A `wf.commit` span under each attempt the coming commit makes
    /// durable, its `db.system.name` naming the backend (`sqlite`,
    /// `postgresql`), followed by those attempts' own spans, still open:
    /// dropped in that order once the commit returned, each commit span
    /// ends before its attempt's.
    /// `system`: the database's `db.system.name` ([`Store::system`]).
    pub(super) fn commit_spans(&mut self, system: &'static str) -> Vec<tracing::Span> {
        let committing = std::mem::take(&mut self.committing);
        let mut spans: Vec<tracing::Span> = committing
            .iter()
            .map(|(span_id, _)| {
                let span = tracing::info_span!(
                    parent: None,
                    "wf.commit",
                    workflow.name = self.wf.name.as_str(),
                    workflow.instance.id = self.id.as_str(),
                    db.system.name = system,
                    db.operation.name = "COMMIT",
                );
                let _ = span.set_parent(recorder::parent_context(&self.trace.0, span_id, false));
                span
            })
            .collect();
        spans.extend(committing.into_iter().map(|(_, attempt)| attempt));
        spans
    }

    /// Ends the run's root span and stores it with whatever spans are pending.
    pub(in crate::engine) fn write_root_span(&mut self, outcome: RunEnd, error: Option<&str>) {
        self.root
            .set_attribute("workflow.outcome", outcome.as_str());
        if let Some(e) = error {
            self.root.set_status(Status::error(e.to_string()));
        }
        // An attempt still open has no outcome: its row stays open, and the
        // next run records its span as crashed, with the same id.
        let open: Vec<String> = self
            .spans
            .open
            .drain()
            .map(|(_, (_, span_id, _))| span_id)
            .collect();
        drop(std::mem::replace(&mut self.root, tracing::Span::none()));
        self.flush_spans(&open);
    }

    /// Ends the span of one finished attempt and stores it, with the spans of
    /// what it did (its process or HTTP call) beneath it. A successful one
    /// (`outcome` `ok`) is not ended here: it waits for the commit that makes
    /// its result durable ([`Runner::commit_spans`]).
    pub(super) fn end_attempt_span(
        &mut self,
        key: &str,
        attempt: i64,
        outcome: AttemptOutcome,
        failure: Option<&Failure>,
    ) {
        let (span, span_id) = match self.spans.open.remove(key) {
            Some((span, span_id, _)) => (span, span_id),
            None if self
                .spans
                .carried
                .get(key)
                .is_some_and(|c| c.attempt == attempt) =>
            {
                if let Some(c) = self.spans.carried.remove(key) {
                    self.store_carried_span(key, c, outcome, failure);
                }
                return;
            }
            None => {
                let span = self
                    .spans
                    .new_span(&self.sched.shown_key(UnitKeyBuf::from(key)));
                let (_, span_id) = recorder::ids(&span);
                (span, span_id)
            }
        };
        span.set_attribute("workflow.step.attempt", attempt);
        span.set_attribute("workflow.step.outcome", outcome.as_str());
        if let Some(f) = failure {
            span.set_attribute("error.type", f.error_type.text());
            span.set_status(Status::error(f.message.clone()));
        }
        if matches!(outcome, AttemptOutcome::Ok | AttemptOutcome::Cached) {
            self.committing.push((span_id, span));
        }
    }
}

impl Runner<'_> {
    /// Stores the span of a `workflow:` attempt an earlier run began (its
    /// child outlived that run): with the id, trace, run and start it got
    /// there, so the child's first run, a child of that span, hangs under
    /// it; it ends now, with the child, in the commit that records the end.
    fn store_carried_span(
        &mut self,
        key: &str,
        c: CarriedAttempt,
        outcome: AttemptOutcome,
        failure: Option<&Failure>,
    ) {
        let mut attributes = serde_json::Map::new();
        attributes.insert("workflow.step.id".into(), key.into());
        attributes.insert("workflow.step.attempt".into(), c.attempt.into());
        attributes.insert("workflow.step.outcome".into(), outcome.as_str().into());
        let (status, message) = match failure {
            Some(f) => {
                attributes.insert("error.type".into(), f.error_type.text().into());
                ("error", Some(self.sched.redactor().text(&f.message)))
            }
            None => ("unset", None),
        };
        self.sched.push_write(Write::Span(Box::new(store::SpanRow {
            trace_id: c.trace_id,
            span_id: c.span_id,
            parent_span_id: Some(c.root_span_id),
            instance_id: self.id.clone(),
            run: c.run,
            name: format!("{}/{key}", self.wf.name),
            kind: "internal".into(),
            start_ns: c.start_ns,
            end_ns: telemetry::now_ns().max(c.start_ns),
            status: status.into(),
            status_message: message,
            attributes: serde_json::Value::Object(attributes),
            links: serde_json::json!([]),
        })));
    }
}

/// A `workflow:` attempt an earlier run began, still waiting on its child:
/// where its span was made, to be stored when the attempt ends.
#[derive(Debug, Clone)]
pub struct CarriedAttempt {
    pub attempt: i64,
    /// The run that began it, and that run's trace and root span.
    pub run: i64,
    pub trace_id: String,
    pub root_span_id: String,
    pub span_id: String,
    pub start_ns: i64,
}

/// The spans of the attempts in flight, by unit key: where the
/// scheduler's attempt span ids come from ([`SpanIds`]).
pub(super) struct AttemptSpans {
    workflow: String,
    id: InstanceId,
    trace_id: String,
    root_span_id: String,
    /// Unit key -> (span, its id, start ns).
    pub(super) open: HashMap<UnitKeyBuf, (tracing::Span, String, i64)>,
    /// `workflow:` attempts begun by earlier runs, by unit key.
    carried: HashMap<UnitKeyBuf, CarriedAttempt>,
}

impl AttemptSpans {
    pub(super) fn new(
        workflow: &str,
        id: &InstanceId,
        trace: &store::RunTrace,
        carried: HashMap<UnitKeyBuf, CarriedAttempt>,
    ) -> AttemptSpans {
        AttemptSpans {
            workflow: workflow.to_string(),
            id: id.clone(),
            trace_id: trace.0.clone(),
            root_span_id: trace.1.clone(),
            open: HashMap::new(),
            carried,
        }
    }

    /// A new span for an attempt of `key` (or its skip), child of the root.
    /// Named as the unit is shown (a matrix combination by its values).
    pub(super) fn new_span(&self, key: &ShownKey) -> tracing::Span {
        let span = tracing::info_span!(
            parent: None,
            "attempt",
            otel.name = format!("{}/{key}", self.workflow),
            workflow.name = self.workflow.as_str(),
            workflow.instance.id = self.id.as_str(),
            workflow.step.id = key.as_str(),
        );
        let _ = span.set_parent(recorder::parent_context(
            &self.trace_id,
            &self.root_span_id,
            false,
        ));
        span
    }

    /// Sets an attribute on the open span of the attempt of `key`.
    pub(super) fn annotate(&self, key: &str, name: &'static str, value: String) {
        if let Some((span, _, _)) = self.open.get(key) {
            span.set_attribute(name, value);
        }
    }

    /// The open span of the attempt of `key` (none if it has none).
    pub(super) fn open_span(&self, key: &str) -> tracing::Span {
        self.open
            .get(key)
            .map_or_else(tracing::Span::none, |(span, _, _)| span.clone())
    }
}

impl SpanIds for AttemptSpans {
    /// Opens the attempt's span on the first call.
    fn attempt(&mut self, key: &ShownKey) -> (String, i64) {
        if let Some((_, span_id, start_ns)) = self.open.get(&key.key) {
            return (span_id.clone(), *start_ns);
        }
        let span = self.new_span(key);
        let start_ns = telemetry::now_ns();
        let (_, span_id) = recorder::ids(&span);
        self.open
            .insert(key.key.clone(), (span, span_id.clone(), start_ns));
        (span_id, start_ns)
    }
}

/// The spans of `(trace id, instance, run)` of `workflow` that ended since
/// the last call, as writes, with secrets masked by `redactor`, except those
/// in `skip`; stored without the attributes the instance already says
/// ([`store::SpanRow::slim`]).
pub(in crate::engine) fn ended_spans(
    (trace_id, instance, run): (&str, &str, i64),
    workflow: &str,
    redactor: Option<&Redactor>,
    skip: &[String],
) -> Vec<Write> {
    recorder::take(trace_id, instance)
        .into_iter()
        .filter_map(|span| {
            let mut row = recorder::row(&span, run);
            if skip.contains(&row.span_id) {
                return None;
            }
            if let Some(r) = redactor.filter(|r| !r.is_empty()) {
                r.value(&mut row.attributes);
                row.status_message = row.status_message.map(|m| r.text(m.as_str()));
            }
            row.slim(workflow);
            Some(Write::Span(Box::new(row)))
        })
        .collect()
}
