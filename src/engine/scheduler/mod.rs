//! The deterministic core of a run: what is ready, what is due, how a unit
//! starts (its `if`, its `for_each` list, its attempt recorded, its job
//! rendered), what an attempt's result means (output, state patch, retry
//! or failure), when the run is over, and when it next needs waking. It
//! holds the run's records, expression context and state, and decides;
//! nothing else: no clock (every input comes with `now`), no I/O, no
//! channels, no processes. [`Scheduler::step`] (`step.rs`) turns an input
//! into writes and effects; the driver (`engine::runner`) carries the
//! effects out (spawns jobs, tells the observer, ends spans) and commits
//! the [`Write`]s the scheduler collected.
//!
//! Unit-tested without I/O in `tests.rs`, in restate's style: a workflow,
//! records as history left them, a time, inputs, and the decisions expected.

mod attempt;
mod batch;
mod cache;
pub mod child;
mod close;
mod fan;
mod ready;
pub mod recovery;
mod render;
pub mod retry;
mod step;
mod suspend;
#[cfg(test)]
mod tests;

pub use cache::CacheAnswer;
pub use child::ChildEndEvent;
pub use close::Closed;
pub use step::{Effect, Input, Job, MAX_SETTLED_PER_COMMIT, Note, Settled, SpanIds};

use super::context::Context;
use super::output::merge_patch;
use super::redact::Redactor;
use super::{AttemptResult, Failure, http, shell};
use crate::store::{AttemptEnd, EventRow, StepRow, Write};
use crate::telemetry;
use crate::vocab::{ErrorType, InstanceId, RunEnd, StepStatus, Timestamp, UnitKey, UnitKeyBuf};
use crate::workflow::template::{self, Template};
use crate::workflow::{
    Action, Condition, HttpSpec, RetryPolicy, RunCmd, SleepSpec, Step, Workflow, expr,
};
use attempt::{failure_reason, ok};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use step::Started;

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    Completed,
    Failed(String),
    Sleeping(Timestamp),
    Waiting(String),
    Canceled,
    Interrupted,
    /// Not admitted by its queue (`queue:`) within the inline wait: why,
    /// and where it stands. No run was opened.
    Queued(String),
    /// Ended by its queue before it ran (`on_full: skip`, `debounce`): why.
    Skipped(String),
}

impl RunOutcome {
    /// How the run's record says it ended.
    pub fn end(&self) -> RunEnd {
        match self {
            RunOutcome::Completed => RunEnd::Completed,
            RunOutcome::Failed(_) => RunEnd::Failed,
            RunOutcome::Sleeping(_) => RunEnd::Sleeping,
            RunOutcome::Waiting(_) => RunEnd::Waiting,
            RunOutcome::Canceled => RunEnd::Canceled,
            RunOutcome::Interrupted => RunEnd::Interrupted,
            RunOutcome::Queued(_) => RunEnd::Queued,
            RunOutcome::Skipped(_) => RunEnd::Skipped,
        }
    }

    pub fn as_str(&self) -> &'static str {
        self.end().as_str()
    }
}

/// Why running steps are being stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGINT/SIGTERM to this process: attempts are `interrupted`, the instance stays resumable.
    Signal,
    /// `wf cancel`: attempts are `canceled`, compensations run.
    Cancel,
    /// The workflow's own `timeout` passed: attempts time out, the workflow fails.
    Deadline,
    /// Another process took the instance over: stop everything, record nothing.
    Lost,
}

/// One schedulable thing: a step, one item of a `for_each` step, or the
/// compensation of a completed step (or item).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    pub idx: usize,
    pub item: Option<usize>,
    pub compensation: bool,
}

impl Unit {
    pub fn step(idx: usize) -> Unit {
        Unit {
            idx,
            item: None,
            compensation: false,
        }
    }

    /// The key its rows are stored under: `id`, `id[3]`, `id:compensate`.
    pub fn key(&self, wf: &Workflow) -> UnitKeyBuf {
        UnitKeyBuf::from(UnitKey {
            step: &wf.steps[self.idx].id,
            item: self.item,
            compensation: self.compensation,
        })
    }
}

