//! The scheduler: drives one instance for one run. It replays what history
//! says is done, decides which units (steps, `for_each` items, compensations)
//! are ready, records each attempt before its command starts, and commits each
//! result (attempt outcome, output, state patch) in one transaction together
//! with the starts of the units that result unblocks: a sequential step costs
//! one commit. It ends the run when the instance completes, fails (after its
//! compensations), suspends on a timer or an event, is canceled, or is
//! interrupted.
//!
//! This file holds the loop (commit, spawn, wait, poll); `schedule` decides
//! what is ready, `attempt` starts units and settles results, `suspend`
//! handles timers and events, `render` turns expressions into what runs,
//! `spans` keeps the run's trace, and `groups` records the process groups of
//! attempts that run long enough to need it. Every change is a
//! `store::Write`, committed by the loop in one fenced batch.

mod attempt;
mod commit;
mod groups;
mod render;
mod spans;
mod suspend;

use super::context::{self, Context};
use super::output::merge_patch;
use super::output_files;
use super::redact::Redactor;
pub use super::scheduler::RunOutcome;
pub(super) use super::scheduler::Stop;
use super::scheduler::{Scheduler, Unit, retry};
use super::{AttemptResult, EngineError, Failure, Observer, http, shell};
use crate::store::{self, AttemptEnd, Fence, StepRow, Store, Write};
use crate::telemetry::{self, recorder};
use crate::vocab::{CancelRequest, InstanceId, StepStatus, Timestamp, UnitKey};
use crate::workflow::template::{self, Template};
use crate::workflow::{
    Action, Condition, HttpSpec, RetryPolicy, RunCmd, SleepSpec, Step, Workflow, expr,
};
use opentelemetry::KeyValue;
use opentelemetry::trace::Status;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// How one run should behave.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Waits (timers, retry backoffs) up to this long happen inside the run.
    pub inline_wait: Duration,
    /// Fire timers that are not yet due (`wf resume --now`).
    pub fire_timers: bool,
    /// Give failed steps a fresh attempt budget (`wf resume --retry-failed`).
    pub retry_failed: bool,
    /// Cancel the instance: start nothing new, run compensations (`wf cancel`).
    pub cancel: bool,
    /// With `cancel`: run no compensations (`wf cancel --terminate`).
    pub terminate: bool,
    /// The definition, when the caller has just parsed it (used if it is the pinned one).
    pub workflow: Option<Arc<Workflow>>,
    /// W3C `traceparent` this run's trace is a child of (`TRACEPARENT` of
    /// `wf run` and `wf resume`), and its `tracestate` (`TRACESTATE`).
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
    /// The lease owner to take the instance as: `wf run`'s, which created
    /// it leased to itself, or a worker's, which claimed it; either way the
    /// run takes it at once and checks it under the lease (`drive`). None:
    /// a name of this run's own, the instance checked before it is taken.
    pub owner: Option<String>,
    /// `wf restart --from STEP`: reset STEP and what depends on it first
    /// (see `engine::restart`); only an ended instance can be.
    pub restart: Option<String>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            inline_wait: Duration::from_secs(30),
            fire_timers: false,
            retry_failed: false,
            cancel: false,
            terminate: false,
            workflow: None,
            traceparent: None,
            tracestate: None,
            owner: None,
            restart: None,
        }
    }
}

/// How often a run looks for a cancel request or an awaited event while it
/// waits (docs/execution.md: they take effect within 200 ms).
const POLL_EVERY: Duration = Duration::from_millis(100);

/// The signals that interrupt a run: Ctrl-C, SIGTERM, SIGHUP.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Result<Signals, EngineError> {
        use tokio::signal::unix::{SignalKind, signal};
        let one = |kind: SignalKind, name: &str| {
            signal(kind).map_err(|e| {
                EngineError::Internal(format!("cannot install the {name} handler: {e}"))
            })
        };
        Ok(Signals {
            int: one(SignalKind::interrupt(), "SIGINT")?,
            term: one(SignalKind::terminate(), "SIGTERM")?,
            hup: one(SignalKind::hangup(), "SIGHUP")?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.int.recv() => {}
            _ = self.term.recv() => {}
            _ = self.hup.recv() => {}
        }
    }
}

/// Resolves with the new holder's name once the heartbeat finds the lease lost.
async fn lost(rx: &mut watch::Receiver<Option<String>>) -> String {
    loop {
        if let Some(holder) = rx.borrow_and_update().clone() {
            return holder;
        }
        if rx.changed().await.is_err() {
            // The heartbeat stopped without news: the writes stay fenced.
            std::future::pending::<()>().await;
        }
    }
}

