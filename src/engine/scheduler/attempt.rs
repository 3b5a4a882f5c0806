//! An attempt's lifecycle, decided: starting a unit (its `if`, a `for_each`
//! expansion, a pure step settled at once, or an attempt recorded and its
//! job rendered for the driver to spawn) and settling its result (output,
//! state patch, retry or failure, compensation bookkeeping) into writes and
//! effects. The time is the caller's `now`; span ids come from [`SpanIds`].

use super::*;
use crate::vocab::AttemptOutcome;

/// What a unit executes: a step's own action, or its compensation.
pub(super) struct Exec<'a> {
    pub action: &'a Action,
    pub dir: Option<&'a str>,
    pub env: &'a [(String, Template)],
    pub timeout: Option<Duration>,
    pub retry: &'a RetryPolicy,
    pub errors: Option<&'a BTreeMap<i32, String>>,
}

/// A child's compensation (see `start_child_compensation`) is one attempt:
/// a second would find the child no longer completed.
static ONCE: RetryPolicy = RetryPolicy::ONE_ATTEMPT;

pub(super) fn exec_of<'a>(step: &'a Step, unit: &Unit) -> Exec<'a> {
    match (&step.compensate, unit.compensation) {
        (None, true) if step.undone_by_its_child() => Exec {
            action: &step.action,
            dir: None,
            env: &[],
            timeout: None,
            retry: &ONCE,
            errors: None,
        },
        (Some(c), true) => Exec {
            action: &c.action,
            dir: c.dir.as_deref(),
            env: &c.env,
            timeout: c.timeout,
            retry: &c.retry,
            errors: None,
        },
        _ => Exec {
            action: &step.action,
            dir: step.dir.as_deref(),
            env: &step.env,
            timeout: step.timeout,
            retry: &step.retry,
            errors: Some(&step.errors),
        },
    }
}

pub(super) fn ok(output: Value) -> AttemptResult {
    AttemptResult {
        outcome: Ok(output),
        ..AttemptResult::default()
    }
}

/// Why the workflow failed, when `key`'s row failed it.
pub(super) fn failure_reason(key: &str, rec: &StepRow) -> String {
    format!(
        "step `{key}` failed{}",
        match (&rec.error_type, &rec.error_message) {
            (Some(t), Some(m)) => format!(" ({t}: {m})"),
            (Some(t), None) => format!(" ({t})"),
            _ => String::new(),
        }
    )
}

impl Scheduler {
    /// Sets `item`, `index` and `step` in the expression context for `unit`
    /// (`attempt`: the one settling, else the one about to start).
    pub(super) fn enter(&mut self, unit: &Unit, attempt: Option<i64>) {
        let attempt = attempt.unwrap_or(self.record(unit).attempts + 1);
        let key = unit.key(&self.wf);
        // Copied only when it changed: a large state is not cloned per unit.
        if !self.ctx_state_current {
            self.ctx.set("state", self.state.clone());
            self.ctx_state_current = true;
        }
        self.ctx.set(
            "step",
            json!({ "id": self.wf.steps[unit.idx].id, "key": key, "attempt": attempt }),
        );
        let step = &self.wf.steps[unit.idx];
        match unit.item {
            Some(i) => {
                let item = self
                    .records
                    .get(step.id.as_str())
                    .and_then(|r| r.fan()?.get(i).cloned())
                    .unwrap_or(Value::Null);
                if step.matrix.is_some() {
                    self.ctx.set("matrix", item);
                    self.ctx.remove("item");
                    self.ctx.remove("index");
                } else {
                    self.ctx.set("item", item);
                    self.ctx.set("index", json!(i));
                    self.ctx.remove("matrix");
                }
            }
            None => {
                self.ctx.remove("item");
                self.ctx.remove("index");
                self.ctx.remove("matrix");
            }
        }
    }

