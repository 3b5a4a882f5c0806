//! The scheduler: drives one instance for one run. It replays what history
//! says is done, decides which units (steps, `for_each` items, compensations)
//! are ready, records each attempt before its command starts, and commits each
//! result (attempt outcome, output, state patch) in one transaction together
//! with the starts of the units that result unblocks: a sequential step costs
//! one commit. It ends the run when the instance completes, fails (after its
//! compensations), suspends on a timer or an event, is canceled, or is
//! interrupted.

use super::context::{self, Context};
use super::output::merge_patch;
use super::procs;
use super::redact::Redactor;
use super::{AttemptResult, EngineError, Failure, Observer, http, shell};
use crate::store::{self, AttemptEnd, Fence, StepRow, Store, Write};
use crate::telemetry::{self, recorder};
use crate::workflow::template::{self, Template};
use crate::workflow::{
    Action, Condition, HttpSpec, RetryPolicy, RunCmd, SleepSpec, Step, Workflow, expr,
};
use chrono::{DateTime, Utc};
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
    /// The definition, when the caller has just parsed it (used if it is the pinned one).
    pub workflow: Option<Arc<Workflow>>,
    /// W3C `traceparent` this run's trace is a child of (`TRACEPARENT` of
    /// `wf run` and `wf resume`).
    pub traceparent: Option<String>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            inline_wait: Duration::from_secs(30),
            fire_timers: false,
            retry_failed: false,
            cancel: false,
            workflow: None,
            traceparent: None,
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

/// Why running steps are being stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// SIGINT/SIGTERM to this process: attempts are `interrupted`, the instance stays resumable.
    Signal,
    /// `wf cancel`: attempts are `canceled`, compensations run.
    Cancel,
    /// The workflow's own `timeout` passed: attempts time out, the workflow fails.
    Deadline,
    /// Another process took the instance over: stop everything, record nothing.
    Lost,
}

/// How often a run looks for a cancel request or an awaited event while it
/// waits (SPEC §3: they take effect within 200 ms).
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
const MAX_SETTLED_PER_COMMIT: usize = 500;

/// Key suffix of a step's compensation unit.
pub(super) const COMPENSATE_SUFFIX: &str = ":compensate";

/// One schedulable thing: a step, one item of a `for_each` step, or the
/// compensation of a completed step (or item).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Unit {
    idx: usize,
    item: Option<usize>,
    compensation: bool,
}

impl Unit {
    fn step(idx: usize) -> Unit {
        Unit {
            idx,
            item: None,
            compensation: false,
        }
    }

    /// The key its rows are stored under: `id`, `id[3]`, `id:compensate`.
    fn key(&self, wf: &Workflow) -> String {
        let id = &wf.steps[self.idx].id;
        let base = match self.item {
            Some(i) => format!("{id}[{i}]"),
            None => id.clone(),
        };
        if self.compensation {
            base + COMPENSATE_SUFFIX
        } else {
            base
        }
    }
}

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

/// What starting a unit amounted to.
enum Started {
    Spawn(Job, i64),
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
}