/// Most units settled in one transaction without a process in between.
const MAX_SETTLED_PER_COMMIT: usize = 128;

/// What a unit executes: a step's own action, or its compensation.
struct Exec<'a> {
    action: &'a Action,
    dir: Option<&'a str>,
    env: &'a [(String, Template)],
    timeout: Option<Duration>,
    retry: &'a RetryPolicy,
    errors: Option<&'a BTreeMap<i32, String>>,
}

fn exec_of<'a>(step: &'a Step, unit: &Unit) -> Exec<'a> {
    match (&step.compensate, unit.compensation) {
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

/// A unit ready to start its process or request, with everything rendered.
enum Job {
    Shell(shell::ShellJob),
    Http(http::HttpJob),
}

/// Work whose start waits for the commit in progress, with the span made
/// for it when it was first tried.
type Deferred = (Unit, Job, i64, Option<tracing::Span>);

/// What starting a unit amounted to.
enum Started {
    Spawn(Box<Job>, i64),
    /// Settled within the transaction (skipped, pure step, timer fired, event taken, failed).
    Settled,
    /// Waiting on a timer or an event, or nothing to do yet.
    Blocked,
}

struct Done {
    unit: Unit,
    attempt: i64,
    elapsed: Duration,
    result: AttemptResult,
    /// A shell attempt's `$WF_OUTPUT` file, read: for `output_files`.
    output_file: Option<output_files::OutputFile>,
}

pub(super) struct Runner<'o> {
    wf: Arc<Workflow>,
    pub(super) id: InstanceId,
    pub(super) run: i64,
    /// The run's records and decisions: the deterministic core.
    pub(super) sched: Scheduler,
    base_dir: PathBuf,
    opts: RunOptions,
    observer: &'o dyn Observer,
    output_files: output_files::OutputFiles,
    state: Value,
    ctx: Context,
    env: Vec<(String, String)>,
    tasks: JoinSet<Done>,
    /// A signal stopped the run while nothing ran but timers and waits
    /// (`drive` then leaves the instance sleeping or waiting).
    pub(in crate::engine) idle_when_stopped: bool,
    interrupt_tx: watch::Sender<bool>,
    http: Option<reqwest::Client>,
    redactor: Redactor,
    /// This run's trace: (trace_id, root span_id, parent span_id, start ns).
    trace: store::RunTrace,
    /// The run's root span, open until the run's final commit.
    root: tracing::Span,
    /// `state` changed since the last write; written just before each commit.
    state_dirty: bool,
    /// The expression context's `state` is `self.state` (not a stale copy,
    /// nor the snapshot a settling `set_state` step started with).
    ctx_state_current: bool,
    /// State as it was when each running unit with a `set_state` started.
    start_states: HashMap<String, Value>,
    /// Attempt spans in flight: unit key -> (span, its id, start ns).
    attempt_spans: HashMap<String, (tracing::Span, String, i64)>,
    /// Attempts whose success the next commit makes durable: their span ids
    /// and spans, open until that commit returned (`commit_spans`).
    committing: Vec<(String, tracing::Span)>,
    /// This run's claim on the instance: every write checks it.
    pub(super) fence: Fence,
    /// The heartbeat's word that another process took the instance over.
    lost: watch::Receiver<Option<String>>,
    /// Process groups of running attempts, not recorded yet (`groups`).
    started_groups: Vec<groups::PendingGroup>,
    /// Processes held at their exec until the commit in progress returns.
    held: Vec<u32>,
    /// How long the last commit that started work took, sent to returned
    /// (`commit::start_held`).
    commit_took: Duration,
    /// Delivered events no step has taken yet, and the last one seen.
    events: Vec<store::EventRow>,
    last_event: i64,
    /// The caller's trace flags and state (see `RunStart::caller`).
    caller: (
        opentelemetry::trace::TraceFlags,
        opentelemetry::trace::TraceState,
    ),
    live_dir: Option<PathBuf>,
}

/// What a run starts from (see `drive`).
pub(super) struct RunStart<'o> {
    pub wf: Arc<Workflow>,
    pub inst: store::InstanceRow,
    pub run: i64,
    pub records: HashMap<String, StepRow>,
    pub opts: RunOptions,
    pub observer: &'o dyn Observer,
    pub trace: store::RunTrace,
    pub root: tracing::Span,
    pub fence: Fence,
    pub lost: watch::Receiver<Option<String>>,
    pub uncounted: HashMap<String, Vec<i64>>,
    pub events: Vec<store::EventRow>,
    /// The caller's sampled flag and `tracestate`, passed on to steps.
    pub caller: (
        opentelemetry::trace::TraceFlags,
        opentelemetry::trace::TraceState,
    ),
    /// Where running attempts copy their output for `wf logs --follow`.
    pub live_dir: Option<PathBuf>,
    /// What the workflow's `timeout` counts from: the newest `wf restart`
    /// (RFC 3339), else the instance's creation.
    pub deadline_from: Option<Timestamp>,
    /// The writes that open the run, for its first commit ([`Runner::opening`]).
    pub opening: Vec<Write>,
}