/// Who a run is: what its steps are told and where they run.
#[derive(Debug, Clone)]
pub struct RunData {
    pub id: InstanceId,
    /// The run's number (`WF_RUN`).
    pub number: i64,
    /// What relative `dir`s are relative to.
    pub base_dir: PathBuf,
    /// Where running attempts copy their output for `wf logs --follow`.
    pub live_dir: Option<PathBuf>,
    /// The run's trace, which steps are told of (`TRACEPARENT`).
    pub trace_id: String,
    /// How many parents are above the instance (0: started on its own).
    pub depth: i64,
    /// The parent instance, for a child (`${{ instance.parent }}`).
    pub parent: Option<InstanceId>,
    /// The caller's sampled flag and `tracestate`, passed on to steps.
    pub caller: (
        opentelemetry::trace::TraceFlags,
        opentelemetry::trace::TraceState,
    ),
    /// Who started or resumed this run: the starter its children record.
    pub actor: Option<crate::vocab::Actor>,
    /// `--no-cache`: `cache:` steps run without looking for an entry (what
    /// they complete is kept all the same).
    pub no_cache: bool,
}

/// What a run's scheduler starts from.
pub struct Setup {
    pub wf: Arc<Workflow>,
    pub run: RunData,
    /// The instance's pinned inputs and its state as last committed.
    pub inputs: Value,
    pub state: Value,
    /// Every unit's row as history left it.
    pub records: HashMap<UnitKeyBuf, StepRow>,
    /// Per unit key, its attempts that do not count towards `max_attempts`.
    pub uncounted: HashMap<UnitKeyBuf, Vec<i64>>,
    /// When the workflow's `timeout` runs out.
    pub deadline: Option<Timestamp>,
    /// Delivered events no step has taken yet.
    pub events: Vec<EventRow>,
    /// The writes that open the run (see [`Scheduler::opening`]).
    pub opening: Vec<Write>,
    /// The values of the workflow's secrets by name, as the process running
    /// it has them (`context::secret_values`): what `secrets.NAME` gives,
    /// and what is masked in everything the run records.
    pub secrets: Map<String, Value>,
}

