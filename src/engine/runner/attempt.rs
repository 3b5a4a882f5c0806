//! An attempt's lifecycle: starting a unit (its `if`, a `for_each`
//! expansion, a pure step settled at once, or an attempt recorded and its
//! process or request spawned) and settling its result (output, state patch,
//! retry or failure, compensation bookkeeping) into writes.

use super::*;
use crate::vocab::{AttemptOutcome, ErrorType, StepStatus, Timestamp};

impl<'o> Runner<'o> {
    /// Sets `item`, `index` and `step` in the expression context for `unit`
    /// (`attempt`: the one settling, else the one about to start).
    pub(super) fn enter(&mut self, unit: &Unit, attempt: Option<i64>) {
        let attempt = attempt.unwrap_or(self.sched.record(unit).attempts + 1);
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
        match unit.item {
            Some(i) => {
                let item = self
                    .sched
                    .records
                    .get(&self.wf.steps[unit.idx].id)
                    .and_then(|r| r.items.get(i).cloned())
                    .unwrap_or(Value::Null);
                self.ctx.set("item", item);
                self.ctx.set("index", json!(i));
            }
            None => {
                self.ctx.remove("item");
                self.ctx.remove("index");
            }
        }
    }

    /// Starts `unit`: evaluates `if`, expands a `for_each`, then records an
    /// attempt and renders its job, or settles it at once when it needs no process.
    pub(super) fn start(&mut self, unit: &Unit) -> Result<Started, EngineError> {
        let wf = self.wf.clone();
        let step = &wf.steps[unit.idx];
        self.enter(unit, None);
        // Never started, or reset by `wf restart` (which keeps the attempt
        // count): a retry or a resumed interrupted attempt keeps `started_at`.
        let first_time = {
            let rec = self.sched.record(unit);
            rec.status == StepStatus::Pending && rec.started_at.is_none()
        };

        if !unit.compensation && unit.item.is_none() {
            if first_time && let Some(cond) = &step.condition {
                // What the status functions see.
                self.ctx.set(
                    "__status",
                    json!({
                        "failure": self.sched.upstream_failed(unit.idx),
                        "cancelled": self.sched.stop == Some(Stop::Cancel),
                    }),
                );
                match self.eval_condition(cond) {
                    Ok(true) => {}
                    Ok(false) => {
                        self.skip(unit)?;
                        return Ok(Started::Settled);
                    }
                    Err(e) => {
                        let f = Failure::new(ErrorType::Expression, format!("`if`: {e}"));
                        self.fail_now(unit, f)?;
                        return Ok(Started::Settled);
                    }
                }
            }
            if let Some(list) = &step.for_each {
                return self.fan_out(unit, list);
            }
        }

        let exec = exec_of(step, unit);
        match exec.action {
            Action::Noop => {
                let attempt = self.begin_attempt(unit, true)?;
                self.settle_result(unit, attempt, ok(Value::Object(Map::new())), Duration::ZERO)?;
                Ok(Started::Settled)
            }
            Action::Sleep(spec) => self.start_sleep(unit, spec),
            Action::WaitForEvent { name, timeout } => self.start_wait(unit, name, *timeout),
            Action::Run(cmd) => {
                self.open_attempt_span(unit);
                let job = self.render_shell(unit, &exec, cmd);
                self.launch(unit, job.map(Job::Shell))
            }
            Action::Http(spec) => {
                self.open_attempt_span(unit);
                let job = self.render_http(unit, &exec, spec);
                self.launch(unit, job.map(Job::Http))
            }
        }
    }

    pub(super) fn launch(
        &mut self,
        unit: &Unit,
        job: Result<Job, Failure>,
    ) -> Result<Started, EngineError> {
        let attempt = self.begin_attempt(unit, false)?;
        match job {
            Ok(job) => Ok(Started::Spawn(Box::new(job), attempt)),
            Err(f) => {
                self.settle_result(unit, attempt, AttemptResult::failed(f), Duration::ZERO)?;
                Ok(Started::Settled)
            }
        }
    }