    /// Starts `unit`: evaluates `if`, expands a `for_each`, then records an
    /// attempt and renders its job, or settles it at once when it needs no process.
    pub(super) fn start(
        &mut self,
        unit: &Unit,
        now: Timestamp,
        spans: &mut dyn SpanIds,
    ) -> Started {
        let wf = self.wf.clone();
        let step = &wf.steps[unit.idx];
        self.enter(unit, None);
        // Never started, or reset by `wf restart` (which keeps the attempt
        // count): a retry or a resumed interrupted attempt keeps `started_at`.
        let first_time = {
            let rec = self.record(unit);
            rec.status == StepStatus::Pending && rec.started_at.is_none()
        };

        if !unit.compensation && unit.item.is_none() {
            if first_time && let Some(cond) = &step.condition {
                // What the status functions see.
                self.ctx.set(
                    "__status",
                    json!({
                        "failure": self.upstream_failed(unit.idx),
                        "cancelled": self.stop == Some(Stop::Cancel),
                    }),
                );
                match self.eval_condition(cond) {
                    Ok(true) => {}
                    Ok(false) => {
                        self.skip(unit, now);
                        return Started::Settled;
                    }
                    Err(e) => {
                        let f = Failure::new(ErrorType::Expression, format!("`if`: {e}"));
                        self.fail_now(unit, f, now, spans);
                        return Started::Settled;
                    }
                }
            }
            if step.fans_out() {
                return self.fan_out(unit, now, spans);
            }
        }

        // A `workflow:` step without a `compensate:` is undone by its child.
        if unit.compensation && step.undone_by_its_child() {
            return self.start_child_compensation(unit, now, spans);
        }

        // A `cache:` step's attempt may not be needed.
        if let Some(started) = self.start_cached(unit, now, spans) {
            return started;
        }
        // A `lock:` step's attempt starts once the driver took its lock.
        if let Some(lock) = &step.lock
            && matches!(exec_of(step, unit).action, Action::Run(_) | Action::Http(_))
        {
            let key = unit.key(&self.wf);
            if !self.locks_held.contains(&key) {
                if self.locks_asked.contains(&key) {
                    return Started::Blocked;
                }
                match lock.key.render_text(self.ctx.value()) {
                    Ok(name) => {
                        let name = self.redactor.text(&name);
                        self.locks_asked.insert(key.clone());
                        self.effects.push(Effect::TakeLock {
                            key,
                            lock: name,
                            limit: lock.limit,
                        });
                        return Started::Blocked;
                    }
                    Err(e) => {
                        let f = Failure::new(ErrorType::Expression, format!("`lock.key`: {e}"));
                        self.fail_now(unit, f, now, spans);
                        return Started::Settled;
                    }
                }
            }
        }
        let exec = exec_of(step, unit);
        match exec.action {
            Action::Noop => {
                let attempt = self.begin_attempt(unit, true, now, spans);
                let out = ok(Value::Object(Map::new()));
                self.settle_result(unit, attempt, out, Duration::ZERO, now);
                Started::Settled
            }
            Action::Sleep(spec) => self.start_sleep(unit, spec, now, spans),
            Action::WaitForEvent { name, timeout } => {
                self.start_wait(unit, name, *timeout, now, spans)
            }
            Action::Run(cmd) => {
                let (span_id, _) = spans.attempt(&self.shown_key(unit.key(&self.wf)));
                let job = self.render_shell(unit, &exec, cmd, &span_id);
                self.launch(unit, job.map(Job::Shell), now, spans)
            }
            Action::Http(spec) => {
                let job = self.render_http(unit, &exec, spec);
                self.launch(unit, job.map(Job::Http), now, spans)
            }
            Action::Workflow(call) => self.start_child(unit, call, now, spans),
        }
    }

    pub(super) fn launch(
        &mut self,
        unit: &Unit,
        job: Result<Job, Failure>,
        now: Timestamp,
        spans: &mut dyn SpanIds,
    ) -> Started {
        let attempt = self.begin_attempt(unit, false, now, spans);
        match job {
            Ok(job) => Started::Spawn(Box::new(job), attempt),
            Err(f) => {
                let failed = AttemptResult::failed(f);
                self.settle_result(unit, attempt, failed, Duration::ZERO, now);
                Started::Settled
            }
        }
    }

    /// Fails `unit` without running anything (its inputs could not be evaluated).
    pub(super) fn fail_now(
        &mut self,
        unit: &Unit,
        f: Failure,
        now: Timestamp,
        spans: &mut dyn SpanIds,
    ) {
        let attempt = self.begin_attempt(unit, true, now, spans);
        self.settle_result(unit, attempt, AttemptResult::failed(f), Duration::ZERO, now);
    }