/// The run's records and what it decided from them.
pub struct Scheduler {
    wf: Arc<Workflow>,
    run: RunData,
    /// Every unit's row, by key, as this run last decided it.
    records: HashMap<UnitKeyBuf, StepRow>,
    /// Keys of the records that have held a timer status (`retrying`,
    /// `sleeping`, `waiting`) in this run: a superset of those holding one
    /// now (every such status is written through [`Scheduler::put`]), so
    /// that finding the next timer does not walk every record after every
    /// step.
    timed: HashSet<UnitKeyBuf>,
    /// Units in flight: key -> attempt.
    running: HashMap<UnitKeyBuf, i64>,
    /// Steps whose needs are met and that have not ended (see `candidates`).
    frontier: BTreeSet<usize>,
    /// For each step, the steps that need it.
    dependents: Vec<Vec<usize>>,
    /// Steps whose `if` calls `failure()`, `always()` or `cancelled()`:
    /// handlers, which still run once a step failed (or on cancel).
    handlers: Vec<usize>,
    /// Why the workflow failed, once a unit failed for good.
    failed: Option<String>,
    stop: Option<Stop>,
    /// When the workflow's `timeout` runs out.
    deadline: Option<Timestamp>,
    /// Per unit key, its attempts that do not count towards `max_attempts`.
    uncounted: HashMap<UnitKeyBuf, Vec<i64>>,
    /// Canceled without compensations (`wf cancel --terminate`).
    terminate: bool,
    /// The completion order of the last unit that completed.
    seq: i64,
    /// What the run decided since its last commit, applied at the next one.
    writes: Vec<Write>,
    /// How many of `writes`, from the first, open the run (the recovery of
    /// a dead predecessor's history, the run's record, the instance
    /// `running`) and are not committed yet: they go in with the run's
    /// first decisions, one commit rather than two, and are kept should the
    /// run end on an error before that commit.
    opening: usize,
    /// The effects decided and not yet returned by [`Scheduler::step`].
    effects: Vec<Effect>,
    /// What expressions see.
    ctx: Context,
    /// Workflow-level `env`, rendered once for the run.
    env: Vec<(String, String)>,
    /// Masks the values of the workflow's secrets.
    redactor: Redactor,
    /// The instance's state as this run decided it.
    state: Value,
    /// `state` changed since the last tick: written at its end.
    state_dirty: bool,
    /// The expression context's `state` is `self.state` (not a stale copy,
    /// nor the snapshot a settling `set_state` step started with).
    ctx_state_current: bool,
    /// State as it was when each running unit with a `set_state` started.
    start_states: HashMap<UnitKeyBuf, Value>,
    /// Delivered events no step has taken yet, and those this run took.
    events: Vec<EventRow>,
    taken_events: HashSet<i64>,
    /// The ends of children run in this process handed to this run
    /// (`Input::ChildEnded`), by event name: delivered as events are,
    /// without their ids.
    ended_here: HashMap<String, String>,
    /// Units waiting on the child their last attempt made, by key: they
    /// count towards `concurrency` and `max_parallel` as running units do.
    open_children: HashSet<UnitKeyBuf>,
    /// Whether the children this run found open were handed to the driver.
    children_started: bool,
    /// Units whose children were asked to end (or left to run) because the
    /// parent ends early.
    children_ending: HashSet<UnitKeyBuf>,
    /// Units of `lock:` steps whose lock the driver was asked to take, and
    /// those holding it (for their next attempt, then while it runs).
    locks_asked: HashSet<UnitKeyBuf>,
    locks_held: HashSet<UnitKeyBuf>,
    /// Combinations of a `matrix` step that `fail_fast` asked the driver to
    /// stop: each settles `canceled` when its attempt comes back.
    stopping: HashSet<UnitKeyBuf>,
    /// Units of `cache:` steps on their way to an attempt: their files
    /// hashed, their key looked up, and the answer.
    cache: HashMap<UnitKeyBuf, cache::CacheStep>,
    /// The rendered key and part of each unit whose key was looked up: its
    /// success keeps an entry under them.
    cache_keys: HashMap<UnitKeyBuf, (String, String)>,
    /// Units whose files could not be hashed, and why: they fail.
    cache_failed: HashMap<UnitKeyBuf, String>,
}

