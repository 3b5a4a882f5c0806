//! Steps that run as units of a list: a `for_each` step's items and a
//! `matrix` step's combinations. The list is pinned when the step starts
//! (a matrix expanded by `workflow::matrix`), the step settles with the
//! list of outputs once every unit ended, and a failed combination stops
//! the others under `fail_fast`. Also how a combination is shown: by its
//! values, from the combinations its step pinned.

use super::attempt::failure_reason;
use super::*;
use crate::store::Sparse;
use crate::vocab::{AttemptOutcome, ShownKey};

impl Scheduler {
    /// Pins a `for_each` step's list or a `matrix` step's combinations
    /// (first time) or, once every item ended, settles the step with the
    /// list of item outputs.
    pub(super) fn fan_out(
        &mut self,
        unit: &Unit,
        now: Timestamp,
        spans: &mut dyn SpanIds,
    ) -> Started {
        let step = &self.wf.clone().steps[unit.idx];
        let Some(items) = self.record(unit).fan().cloned() else {
            let pinned = match (&step.for_each, &step.matrix) {
                (Some(list), _) => self.for_each_list(list).map(|mut items| {
                    for v in &mut items {
                        self.redactor.value(v);
                    }
                    Sparse::from(Value::Array(items))
                }),
                (None, Some(matrix)) => self.combinations(matrix).map(|combos| {
                    let mut combos: Vec<Value> = combos.into_iter().map(Value::Object).collect();
                    for v in &mut combos {
                        self.redactor.value(v);
                    }
                    StepRow::pinned_matrix(combos)
                }),
                (None, None) => Ok(Sparse::default()),
            };
            let pinned = match pinned {
                Ok(p) => p,
                Err(f) => {
                    self.fail_now(unit, f, now, spans);
                    return Started::Settled;
                }
            };
            let rec = self.record(unit);
            rec.items = pinned;
            rec.status = StepStatus::Running;
            rec.started_at = Some(now);
            self.put(unit);
            return Started::Settled;
        };
        // Every item has ended (the scheduler only offers the step itself then).
        let mut outputs = Vec::with_capacity(items.len());
        let mut failed_item = None;
        for i in 0..items.len() {
            let key = format!("{}[{i}]", step.id);
            match self.records.get(key.as_str()) {
                Some(r) if r.status == StepStatus::Completed => outputs.push(r.output.clone()),
                Some(r) => {
                    if r.status == StepStatus::Failed && failed_item.is_none() {
                        let item = Unit {
                            idx: unit.idx,
                            item: Some(i),
                            compensation: false,
                        };
                        failed_item = Some((self.shown(&item), r.clone()));
                    }
                    outputs.push(Value::Null);
                }
                None => return Started::Blocked,
            }
        }
        self.seq += 1;
        let seq = self.seq;
        let rec = self.record(unit);
        rec.output = Value::Array(outputs);
        rec.finished_at = Some(now);
        rec.attempts = rec.attempts.max(0);
        match &failed_item {
            None => {
                rec.status = StepStatus::Completed;
                rec.outcome = Some(AttemptOutcome::Ok);
                // A retried failure's words go with it.
                rec.error_type = None;
                rec.error_message = None;
                rec.seq = Some(seq);
            }
            Some((_, r)) => {
                rec.status = StepStatus::Failed;
                rec.outcome = Some(AttemptOutcome::Failed);
                rec.error_type = r.error_type.clone();
                rec.error_message = r.error_message.clone();
            }
        }
        let status = rec.status;
        let output = rec.output.clone();
        self.put(unit);
        self.ctx.set_step_result(&step.id, status, &output);
        self.note(Note::FanOutFinished {
            key: UnitKeyBuf::from(UnitKey::step(&step.id)),
            items: items.len(),
        });
        if let Some((key, r)) = failed_item
            && !step.continue_on_error
            && self.failed.is_none()
        {
            self.failed = Some(failure_reason(&key, &r));
        }
        Started::Settled
    }

    /// A `for_each` step's list, evaluated.
    fn for_each_list(&self, list: &Value) -> Result<Vec<Value>, Failure> {
        let evaluated = match list {
            Value::String(s) => Template::parse(s)
                .map_err(|e| e.to_string())
                .and_then(|t| t.render_value(self.ctx.value()).map_err(|e| e.to_string())),
            other => template::render_tree(other, self.ctx.value()).map_err(|e| e.to_string()),
        };
        match evaluated {
            Ok(Value::Array(items)) => Ok(items),
            Ok(other) => Err(Failure::new(
                ErrorType::Expression,
                format!("`for_each` gave {}, not a list", kind_of(&other)),
            )),
            Err(e) => Err(Failure::new(
                ErrorType::Expression,
                format!("`for_each`: {e}"),
            )),
        }
    }

