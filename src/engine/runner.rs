//! The scheduler: drives one instance for one run. It replays what history
//! says is done, decides which steps are ready, records each attempt before its
//! command starts, and commits each result (attempt outcome, output, state
//! patch) in one transaction together with the starts of the steps that result
//! unblocks: a sequential step costs one commit. It ends the run when the
//! instance completes, fails, suspends on a timer or an event, or is
//! interrupted.

use super::context::{self, Context};
use super::lease::{self, Heartbeat};
use super::output::merge_patch;
use super::redact::Redactor;
use super::{AttemptResult, EngineError, Failure, Observer, http, shell};
use crate::store::{self, AttemptEnd, SpanRow, StepRow, Store};
use crate::telemetry::{self, Span};
use crate::workflow::template::{self, Template};
use crate::workflow::{Action, Condition, RunCmd, SleepSpec, Step, Workflow, expr};
use chrono::{DateTime, Utc};
use rusqlite::Connection;
use serde_json::json;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// How one run should behave.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Waits (timers, retry backoffs) up to this long happen inside the run.
    pub inline_wait: Duration,
    /// Fire timers that are not yet due (`wf resume --now`).
    pub fire_timers: bool,
    /// Give failed steps a fresh attempt budget (`wf resume --retry-failed`).
    pub retry_failed: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            inline_wait: Duration::from_secs(30),
            fire_timers: false,
            retry_failed: false,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    Completed,
    Failed(String),
    Sleeping(String),
    Waiting(String),
    Canceled,
    Interrupted,
}

impl RunOutcome {
    pub fn as_str(&self) -> &'static str {
        match self {
            RunOutcome::Completed => "completed",
            RunOutcome::Failed(_) => "failed",
            RunOutcome::Sleeping(_) => "sleeping",
            RunOutcome::Waiting(_) => "waiting",
            RunOutcome::Canceled => "canceled",
            RunOutcome::Interrupted => "interrupted",
        }
    }
}

/// Drives instance `id` until it completes, fails, suspends or is interrupted.
pub async fn drive(
    store: &mut Store,
    id: &str,
    opts: RunOptions,
    observer: &dyn Observer,
) -> Result<RunOutcome, EngineError> {
    let owner = lease::owner_name();
    let inst = store::instance(store.conn(), id)?;
    match inst.status.as_str() {
        "completed" => {
            return Err(EngineError::NotResumable(format!(
                "instance {id} already completed"
            )));
        }
        "canceled" => {
            return Err(EngineError::NotResumable(format!(
                "instance {id} was canceled; it cannot be resumed"
            )));
        }
        "failed" if !opts.retry_failed => {
            return Err(EngineError::NotResumable(format!(
                "instance {id} failed{}; resume it with --retry-failed to give failed steps a fresh attempt budget",
                inst.error
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            )));
        }
        _ => {}
    }
    let wf = Arc::new(Workflow::from_pinned(
        &inst.definition,
        &format!("{} (pinned definition of {id})", inst.workflow_path),
    )?);
    super::check_secrets(&wf)?;

    // Take the lease, then recover whatever a dead predecessor left behind.
    let (run, mut records, trace) = {
        let tx = store.write()?;
        if let Err(holder) =
            store::acquire_lease(&tx, id, &owner, lease::TTL_MS, lease::holder_alive)?
        {
            return Err(EngineError::Held {
                id: id.into(),
                holder,
            });
        }
        let mut records: HashMap<String, StepRow> = store::steps(&tx, id)?
            .into_iter()
            .map(|r| (r.key.clone(), r))
            .collect();
        recover_crashed(&tx, id, &wf, &mut records)?;
        for crashed in store::close_abandoned_runs(&tx, id)? {
            if let Some((trace, span, parent, start)) = store::run_trace(&tx, id, crashed)? {
                let root = Span::new(
                    &trace,
                    &span,
                    parent.as_deref(),
                    &format!("{}/workflow", wf.name),
                    start,
                )
                .instance(&wf.name, id, crashed)
                .attr("workflow.run", crashed)
                .attr("workflow.outcome", "crashed")
                .error("the process running this run died");
                let root = match crashed.checked_sub(1).map(|p| store::run_trace(&tx, id, p)) {
                    Some(Ok(Some(prev))) => root.link(telemetry::link(
                        &prev.0,
                        &prev.1,
                        json!({ "workflow.run": crashed - 1 }),
                    )),
                    _ => root,
                };
                store::insert_span(&tx, &root.finish(telemetry::now_ns()))?;
            }
        }
        let run = store::start_run(&tx, id)?;
        // This run's trace: a child of TRACEPARENT for the first run, else a new trace.
        let parent = (run == 1)
            .then(|| std::env::var("TRACEPARENT").ok())
            .flatten()
            .and_then(|t| telemetry::parse_traceparent(&t));
        let trace = match parent {
            Some((trace_id, parent_span)) => (
                trace_id,
                telemetry::new_span_id(),
                Some(parent_span),
                telemetry::now_ns(),
            ),
            None => (
                telemetry::new_trace_id(),
                telemetry::new_span_id(),
                None,
                telemetry::now_ns(),
            ),
        };
        store::set_run_trace(&tx, id, run, &trace)?;
        if opts.retry_failed {
            for rec in records.values_mut().filter(|r| r.status == "failed") {
                rec.status = "pending".into();
                rec.budget_base = rec.attempts;
                rec.retry_at = None;
                rec.finished_at = None;
                store::put_step(&tx, id, rec)?;
            }
        }
        store::set_instance_status(&tx, id, "running", None, None, None)?;
        tx.commit()?;
        (run, records, trace)
    };
    let _heartbeat = Heartbeat::start(store.path().to_path_buf(), id.to_string(), owner.clone());

    if opts.fire_timers {
        for rec in records.values_mut() {
            if rec.retry_at.is_some() && matches!(rec.status.as_str(), "sleeping" | "retrying") {
                rec.retry_at = Some(store::now());
            }
        }
    }

    let previous = store::run_trace(store.conn(), id, run - 1)?;
    let mut runner = Runner::new(wf.clone(), &inst, run, records, opts, observer, trace)?;
    if let Some(prev) = previous {
        runner.links.push(telemetry::link(
            &prev.0,
            &prev.1,
            json!({ "workflow.run": run - 1 }),
        ));
    }
    observer.run_started(id, &wf.name, run, wf.steps.len());
    let outcome = runner.main_loop(store).await;

    // Close the run whatever happened, so history never shows a run in progress.
    let tx = store.write()?;
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            runner.write_root_span(&tx, "failed", Some(&e.to_string()))?;
            store::finish_run(&tx, id, run, "failed")?;
            store::release_lease(&tx, id, &owner)?;
            tx.commit()?;
            return Err(e);
        }
    };
    let failure = match &outcome {
        RunOutcome::Failed(reason) => Some(reason.as_str()),
        _ => None,
    };
    runner.write_root_span(&tx, outcome.as_str(), failure)?;
    let (status, wake, event, error) = match &outcome {
        RunOutcome::Completed => ("completed", None, None, None),
        RunOutcome::Failed(reason) => ("failed", None, None, Some(reason.clone())),
        RunOutcome::Sleeping(wake) => ("sleeping", Some(wake.clone()), None, None),
        RunOutcome::Waiting(event) => (
            "waiting",
            runner.next_timer().map(store::fmt_time),
            Some(event.clone()),
            None,
        ),
        RunOutcome::Canceled => ("canceled", None, None, None),
        // Left `running` without a lease: `wf list` shows it as interrupted, `wf resume` continues it.
        RunOutcome::Interrupted => ("running", None, None, None),
    };
    store::set_instance_status(
        &tx,
        id,
        status,
        wake.as_deref(),
        event.as_deref(),
        error.as_deref(),
    )?;
    store::finish_run(&tx, id, run, outcome.as_str())?;
    store::release_lease(&tx, id, &owner)?;
    tx.commit()?;
    Ok(outcome)
}

