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
use crate::vocab::{AttemptOutcome, RunEnd};

impl<'o> Runner<'o> {
    /// Stores the spans of this run that ended since the last call (masking
    /// secrets), except those in `skip`.
    pub(super) fn flush_spans(&mut self, skip: &[String]) -> Result<(), EngineError> {
        let run = (self.trace.0.as_str(), self.id.as_str(), self.run);
        let spans =
            crate::engine::drive::ended_spans(run, &self.wf.name, Some(&self.redactor), skip);
        self.sched.writes.extend(spans);
        Ok(())
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
    pub(in crate::engine) fn write_root_span(
        &mut self,
        outcome: RunEnd,
        error: Option<&str>,
    ) -> Result<(), EngineError> {
        self.root
            .set_attribute("workflow.outcome", outcome.as_str());
        if let Some(e) = error {
            self.root.set_status(Status::error(e.to_string()));
        }
        // An attempt still open has no outcome: its row stays open, and the
        // next run records its span as crashed, with the same id.
        let open: Vec<String> = self
            .attempt_spans
            .drain()
            .map(|(_, (_, span_id, _))| span_id)
            .collect();
        drop(std::mem::replace(&mut self.root, tracing::Span::none()));
        self.flush_spans(&open)
    }

    /// A new span for an attempt of `key` (or its skip), child of the root.
    pub(super) fn attempt_span(&self, key: &str) -> tracing::Span {
        let span = tracing::info_span!(
            parent: None,
            "attempt",
            otel.name = format!("{}/{key}", self.wf.name),
            workflow.name = self.wf.name.as_str(),
            workflow.instance.id = self.id.as_str(),
            workflow.step.id = key,
        );
        let _ = span.set_parent(recorder::parent_context(
            &self.trace.0,
            &self.trace.1,
            false,
        ));
        span
    }

    /// Ends the span of one finished attempt and stores it, with the spans of
    /// what it did (its process or HTTP call) beneath it. A successful one
    /// (`outcome` `ok`) is not ended here: it waits for the commit that makes
    /// its result durable ([`Runner::commit_spans`]).
    pub(super) fn write_attempt_span(
        &mut self,
        key: &str,
        attempt: i64,
        outcome: AttemptOutcome,
        failure: Option<&Failure>,
    ) -> Result<(), EngineError> {
        let (span, span_id) = match self.attempt_spans.remove(key) {
            Some((span, span_id, _)) => (span, span_id),
            None => {
                let span = self.attempt_span(key);
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
        if outcome == AttemptOutcome::Ok {
            self.committing.push((span_id, span));
        } else {
            drop(span);
        }
        self.flush_spans(&[])
    }

    /// The span id (and start) of the attempt about to begin; its span starts
    /// on the first call.
    pub(super) fn open_attempt_span(&mut self, unit: &Unit) -> (String, i64) {
        let key = unit.key(&self.wf);
        if let Some((_, span_id, start_ns)) = self.attempt_spans.get(&key) {
            return (span_id.clone(), *start_ns);
        }
        let span = self.attempt_span(&key);
        let start_ns = telemetry::now_ns();
        let (_, span_id) = recorder::ids(&span);
        self.attempt_spans
            .insert(key, (span, span_id.clone(), start_ns));
        (span_id, start_ns)
    }

    /// W3C trace context (`traceparent`, `tracestate`) of the attempt about
    /// to begin, for its process or request, with the caller's flags and state.
    pub(super) fn attempt_trace_context(&self, unit: &Unit) -> Vec<(String, String)> {
        self.attempt_spans
            .get(&unit.key(&self.wf))
            .map(|(_, span_id, _)| self.trace_context_of(span_id))
            .unwrap_or_default()
    }

    /// `traceparent` (and `tracestate`) naming `span_id` of this run's trace.
    pub(super) fn trace_context_of(&self, span_id: &str) -> Vec<(String, String)> {
        telemetry::inject(&self.trace.0, span_id, self.caller.0, &self.caller.1)
    }
}