impl Scheduler {
    /// The scheduler of a run over the records history left. The
    /// workflow's `env` is rendered here, once: if it cannot be, nothing
    /// can run, and the workflow fails (with its compensations) as when a
    /// step's inputs cannot be evaluated.
    pub fn new(setup: Setup) -> Scheduler {
        let Setup {
            wf,
            run,
            inputs,
            state,
            records,
            uncounted,
            deadline,
            events,
            opening,
            secrets,
        } = setup;
        let redactor = Redactor::new(
            secrets
                .values()
                .filter_map(|v| v.as_str().map(str::to_string)),
        );
        let mut ctx = Context::new(
            &run.id,
            run.parent.as_ref(),
            &wf.name,
            run.number,
            &inputs,
            secrets,
        );
        ctx.keep_results_of(wf.results_read.clone());
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
        ctx.set("state", state.clone());
        for step in &wf.steps {
            if let Some(rec) = records.get(step.id.as_str())
                && rec.status.is_ended()
            {
                ctx.set_step_result(&step.id, rec.status, &rec.output);
            }
        }
        let failed = env_failure.or_else(|| {
            wf.steps.iter().find_map(|s| {
                let r = records.get(s.id.as_str())?;
                (r.status == StepStatus::Failed && !s.continue_on_error)
                    .then(|| failure_reason(&s.id, r))
            })
        });
        let handlers: Vec<usize> = wf
            .steps
            .iter()
            .enumerate()
            .filter(|(_, s)| match s.condition.as_deref() {
                Some(Condition::Expr(e)) => e.calls_handler_function(),
                Some(Condition::Template(t)) => t.exprs().any(expr::Expr::calls_handler_function),
                _ => false,
            })
            .map(|(i, _)| i)
            .collect();
        let mut dependents = vec![Vec::new(); wf.steps.len()];
        for (i, s) in wf.steps.iter().enumerate() {
            for &d in &s.needs {
                dependents[d].push(i);
            }
        }
        let timed = records
            .iter()
            .filter(|(_, r)| r.status.is_timed())
            .map(|(k, _)| k.clone())
            .collect();
        let seq = records.values().filter_map(|r| r.seq).max().unwrap_or(0);
        let open_children = records
            .values()
            .filter(|r| Scheduler::waits_on_child(&wf, r))
            .map(|r| r.key.clone())
            .collect();
        let mut s = Scheduler {
            wf,
            run,
            records,
            timed,
            running: HashMap::new(),
            frontier: BTreeSet::new(),
            dependents,
            handlers,
            failed,
            stop: None,
            deadline,
            uncounted,
            terminate: false,
            seq,
            opening: opening.len(),
            writes: opening,
            effects: Vec::new(),
            ctx,
            env,
            redactor,
            state,
            state_dirty: false,
            ctx_state_current: true,
            start_states: HashMap::new(),
            events,
            taken_events: HashSet::new(),
            ended_here: HashMap::new(),
            open_children,
            children_started: false,
            children_ending: HashSet::new(),
            locks_asked: HashSet::new(),
            locks_held: HashSet::new(),
            stopping: HashSet::new(),
            cache: HashMap::new(),
            cache_keys: HashMap::new(),
            cache_failed: HashMap::new(),
        };
        s.frontier = (0..s.wf.steps.len())
            .filter(|&i| s.deps_satisfied(i) && !s.ended(i))
            .collect();
        s
    }

    /// The row of `unit`, made `pending` if it has none yet.
    pub fn record(&mut self, unit: &Unit) -> &mut StepRow {
        let key = unit.key(&self.wf);
        let step_id = self.wf.steps[unit.idx].id.clone();
        self.records
            .entry(key.clone())
            .or_insert_with(|| StepRow::pending(key.clone(), &step_id))
    }

    /// Decides `unit`'s row as it now is: written at the next commit.
    pub fn put(&mut self, unit: &Unit) {
        let rec = self.record(unit).clone();
        if rec.status.is_timed() && !self.timed.contains(&rec.key) {
            self.timed.insert(rec.key.clone());
        }
        self.writes.push(Write::Step(Box::new(rec)));
    }

    /// Steps still waiting for a retry when the instance fails or is
    /// canceled will not get it: they end as `status`, their last error kept.
    /// (`wf resume --retry-failed` gives a failed one a fresh budget.)
    /// Steps sleeping or waiting for an event end `canceled`.
    pub fn abandon_retries(&mut self, status: StepStatus, why: &str, now: Timestamp) {
        for rec in self
            .records
            .values_mut()
            .filter(|r| r.status == StepStatus::Retrying)
        {
            rec.status = status;
            rec.retry_at = None;
            rec.finished_at = Some(now);
            rec.error_message = Some(match rec.error_message.take() {
                Some(m) => format!("{m} (not retried: {why})"),
                None => format!("not retried: {why}"),
            });
            self.writes.push(Write::Step(Box::new(rec.clone())));
        }
        // A timer or a wait that will never be kept: it ends canceled, with
        // no wake-up time left (docs/execution.md, statuses stay true).
        for rec in self
            .records
            .values_mut()
            .filter(|r| matches!(r.status, StepStatus::Sleeping | StepStatus::Waiting))
        {
            rec.status = StepStatus::Canceled;
            rec.retry_at = None;
            rec.finished_at = Some(now);
            rec.error_type = Some(ErrorType::Canceled);
            rec.error_message = Some(format!("not continued: {why}"));
            self.writes.push(Write::Step(Box::new(rec.clone())));
        }
    }
}