    /// A `matrix` step's combinations: its expressions rendered, then
    /// expanded as validation expands a matrix written without any.
    fn combinations(&self, matrix: &Value) -> Result<Vec<Map<String, Value>>, Failure> {
        let rendered = match matrix {
            Value::String(s) => Template::parse(s)
                .map_err(|e| e.to_string())
                .and_then(|t| t.render_value(self.ctx.value()).map_err(|e| e.to_string())),
            other => template::render_tree(other, self.ctx.value()).map_err(|e| e.to_string()),
        }
        .map_err(|e| Failure::new(ErrorType::Expression, format!("`matrix`: {e}")))?;
        crate::workflow::matrix::expand(&rendered)
            .map_err(|e| Failure::new(ErrorType::Expression, format!("`matrix`: {e}")))
    }

    /// Combination `unit` of a `matrix` step failed for good, with
    /// `fail_fast`: the step fails now (and the workflow, without
    /// `continue_on_error`), no other combination starts, those running are
    /// stopped and those waiting on a child have it canceled; the others
    /// end `canceled`.
    pub(super) fn fail_fast(&mut self, unit: &Unit, rec: &StepRow, now: Timestamp) {
        let wf = self.wf.clone();
        let step = &wf.steps[unit.idx];
        let shown = self.shown(unit);
        let parent = Unit::step(unit.idx);
        // Once is enough: a combination failing after the step did changes nothing.
        if self.record(&parent).status.is_ended() {
            return;
        }
        let n = self.record(&parent).fan().map_or(0, Vec::len);
        let p = self.record(&parent);
        p.status = StepStatus::Failed;
        p.outcome = Some(AttemptOutcome::Failed);
        p.error_type = rec.error_type.clone();
        p.error_message = Some(format!("combination {shown} failed"));
        p.finished_at = Some(now);
        self.put(&parent);
        self.ctx
            .set_step_result(&step.id, StepStatus::Failed, &Value::Null);
        if !step.continue_on_error && self.failed.is_none() {
            self.failed = Some(failure_reason(&shown, rec));
        }
        let failure = self.fail_fast_failure(unit.idx);
        let mut stop = Vec::new();
        for i in (0..n).filter(|&i| Some(i) != unit.item) {
            let other = Unit {
                idx: unit.idx,
                item: Some(i),
                compensation: false,
            };
            let key = other.key(&wf);
            if self.running.contains_key(key.as_str()) {
                self.stopping.insert(key.clone());
                stop.push(key);
            } else if self.open_children.contains(key.as_str()) {
                self.stopping.insert(key.clone());
                if self.children_ending.insert(key.clone())
                    && let Some(r) = self.records.get(key.as_str())
                {
                    let id = self.child_id(&key, r.attempts);
                    self.effects.push(Effect::EndChild {
                        id,
                        terminate: false,
                    });
                }
            } else if !self
                .records
                .get(key.as_str())
                .is_some_and(|r| r.status.is_ended())
            {
                let r = self.record(&other);
                r.status = StepStatus::Canceled;
                r.retry_at = None;
                r.error_type = Some(failure.error_type.clone());
                r.error_message = Some(failure.message.clone());
                r.finished_at = Some(now);
                self.put(&other);
            }
        }
        if !stop.is_empty() {
            self.effects.push(Effect::StopUnits { keys: stop });
        }
    }

    /// Why `fail_fast` stopped a combination of step `idx`.
    pub(super) fn fail_fast_failure(&self, idx: usize) -> Failure {
        let id = &self.wf.steps[idx].id;
        let why = self
            .records
            .get(id.as_str())
            .and_then(|r| r.error_message.clone())
            .unwrap_or_else(|| "another combination failed".into());
        Failure::new(
            ErrorType::Canceled,
            format!("stopped by `fail_fast`: {why}"),
        )
    }

    /// `key` with how it is shown (see [`Scheduler::shown`]).
    pub fn shown_key(&self, key: UnitKeyBuf) -> ShownKey {
        let parts = key.parts();
        let label = parts
            .item
            .and_then(|_| self.records.get(parts.step)?.unit_label(parts));
        ShownKey { key, label }
    }

    /// How `unit` is shown: a matrix combination by its values
    /// (`build[os=linux]`, `build[os=linux]:compensate`), else by its key.
    pub(super) fn shown(&self, unit: &Unit) -> String {
        self.shown_key(unit.key(&self.wf)).to_string()
    }
}

/// How a value that is not a list is named in an error.
fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Object(_) => "an object",
        Value::Array(_) => "a list",
    }
}