    /// Skips `unit`, whose `if` was false.
    pub(super) fn skip(&mut self, unit: &Unit, now: Timestamp) {
        let key = unit.key(&self.wf);
        let rec = self.record(unit);
        rec.status = StepStatus::Skipped;
        rec.outcome = Some(AttemptOutcome::Skipped);
        rec.started_at = Some(now);
        rec.finished_at = Some(now);
        self.put(unit);
        self.ctx
            .set_step_result(&key, StepStatus::Skipped, &Value::Null);
        self.effects.push(Effect::Skipped { key: key.clone() });
        self.note(Note::StepSkipped { key });
    }

    /// Records the attempt row (durably, with the enclosing commit) before anything runs.
    ///
    /// `settles_now`: the attempt ends within this same transaction (no process),
    /// so the step row is written once, by the settle, instead of twice.
    pub(super) fn begin_attempt(
        &mut self,
        unit: &Unit,
        settles_now: bool,
        now: Timestamp,
        spans: &mut dyn SpanIds,
    ) -> i64 {
        let key = unit.key(&self.wf);
        let (span_id, start_ns) = spans.attempt(&self.shown_key(key.clone()));
        let run = self.run.number;
        let rec = self.record(unit);
        rec.attempts += 1;
        rec.status = StepStatus::Running;
        rec.retry_at = None;
        if rec.started_at.is_none() {
            rec.started_at = Some(now);
        }
        let attempt = rec.attempts;
        self.writes.push(Write::StartAttempt {
            key: key.clone(),
            attempt,
            run,
            started_at: now,
            span_id,
            started_ns: start_ns,
        });
        if !settles_now {
            self.put(unit);
        }
        self.note(Note::StepStarted { key, attempt });
        attempt
    }
    /// Settles an attempt that ended: it no longer runs, and its result is
    /// judged in the context it started in.
    pub(super) fn settle(&mut self, s: Settled, now: Timestamp) {
        let key = s.unit.key(&self.wf);
        self.running.remove(&key);
        self.enter(&s.unit, Some(s.attempt));
        if let Some(state) = self.start_states.remove(&key) {
            self.ctx.set("state", state);
            self.ctx_state_current = false;
        }
        self.settle_result(&s.unit, s.attempt, s.result, s.elapsed, now);
    }

    /// Records an attempt this run stopped (interrupted or canceled, its
    /// outcome the failure's type): it does not count towards `max_attempts`.
    fn stopped_attempt(
        &mut self,
        unit: &Unit,
        (key, attempt): (&UnitKeyBuf, i64),
        mut end: AttemptEnd,
        failure: &Failure,
        elapsed: Duration,
    ) {
        let outcome = match failure.error_type {
            ErrorType::Canceled => AttemptOutcome::Canceled,
            _ => AttemptOutcome::Interrupted,
        };
        self.uncounted.entry(key.clone()).or_default().push(attempt);
        end.outcome = outcome;
        end.error_type = Some(failure.error_type.clone());
        end.error_message = Some(failure.message.clone());
        self.writes.push(Write::EndAttempt {
            key: key.clone(),
            attempt,
            end,
        });
        self.record(unit).outcome = Some(outcome);
        self.attempt_ended(key, attempt, outcome, Some(failure), elapsed);
    }

