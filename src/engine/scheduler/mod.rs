//! The deterministic core of a run: what is ready, what is due, what an
//! attempt's failure means (retry or fail), when the run is over, and when
//! it next needs waking. It holds the run's records and decisions and
//! nothing else: no clock (every question takes `now`), no I/O, no
//! channels, no processes. The driver (`engine::runner`) owns those: it
//! asks the scheduler what to start, starts it, feeds results back, and
//! commits the [`Write`]s the scheduler collected.
//!
//! Unit-tested without I/O in `tests.rs`, in restate's style: a workflow,
//! records as history left them, a time, and the decisions expected.

mod ready;
pub mod recovery;
pub mod retry;
#[cfg(test)]
mod tests;

use crate::store::{StepRow, Write};
use crate::vocab::{ErrorType, RunEnd, StepStatus, Timestamp, UnitKey};
use crate::workflow::{Condition, Workflow, expr};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    Completed,
    Failed(String),
    Sleeping(Timestamp),
    Waiting(String),
    Canceled,
    Interrupted,
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
    pub fn key(&self, wf: &Workflow) -> String {
        let step = &wf.steps[self.idx].id;
        if self.item.is_none() && !self.compensation {
            // The common case, asked many times a step: no formatting.
            return step.clone();
        }
        UnitKey {
            step,
            item: self.item,
            compensation: self.compensation,
        }
        .to_string()
    }
}

/// The run's records and what it decided from them.
pub struct Scheduler {
    pub wf: Arc<Workflow>,
    /// Every unit's row, by key, as this run last decided it.
    pub records: HashMap<String, StepRow>,
    /// Keys of the records that have held a timer status (`retrying`,
    /// `sleeping`, `waiting`) in this run: a superset of those holding one
    /// now (every such status is written through [`Scheduler::put`]), so
    /// that finding the next timer does not walk every record after every
    /// step.
    pub timed: HashSet<String>,
    /// Units in flight: key -> attempt.
    pub running: HashMap<String, i64>,
    /// Steps whose needs are met and that have not ended (see `candidates`).
    pub frontier: BTreeSet<usize>,
    /// For each step, the steps that need it.
    pub dependents: Vec<Vec<usize>>,
    /// Steps whose `if` calls `failure()`, `always()` or `cancelled()`:
    /// handlers, which still run once a step failed (or on cancel).
    pub handlers: Vec<usize>,
    /// Why the workflow failed, once a unit failed for good.
    pub failed: Option<String>,
    pub stop: Option<Stop>,
    /// When the workflow's `timeout` runs out.
    pub deadline: Option<Timestamp>,
    /// Per unit key, its attempts that do not count towards `max_attempts`.
    pub uncounted: HashMap<String, Vec<i64>>,
    /// Canceled without compensations (`wf cancel --terminate`).
    pub terminate: bool,
    /// The completion order of the last unit that completed.
    pub seq: i64,
    /// What the run decided since its last commit, applied at the next one.
    pub writes: Vec<Write>,
    /// How many of `writes`, from the first, open the run (the recovery of
    /// a dead predecessor's history, the run's record, the instance
    /// `running`) and are not committed yet: they go in with the run's
    /// first decisions, one commit rather than two, and are kept should the
    /// run end on an error before that commit.
    pub opening: usize,
}

impl Scheduler {
    /// The scheduler of a run of `wf` over the records history left
    /// (`opening`: the writes that open the run, see [`Scheduler::opening`]).
    pub fn new(
        wf: Arc<Workflow>,
        records: HashMap<String, StepRow>,
        failed: Option<String>,
        deadline: Option<Timestamp>,
        uncounted: HashMap<String, Vec<i64>>,
        opening: Vec<Write>,
    ) -> Scheduler {
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
        let mut s = Scheduler {
            wf,
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
            .or_insert_with(|| StepRow::pending(&key, &step_id))
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