impl<'o> Runner<'o> {
    pub(super) fn new(start: RunStart<'o>) -> Runner<'o> {
        let RunStart {
            wf,
            inst,
            run,
            records,
            opts,
            observer,
            trace,
            root,
            fence,
            lost,
            uncounted,
            events,
            caller,
            live_dir,
            deadline_from,
            opening,
        } = start;
        let inst = &inst;
        let secrets = context::secret_values(&wf.secrets);
        let redactor = Redactor::for_secrets(&wf.secrets);
        let mut ctx = Context::new(&inst.id, &wf.name, run, &inst.inputs, secrets);
        ctx.keep_results_of(wf.results_read.clone());
        // Workflow-level env is rendered once per run; steps see it as `env`.
        // If it cannot be, nothing can run: the workflow fails (with its
        // compensations), like a step whose inputs cannot be evaluated.
        let mut env = Vec::new();
        let mut env_map = Map::new();
        let mut env_failure = None;
        for (k, t) in &wf.env {
            match t.render_text(ctx.value()) {
                Ok(v) => {
                    env_map.insert(k.clone(), Value::String(v.clone()));
                    env.push((k.clone(), v));
                }
                Err(e) => {
                    env_failure
                        .get_or_insert_with(|| redactor.text(&format!("workflow env `{k}`: {e}")));
                }
            }
        }
        ctx.set("env", Value::Object(env_map));
        ctx.set("state", inst.state.clone());
        for step in &wf.steps {
            if let Some(rec) = records.get(&step.id)
                && rec.status.is_ended()
            {
                ctx.set_step_result(&step.id, rec.status, &rec.output);
            }
        }
        let failed = env_failure.or_else(|| {
            wf.steps.iter().find_map(|s| {
                let r = records.get(&s.id)?;
                (r.status == StepStatus::Failed && !s.continue_on_error)
                    .then(|| failure_reason(&s.id, r))
            })
        });
        let deadline = wf
            .timeout
            .map(|t| deadline_from.unwrap_or(inst.created_at).plus(t));
        let (interrupt_tx, _) = watch::channel(false);
        let sched = Scheduler::new(wf.clone(), records, failed, deadline, uncounted, opening);
        Runner {
            output_files: output_files::OutputFiles::default(),
            base_dir: PathBuf::from(&inst.base_dir),
            id: inst.id.clone(),
            state: inst.state.clone(),
            wf,
            run,
            sched,
            opts,
            observer,
            ctx,
            env,
            tasks: JoinSet::new(),
            idle_when_stopped: false,
            interrupt_tx,
            http: None,
            redactor,
            trace,
            root,
            state_dirty: false,
            ctx_state_current: true,
            start_states: HashMap::new(),
            attempt_spans: HashMap::new(),
            committing: Vec::new(),
            fence,
            lost,
            started_groups: Vec::new(),
            held: Vec::new(),
            commit_took: Duration::ZERO,
            events,
            last_event: 0,
            caller,
            live_dir,
        }
    }

    pub(super) async fn main_loop(&mut self, store: &mut Store) -> Result<RunOutcome, EngineError> {
        let replayed = self
            .sched
            .records
            .values()
            .filter(|r| r.status.is_done())
            .count();
        if replayed > 0 {
            self.observer.steps_replayed(replayed);
        }
        let mut signals = Signals::install()?;
        let mut done: Vec<Done> = Vec::new();
        let mut last_poll = Instant::now();
        loop {
            if self.sched.deadline.is_some_and(|d| d <= Timestamp::now())
                && self.sched.stop.is_none()
            {
                self.stop(Stop::Deadline);
            }
            // One transaction: results that came in, then every start they unblock.
            let mut spawns = Vec::new();
            let mut commit_spans = Vec::new();
            let mut more_now = false;
            {
                self.flush_spans(&[])?;
                for d in done.drain(..) {
                    self.settle(d)?;
                }
                if self.sched.stop != Some(Stop::Signal) {
                    let mut settled_in_tx = 0;
                    loop {
                        let mut settled = false;
                        for unit in self.sched.candidates(Timestamp::now()) {
                            if self.sched.running.len() >= self.wf.concurrency {
                                break;
                            }
                            match self.start(&unit)? {
                                Started::Spawn(job, attempt) => {
                                    // Counted as running from now on, so no later pass starts it again.
                                    let key = unit.key(&self.wf);
                                    // `set_state` sees the state as committed when its step started.
                                    if self.wf.steps[unit.idx].set_state.is_some() {
                                        self.start_states.insert(key.clone(), self.state.clone());
                                    }
                                    self.sched.running.insert(key, attempt);
                                    spawns.push((unit, job, attempt));
                                }
                                Started::Settled => {
                                    settled = true;
                                    settled_in_tx += 1;
                                }
                                Started::Blocked => {}
                            }
                        }
                        // Bound a transaction of steps that settle without a
                        // process (pure set_state steps): memory stays flat and
                        // progress reaches the disk in chunks.
                        if settled_in_tx >= MAX_SETTLED_PER_COMMIT {
                            more_now = true;
                            break;
                        }
                        if !settled {
                            break;
                        }
                    }
                }
                if std::mem::take(&mut self.state_dirty) {
                    self.sched.writes.push(Write::State(self.state.clone()));
                }
                // Nothing decided (a wake-up to look for a cancel request
                // while steps run, every 100 ms): no commit. Spans alone
                // (the last commit's own span) wait for the next commit
                // that records something, or the run's last one. A commit
                // of nothing was a synced transaction on PostgreSQL (the
                // fence's row lock is logged): ten a second per running
                // instance.
                let decided = !self.committing.is_empty()
                    || self
                        .sched
                        .writes
                        .iter()
                        .any(|w| !matches!(w, Write::Span(_)));
                debug_assert!(decided || spawns.is_empty());
                if decided {
                    commit_spans = self.commit_and_start(store, &mut spawns).await?;
                }
            }
            for (unit, job, attempt) in spawns {
                self.spawn(unit, *job, attempt);
            }
            drop(commit_spans);
            self.record_groups(store).await?;
            self.output_files.tidy();
            if more_now {
                continue;
            }

            if self.sched.running.is_empty() && self.tasks.is_empty() {
                if let Some(outcome) = self.sched.final_outcome(Timestamp::now()) {
                    // A completed instance's result is rendered now, from its
                    // final state and step outputs. One that cannot be
                    // rendered fails the instance as a failed step does: the
                    // compensations of its completed steps run first.
                    if outcome == RunOutcome::Completed {
                        match self.render_outputs() {
                            Ok(Some(v)) => self.sched.writes.push(Write::Outputs(v)),
                            Ok(None) => {}
                            Err(e) => {
                                let why = self.redactor.text(&format!("`outputs`: {e}"));
                                self.observer.message(&format!("{why}: the workflow fails"));
                                self.sched.failed = Some(why);
                                continue;
                            }
                        }
                    }
                    return Ok(outcome);
                }
                // Only timers and events left. Short waits happen here; an
                // event not yet delivered ends the run at once, unless a
                // timer is due first within the inline wait.
                let next = self.sched.next_wake();
                let within = self
                    .sched
                    .next_timer()
                    .filter(|t| t.since(Timestamp::now()) <= self.opts.inline_wait);
                let Some(timer) = within else {
                    // An event delivered while earlier steps ran (or a
                    // cancel asked meanwhile) is looked for once more
                    // before the run suspends for it.
                    let stop_before = self.sched.stop;
                    if self.poll_external(store).await? || self.sched.stop != stop_before {
                        continue;
                    }
                    return Ok(self.sched.suspend_outcome(next, Timestamp::now()));
                };
                let until = next.map_or(timer, |n| n.min(timer));
                // In slices, so that a cancel or an awaited event from another
                // process is seen within 200 ms.
                let stop_before = self.sched.stop;
                loop {
                    let wait = until.since(Timestamp::now());
                    if wait.is_zero() || self.sched.stop != stop_before {
                        break;
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(wait.min(POLL_EVERY)) => {}
                        _ = signals.recv() => {
                            // Nothing runs: the instance stays as it was,
                            // sleeping or waiting, not interrupted.
                            self.idle_when_stopped = true;
                            self.stop(Stop::Signal);
                        }
                        holder = lost(&mut self.lost) => return Err(self.fenced(holder)),
                    }
                    if self.poll_external(store).await? {
                        break;
                    }
                }
                continue;
            }

            // Wake for a result, a due timer, a signal, or to look for a cancel request.
            let timer = self
                .sched
                .next_wake()
                .map(|t| t.since(Timestamp::now()))
                .unwrap_or(Duration::from_secs(3600))
                .min(POLL_EVERY)
                .min(self.next_group_due().unwrap_or(POLL_EVERY));
            tokio::select! {
                Some(joined) = self.tasks.join_next() => {
                    done.push(joined.map_err(|e| EngineError::Internal(format!("step task failed: {e}")))?);
                    while let Some(joined) = self.tasks.try_join_next() {
                        done.push(joined.map_err(|e| EngineError::Internal(format!("step task failed: {e}")))?);
                    }
                }
                _ = tokio::time::sleep(timer) => {}
                _ = signals.recv() => self.stop(Stop::Signal),
                holder = lost(&mut self.lost) => return Err(self.fenced(holder)),
            }
            if last_poll.elapsed() >= POLL_EVERY {
                last_poll = Instant::now();
                self.poll_external(store).await?;
            }
        }
    }

    /// Looks for what other processes asked of this run: a cancel request (it
    /// starts canceling) or an awaited event (true: a waiting step can go on).
    async fn poll_external(&mut self, store: &Store) -> Result<bool, EngineError> {
        let asked = store.cancel_requested(&self.id).await?;
        if asked == CancelRequest::Terminate {
            self.sched.terminate = true;
        }
        if self.sched.stop.is_none() && asked.is_asked() {
            self.stop(Stop::Cancel);
        }
        let awaited: Vec<&str> = self
            .sched
            .records
            .values()
            .filter(|r| r.status == StepStatus::Waiting)
            .filter_map(|r| match self.wf.step(&r.step_id).map(|s| &s.action) {
                Some(Action::WaitForEvent { name, .. }) => Some(name.as_str()),
                _ => None,
            })
            .collect();
        if awaited.is_empty() {
            return Ok(false);
        }
        let after = self
            .events
            .iter()
            .map(|e| e.id)
            .max()
            .unwrap_or(0)
            .max(self.last_event);
        let new = store.events_after(&self.id, after).await?;
        let arrived = new.iter().any(|e| awaited.contains(&e.name.as_str()));
        if let Some(last) = new.last() {
            self.last_event = last.id;
        }
        self.events.extend(new);
        Ok(arrived)
    }

    /// The error of a run whose instance `holder` took over.
    fn fenced(&self, holder: String) -> EngineError {
        EngineError::LeaseLost {
            id: self.id.clone(),
            holder,
        }
    }

    /// Stops every step still running and waits for them to end, keeping
    /// nothing they report: another process owns the instance now.
    pub(super) async fn abandon(&mut self) {
        self.stop(Stop::Lost);
        let _ = self.interrupt_tx.send(true);
        while self.tasks.join_next().await.is_some() {}
    }

    /// Stops running units for `why`; a signal outranks everything.
    pub(super) fn stop(&mut self, why: Stop) {
        if why == Stop::Lost {
            self.sched.stop = Some(why);
            return;
        }
        if matches!(self.sched.stop, Some(Stop::Signal | Stop::Lost))
            || (self.sched.stop.is_some() && why != Stop::Signal)
        {
            return;
        }
        self.sched.stop = Some(why);
        // A compensation in flight (they run one at a time, after every forward
        // unit ended) is never cut short by a deadline or a cancel: only a
        // signal to this process stops it.
        if why != Stop::Signal
            && self
                .sched
                .running
                .keys()
                .any(|k| UnitKey::parse(k).compensation)
        {
            if why == Stop::Cancel {
                self.observer
                    .message("canceled: letting the running compensation finish");
            }
            return;
        }
        match why {
            Stop::Signal | Stop::Lost => {
                self.observer.message("interrupted: stopping running steps");
            }
            Stop::Cancel => self.observer.message("canceled: stopping running steps"),
            Stop::Deadline => self
                .observer
                .message("workflow timeout reached: stopping running steps"),
        }
        if why == Stop::Deadline && self.sched.failed.is_none() {
            let t = self.wf.timeout.unwrap_or_default();
            self.sched.failed = Some(format!(
                "workflow timed out after {}",
                crate::workflow::duration::human(t)
            ));
        }
        let _ = self.interrupt_tx.send(true);
        if why != Stop::Signal {
            // Compensations start after this: they get a channel of their own,
            // which only a signal to this process trips.
            self.interrupt_tx = watch::channel(false).0;
        }
    }
}

fn ok(output: Value) -> AttemptResult {
    AttemptResult {
        outcome: Ok(output),
        ..AttemptResult::default()
    }
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