pub(super) struct Runner<'o> {
    wf: Arc<Workflow>,
    pub(super) id: String,
    pub(super) run: i64,
    base_dir: PathBuf,
    opts: RunOptions,
    observer: &'o dyn Observer,
    records: HashMap<String, StepRow>,
    state: Value,
    ctx: Context,
    env: Vec<(String, String)>,
    /// Units in flight: key -> attempt.
    running: HashMap<String, i64>,
    tasks: JoinSet<Done>,
    seq: i64,
    /// Why the workflow failed, once a unit failed for good.
    failed: Option<String>,
    stop: Option<Stop>,
    interrupt_tx: watch::Sender<bool>,
    http: Option<reqwest::Client>,
    redactor: Redactor,
    /// When the workflow's `timeout` runs out.
    deadline: Option<DateTime<Utc>>,
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
    /// Steps whose needs are met and that have not ended (see `candidates`).
    frontier: std::collections::BTreeSet<usize>,
    /// For each step, the steps that need it.
    dependents: Vec<Vec<usize>>,
    /// Attempt spans in flight: unit key -> (span, its id, start ns).
    attempt_spans: HashMap<String, (tracing::Span, String, i64)>,
    /// Attempts whose success the next commit makes durable (for `wf.sqlite.commit`).
    committing: Vec<String>,
    /// This run's claim on the instance: every write checks it.
    pub(super) fence: Fence,
    /// The heartbeat's word that another process took the instance over.
    lost: watch::Receiver<Option<String>>,
    /// Process groups started since the last time they were recorded.
    started_groups: Vec<(String, i64, store::ProcessTag)>,
    /// What the run decided since its last commit, applied at the next one.
    pub(super) writes: Vec<Write>,
    /// Per unit key, its attempts that do not count towards `max_attempts`.
    uncounted: HashMap<String, Vec<i64>>,
    /// Delivered events no step has taken yet, and the last one seen.
    events: Vec<store::EventRow>,
    last_event: i64,
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
        } = start;
        let inst = &inst;
        let secrets = context::secret_values(&wf.secrets);
        let redactor = Redactor::for_secrets(&wf.secrets);
        let mut ctx = Context::new(&inst.id, &wf.name, run, &inst.inputs, secrets);
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
        let mut seq = 0;
        for rec in records.values() {
            seq = seq.max(rec.seq.unwrap_or(0));
        }
        for step in &wf.steps {
            if let Some(rec) = records.get(&step.id)
                && matches!(rec.status.as_str(), "completed" | "skipped" | "failed")
            {
                ctx.set_step_result(&step.id, &rec.status, &rec.output);
            }
        }
        let failed = env_failure.or_else(|| {
            wf.steps.iter().find_map(|s| {
                let r = records.get(&s.id)?;
                (r.status == "failed" && !s.continue_on_error).then(|| failure_reason(&s.id, r))
            })
        });
        let deadline = wf.timeout.and_then(|t| {
            store::parse_time(&inst.created_at)
                .map(|c| c + chrono::Duration::from_std(t).unwrap_or_default())
        });
        let (interrupt_tx, _) = watch::channel(false);
        let mut dependents = vec![Vec::new(); wf.steps.len()];
        for (i, s) in wf.steps.iter().enumerate() {
            for &d in &s.needs {
                dependents[d].push(i);
            }
        }
        let mut runner = Runner {
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
            stop: None,
            interrupt_tx,
            http: None,
            redactor,
            deadline,
            trace,
            root,
            state_dirty: false,
            ctx_state_current: true,
            start_states: HashMap::new(),
            frontier: std::collections::BTreeSet::new(),
            dependents,
            attempt_spans: HashMap::new(),
            committing: Vec::new(),
            fence,
            lost,
            started_groups: Vec::new(),
            writes: Vec::new(),
            uncounted,
            events,
            last_event: 0,
        };
        runner.frontier = (0..runner.wf.steps.len())
            .filter(|&i| runner.deps_satisfied(i) && !runner.ended(i))
            .collect();
        runner
    }

    pub(super) async fn main_loop(&mut self, store: &mut Store) -> Result<RunOutcome, EngineError> {
        let replayed = self
            .records
            .values()
            .filter(|r| r.status == "completed" || r.status == "skipped")
            .count();
        if replayed > 0 {
            self.observer.steps_replayed(replayed);
        }
        let mut signals = Signals::install()?;
        let mut done: Vec<Done> = Vec::new();
        let mut last_poll = Instant::now();
        loop {
            if self.deadline.is_some_and(|d| d <= Utc::now()) && self.stop.is_none() {
                self.stop(Stop::Deadline);
            }
            // One transaction: results that came in, then every start they unblock.
            let mut spawns = Vec::new();
            let mut more_now = false;
            {
                self.flush_spans(&[])?;
                for d in done.drain(..) {
                    self.settle(d)?;
                }
                if self.stop != Some(Stop::Signal) {
                    let mut settled_in_tx = 0;
                    loop {
                        let mut settled = false;
                        for unit in self.candidates() {
                            if self.running.len() >= self.wf.concurrency {
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
                                    self.running.insert(key, attempt);
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
                    self.writes.push(Write::State(self.state.clone()));
                }
                let commit_spans = self.commit_spans();
                let writes = std::mem::take(&mut self.writes);
                store.commit(&self.fence, &writes)?;
                drop(commit_spans);
            }
            for (unit, job, attempt) in spawns {
                self.spawn(unit, job, attempt);
            }
            self.record_groups(store)?;
            if more_now {
                continue;
            }

            if self.running.is_empty() && self.tasks.is_empty() {
                if let Some(outcome) = self.final_outcome() {
                    return Ok(outcome);
                }
                // Only timers and events left. Short waits happen here; an
                // event not yet delivered ends the run at once, unless a
                // timer is due first within the inline wait.
                let next = self.next_wake();
                let within = self.next_timer().filter(|t| {
                    (*t - Utc::now()).to_std().unwrap_or_default() <= self.opts.inline_wait
                });
                let Some(timer) = within else {
                    return Ok(self.suspend_outcome(next));
                };
                let until = next.map_or(timer, |n| n.min(timer));
                // In slices, so that a cancel or an awaited event from another
                // process is seen within 200 ms.
                let stop_before = self.stop;
                loop {
                    let wait = (until - Utc::now()).to_std().unwrap_or_default();
                    if wait.is_zero() || self.stop != stop_before {
                        break;
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(wait.min(POLL_EVERY)) => {}
                        _ = signals.recv() => self.stop(Stop::Signal),
                        holder = lost(&mut self.lost) => return Err(self.fenced(holder)),
                    }
                    if self.poll_external(store)? {
                        break;
                    }
                }
                continue;
            }

            // Wake for a result, a due timer, a signal, or to look for a cancel request.
            let timer = self
                .next_wake()
                .map(|t| (t - Utc::now()).to_std().unwrap_or_default())
                .unwrap_or(Duration::from_secs(3600))
                .min(POLL_EVERY);
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
                self.poll_external(store)?;
            }
        }
    }

    /// Looks for what other processes asked of this run: a cancel request (it
    /// starts canceling) or an awaited event (true: a waiting step can go on).
    fn poll_external(&mut self, store: &Store) -> Result<bool, EngineError> {
        if self.stop.is_none() && store::cancel_requested(store.conn(), &self.id)? {
            self.stop(Stop::Cancel);
        }
        let awaited: Vec<&str> = self
            .records
            .values()
            .filter(|r| r.status == "waiting")
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
        let new = store::events_after(store.conn(), &self.id, after)?;
        let arrived = new.iter().any(|e| awaited.contains(&e.name.as_str()));
        if let Some(last) = new.last() {
            self.last_event = last.id;
        }
        self.events.extend(new);
        Ok(arrived)
    }

    /// Records which process group each attempt just started runs in, so the
    /// next runner can end what is left of it should this process die. Not
    /// fsynced: a process group does not outlive the machine.
    fn record_groups(&mut self, store: &mut Store) -> Result<(), EngineError> {
        if self.started_groups.is_empty() {
            return Ok(());
        }
        let writes: Vec<Write> = std::mem::take(&mut self.started_groups)
            .into_iter()
            .map(|(key, attempt, tag)| Write::AttemptProcess { key, attempt, tag })
            .collect();
        store.commit_unsynced(&self.fence, &writes)?;
        Ok(())
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
            self.stop = Some(why);
            return;
        }
        if matches!(self.stop, Some(Stop::Signal | Stop::Lost))
            || (self.stop.is_some() && why != Stop::Signal)
        {
            return;
        }
        self.stop = Some(why);
        // A compensation in flight (they run one at a time, after every forward
        // unit ended) is never cut short by a deadline or a cancel: only a
        // signal to this process stops it.
        if why != Stop::Signal && self.running.keys().any(|k| k.ends_with(COMPENSATE_SUFFIX)) {
            if why == Stop::Cancel {
                self.observer
                    .message("canceled: letting the running compensation finish");
            }
            return;
        }
        match why {
            Stop::Signal | Stop::Lost => {
                self.observer.message("interrupted: stopping running steps")
            }
            Stop::Cancel => self.observer.message("canceled: stopping running steps"),
            Stop::Deadline => self
                .observer
                .message("workflow timeout reached: stopping running steps"),
        }
        if why == Stop::Deadline && self.failed.is_none() {
            let t = self.wf.timeout.unwrap_or_default();
            self.failed = Some(format!(
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

    /// Whether the run is winding down: compensating after a failure or cancel.
    fn compensating(&self) -> bool {
        self.failed.is_some() || self.stop == Some(Stop::Cancel)
    }

    /// Units that may start now, in a deterministic order.
    fn candidates(&mut self) -> Vec<Unit> {
        if self.compensating() {
            return self.next_compensation().into_iter().collect();
        }
        let mut out = Vec::new();
        // Only the frontier is looked at: steps whose needs are met and that
        // have not ended. A step that ended since the last call leaves it and
        // lets in the dependents it unblocks, so a long chain costs O(1) a step.
        let wf = self.wf.clone();
        let mut queue: Vec<usize> = self.frontier.iter().copied().collect();
        let mut i = 0;
        while let Some(&idx) = queue.get(i) {
            i += 1;
            let step = &wf.steps[idx];
            let key = step.id.clone();
            let rec = self.records.get(&key);
            let status = rec.map(|r| r.status.as_str()).unwrap_or("pending");
            if matches!(status, "completed" | "skipped" | "failed") {
                self.frontier.remove(&idx);
                for &d in &self.dependents[idx] {
                    if !self.frontier.contains(&d) && self.deps_satisfied(d) && !self.ended(d) {
                        self.frontier.insert(d);
                        queue.push(d);
                    }
                }
                continue;
            }
            if step.for_each.is_some() && rec.is_some_and(|r| !r.items.is_null()) {
                // Expanded: its items are the units.
                let n = rec.and_then(|r| r.items.as_array()).map_or(0, Vec::len);
                let limit = step.max_parallel.unwrap_or(usize::MAX);
                let mut active = (0..n)
                    .filter(|i| self.running.contains_key(&format!("{}[{i}]", step.id)))
                    .count();
                let mut unfinished = 0;
                for i in 0..n {
                    let unit = Unit {
                        idx,
                        item: Some(i),
                        compensation: false,
                    };
                    let k = unit.key(&self.wf);
                    let st = self
                        .records
                        .get(&k)
                        .map(|r| r.status.as_str())
                        .unwrap_or("pending");
                    if !matches!(st, "completed" | "skipped" | "failed") {
                        unfinished += 1;
                    }
                    if active >= limit || !self.unit_due(&k) {
                        continue;
                    }
                    active += 1;
                    out.push(unit);
                }
                if unfinished == 0 {
                    // All items ended: the step itself settles next.
                    out.push(Unit::step(idx));
                }
            } else if !self.running.contains_key(&key) && self.unit_due(&key) {
                out.push(Unit::step(idx));
            }
        }
        out
    }

    /// Not terminal, not running, and any retry backoff has passed.
    fn unit_due(&self, key: &str) -> bool {
        if self.running.contains_key(key) {
            return false;
        }
        match self.records.get(key) {
            None => true,
            Some(r) => match r.status.as_str() {
                "completed" | "skipped" | "failed" => false,
                "retrying" => r
                    .retry_at
                    .as_deref()
                    .and_then(store::parse_time)
                    .is_none_or(|t| t <= Utc::now()),
                _ => true,
            },
        }
    }

    fn ended(&self, idx: usize) -> bool {
        self.records
            .get(&self.wf.steps[idx].id)
            .is_some_and(|r| matches!(r.status.as_str(), "completed" | "skipped" | "failed"))
    }

    fn deps_satisfied(&self, idx: usize) -> bool {
        self.wf.steps[idx].needs.iter().all(|&d| {
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

    /// The next compensation to run: of the completed units with a
    /// `compensate`, the latest-completed one not yet compensated. One at a
    /// time, in reverse completion order.
    fn next_compensation(&self) -> Option<Unit> {
        if !self.running.is_empty() {
            return None;
        }
        let mut done: Vec<(i64, Unit)> = Vec::new();
        for (idx, step) in self.wf.steps.iter().enumerate() {
            if step.compensate.is_none() {
                continue;
            }
            let mut units = vec![Unit::step(idx)];
            if step.for_each.is_some() {
                let n = self
                    .records
                    .get(&step.id)
                    .and_then(|r| r.items.as_array())
                    .map_or(0, Vec::len);
                units = (0..n)
                    .map(|i| Unit {
                        idx,
                        item: Some(i),
                        compensation: false,
                    })
                    .collect();
            }
            for u in units {
                if let Some(r) = self.records.get(&u.key(&self.wf))
                    && r.status == "completed"
                    && let Some(seq) = r.seq
                {
                    done.push((seq, u));
                }
            }
        }
        done.sort_by_key(|(seq, _)| std::cmp::Reverse(*seq));
        for (_, u) in done {
            let comp = Unit {
                compensation: true,
                ..u
            };
            let key = comp.key(&self.wf);
            match self.records.get(&key).map(|r| r.status.as_str()) {
                Some("completed") | Some("failed") => continue,
                _ if self.unit_due(&key) => return Some(comp),
                // Waiting out a retry backoff: nothing else starts before it.
                _ => return None,
            }
        }
        None
    }

    fn compensations_pending(&self) -> bool {
        self.wf.steps.iter().enumerate().any(|(idx, step)| {
            if step.compensate.is_none() {
                return false;
            }
            let units: Vec<Unit> = match self.records.get(&step.id).and_then(|r| r.items.as_array())
            {
                Some(items) if step.for_each.is_some() => (0..items.len())
                    .map(|i| Unit {
                        idx,
                        item: Some(i),
                        compensation: false,
                    })
                    .collect(),
                _ => vec![Unit::step(idx)],
            };
            units.into_iter().any(|u| {
                let done = self
                    .records
                    .get(&u.key(&self.wf))
                    .is_some_and(|r| r.status == "completed");
                let comp = Unit {
                    compensation: true,
                    ..u
                };
                let comp_ended = self
                    .records
                    .get(&comp.key(&self.wf))
                    .is_some_and(|r| r.status == "completed" || r.status == "failed");
                done && !comp_ended
            })
        })
    }

    /// Stores the spans of this run that ended since the last call (masking
    /// secrets), except those in `skip`.
    fn flush_spans(&mut self, skip: &[String]) -> Result<(), EngineError> {
        let run = (self.trace.0.as_str(), self.id.as_str(), self.run);
        let spans = super::drive::ended_spans(run, Some(&self.redactor), skip);
        self.writes.extend(spans);
        Ok(())
    }

    /// A `wf.sqlite.commit` span under each attempt the coming commit makes
    /// durable; they end when the caller drops them, after the commit.
    fn commit_spans(&mut self) -> Vec<tracing::Span> {
        std::mem::take(&mut self.committing)
            .into_iter()
            .map(|parent| {
                let span = tracing::info_span!(
                    parent: None,
                    "wf.sqlite.commit",
                    workflow.name = self.wf.name.as_str(),
                    workflow.instance.id = self.id.as_str(),
                    db.system.name = "sqlite",
                    db.operation.name = "COMMIT",
                );
                let _ = span.set_parent(recorder::parent_context(&self.trace.0, &parent, false));
                span
            })
            .collect()
    }

    /// Ends the run's root span and stores it with whatever spans are pending.
    pub(super) fn write_root_span(
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
    fn attempt_span(&self, key: &str) -> tracing::Span {
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
    fn write_attempt_span(
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

    /// Steps still waiting for a retry when the instance fails or is
    /// canceled will not get it: they end as `status`, their last error kept.
    /// (`wf resume --retry-failed` gives a failed one a fresh budget.)
    pub(super) fn abandon_retries(&mut self, status: &str, why: &str) -> Result<(), EngineError> {
        let now = store::now();
        for rec in self.records.values_mut().filter(|r| r.status == "retrying") {
            rec.status = status.into();
            rec.retry_at = None;
            rec.finished_at = Some(now.clone());
            rec.error_message = Some(match rec.error_message.take() {
                Some(m) => format!("{m} (not retried: {why})"),
                None => format!("not retried: {why}"),
            });
            self.writes.push(Write::Step(Box::new(rec.clone())));
        }
        Ok(())
    }

    /// The run's end when nothing is running and nothing more can start now.
    fn final_outcome(&self) -> Option<RunOutcome> {
        if self.stop == Some(Stop::Signal) {
            return Some(RunOutcome::Interrupted);
        }
        if self.compensating() {
            if self.compensations_pending() {
                return None;
            }
            if self.stop == Some(Stop::Cancel) {
                return Some(RunOutcome::Canceled);
            }
            return self.failed.clone().map(RunOutcome::Failed);
        }
        let all_done = self.wf.steps.iter().all(|s| {
            self.records
                .get(&s.id)
                .is_some_and(|r| matches!(r.status.as_str(), "completed" | "skipped" | "failed"))
        });
        all_done.then_some(RunOutcome::Completed)
    }

    fn suspend_outcome(&self, next: Option<DateTime<Utc>>) -> RunOutcome {
        let mut waiting: Vec<String> = Vec::new();
        for rec in self.records.values().filter(|r| r.status == "waiting") {
            if let Some(Action::WaitForEvent { name, .. }) =
                self.wf.step(&rec.step_id).map(|s| &s.action)
                && !waiting.contains(name)
            {
                waiting.push(name.clone());
            }
        }
        waiting.sort();
        if !waiting.is_empty() {
            RunOutcome::Waiting(waiting.join(","))
        } else {
            RunOutcome::Sleeping(next.map(store::fmt_time).unwrap_or_else(store::now))
        }
    }

    /// The earliest time something becomes due: a retry, a sleep, an event
    /// timeout, or the workflow's deadline.
    pub(super) fn next_wake(&self) -> Option<DateTime<Utc>> {
        self.records
            .values()
            .filter(|r| matches!(r.status.as_str(), "retrying" | "sleeping" | "waiting"))
            .filter_map(|r| r.retry_at.as_deref().and_then(store::parse_time))
            .chain(self.deadline.filter(|_| self.stop.is_none()))
            .min()
    }

    /// Attempts that count towards `key`'s `max_attempts` since `base`
    /// (every recorded one but the interrupted and canceled; the one in
    /// flight included).
    fn budget_used(&self, key: &str, base: i64) -> i64 {
        let recorded = self.records.get(key).map_or(0, |r| r.attempts);
        let uncounted = self
            .uncounted
            .get(key)
            .map_or(0, |a| a.iter().filter(|&&n| n > base).count() as i64);
        recorded - base - uncounted
    }

    /// The earliest timer the run may wait for inline: a retry, a sleep, or
    /// the workflow's deadline (not an event's timeout: a run does not wait
    /// for events).
    fn next_timer(&self) -> Option<DateTime<Utc>> {
        self.records
            .values()
            .filter(|r| matches!(r.status.as_str(), "retrying" | "sleeping"))
            .filter_map(|r| r.retry_at.as_deref().and_then(store::parse_time))
            .chain(self.deadline.filter(|_| self.stop.is_none()))
            .min()
    }

    fn record(&mut self, unit: &Unit) -> &mut StepRow {
        let key = unit.key(&self.wf);
        let step_id = self.wf.steps[unit.idx].id.clone();
        self.records
            .entry(key.clone())
            .or_insert_with(|| StepRow::pending(&key, &step_id))
    }

    fn put(&mut self, unit: &Unit) -> Result<(), EngineError> {
        let rec = self.record(unit).clone();
        self.writes.push(Write::Step(Box::new(rec)));
        Ok(())
    }

    /// Sets `item`, `index` and `step` in the expression context for `unit`
    /// (`attempt`: the one settling, else the one about to start).
    fn enter(&mut self, unit: &Unit, attempt: Option<i64>) {
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
        match unit.item {
            Some(i) => {
                let item = self
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
    fn start(&mut self, unit: &Unit) -> Result<Started, EngineError> {
        let wf = self.wf.clone();
        let step = &wf.steps[unit.idx];
        self.enter(unit, None);
        let first_time = {
            let rec = self.record(unit);
            rec.attempts == 0 && rec.status == "pending"
        };

        if !unit.compensation && unit.item.is_none() {
            if first_time && let Some(cond) = &step.condition {
                match self.eval_condition(cond) {
                    Ok(true) => {}
                    Ok(false) => {
                        self.skip(unit)?;
                        return Ok(Started::Settled);
                    }
                    Err(e) => {
                        let f = Failure::new("expression", format!("`if`: {e}"));
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

    fn launch(&mut self, unit: &Unit, job: Result<Job, Failure>) -> Result<Started, EngineError> {
        let attempt = self.begin_attempt(unit, false)?;
        match job {
            Ok(job) => Ok(Started::Spawn(job, attempt)),
            Err(f) => {
                self.settle_result(unit, attempt, AttemptResult::failed(f), Duration::ZERO)?;
                Ok(Started::Settled)
            }
        }
    }

    /// Fails `unit` without running anything (its inputs could not be evaluated).
    fn fail_now(&mut self, unit: &Unit, f: Failure) -> Result<(), EngineError> {
        let attempt = self.begin_attempt(unit, true)?;
        self.settle_result(unit, attempt, AttemptResult::failed(f), Duration::ZERO)
    }

    fn skip(&mut self, unit: &Unit) -> Result<(), EngineError> {
        let now = store::now();
        let key = unit.key(&self.wf);
        let rec = self.record(unit);
        rec.status = "skipped".into();
        rec.outcome = Some("skipped".into());
        rec.started_at = Some(now.clone());
        rec.finished_at = Some(now);
        self.put(unit)?;
        self.ctx.set_step_result(&key, "skipped", &Value::Null);
        let span = self.attempt_span(&key);
        span.set_attribute("workflow.step.outcome", "skipped");
        drop(span);
        self.flush_spans(&[])?;
        self.observer.step_skipped(&key);
        Ok(())
    }

    /// Pins a `for_each` step's list (first time) or, once every item ended,
    /// settles the step with the list of item outputs.
    fn fan_out(&mut self, unit: &Unit, list: &Value) -> Result<Started, EngineError> {
        let step = &self.wf.clone().steps[unit.idx];
        let items = self.record(unit).items.clone();
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
                    let f =
                        Failure::new("expression", format!("`for_each` gave {kind}, not a list"));
                    self.fail_now(unit, f)?;
                    return Ok(Started::Settled);
                }
                Err(e) => {
                    self.fail_now(unit, Failure::new("expression", format!("`for_each`: {e}")))?;
                    return Ok(Started::Settled);
                }
            };
            let now = store::now();
            let mut items = items;
            for v in items.iter_mut() {
                self.redactor.value(v);
            }
            let rec = self.record(unit);
            rec.items = Value::Array(items);
            rec.status = "running".into();
            rec.started_at = Some(now);
            self.put(unit)?;
            return Ok(Started::Settled);
        };
        // Every item has ended (the scheduler only offers the step itself then).
        let mut outputs = Vec::with_capacity(items.len());
        let mut failed_item = None;
        for i in 0..items.len() {
            let key = format!("{}[{i}]", step.id);
            match self.records.get(&key) {
                Some(r) if r.status == "completed" => outputs.push(r.output.clone()),
                Some(r) => {
                    if r.status == "failed" && failed_item.is_none() {
                        failed_item = Some((key.clone(), r.clone()));
                    }
                    outputs.push(Value::Null)
                }
                None => return Ok(Started::Blocked),
            }
        }
        let now = store::now();
        self.seq += 1;
        let seq = self.seq;
        let rec = self.record(unit);
        rec.output = Value::Array(outputs);
        rec.finished_at = Some(now);
        rec.attempts = rec.attempts.max(0);
        match &failed_item {
            None => {
                rec.status = "completed".into();
                rec.outcome = Some("ok".into());
                rec.seq = Some(seq);
            }
            Some((_, r)) => {
                rec.status = "failed".into();
                rec.outcome = Some("failed".into());
                rec.error_type = r.error_type.clone();
                rec.error_message = r.error_message.clone();
            }
        }
        let status = rec.status.clone();
        let output = rec.output.clone();
        self.put(unit)?;
        self.ctx.set_step_result(&step.id, &status, &output);
        self.observer.fan_out_finished(&step.id, items.len());
        if let Some((key, r)) = failed_item
            && !step.continue_on_error
            && self.failed.is_none()
        {
            self.failed = Some(failure_reason(&key, &r));
        }
        Ok(Started::Settled)
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

    /// The span id (and start) of the attempt about to begin; its span starts
    /// on the first call.
    fn open_attempt_span(&mut self, unit: &Unit) -> (String, i64) {
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

    /// W3C trace context of the attempt about to begin (for its process or request).
    fn attempt_traceparent(&self, unit: &Unit) -> Option<String> {
        self.attempt_spans
            .get(&unit.key(&self.wf))
            .map(|(_, span_id, _)| telemetry::traceparent(&self.trace.0, span_id))
    }

    /// Records the attempt row (durably, with the enclosing commit) before anything runs.
    ///
    /// `settles_now`: the attempt ends within this same transaction (no process),
    /// so the step row is written once, by the settle, instead of twice.
    fn begin_attempt(&mut self, unit: &Unit, settles_now: bool) -> Result<i64, EngineError> {
        let (span_id, start_ns) = self.open_attempt_span(unit);
        let now = store::now();
        let run = self.run;
        let key = unit.key(&self.wf);
        let rec = self.record(unit);
        rec.attempts += 1;
        rec.status = "running".into();
        rec.retry_at = None;
        if rec.started_at.is_none() {
            rec.started_at = Some(now.clone());
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
            self.put(unit)?;
        }
        self.observer.step_started(&key, attempt);
        Ok(attempt)
    }

    fn start_sleep(&mut self, unit: &Unit, spec: &SleepSpec) -> Result<Started, EngineError> {
        let existing = self.record(unit).retry_at.clone();
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
                                self.fail_now(unit, Failure::new("expression", msg))?;
                                return Ok(Started::Settled);
                            }
                        }
                    }
                };
                let rec = self.record(unit);
                rec.status = "sleeping".into();
                rec.started_at = Some(store::now());
                rec.retry_at = Some(store::fmt_time(wake));
                self.put(unit)?;
                wake
            }
        };
        if wake <= Utc::now() {
            let attempt = self.begin_attempt(unit, true)?;
            let out = json!({ "slept_until": store::fmt_time(wake) });
            self.settle_result(unit, attempt, ok(out), Duration::ZERO)?;
            Ok(Started::Settled)
        } else {
            Ok(Started::Blocked)
        }
    }

    fn start_wait(
        &mut self,
        unit: &Unit,
        name: &str,
        timeout: Option<Duration>,
    ) -> Result<Started, EngineError> {
        let key = unit.key(&self.wf);
        // Delivered events are known from the run's start and each poll.
        if let Some(at) = self.events.iter().position(|e| e.name == name) {
            let store::EventRow {
                id: event_id,
                payload,
                traceparent,
                ..
            } = self.events.remove(at);
            self.writes.push(Write::TakeEvent {
                event: event_id,
                key: key.clone(),
            });
            // The run an event wakes links to the context it was sent under.
            if let Some(sc) = traceparent
                .as_deref()
                .and_then(telemetry::parse_traceparent)
                .and_then(|(trace, span)| recorder::span_context(&trace, &span, true))
            {
                self.root.add_link_with_attributes(
                    sc,
                    vec![KeyValue::new("wf.event.name", name.to_string())],
                );
            }
            let attempt = self.begin_attempt(unit, true)?;
            let data = serde_json::from_str::<Value>(&payload).unwrap_or(Value::Null);
            let out = json!({ "event": name, "json": data, "body": payload });
            self.settle_result(unit, attempt, ok(out), Duration::ZERO)?;
            return Ok(Started::Settled);
        }
        let rec = self.record(unit);
        if rec.status != "waiting" {
            rec.status = "waiting".into();
            rec.started_at = Some(store::now());
            rec.retry_at = timeout.map(|t| {
                store::fmt_time(Utc::now() + chrono::Duration::from_std(t).unwrap_or_default())
            });
            self.put(unit)?;
            return Ok(Started::Blocked);
        }
        if let Some(deadline) = rec.retry_at.as_deref().and_then(store::parse_time)
            && deadline <= Utc::now()
        {
            let f = Failure::new(
                "timeout",
                format!("no `{name}` event arrived before the timeout"),
            );
            self.fail_now(unit, f)?;
            return Ok(Started::Settled);
        }
        Ok(Started::Blocked)
    }

    fn unit_env(
        &self,
        unit: &Unit,
        exec: &Exec,
        out: &mut Vec<(String, String)>,
    ) -> Result<(), Failure> {
        out.extend(self.env.iter().cloned());
        for (k, t) in exec.env {
            let v = t
                .render_text(self.ctx.value())
                .map_err(|e| Failure::new("expression", format!("env `{k}`: {e}")))?;
            out.push((k.clone(), v));
        }
        let key = unit.key(&self.wf);
        let attempt = self.records.get(&key).map_or(1, |r| r.attempts + 1);
        out.push(("WF_INSTANCE_ID".into(), self.id.clone()));
        out.push(("WF_WORKFLOW".into(), self.wf.name.clone()));
        out.push(("WF_STEP_ID".into(), key));
        out.push(("WF_ATTEMPT".into(), attempt.to_string()));
        out.push(("WF_RUN".into(), self.run.to_string()));
        if let Some(i) = unit.item {
            out.push(("WF_ITEM_INDEX".into(), i.to_string()));
        }
        if let Some(tp) = self.attempt_traceparent(unit) {
            out.push(("TRACEPARENT".into(), tp));
        }
        if let Some((k, _)) = out
            .iter()
            .find(|(k, v)| k.contains('\0') || v.contains('\0'))
        {
            return Err(Failure::new(
                "expression",
                format!("env `{k}` contains a NUL byte"),
            ));
        }
        Ok(())
    }

    fn render_shell(
        &self,
        unit: &Unit,
        exec: &Exec,
        cmd: &RunCmd,
    ) -> Result<shell::ShellJob, Failure> {
        let ctx = self.ctx.value();
        let expr_err = |e: expr::ExprError| Failure::new("expression", format!("`run`: {e}"));
        let mut env = Vec::new();
        let mut files = Vec::new();
        self.unit_env(unit, exec, &mut env)?;
        let (shell, argv) = match cmd {
            RunCmd::Shell(t) => {
                let mut vars = Vec::new();
                let text = t.render_shell(ctx, &mut vars).map_err(expr_err)?;
                if text.contains('\0') || vars.iter().any(|(_, v)| v.contains('\0')) {
                    return Err(Failure::new(
                        "expression",
                        "`run`: a value contains a NUL byte".into(),
                    ));
                }
                // A value too large for an environment variable reaches the
                // shell through a file (in memory) that it reads first.
                let mut prologue = String::new();
                for (name, value) in vars {
                    if value.len() > shell::LARGE_VALUE {
                        prologue.push_str(&format!(
                            "{name}=$(cat -- \"${{{name}_FILE}}\"; printf x); {name}=${{{name}%x}}; unset {name}_FILE\n"
                        ));
                        files.push((name, value));
                    } else {
                        env.push((name, value));
                    }
                }
                (Some(prologue + &text), Vec::new())
            }
            RunCmd::Argv(items) => {
                let argv = items
                    .iter()
                    .map(|t| t.render_text(ctx))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(expr_err)?;
                if argv.iter().any(|a| a.contains('\0')) {
                    return Err(Failure::new(
                        "expression",
                        "`run`: an argument contains a NUL byte".into(),
                    ));
                }
                (None, argv)
            }
        };
        let dir = match exec.dir {
            Some(d) => self.base_dir.join(d),
            None => self.base_dir.clone(),
        };
        Ok(shell::ShellJob {
            shell,
            argv,
            env,
            env_remove: self.wf.secrets.clone(),
            files,
            dir,
            timeout: exec.timeout,
            errors: exec.errors.cloned().unwrap_or_default(),
        })
    }

    fn render_http(
        &self,
        unit: &Unit,
        exec: &Exec,
        spec: &HttpSpec,
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
            headers.push((
                "Idempotency-Key".into(),
                format!("{}/{}", self.id, unit.key(&self.wf)),
            ));
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
        let carries_secret = self.redactor.contains(&url)
            || headers.iter().any(|(_, v)| self.redactor.contains(v))
            || query.iter().any(|(_, v)| self.redactor.contains(v))
            || body
                .as_ref()
                .is_some_and(|(b, _)| self.redactor.contains(&String::from_utf8_lossy(b)));
        Ok(http::HttpJob {
            method: spec.method.clone(),
            url,
            headers,
            query,
            body,
            expect_status: spec.expect_status.clone(),
            timeout: exec.timeout,
            follow_redirects: spec.follow_redirects,
            carries_secret,
        })
    }

    fn spawn(&mut self, unit: Unit, job: Job, attempt: i64) {
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
                let span = tracing::info_span!(
                    parent: &attempt_span,
                    "process",
                    workflow.name = self.wf.name.as_str(),
                    workflow.instance.id = self.id.as_str(),
                    process.command = job.program(),
                );
                // Started here, not in the task, so its process group is
                // known (and recorded) before the loop goes on.
                let running = shell::start(job, span);
                if let Ok(r) = &running
                    && let Some(tag) = procs::tag(r.pid())
                {
                    self.started_groups.push((unit.key(&self.wf), attempt, tag));
                }
                self.tasks.spawn(async move {
                    let result = match running {
                        Ok(r) => shell::finish(r, interrupt).await,
                        Err(failed) => *failed,
                    };
                    Done {
                        unit,
                        attempt,
                        elapsed: started.elapsed(),
                        result,
                    }
                });
            }
            Job::Http(mut job) => {
                let client = self.http.get_or_insert_with(http::client).clone();
                let span = tracing::info_span!(
                    parent: &attempt_span,
                    "http",
                    otel.name = job.method.as_str(),
                    otel.kind = "client",
                    workflow.name = self.wf.name.as_str(),
                    workflow.instance.id = self.id.as_str(),
                    http.request.method = job.method.as_str(),
                    url.full = job.full_url(),
                );
                // The server's spans become children of this call's client span.
                if !job
                    .headers
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("traceparent"))
                {
                    let (trace_id, span_id) = recorder::ids(&span);
                    job.headers.push((
                        "traceparent".into(),
                        telemetry::traceparent(&trace_id, &span_id),
                    ));
                }
                self.tasks.spawn(async move {
                    let result = http::run(client, job, span, interrupt).await;
                    Done {
                        unit,
                        attempt,
                        elapsed: started.elapsed(),
                        result,
                    }
                });
            }
        }
    }

    fn settle(&mut self, d: Done) -> Result<(), EngineError> {
        let key = d.unit.key(&self.wf);
        self.running.remove(&key);
        self.enter(&d.unit, Some(d.attempt));
        if let Some(state) = self.start_states.remove(&key) {
            self.ctx.set("state", state);
            self.ctx_state_current = false;
        }
        self.settle_result(&d.unit, d.attempt, d.result, d.elapsed)
    }

    /// Commits an attempt's result: on success output, state patch and outcome
    /// together; on failure only the attempt record, and the retry decision.
    fn settle_result(
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
                    new_state = Some(s);
                }
                Err(e) => {
                    result.outcome = Err(Failure::new("expression", format!("`set_state`: {e}")))
                }
            }
        }

        let mut end = AttemptEnd {
            outcome: String::new(),
            exit_code: result.exit_code.map(i64::from),
            finished_at: now.clone(),
            stdout: std::mem::take(&mut result.stdout),
            stderr: std::mem::take(&mut result.stderr),
            ..AttemptEnd::default()
        };
        // An attempt stopped by us takes its reason from why we stopped it.
        let stopped = if result.interrupted { self.stop } else { None };
        match result.outcome {
            Ok(output) => {
                end.outcome = "ok".into();
                self.writes.push(Write::EndAttempt {
                    key: key.clone(),
                    attempt,
                    end: std::mem::take(&mut end),
                });
                self.seq += 1;
                let seq = self.seq;
                let rec = self.record(unit);
                rec.status = "completed".into();
                rec.outcome = Some("ok".into());
                rec.error_type = None;
                rec.error_message = None;
                rec.output = output;
                rec.finished_at = Some(now);
                rec.retry_at = None;
                rec.seq = Some(seq);
                let output = rec.output.clone();
                self.put(unit)?;
                if let Some(s) = new_state {
                    // Written once, just before this transaction commits.
                    self.state = s;
                    self.state_dirty = true;
                    self.ctx_state_current = false;
                }
                if unit.item.is_none() && !unit.compensation {
                    self.ctx.set_step_result(&key, "completed", &output);
                }
                let span = self.write_attempt_span(&key, attempt, "ok", None)?;
                self.committing.push(span);
                self.observer
                    .step_finished(&key, attempt, "ok", None, elapsed);
            }
            Err(failure) if stopped == Some(Stop::Signal) => {
                self.uncounted.entry(key.clone()).or_default().push(attempt);
                end.outcome = "interrupted".into();
                end.error_type = Some("interrupted".into());
                end.error_message = Some(failure.message.clone());
                self.writes.push(Write::EndAttempt {
                    key: key.clone(),
                    attempt,
                    end: std::mem::take(&mut end),
                });
                let rec = self.record(unit);
                rec.status = "pending".into();
                rec.outcome = Some("interrupted".into());
                self.put(unit)?;
                self.write_attempt_span(&key, attempt, "interrupted", Some(&failure))?;
                self.observer
                    .step_finished(&key, attempt, "interrupted", Some(&failure), elapsed);
            }
            Err(_) if stopped == Some(Stop::Cancel) => {
                self.uncounted.entry(key.clone()).or_default().push(attempt);
                let failure = Failure::new("canceled", "the instance was canceled".into());
                end.outcome = "canceled".into();
                end.error_type = Some(failure.error_type.clone());
                end.error_message = Some(failure.message.clone());
                self.writes.push(Write::EndAttempt {
                    key: key.clone(),
                    attempt,
                    end: std::mem::take(&mut end),
                });
                let rec = self.record(unit);
                rec.status = "canceled".into();
                rec.outcome = Some("canceled".into());
                rec.error_type = Some(failure.error_type.clone());
                rec.finished_at = Some(now);
                self.put(unit)?;
                self.write_attempt_span(&key, attempt, "canceled", Some(&failure))?;
                self.observer
                    .step_finished(&key, attempt, "canceled", Some(&failure), elapsed);
            }
            Err(failure) => {
                let failure = if stopped == Some(Stop::Deadline) {
                    Failure::new(
                        "timeout",
                        "stopped: the workflow's timeout was reached".into(),
                    )
                } else {
                    failure
                };
                let budget_base = self.record(unit).budget_base;
                // Counts this attempt too: it is recorded (outcome pending) already.
                let used = self.budget_used(&key, budget_base);
                let retryable = stopped.is_none()
                    && failure.error_type != "expression"
                    && exec.retry.is_retryable(&failure.error_type)
                    && (!matches!(exec.action, Action::Http(_))
                        || http::default_retryable(&failure.error_type)
                        || explicitly_listed(exec.retry, &failure.error_type));
                let will_retry = retryable && used < exec.retry.max_attempts as i64;
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
                self.writes.push(Write::EndAttempt {
                    key: key.clone(),
                    attempt,
                    end: std::mem::take(&mut end),
                });
                let delay = exec
                    .retry
                    .delay_before(attempt as u32 + 1)
                    .max(result.retry_after.unwrap_or_default());
                let rec = self.record(unit);
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
                self.put(unit)?;
                self.write_attempt_span(&key, attempt, outcome, Some(&failure))?;
                self.observer
                    .step_finished(&key, attempt, outcome, Some(&failure), elapsed);
                if !will_retry && !unit.compensation {
                    if unit.item.is_none() {
                        self.ctx.set_step_result(&key, "failed", &Value::Null);
                    }
                    if !step.continue_on_error {
                        if self.failed.is_none() {
                            self.failed = Some(failure_reason(&key, &rec));
                        }
                        // A failed item fails its for_each step at once (no more items start).
                        if unit.item.is_some() {
                            let parent = Unit::step(unit.idx);
                            let p = self.record(&parent);
                            p.status = "failed".into();
                            p.outcome = Some("failed".into());
                            p.error_type = rec.error_type.clone();
                            p.error_message = Some(format!("item {key} failed"));
                            p.finished_at = Some(store::now());
                            self.put(&parent)?;
                            self.ctx.set_step_result(&step.id, "failed", &Value::Null);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

fn ok(output: Value) -> AttemptResult {
    AttemptResult {
        outcome: Ok(output),
        ..AttemptResult::default()
    }
}

/// An HTTP error type the user named in `retry` is retried even if it is a 4xx.
fn explicitly_listed(retry: &RetryPolicy, error_type: &str) -> bool {
    retry
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