    /// Commits an attempt's result: on success output, state patch and outcome
    /// together; on failure only the attempt record, and the retry decision.
    pub(super) fn settle_result(
        &mut self,
        unit: &Unit,
        attempt: i64,
        mut result: AttemptResult,
        elapsed: Duration,
        now: Timestamp,
    ) {
        let wf = self.wf.clone();
        let step = &wf.steps[unit.idx];
        let exec = exec_of(step, unit);
        let key = unit.key(&wf);
        // Its lock is given back with the attempt's end, in the commit that
        // records it (a retry takes it again).
        if self.locks_held.remove(&key) {
            self.writes.push(Write::ReleaseLock { key: key.clone() });
        }
        // A retry of a `cache:` unit looks its key up again.
        self.cache.remove(&key);
        // Nothing a secret's value appears in leaves this function unmasked.
        if !self.redactor.is_empty() {
            match &mut result.outcome {
                Ok(v) => self.redactor.value(v),
                Err(f) => f.message = self.redactor.text(&f.message),
            }
            result.stdout = self.redactor.bytes(std::mem::take(&mut result.stdout));
            result.stderr = self.redactor.bytes(std::mem::take(&mut result.stderr));
        }
        // Compute the state patch first: if it cannot be rendered, the attempt fails.
        let mut new_state = None;
        if let Ok(output) = &result.outcome
            && !unit.compensation
            && let Some(patch) = &step.set_state
        {
            self.ctx.set("output", output.clone());
            let rendered = template::render_tree(patch, self.ctx.value());
            self.ctx.remove("output");
            match rendered {
                Ok(mut p) => {
                    self.redactor.value(&mut p);
                    let mut s = self.state.clone();
                    merge_patch(&mut s, &p);
                    new_state = Some((s, p));
                }
                Err(e) => {
                    result.outcome = Err(Failure::new(
                        ErrorType::Expression,
                        format!("`set_state`: {e}"),
                    ));
                }
            }
        }

        let mut end = AttemptEnd {
            outcome: AttemptOutcome::Ok,
            error_type: None,
            error_message: None,
            exit_code: result.exit_code.map(i64::from),
            finished_at: now,
            stdout: std::mem::take(&mut result.stdout),
            stderr: std::mem::take(&mut result.stderr),
        };
        // An attempt stopped by us takes its reason from why we stopped it.
        let stopped = if result.interrupted { self.stop } else { None };
        // A combination `fail_fast` stopped (its process, or its child)
        // ends `canceled`, unless it succeeded first.
        let stopped_fast = self.stopping.remove(&key) && result.outcome.is_err();
        match result.outcome {
            Ok(output) => {
                self.writes.push(Write::EndAttempt {
                    key: key.clone(),
                    attempt,
                    end,
                });
                self.seq += 1;
                let seq = self.seq;
                let rec = self.record(unit);
                rec.status = StepStatus::Completed;
                rec.outcome = Some(AttemptOutcome::Ok);
                rec.error_type = None;
                rec.error_message = None;
                rec.output = output;
                rec.finished_at = Some(now);
                rec.retry_at = None;
                rec.seq = Some(seq);
                // The patch is kept with the result: `wf restart` rebuilds
                // the state from the patches of the steps it keeps.
                rec.state_patch = new_state
                    .as_ref()
                    .map_or(Value::Null, |(_, p)| p.clone())
                    .into();
                let output = rec.output.clone();
                self.put(unit);
                let patch = new_state.as_ref().map_or(Value::Null, |(_, p)| p.clone());
                if let Some(w) = self.cache_entry_of(unit, attempt, &output, &patch, now) {
                    self.writes.push(w);
                }
                // Written; not kept in memory (a later write of the row
                // keeps it: `COALESCE` in the store). 10,000 patches held
                // cost 4 MiB of a 10,000-step run.
                self.record(unit).state_patch = Default::default();
                if let Some((s, _)) = new_state {
                    // Written once, just before this transaction commits.
                    self.state = s;
                    self.state_dirty = true;
                    self.ctx_state_current = false;
                }
                if unit.item.is_none() && !unit.compensation {
                    self.ctx
                        .set_step_result(&key, StepStatus::Completed, &output);
                }
                self.attempt_ended(&key, attempt, AttemptOutcome::Ok, None, elapsed);
            }
            // Stopped by `fail_fast`: another combination failed.
            Err(_) if stopped_fast => {
                let failure = self.fail_fast_failure(unit.idx);
                self.stopped_attempt(unit, (&key, attempt), end, &failure, elapsed);
                let rec = self.record(unit);
                rec.status = StepStatus::Canceled;
                rec.error_type = Some(failure.error_type.clone());
                rec.error_message = Some(failure.message.clone());
                rec.finished_at = Some(now);
                self.put(unit);
            }
            // Stopped by us, not failed: the attempt does not count.
            Err(failure) if stopped == Some(Stop::Signal) => {
                let failure = Failure::new(ErrorType::Interrupted, failure.message);
                self.stopped_attempt(unit, (&key, attempt), end, &failure, elapsed);
                let rec = self.record(unit);
                rec.status = StepStatus::Pending;
                self.put(unit);
            }
            Err(_) if stopped == Some(Stop::Cancel) => {
                let failure = Failure::new(ErrorType::Canceled, "the instance was canceled".into());
                self.stopped_attempt(unit, (&key, attempt), end, &failure, elapsed);
                let rec = self.record(unit);
                rec.status = StepStatus::Canceled;
                rec.error_type = Some(failure.error_type.clone());
                rec.finished_at = Some(now);
                self.put(unit);
            }
            Err(failure) => {
                let failure = if stopped == Some(Stop::Deadline) {
                    Failure::new(
                        ErrorType::Timeout,
                        "stopped: the workflow's timeout was reached".into(),
                    )
                } else {
                    failure
                };
                let budget_base = self.record(unit).budget_base;
                // Counts this attempt too: it is recorded (outcome pending) already.
                let used = self.budget_used(&key, budget_base);
                let verdict = retry::judge(
                    &failure.error_type,
                    exec.retry,
                    matches!(exec.action, Action::Http(_)),
                    stopped.is_some(),
                    used,
                    result.retry_after,
                );
                let outcome = verdict.outcome;
                end.outcome = outcome;
                end.error_type = Some(failure.error_type.clone());
                end.error_message = Some(failure.message.clone());
                self.writes.push(Write::EndAttempt {
                    key: key.clone(),
                    attempt,
                    end,
                });
                let rec = self.record(unit);
                rec.outcome = Some(outcome);
                rec.error_type = Some(failure.error_type.clone());
                rec.error_message = Some(failure.message.clone());
                if let Some(delay) = verdict.retry_in {
                    rec.status = StepStatus::Retrying;
                    rec.retry_at = Some(now.plus(delay));
                } else {
                    rec.status = StepStatus::Failed;
                    rec.finished_at = Some(now);
                    rec.retry_at = None;
                }
                let rec = rec.clone();
                self.put(unit);
                self.attempt_ended(&key, attempt, outcome, Some(&failure), elapsed);
                if let Some(delay) = verdict.retry_in {
                    self.note(Note::StepRetrying {
                        key: key.clone(),
                        next_attempt: attempt + 1,
                        try_n: used + 1,
                        max_attempts: exec.retry.max_attempts,
                        delay,
                    });
                }
                if verdict.retry_in.is_none() && !unit.compensation {
                    if unit.item.is_none() {
                        self.ctx
                            .set_step_result(&key, StepStatus::Failed, &Value::Null);
                    }
                    // A failed combination stops the others (`fail_fast`),
                    // or the step fails once they all ended (`fan_out`).
                    if unit.item.is_some() && step.matrix.is_some() {
                        if step.fail_fast {
                            self.fail_fast(unit, &rec, now);
                        }
                    } else if !step.continue_on_error {
                        if self.failed.is_none() {
                            self.failed = Some(failure_reason(&key, &rec));
                        }
                        // A failed item fails its for_each step at once (no more items start).
                        if unit.item.is_some() {
                            let parent = Unit::step(unit.idx);
                            let p = self.record(&parent);
                            p.status = StepStatus::Failed;
                            p.outcome = Some(AttemptOutcome::Failed);
                            p.error_type = rec.error_type.clone();
                            p.error_message = Some(format!("item {key} failed"));
                            p.finished_at = Some(now);
                            self.put(&parent);
                            self.ctx
                                .set_step_result(&step.id, StepStatus::Failed, &Value::Null);
                        }
                    }
                }
            }
        }
    }

    /// An attempt ended as `outcome`: its span ends (a successful one once
    /// the commit that makes it durable returned) and the observer hears.
    pub(super) fn attempt_ended(
        &mut self,
        key: &UnitKeyBuf,
        attempt: i64,
        outcome: AttemptOutcome,
        failure: Option<&Failure>,
        elapsed: Duration,
    ) {
        self.effects.push(Effect::AttemptEnded {
            key: key.clone(),
            attempt,
            outcome,
            failure: failure.cloned(),
        });
        self.note(Note::StepFinished {
            key: key.clone(),
            attempt,
            outcome,
            failure: failure.cloned(),
            elapsed,
        });
    }
}