/// Attempts that never got an outcome belong to a process that died: mark them
/// `crashed` (they count towards `max_attempts`) and decide their step's fate.
fn recover_crashed(
    c: &Connection,
    id: &str,
    wf: &Workflow,
    records: &mut HashMap<String, StepRow>,
) -> Result<(), EngineError> {
    for (key, attempt) in store::open_attempts(c, id)? {
        let end = AttemptEnd {
            outcome: "crashed".into(),
            error_type: Some("crashed".into()),
            error_message: Some("the process running this attempt died before it finished".into()),
            finished_at: store::now(),
            ..AttemptEnd::default()
        };
        store::finish_attempt(c, id, &key, attempt, &end)?;
        if let Some((span_id, start_ns, run)) = store::attempt_span(c, id, &key, attempt)?
            && let Some((trace, root, _, _)) = store::run_trace(c, id, run)?
        {
            let span = Span::new(
                &trace,
                &span_id,
                Some(&root),
                &format!("{}/{key}", wf.name),
                start_ns,
            )
            .instance(&wf.name, id, run)
            .attr("workflow.step.id", key.as_str())
            .attr("workflow.step.attempt", attempt)
            .attr("workflow.step.outcome", "crashed")
            .attr("error.type", "crashed")
            .error("the process running this attempt died before it finished");
            store::insert_span(c, &span.finish(telemetry::now_ns()))?;
        }
        let Some(rec) = records.get_mut(&key) else {
            continue;
        };
        let Some(step) = wf.step(&rec.step_id) else {
            continue;
        };
        rec.outcome = Some("crashed".into());
        rec.error_type = Some("crashed".into());
        rec.error_message = end.error_message.clone();
        let used = budget_used(c, id, &key, rec.budget_base)?;
        if used >= step.retry.max_attempts as i64 || !step.retry.is_retryable("crashed") {
            rec.status = "failed".into();
            rec.finished_at = Some(end.finished_at.clone());
        } else {
            rec.status = "retrying".into();
            rec.retry_at = None;
        }
        store::put_step(c, id, rec)?;
    }
    Ok(())
}

/// Attempts that count towards the step's `max_attempts`.
fn budget_used(c: &Connection, id: &str, key: &str, base: i64) -> Result<i64, EngineError> {
    Ok(c.query_row(
        "SELECT COUNT(*) FROM attempts WHERE instance_id=?1 AND step_key=?2 AND attempt>?3 \
         AND (outcome IS NULL OR outcome != 'interrupted')",
        rusqlite::params![id, key, base],
        |r| r.get(0),
    )?)
}

/// A step ready to start its process or request, with everything rendered.
enum Job {
    Shell(shell::ShellJob),
    Http(http::HttpJob),
}

/// What starting a step amounted to.
enum Started {
    Spawn(Job, i64),
    /// Settled within the transaction (skipped, pure step, timer fired, event taken, failed).
    Settled,
    /// Waiting on a timer or an event.
    Blocked,
}

struct Done {
    key: String,
    attempt: i64,
    elapsed: Duration,
    result: AttemptResult,
}