    /// Fails `unit` without running anything (its inputs could not be evaluated).
    pub(super) fn fail_now(&mut self, unit: &Unit, f: Failure) -> Result<(), EngineError> {
        let attempt = self.begin_attempt(unit, true)?;
        self.settle_result(unit, attempt, AttemptResult::failed(f), Duration::ZERO)
    }

    pub(super) fn skip(&mut self, unit: &Unit) -> Result<(), EngineError> {
        let now = store::now();
        let key = unit.key(&self.wf);
        let rec = self.sched.record(unit);
        rec.status = StepStatus::Skipped;
        rec.outcome = Some(AttemptOutcome::Skipped);
        rec.started_at = Some(now);
        rec.finished_at = Some(now);
        self.sched.put(unit);
        self.ctx
            .set_step_result(&key, StepStatus::Skipped, &Value::Null);
        let span = self.attempt_span(&key);
        span.set_attribute("workflow.step.outcome", "skipped");
        drop(span);
        self.flush_spans(&[])?;
        self.observer.step_skipped(&key);
        Ok(())
    }

    /// Pins a `for_each` step's list (first time) or, once every item ended,
    /// settles the step with the list of item outputs.
    pub(super) fn fan_out(&mut self, unit: &Unit, list: &Value) -> Result<Started, EngineError> {
        let step = &self.wf.clone().steps[unit.idx];
        let items = self.sched.record(unit).items.clone();
        let Some(items) = items.as_array().cloned() else {
            let evaluated = match list {
                Value::String(s) => Template::parse(s)
                    .map_err(|e| e.to_string())
                    .and_then(|t| t.render_value(self.ctx.value()).map_err(|e| e.to_string())),
                other => template::render_tree(other, self.ctx.value()).map_err(|e| e.to_string()),
            };
            let items = match evaluated {
                Ok(Value::Array(items)) => items,
                Ok(other) => {
                    let kind = match other {
                        Value::Null => "null",
                        Value::Bool(_) => "a boolean",
                        Value::Number(_) => "a number",
                        Value::String(_) => "a string",
                        Value::Object(_) => "an object",
                        Value::Array(_) => "a list",
                    };
                    let f = Failure::new(
                        ErrorType::Expression,
                        format!("`for_each` gave {kind}, not a list"),
                    );
                    self.fail_now(unit, f)?;
                    return Ok(Started::Settled);
                }
                Err(e) => {
                    self.fail_now(
                        unit,
                        Failure::new(ErrorType::Expression, format!("`for_each`: {e}")),
                    )?;
                    return Ok(Started::Settled);
                }
            };
            let now = store::now();
            let mut items = items;
            for v in &mut items {
                self.redactor.value(v);
            }
            let rec = self.sched.record(unit);
            rec.items = Value::Array(items).into();
            rec.status = StepStatus::Running;
            rec.started_at = Some(now);
            self.sched.put(unit);
            return Ok(Started::Settled);
        };
        // Every item has ended (the scheduler only offers the step itself then).
        let mut outputs = Vec::with_capacity(items.len());
        let mut failed_item = None;
        for i in 0..items.len() {
            let key = format!("{}[{i}]", step.id);
            match self.sched.records.get(&key) {
                Some(r) if r.status == StepStatus::Completed => outputs.push(r.output.clone()),
                Some(r) => {
                    if r.status == StepStatus::Failed && failed_item.is_none() {
                        failed_item = Some((key.clone(), r.clone()));
                    }
                    outputs.push(Value::Null);
                }
                None => return Ok(Started::Blocked),
            }
        }
        let now = store::now();
        self.sched.seq += 1;
        let seq = self.sched.seq;
        let rec = self.sched.record(unit);
        rec.output = Value::Array(outputs);
        rec.finished_at = Some(now);
        rec.attempts = rec.attempts.max(0);
        match &failed_item {
            None => {
                rec.status = StepStatus::Completed;
                rec.outcome = Some(AttemptOutcome::Ok);
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
        self.sched.put(unit);
        self.ctx.set_step_result(&step.id, status, &output);
        self.observer.fan_out_finished(&step.id, items.len());
        if let Some((key, r)) = failed_item
            && !step.continue_on_error
            && self.sched.failed.is_none()
        {
            self.sched.failed = Some(failure_reason(&key, &r));
        }
        Ok(Started::Settled)
    }

    /// Records the attempt row (durably, with the enclosing commit) before anything runs.
    ///
    /// `settles_now`: the attempt ends within this same transaction (no process),
    /// so the step row is written once, by the settle, instead of twice.
    pub(super) fn begin_attempt(
        &mut self,
        unit: &Unit,
        settles_now: bool,
    ) -> Result<i64, EngineError> {
        let (span_id, start_ns) = self.open_attempt_span(unit);
        let now = store::now();
        let run = self.run;
        let key = unit.key(&self.wf);
        let rec = self.sched.record(unit);
        rec.attempts += 1;
        rec.status = StepStatus::Running;
        rec.retry_at = None;
        if rec.started_at.is_none() {
            rec.started_at = Some(now);
        }
        let attempt = rec.attempts;
        self.sched.writes.push(Write::StartAttempt {
            key: key.clone(),
            attempt,
            run,
            started_at: now,
            span_id,
            started_ns: start_ns,
        });
        if !settles_now {
            self.sched.put(unit);
        }
        self.observer.step_started(&key, attempt);
        Ok(attempt)
    }

    /// Starts the attempt's work, once its attempt is durable.
    pub(super) fn spawn(&mut self, unit: Unit, job: Job, attempt: i64) {
        // Not asked to hold: nothing is given back.
        let _ = self.spawn_with(unit, job, attempt, false, None);
    }

    /// Starts the attempt's work; `hold`: while its attempt is being
    /// committed, so only a process that the kernel holds at its exec starts
    /// now (released by the runner once the commit returned). Anything else
    /// is given back untouched, with the span made for it, to be started
    /// with [`Runner::spawn_deferred`] once the commit returned.
    pub(super) fn spawn_maybe_held(
        &mut self,
        unit: Unit,
        job: Job,
        attempt: i64,
        hold: bool,
    ) -> Option<Deferred> {
        if hold && matches!(job, Job::Http(_)) {
            return Some((unit, job, attempt, None));
        }
        self.spawn_with(unit, job, attempt, hold, None)
    }

    /// Starts work that [`Runner::spawn_maybe_held`] gave back.
    pub(super) fn spawn_deferred(&mut self, (unit, job, attempt, span): Deferred) {
        let _ = self.spawn_with(unit, job, attempt, false, span);
    }

    /// Starts the attempt's work (held at its exec if `hold`), in `span`
    /// when it was made already; gives it back if it cannot be held.
    fn spawn_with(
        &mut self,
        unit: Unit,
        job: Job,
        attempt: i64,
        hold: bool,
        span: Option<tracing::Span>,
    ) -> Option<Deferred> {
        let interrupt = self.interrupt_tx.subscribe();
        let started = Instant::now();
        // The span of what the attempt does, a child of the attempt's span.
        let attempt_span = self
            .attempt_spans
            .get(&unit.key(&self.wf))
            .map(|(span, _, _)| span.clone())
            .unwrap_or_else(tracing::Span::none);
        match job {
            Job::Shell(job) => {
                let span = span.unwrap_or_else(|| {
                    tracing::info_span!(
                        parent: &attempt_span,
                        "process",
                        workflow.name = self.wf.name.as_str(),
                        workflow.instance.id = self.id.as_str(),
                        process.command = job.program(),
                    )
                });
                // Started here, not in the task, so its process group is
                // known before the loop goes on (and recorded once it has
                // run `groups::RECORD_AFTER`).
                let running = match shell::start(job, span, &mut self.output_files, hold) {
                    Ok(r) => {
                        if r.held() {
                            self.held.push(r.pid());
                        }
                        if let Some(tag) = r.group() {
                            self.group_started(unit.key(&self.wf), attempt, tag);
                        }
                        Ok(r)
                    }
                    Err(shell::Unstarted::NotHeld(job, span)) => {
                        return Some((unit, Job::Shell(*job), attempt, Some(span)));
                    }
                    Err(shell::Unstarted::Failed(failed)) => Err(failed),
                };
                self.tasks.spawn(async move {
                    let (result, output_file) = match running {
                        Ok(r) => {
                            let (result, file) = shell::finish(r, interrupt).await;
                            (result, Some(file))
                        }
                        Err(failed) => (*failed, None),
                    };
                    Done {
                        unit,
                        attempt,
                        elapsed: started.elapsed(),
                        result,
                        output_file,
                    }
                });
            }
            Job::Http(mut job) => {
                let client = self.http.get_or_insert_with(http::client).clone();
                // HTTP client semantic conventions: where the request goes.
                let (host, port) = reqwest::Url::parse(&job.url)
                    .ok()
                    .map(|u| {
                        (
                            u.host_str().unwrap_or_default().to_string(),
                            u.port_or_known_default().map_or(0, i64::from),
                        )
                    })
                    .unwrap_or_default();
                let span = tracing::info_span!(
                    parent: &attempt_span,
                    "http",
                    otel.name = job.method.as_str(),
                    otel.kind = "client",
                    workflow.name = self.wf.name.as_str(),
                    workflow.instance.id = self.id.as_str(),
                    http.request.method = job.method.as_str(),
                    url.full = job.full_url(),
                    server.address = host.as_str(),
                    server.port = port,
                );
                // The server's spans become children of this call's client span.
                if !job
                    .headers
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("traceparent"))
                {
                    let (_, span_id) = recorder::ids(&span);
                    job.headers.extend(self.trace_context_of(&span_id));
                }
                self.tasks.spawn(async move {
                    let result = http::run(client, job, span, interrupt).await;
                    Done {
                        unit,
                        attempt,
                        elapsed: started.elapsed(),
                        result,
                        output_file: None,
                    }
                });
            }
        }
        None
    }

    pub(super) fn settle(&mut self, mut d: Done) -> Result<(), EngineError> {
        if let Some(file) = d.output_file.take() {
            self.output_files.spent(file);
        }
        let key = d.unit.key(&self.wf);
        self.sched.running.remove(&key);
        self.group_ended(&key, d.attempt);
        self.enter(&d.unit, Some(d.attempt));
        if let Some(state) = self.start_states.remove(&key) {
            self.ctx.set("state", state);
            self.ctx_state_current = false;
        }
        self.settle_result(&d.unit, d.attempt, d.result, d.elapsed)
    }

    /// Records an attempt this run stopped (interrupted or canceled, its
    /// outcome the failure's type): it does not count towards `max_attempts`.
    fn stopped_attempt(
        &mut self,
        unit: &Unit,
        (key, attempt): (&str, i64),
        mut end: AttemptEnd,
        failure: &Failure,
        elapsed: Duration,
    ) -> Result<(), EngineError> {
        let outcome = match failure.error_type {
            ErrorType::Canceled => AttemptOutcome::Canceled,
            _ => AttemptOutcome::Interrupted,
        };
        self.sched
            .uncounted
            .entry(key.to_string())
            .or_default()
            .push(attempt);
        end.outcome = outcome;
        end.error_type = Some(failure.error_type.clone());
        end.error_message = Some(failure.message.clone());
        self.sched.writes.push(Write::EndAttempt {
            key: key.to_string(),
            attempt,
            end,
        });
        self.sched.record(unit).outcome = Some(outcome);
        self.write_attempt_span(key, attempt, outcome, Some(failure))?;
        self.observer
            .step_finished(key, attempt, outcome, Some(failure), elapsed);
        Ok(())
    }

    /// Commits an attempt's result: on success output, state patch and outcome
    /// together; on failure only the attempt record, and the retry decision.
    pub(super) fn settle_result(
        &mut self,
        unit: &Unit,
        attempt: i64,
        mut result: AttemptResult,
        elapsed: Duration,
    ) -> Result<(), EngineError> {
        let wf = self.wf.clone();
        let step = &wf.steps[unit.idx];
        let exec = exec_of(step, unit);
        let key = unit.key(&wf);
        let now = store::now();
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
        let stopped = if result.interrupted {
            self.sched.stop
        } else {
            None
        };
        match result.outcome {
            Ok(output) => {
                self.sched.writes.push(Write::EndAttempt {
                    key: key.clone(),
                    attempt,
                    end,
                });
                self.sched.seq += 1;
                let seq = self.sched.seq;
                let rec = self.sched.record(unit);
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
                self.sched.put(unit);
                // Written; not kept in memory (a later write of the row
                // keeps it: `COALESCE` in the store). 10,000 patches held
                // cost 4 MiB of a 10,000-step run.
                self.sched.record(unit).state_patch = Default::default();
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
                self.write_attempt_span(&key, attempt, AttemptOutcome::Ok, None)?;
                self.observer
                    .step_finished(&key, attempt, AttemptOutcome::Ok, None, elapsed);
            }
            // Stopped by us, not failed: the attempt does not count.
            Err(failure) if stopped == Some(Stop::Signal) => {
                let failure = Failure::new(ErrorType::Interrupted, failure.message);
                self.stopped_attempt(unit, (&key, attempt), end, &failure, elapsed)?;
                let rec = self.sched.record(unit);
                rec.status = StepStatus::Pending;
                self.sched.put(unit);
            }
            Err(_) if stopped == Some(Stop::Cancel) => {
                let failure = Failure::new(ErrorType::Canceled, "the instance was canceled".into());
                self.stopped_attempt(unit, (&key, attempt), end, &failure, elapsed)?;
                let rec = self.sched.record(unit);
                rec.status = StepStatus::Canceled;
                rec.error_type = Some(failure.error_type.clone());
                rec.finished_at = Some(now);
                self.sched.put(unit);
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
                let budget_base = self.sched.record(unit).budget_base;
                // Counts this attempt too: it is recorded (outcome pending) already.
                let used = self.sched.budget_used(&key, budget_base);
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
                self.sched.writes.push(Write::EndAttempt {
                    key: key.clone(),
                    attempt,
                    end,
                });
                let rec = self.sched.record(unit);
                rec.outcome = Some(outcome);
                rec.error_type = Some(failure.error_type.clone());
                rec.error_message = Some(failure.message.clone());
                if let Some(delay) = verdict.retry_in {
                    rec.status = StepStatus::Retrying;
                    rec.retry_at = Some(Timestamp::now().plus(delay));
                } else {
                    rec.status = StepStatus::Failed;
                    rec.finished_at = Some(now);
                    rec.retry_at = None;
                }
                let rec = rec.clone();
                self.sched.put(unit);
                self.write_attempt_span(&key, attempt, outcome, Some(&failure))?;
                self.observer
                    .step_finished(&key, attempt, outcome, Some(&failure), elapsed);
                if let Some(delay) = verdict.retry_in {
                    self.observer.step_retrying(
                        &key,
                        attempt + 1,
                        used + 1,
                        exec.retry.max_attempts,
                        delay,
                    );
                }
                if verdict.retry_in.is_none() && !unit.compensation {
                    if unit.item.is_none() {
                        self.ctx
                            .set_step_result(&key, StepStatus::Failed, &Value::Null);
                    }
                    if !step.continue_on_error {
                        if self.sched.failed.is_none() {
                            self.sched.failed = Some(failure_reason(&key, &rec));
                        }
                        // A failed item fails its for_each step at once (no more items start).
                        if unit.item.is_some() {
                            let parent = Unit::step(unit.idx);
                            let p = self.sched.record(&parent);
                            p.status = StepStatus::Failed;
                            p.outcome = Some(AttemptOutcome::Failed);
                            p.error_type = rec.error_type.clone();
                            p.error_message = Some(format!("item {key} failed"));
                            p.finished_at = Some(store::now());
                            self.sched.put(&parent);
                            self.ctx
                                .set_step_result(&step.id, StepStatus::Failed, &Value::Null);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
