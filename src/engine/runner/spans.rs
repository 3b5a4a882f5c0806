//! The run's spans: its root, one per attempt (started before the attempt
//! is recorded, so its id can travel with the attempt), `wf.commit` for a
//! commit that makes attempts durable (under the root, linked to them), and
//! the ended spans turned into writes with secrets masked.

use super::*;

impl<'o> Runner<'o> {
    /// Stores the spans of this run that ended since the last call (masking
    /// secrets), except those in `skip`.
    pub(super) fn flush_spans(&mut self, skip: &[String]) -> Result<(), EngineError> {
        let run = (self.trace.0.as_str(), self.id.as_str(), self.run);
        let spans =
            crate::engine::drive::ended_spans(run, &self.wf.name, Some(&self.redactor), skip);
        self.writes.extend(spans);
        Ok(())
    }

    /// The `wf.commit` span of the coming commit, when it makes attempts
    /// durable: a child of the run's root, since the commit is the run's
    /// (one transaction, made after those attempts ended, and possibly for
    /// several of them), with a link to each attempt's span (link attribute
    /// `workflow.step.id`). `db.system.name` names the backend (`sqlite`,
    /// `postgresql`). It ends when the caller drops it, after the commit.
    pub(super) fn commit_spans(&mut self, postgres: bool) -> Vec<tracing::Span> {
        let committing = std::mem::take(&mut self.committing);
        if committing.is_empty() {
            return Vec::new();
        }
        let system = if postgres { "postgresql" } else { "sqlite" };
        let span = tracing::info_span!(
            parent: None,
            "wf.commit",
            workflow.name = self.wf.name.as_str(),
            workflow.instance.id = self.id.as_str(),
            db.system.name = system,
            db.operation.name = "COMMIT",
        );
        let _ = span.set_parent(recorder::parent_context(
            &self.trace.0,
            &self.trace.1,
            false,
        ));
        for (key, attempt_span) in committing {
            if let Some(sc) = recorder::span_context(&self.trace.0, &attempt_span, false) {
                span.add_link_with_attributes(sc, vec![KeyValue::new("workflow.step.id", key)]);
            }
        }
        vec![span]
    }

    /// Ends the run's root span and stores it with whatever spans are pending.
    pub(in crate::engine) fn write_root_span(
        &mut self,
        outcome: &str,
        error: Option<&str>,
    ) -> Result<(), EngineError> {
        self.root
            .set_attribute("workflow.outcome", outcome.to_string());
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
    /// what it did (its process or HTTP call) beneath it.
    pub(super) fn write_attempt_span(
        &mut self,
        key: &str,
        attempt: i64,
        outcome: &str,
        failure: Option<&Failure>,
    ) -> Result<String, EngineError> {
        let (span, span_id) = match self.attempt_spans.remove(key) {
            Some((span, span_id, _)) => (span, span_id),
            None => {
                let span = self.attempt_span(key);
                let (_, span_id) = recorder::ids(&span);
                (span, span_id)
            }
        };
        span.set_attribute("workflow.step.attempt", attempt);
        span.set_attribute("workflow.step.outcome", outcome.to_string());
        if let Some(f) = failure {
            span.set_attribute("error.type", f.error_type.clone());
            span.set_status(Status::error(f.message.clone()));
        }
        drop(span);
        self.flush_spans(&[])?;
        Ok(span_id)
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