struct Runner<'o> {
    wf: Arc<Workflow>,
    id: String,
    run: i64,
    base_dir: PathBuf,
    opts: RunOptions,
    observer: &'o dyn Observer,
    records: HashMap<String, StepRow>,
    state: Value,
    ctx: Context,
    env: Vec<(String, String)>,
    running: HashMap<String, i64>,
    tasks: JoinSet<Done>,
    seq: i64,
    failed: Option<String>,
    interrupted: bool,
    interrupt_tx: watch::Sender<bool>,
    http: Option<reqwest::Client>,
    redactor: Redactor,
    /// This run's trace: (trace_id, root span_id, parent span_id, start ns).
    trace: store::RunTrace,
    /// Links of the root span: the previous run, events that woke this one.
    links: Vec<Value>,
    /// Attempt spans in flight: step key -> (span_id, start ns).
    attempt_spans: HashMap<String, (String, i64)>,
    /// Attempts whose success the next commit makes durable (for `wf.sqlite.commit`).
    committing: Vec<String>,
    /// Spans finished after the last commit, written with the next one.
    pending_spans: Vec<SpanRow>,
}

impl<'o> Runner<'o> {
    fn new(
        wf: Arc<Workflow>,
        inst: &store::InstanceRow,
        run: i64,
        records: HashMap<String, StepRow>,
        opts: RunOptions,
        observer: &'o dyn Observer,
        trace: store::RunTrace,
    ) -> Result<Runner<'o>, EngineError> {
        let secrets = context::secret_values(&wf.secrets);
        let redactor = Redactor::new(
            secrets
                .values()
                .filter_map(|v| v.as_str().map(String::from)),
        );
        let mut ctx = Context::new(&inst.id, &wf.name, run, &inst.inputs, secrets);
        // Workflow-level env is rendered once per run; steps see it as `env`.
        let mut env = Vec::new();
        let mut env_map = Map::new();
        for (k, t) in &wf.env {
            let v = t
                .render_text(ctx.value())
                .map_err(|e| EngineError::Input(format!("workflow env `{k}`: {e}")))?;
            env_map.insert(k.clone(), Value::String(v.clone()));
            env.push((k.clone(), v));
        }
        ctx.set("env", Value::Object(env_map));
        ctx.set("state", inst.state.clone());
        let mut seq = 0;
        for rec in records.values() {
            seq = seq.max(rec.seq.unwrap_or(0));
            if matches!(rec.status.as_str(), "completed" | "skipped" | "failed") {
                ctx.set_step_result(&rec.key, &rec.status, &rec.output);
            }
        }
        let failed = wf.steps.iter().find_map(|s| {
            let r = records.get(&s.id)?;
            (r.status == "failed" && !s.continue_on_error).then(|| failure_reason(&s.id, r))
        });
        let (interrupt_tx, _) = watch::channel(false);
        Ok(Runner {
            base_dir: PathBuf::from(&inst.base_dir),
            id: inst.id.clone(),
            state: inst.state.clone(),
            wf,
            run,
            opts,
            observer,
            records,
            ctx,
            env,
            running: HashMap::new(),
            tasks: JoinSet::new(),
            seq,
            failed,
            interrupted: false,
            interrupt_tx,
            http: None,
            redactor,
            trace,
            links: Vec::new(),
            attempt_spans: HashMap::new(),
            committing: Vec::new(),
            pending_spans: Vec::new(),
        })
    }

    async fn main_loop(&mut self, store: &mut Store) -> Result<RunOutcome, EngineError> {
        let replayed = self
            .records
            .values()
            .filter(|r| matches!(r.status.as_str(), "completed" | "skipped"))
            .count();
        if replayed > 0 {
            self.observer.steps_replayed(replayed);
        }
        let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
            .map_err(|e| EngineError::Internal(format!("cannot install SIGINT handler: {e}")))?;
        let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| EngineError::Internal(format!("cannot install SIGTERM handler: {e}")))?;
        let mut done: Vec<Done> = Vec::new();
        loop {
            // One transaction: results that came in, then every start they unblock.
            let mut spawns = Vec::new();
            {
                let tx = store.write()?;
                for span in self.pending_spans.drain(..) {
                    store::insert_span(&tx, &span)?;
                }
                for d in done.drain(..) {
                    self.settle(&tx, d)?;
                }
                if !self.interrupted && self.failed.is_none() {
                    loop {
                        let mut settled = false;
                        for idx in 0..self.wf.steps.len() {
                            if self.running.len() >= self.wf.concurrency {
                                break;
                            }
                            if !self.is_ready(idx) {
                                continue;
                            }
                            match self.start(&tx, idx)? {
                                Started::Spawn(job, attempt) => {
                                    // Counted as running from now on, so no later pass starts it again.
                                    self.running.insert(self.wf.steps[idx].id.clone(), attempt);
                                    spawns.push((idx, job, attempt));
                                }
                                Started::Settled => settled = true,
                                Started::Blocked => {}
                            }
                            if self.failed.is_some() {
                                break;
                            }
                        }
                        if !settled || self.failed.is_some() {
                            break;
                        }
                    }
                }
                let commit_start = telemetry::now_ns();
                tx.commit()?;
                self.committed(commit_start);
            }
            for (idx, job, attempt) in spawns {
                self.spawn(idx, job, attempt);
            }

            if self.running.is_empty() && self.tasks.is_empty() {
                if let Some(outcome) = self.final_outcome() {
                    return Ok(outcome);
                }
                // Only timers and events left. Short waits happen here.
                let next = self.next_timer();
                let within = next.filter(|t| {
                    (*t - Utc::now()).to_std().unwrap_or_default() <= self.opts.inline_wait
                });
                match within {
                    Some(t) => {
                        let wait = (t - Utc::now()).to_std().unwrap_or_default();
                        tokio::select! {
                            _ = tokio::time::sleep(wait) => {}
                            _ = sigint.recv() => self.interrupt(),
                            _ = sigterm.recv() => self.interrupt(),
                        }
                        continue;
                    }
                    None => return Ok(self.suspend_outcome(next)),
                }
            }

            let timer = self
                .next_timer()
                .map(|t| (t - Utc::now()).to_std().unwrap_or_default());
            tokio::select! {
                Some(joined) = self.tasks.join_next() => {
                    match joined {
                        Ok(d) => done.push(d),
                        Err(e) => return Err(EngineError::Internal(format!("step task failed: {e}"))),
                    }
                    while let Some(joined) = self.tasks.try_join_next() {
                        match joined {
                            Ok(d) => done.push(d),
                            Err(e) => return Err(EngineError::Internal(format!("step task failed: {e}"))),
                        }
                    }
                }
                _ = async { tokio::time::sleep(timer.unwrap_or_default()).await }, if timer.is_some() => {}
                _ = sigint.recv() => self.interrupt(),
                _ = sigterm.recv() => self.interrupt(),
            }
        }
    }

    fn interrupt(&mut self) {
        if !self.interrupted {
            self.interrupted = true;
            self.observer.message("interrupted: stopping running steps");
            let _ = self.interrupt_tx.send(true);
        }
    }

    /// Records a `wf.sqlite.commit` span under each attempt the commit made durable.
    fn committed(&mut self, start_ns: i64) {
        let end_ns = telemetry::now_ns();
        for parent in std::mem::take(&mut self.committing) {
            let span = Span::new(
                &self.trace.0,
                &telemetry::new_span_id(),
                Some(&parent),
                "wf.sqlite.commit",
                start_ns,
            )
            .instance(&self.wf.name, &self.id, self.run)
            .attr("db.system.name", "sqlite")
            .attr("db.operation.name", "COMMIT");
            self.pending_spans.push(span.finish(end_ns));
        }
    }

    /// The run's root span, with whatever spans are still pending.
    fn write_root_span(
        &mut self,
        c: &Connection,
        outcome: &str,
        error: Option<&str>,
    ) -> Result<(), EngineError> {
        for span in self.pending_spans.drain(..) {
            store::insert_span(c, &span)?;
        }
        let (trace, root, parent, start) = &self.trace;
        let mut span = Span::new(
            trace,
            root,
            parent.as_deref(),
            &format!("{}/workflow", self.wf.name),
            *start,
        )
        .instance(&self.wf.name, &self.id, self.run)
        .attr("workflow.run", self.run)
        .attr("workflow.outcome", outcome);
        for l in &self.links {
            span = span.link(l.clone());
        }
        if let Some(e) = error {
            span = span.error(&self.redactor.text(e));
        }
        store::insert_span(c, &span.finish(telemetry::now_ns()))?;
        Ok(())
    }

    /// The span of one finished attempt, with its executor's spans beneath it.
    fn write_attempt_span(
        &mut self,
        c: &Connection,
        step: &Step,
        attempt: i64,
        outcome: &str,
        failure: Option<&Failure>,
        children: Vec<super::ChildSpan>,
    ) -> Result<String, EngineError> {
        let (span_id, start_ns) = self
            .attempt_spans
            .remove(&step.id)
            .unwrap_or_else(|| (telemetry::new_span_id(), telemetry::now_ns()));
        let mut span = Span::new(
            &self.trace.0,
            &span_id,
            Some(&self.trace.1),
            &format!("{}/{}", self.wf.name, step.id),
            start_ns,
        )
        .instance(&self.wf.name, &self.id, self.run)
        .attr("workflow.step.id", step.id.as_str())
        .attr("workflow.step.attempt", attempt)
        .attr("workflow.step.outcome", outcome);
        if let Some(f) = failure {
            span = span
                .attr("error.type", f.error_type.as_str())
                .error(&f.message);
        }
        let end_ns = telemetry::now_ns();
        for child in children {
            let mut attrs = Value::Object(child.attributes);
            self.redactor.value(&mut attrs);
            let mut s = Span::new(
                &self.trace.0,
                &telemetry::new_span_id(),
                Some(&span_id),
                &child.name,
                child.start_ns,
            )
            .instance(&self.wf.name, &self.id, self.run)
            .kind(child.kind);
            if let Value::Object(m) = attrs {
                for (k, v) in m {
                    s = s.attr(&k, v);
                }
            }
            if let Some(e) = &child.error {
                s = s.error(&self.redactor.text(e));
            }
            store::insert_span(c, &s.finish(child.end_ns.min(end_ns)))?;
        }
        store::insert_span(c, &span.finish(end_ns))?;
        Ok(span_id)
    }

    /// The run's end when nothing is running and nothing more can start now.
    fn final_outcome(&self) -> Option<RunOutcome> {
        if self.interrupted {
            return Some(RunOutcome::Interrupted);
        }
        if let Some(reason) = &self.failed {
            return Some(RunOutcome::Failed(reason.clone()));
        }
        let all_done = self.wf.steps.iter().all(|s| {
            self.records
                .get(&s.id)
                .is_some_and(|r| matches!(r.status.as_str(), "completed" | "skipped" | "failed"))
        });
        all_done.then_some(RunOutcome::Completed)
    }

    fn suspend_outcome(&self, next: Option<DateTime<Utc>>) -> RunOutcome {
        let waiting: Vec<String> = self
            .wf
            .steps
            .iter()
            .filter(|s| {
                self.records
                    .get(&s.id)
                    .is_some_and(|r| r.status == "waiting")
            })
            .filter_map(|s| match &s.action {
                Action::WaitForEvent { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect();
        if !waiting.is_empty() {
            RunOutcome::Waiting(waiting.join(","))
        } else {
            RunOutcome::Sleeping(next.map(store::fmt_time).unwrap_or_else(store::now))
        }
    }

    /// The earliest time a blocked step becomes due (retry, sleep, event timeout).
    fn next_timer(&self) -> Option<DateTime<Utc>> {
        self.records
            .values()
            .filter(|r| matches!(r.status.as_str(), "retrying" | "sleeping" | "waiting"))
            .filter_map(|r| r.retry_at.as_deref().and_then(store::parse_time))
            .min()
    }

    fn is_ready(&self, idx: usize) -> bool {
        let step = &self.wf.steps[idx];
        if self.running.contains_key(&step.id) {
            return false;
        }
        if let Some(r) = self.records.get(&step.id) {
            match r.status.as_str() {
                "completed" | "skipped" | "failed" => return false,
                "retrying" => {
                    if let Some(t) = r.retry_at.as_deref().and_then(store::parse_time)
                        && t > Utc::now()
                    {
                        return false;
                    }
                }
                _ => {}
            }
        }
        step.needs.iter().all(|&d| {
            let dep = &self.wf.steps[d];
            self.records
                .get(&dep.id)
                .is_some_and(|r| match r.status.as_str() {
                    "completed" | "skipped" => true,
                    "failed" => dep.continue_on_error,
                    _ => false,
                })
        })
    }

    fn record(&mut self, step: &Step) -> &mut StepRow {
        self.records
            .entry(step.id.clone())
            .or_insert_with(|| StepRow {
                key: step.id.clone(),
                step_id: step.id.clone(),
                status: "pending".into(),
                attempts: 0,
                budget_base: 0,
                outcome: None,
                error_type: None,
                error_message: None,
                output: Value::Null,
                started_at: None,
                finished_at: None,
                retry_at: None,
                seq: None,
            })
    }

    /// Starts step `idx`: evaluates `if`, then records an attempt and renders its
    /// job, or settles it at once when it needs no process.
    fn start(&mut self, c: &Connection, idx: usize) -> Result<Started, EngineError> {
        let wf = self.wf.clone();
        let step = &wf.steps[idx];
        let first_time = {
            let rec = self.record(step);
            rec.attempts == 0 && rec.status == "pending"
        };
        self.ctx.set("state", self.state.clone());

        if first_time && let Some(cond) = &step.condition {
            match self.eval_condition(cond) {
                Ok(true) => {}
                Ok(false) => {
                    let now = store::now();
                    let rec = self.record(step);
                    rec.status = "skipped".into();
                    rec.outcome = Some("skipped".into());
                    rec.started_at = Some(now.clone());
                    rec.finished_at = Some(now);
                    let rec = rec.clone();
                    store::put_step(c, &self.id, &rec)?;
                    self.ctx.set_step_result(&step.id, "skipped", &Value::Null);
                    let now_ns = telemetry::now_ns();
                    let span = Span::new(
                        &self.trace.0,
                        &telemetry::new_span_id(),
                        Some(&self.trace.1),
                        &format!("{}/{}", self.wf.name, step.id),
                        now_ns,
                    )
                    .instance(&self.wf.name, &self.id, self.run)
                    .attr("workflow.step.id", step.id.as_str())
                    .attr("workflow.step.outcome", "skipped");
                    store::insert_span(c, &span.finish(now_ns))?;
                    self.observer.step_skipped(&step.id);
                    return Ok(Started::Settled);
                }
                Err(e) => {
                    let attempt = self.begin_attempt(c, step)?;
                    self.settle_result(
                        c,
                        step,
                        attempt,
                        AttemptResult::failed(Failure::new("expression", format!("`if`: {e}"))),
                        Duration::ZERO,
                    )?;
                    return Ok(Started::Settled);
                }
            }
        }

        let attempt_no = self.record(step).attempts + 1;
        self.ctx.set(
            "step",
            serde_json::json!({ "id": step.id, "attempt": attempt_no }),
        );
        match &step.action {
            Action::Noop => {
                let attempt = self.begin_attempt(c, step)?;
                let out = Value::Object(Map::new());
                self.settle_result(
                    c,
                    step,
                    attempt,
                    AttemptResult {
                        outcome: Ok(out),
                        ..AttemptResult::default()
                    },
                    Duration::ZERO,
                )?;
                Ok(Started::Settled)
            }
            Action::Sleep(spec) => self.start_sleep(c, step, spec),
            Action::WaitForEvent { name, timeout } => self.start_wait(c, step, name, *timeout),
            Action::Run(cmd) => match {
                self.open_attempt_span(step);
                self.render_shell(step, cmd)
            } {
                Ok(job) => {
                    let attempt = self.begin_attempt(c, step)?;
                    Ok(Started::Spawn(Job::Shell(job), attempt))
                }
                Err(f) => {
                    let attempt = self.begin_attempt(c, step)?;
                    self.settle_result(c, step, attempt, AttemptResult::failed(f), Duration::ZERO)?;
                    Ok(Started::Settled)
                }
            },
            Action::Http(spec) => match {
                self.open_attempt_span(step);
                self.render_http(step, spec)
            } {
                Ok(job) => {
                    let attempt = self.begin_attempt(c, step)?;
                    Ok(Started::Spawn(Job::Http(job), attempt))
                }
                Err(f) => {
                    let attempt = self.begin_attempt(c, step)?;
                    self.settle_result(c, step, attempt, AttemptResult::failed(f), Duration::ZERO)?;
                    Ok(Started::Settled)
                }
            },
        }
    }

    fn eval_condition(&self, cond: &Condition) -> Result<bool, String> {
        let v = match cond {
            Condition::Literal(b) => return Ok(*b),
            Condition::Template(t) => t
                .render_value(self.ctx.value())
                .map_err(|e| e.to_string())?,
            Condition::Expr(e) => e.eval(self.ctx.value()).map_err(|e| e.to_string())?,
        };
        Ok(expr::truthy(&v))
    }

    /// The span id (and start) of the attempt about to begin, allocated once.
    fn open_attempt_span(&mut self, step: &Step) -> (String, i64) {
        self.attempt_spans
            .entry(step.id.clone())
            .or_insert_with(|| (telemetry::new_span_id(), telemetry::now_ns()))
            .clone()
    }

    /// W3C trace context of the attempt about to begin (for its process or request).
    fn attempt_traceparent(&self, step: &Step) -> Option<String> {
        self.attempt_spans
            .get(&step.id)
            .map(|(span, _)| telemetry::traceparent(&self.trace.0, span))
    }

    /// Records the attempt row (durably, with the enclosing commit) before anything runs.
    fn begin_attempt(&mut self, c: &Connection, step: &Step) -> Result<i64, EngineError> {
        let (span_id, start_ns) = self.open_attempt_span(step);
        let now = store::now();
        let run = self.run;
        let id = self.id.clone();
        let rec = self.record(step);
        rec.attempts += 1;
        rec.status = "running".into();
        rec.retry_at = None;
        if rec.started_at.is_none() {
            rec.started_at = Some(now.clone());
        }
        let attempt = rec.attempts;
        let rec = rec.clone();
        store::insert_attempt(c, &id, &step.id, attempt, run, &now)?;
        store::set_attempt_span(c, &id, &step.id, attempt, &span_id, start_ns)?;
        store::put_step(c, &id, &rec)?;
        self.observer.step_started(&step.id, attempt);
        Ok(attempt)
    }

    fn start_sleep(
        &mut self,
        c: &Connection,
        step: &Step,
        spec: &SleepSpec,
    ) -> Result<Started, EngineError> {
        let existing = self.record(step).retry_at.clone();
        let wake = match existing.as_deref().and_then(store::parse_time) {
            Some(t) => t,
            None => {
                let wake = match spec {
                    SleepSpec::For(d) => {
                        Utc::now() + chrono::Duration::from_std(*d).unwrap_or_default()
                    }
                    SleepSpec::Until(t) => {
                        let text = t.render_text(self.ctx.value()).map_err(|e| e.to_string());
                        match text.as_deref().map(store::parse_time) {
                            Ok(Some(t)) => t,
                            Ok(None) | Err(_) => {
                                let msg = match text {
                                    Ok(s) => format!("`sleep.until` `{s}` is not an RFC 3339 time"),
                                    Err(e) => format!("`sleep.until`: {e}"),
                                };
                                let attempt = self.begin_attempt(c, step)?;
                                self.settle_result(
                                    c,
                                    step,
                                    attempt,
                                    AttemptResult::failed(Failure::new("expression", msg)),
                                    Duration::ZERO,
                                )?;
                                return Ok(Started::Settled);
                            }
                        }
                    }
                };
                let now = store::now();
                let id = self.id.clone();
                let rec = self.record(step);
                rec.status = "sleeping".into();
                rec.started_at = Some(now);
                rec.retry_at = Some(store::fmt_time(wake));
                let rec = rec.clone();
                store::put_step(c, &id, &rec)?;
                wake
            }
        };
        if wake <= Utc::now() {
            let attempt = self.begin_attempt(c, step)?;
            let out = serde_json::json!({ "slept_until": store::fmt_time(wake) });
            self.settle_result(
                c,
                step,
                attempt,
                AttemptResult {
                    outcome: Ok(out),
                    ..AttemptResult::default()
                },
                Duration::ZERO,
            )?;
            Ok(Started::Settled)
        } else {
            Ok(Started::Blocked)
        }
    }

    fn start_wait(
        &mut self,
        c: &Connection,
        step: &Step,
        name: &str,
        timeout: Option<Duration>,
    ) -> Result<Started, EngineError> {
        let event: Option<(i64, String, Option<String>)> = c
            .query_row(
                "SELECT id, payload, traceparent FROM events WHERE instance_id=?1 AND name=?2 AND consumed_by IS NULL ORDER BY id LIMIT 1",
                rusqlite::params![self.id, name],
                |r| Ok((r.get(0)?, r.get(1)?, r.get::<_, Option<String>>(2)?)),
            )
            .ok();
        if let Some((event_id, payload, traceparent)) = event {
            // The run an event wakes links to the context it was sent under.
            if let Some((trace, span)) = traceparent
                .as_deref()
                .and_then(telemetry::parse_traceparent)
            {
                self.links.push(telemetry::link(
                    &trace,
                    &span,
                    json!({ "wf.event.name": name }),
                ));
            }
            c.execute(
                "UPDATE events SET consumed_by=?2 WHERE id=?1",
                rusqlite::params![event_id, step.id],
            )?;
            let attempt = self.begin_attempt(c, step)?;
            let out = serde_json::from_str::<Value>(&payload).unwrap_or(Value::Null);
            let out = serde_json::json!({ "event": name, "json": out, "body": payload });
            self.settle_result(
                c,
                step,
                attempt,
                AttemptResult {
                    outcome: Ok(out),
                    ..AttemptResult::default()
                },
                Duration::ZERO,
            )?;
            return Ok(Started::Settled);
        }
        let id = self.id.clone();
        let rec = self.record(step);
        if rec.status != "waiting" {
            rec.status = "waiting".into();
            rec.started_at = Some(store::now());
            rec.retry_at = timeout.map(|t| {
                store::fmt_time(Utc::now() + chrono::Duration::from_std(t).unwrap_or_default())
            });
            let rec = rec.clone();
            store::put_step(c, &id, &rec)?;
            return Ok(Started::Blocked);
        }
        if let Some(deadline) = rec.retry_at.as_deref().and_then(store::parse_time)
            && deadline <= Utc::now()
        {
            let attempt = self.begin_attempt(c, step)?;
            let f = Failure::new(
                "timeout",
                format!("no `{name}` event arrived before the timeout"),
            );
            self.settle_result(c, step, attempt, AttemptResult::failed(f), Duration::ZERO)?;
            return Ok(Started::Settled);
        }
        Ok(Started::Blocked)
    }

    fn step_env(
        &self,
        step: &Step,
        attempt_env: &mut Vec<(String, String)>,
    ) -> Result<(), Failure> {
        attempt_env.extend(self.env.iter().cloned());
        for (k, t) in &step.env {
            let v = t
                .render_text(self.ctx.value())
                .map_err(|e| Failure::new("expression", format!("env `{k}`: {e}")))?;
            attempt_env.push((k.clone(), v));
        }
        let attempt = self
            .records
            .get(&step.id)
            .map(|r| r.attempts + 1)
            .unwrap_or(1);
        attempt_env.push(("WF_INSTANCE_ID".into(), self.id.clone()));
        attempt_env.push(("WF_WORKFLOW".into(), self.wf.name.clone()));
        attempt_env.push(("WF_STEP_ID".into(), step.id.clone()));
        attempt_env.push(("WF_ATTEMPT".into(), attempt.to_string()));
        attempt_env.push(("WF_RUN".into(), self.run.to_string()));
        if let Some(tp) = self.attempt_traceparent(step) {
            attempt_env.push(("TRACEPARENT".into(), tp));
        }
        Ok(())
    }

    fn render_shell(&self, step: &Step, cmd: &RunCmd) -> Result<shell::ShellJob, Failure> {
        let ctx = self.ctx.value();
        let expr_err = |e: expr::ExprError| Failure::new("expression", format!("`run`: {e}"));
        let mut env = Vec::new();
        self.step_env(step, &mut env)?;
        let (shell, argv) = match cmd {
            RunCmd::Shell(t) => {
                let mut vars = Vec::new();
                let text = t.render_shell(ctx, &mut vars).map_err(expr_err)?;
                env.extend(vars);
                (Some(text), Vec::new())
            }
            RunCmd::Argv(items) => {
                let argv = items
                    .iter()
                    .map(|t| t.render_text(ctx))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(expr_err)?;
                (None, argv)
            }
        };
        let dir = match &step.dir {
            Some(d) => self.base_dir.join(d),
            None => self.base_dir.clone(),
        };
        Ok(shell::ShellJob {
            shell,
            argv,
            env,
            dir,
            timeout: step.timeout,
            errors: step.errors.clone(),
        })
    }

    fn render_http(
        &self,
        step: &Step,
        spec: &crate::workflow::HttpSpec,
    ) -> Result<http::HttpJob, Failure> {
        let ctx = self.ctx.value();
        let text = |t: &Template, what: &str| {
            t.render_text(ctx)
                .map_err(|e| Failure::new("expression", format!("`http.{what}`: {e}")))
        };
        let url = text(&spec.url, "url")?;
        let mut headers = Vec::new();
        for (k, t) in &spec.headers {
            headers.push((k.clone(), text(t, "headers")?));
        }
        if spec.idempotency_key {
            headers.push(("Idempotency-Key".into(), format!("{}/{}", self.id, step.id)));
        }
        if let Some(tp) = self.attempt_traceparent(step) {
            headers.push(("traceparent".into(), tp));
        }
        let mut query = Vec::new();
        for (k, t) in &spec.query {
            query.push((k.clone(), text(t, "query")?));
        }
        let body = match (&spec.json, &spec.body) {
            (Some(j), _) => {
                let v = template::render_tree(j, ctx)
                    .map_err(|e| Failure::new("expression", format!("`http.json`: {e}")))?;
                Some((v.to_string().into_bytes(), true))
            }
            (None, Some(b)) => Some((text(b, "body")?.into_bytes(), false)),
            (None, None) => None,
        };
        Ok(http::HttpJob {
            method: spec.method.clone(),
            url,
            headers,
            query,
            body,
            expect_status: spec.expect_status.clone(),
            timeout: step.timeout,
        })
    }

    fn spawn(&mut self, idx: usize, job: Job, attempt: i64) {
        let key = self.wf.steps[idx].id.clone();
        let interrupt = self.interrupt_tx.subscribe();
        let started = Instant::now();
        match job {
            Job::Shell(job) => {
                self.tasks.spawn(async move {
                    let result = shell::run(job, interrupt).await;
                    Done {
                        key,
                        attempt,
                        elapsed: started.elapsed(),
                        result,
                    }
                });
            }
            Job::Http(job) => {
                let client = self.http.get_or_insert_with(http::client).clone();
                self.tasks.spawn(async move {
                    let result = http::run(client, job, interrupt).await;
                    Done {
                        key,
                        attempt,
                        elapsed: started.elapsed(),
                        result,
                    }
                });
            }
        }
    }

    fn settle(&mut self, c: &Connection, d: Done) -> Result<(), EngineError> {
        self.running.remove(&d.key);
        let wf = self.wf.clone();
        let Some(step) = wf.step(&d.key) else {
            return Err(EngineError::Internal(format!(
                "result for unknown step {}",
                d.key
            )));
        };
        self.settle_result(c, step, d.attempt, d.result, d.elapsed)
    }

    /// Commits an attempt's result: on success output, state patch and outcome
    /// together; on failure only the attempt record, and the retry decision.
    fn settle_result(
        &mut self,
        c: &Connection,
        step: &Step,
        attempt: i64,
        mut result: AttemptResult,
        elapsed: Duration,
    ) -> Result<(), EngineError> {
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
        let children = std::mem::take(&mut result.spans);
        // Compute the state patch first: if it cannot be rendered, the attempt fails.
        let mut new_state = None;
        if let Ok(output) = &result.outcome
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
                    new_state = Some(s);
                }
                Err(e) => {
                    result.outcome = Err(Failure::new("expression", format!("`set_state`: {e}")))
                }
            }
        }

        let id = self.id.clone();
        let mut end = AttemptEnd {
            outcome: String::new(),
            exit_code: result.exit_code.map(i64::from),
            finished_at: now.clone(),
            stdout: std::mem::take(&mut result.stdout),
            stderr: std::mem::take(&mut result.stderr),
            ..AttemptEnd::default()
        };
        match result.outcome {
            Ok(output) => {
                end.outcome = "ok".into();
                store::finish_attempt(c, &id, &step.id, attempt, &end)?;
                self.seq += 1;
                let seq = self.seq;
                let rec = self.record(step);
                rec.status = "completed".into();
                rec.outcome = Some("ok".into());
                rec.error_type = None;
                rec.error_message = None;
                rec.output = output;
                rec.finished_at = Some(now);
                rec.retry_at = None;
                rec.seq = Some(seq);
                let rec = rec.clone();
                store::put_step(c, &id, &rec)?;
                if let Some(s) = new_state {
                    store::set_state(c, &id, &s)?;
                    self.state = s;
                }
                self.ctx.set_step_result(&step.id, "completed", &rec.output);
                let span = self.write_attempt_span(c, step, attempt, "ok", None, children)?;
                self.committing.push(span);
                self.observer
                    .step_finished(&step.id, attempt, "ok", None, elapsed);
            }
            Err(failure) if result.interrupted => {
                end.outcome = "interrupted".into();
                end.error_type = Some("interrupted".into());
                end.error_message = Some(failure.message.clone());
                store::finish_attempt(c, &id, &step.id, attempt, &end)?;
                let rec = self.record(step);
                rec.status = "pending".into();
                rec.outcome = Some("interrupted".into());
                let rec = rec.clone();
                store::put_step(c, &id, &rec)?;
                self.write_attempt_span(c, step, attempt, "interrupted", Some(&failure), children)?;
                self.observer.step_finished(
                    &step.id,
                    attempt,
                    "interrupted",
                    Some(&failure),
                    elapsed,
                );
            }
            Err(failure) => {
                let budget_base = self.record(step).budget_base;
                // Count this attempt too: it is recorded (outcome pending) already.
                let used = budget_used(c, &id, &step.id, budget_base)?;
                let retryable = failure.error_type != "expression"
                    && step.retry.is_retryable(&failure.error_type)
                    && (!matches!(step.action, Action::Http(_))
                        || http::default_retryable(&failure.error_type)
                        || explicitly_listed(step, &failure.error_type));
                let will_retry = retryable && used < step.retry.max_attempts as i64;
                let outcome = if will_retry {
                    "retry"
                } else if failure.error_type == "timeout" {
                    "timeout"
                } else {
                    "failed"
                };
                end.outcome = outcome.into();
                end.error_type = Some(failure.error_type.clone());
                end.error_message = Some(failure.message.clone());
                store::finish_attempt(c, &id, &step.id, attempt, &end)?;
                let delay = step
                    .retry
                    .delay_before(attempt as u32 + 1)
                    .max(result.retry_after.unwrap_or_default());
                let rec = self.record(step);
                rec.outcome = Some(outcome.into());
                rec.error_type = Some(failure.error_type.clone());
                rec.error_message = Some(failure.message.clone());
                if will_retry {
                    rec.status = "retrying".into();
                    rec.retry_at = Some(store::fmt_time(
                        Utc::now() + chrono::Duration::from_std(delay).unwrap_or_default(),
                    ));
                } else {
                    rec.status = "failed".into();
                    rec.finished_at = Some(now);
                    rec.retry_at = None;
                }
                let rec = rec.clone();
                store::put_step(c, &id, &rec)?;
                self.write_attempt_span(c, step, attempt, outcome, Some(&failure), children)?;
                self.observer
                    .step_finished(&step.id, attempt, outcome, Some(&failure), elapsed);
                if !will_retry {
                    self.ctx.set_step_result(&step.id, "failed", &Value::Null);
                    if !step.continue_on_error && self.failed.is_none() {
                        self.failed = Some(failure_reason(&step.id, &rec));
                    }
                }
            }
        }
        Ok(())
    }
}

/// An HTTP error type the user named in `retry` is retried even if it is a 4xx.
fn explicitly_listed(step: &Step, error_type: &str) -> bool {
    step.retry
        .retryable
        .iter()
        .any(|p| crate::workflow::error_matches(p, error_type))
}

fn failure_reason(key: &str, rec: &StepRow) -> String {
    format!(
        "step `{key}` failed{}",
        match (&rec.error_type, &rec.error_message) {
            (Some(t), Some(m)) => format!(" ({t}: {m})"),
            (Some(t), None) => format!(" ({t})"),
            _ => String::new(),
        }
    )
}
