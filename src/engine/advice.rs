//! What to do about a failed instance. `wf resume --retry-failed` gives the
//! failed steps a fresh attempt budget, which can change the result only
//! when a step failed with an error a new attempt may not repeat (an exit
//! code, a step's timeout, an HTTP error, a crash…). It cannot when the
//! workflow's own `timeout` has passed (the next run times out at once), nor
//! when an expression of the pinned definition failed (a resume evaluates it
//! the same way): [`remedy`] tells these apart from the history, and
//! [`Remedy::advice`] says what to do instead.

use super::EngineError;
use crate::store::{InstanceRow, RunRow, StepRow, Store};
use crate::vocab::{ErrorType, StepStatus, Timestamp};
use crate::workflow::Workflow;

/// What can change the result of a failed instance.
#[derive(Debug, Clone, PartialEq)]
pub enum Remedy {
    /// A step failed with an error that a new attempt may not repeat.
    RetryFailed,
    /// The workflow's `timeout` passed at `deadline`: a resume times out at
    /// once. `from`: the first step that did not complete.
    DeadlinePassed {
        timeout: std::time::Duration,
        deadline: Timestamp,
        from: Option<String>,
    },
    /// An expression of the pinned definition failed (a step's, or the
    /// workflow's `env` or `outputs`): it fails the same way again.
    Definition,
    /// Nothing of it ran (a worker lacked one of its secrets): a resume runs it.
    NeverRan,
    /// `wf upgrade` moved it onto another definition since its last run
    /// failed: a retry runs that one.
    Upgraded,
}

/// When the workflow's `timeout` runs out for `inst`: counted from the
/// newest `wf restart` (the run's start), else from the instance's creation.
pub fn deadline(wf: &Workflow, inst: &InstanceRow, runs: &[RunRow]) -> Option<Timestamp> {
    let timeout = wf.timeout?;
    let from = deadline_start(runs).unwrap_or(inst.created_at);
    Some(from.plus(timeout))
}

/// The start of the newest `wf restart` run, which gave the workflow's
/// `timeout` a fresh start.
pub fn deadline_start(runs: &[RunRow]) -> Option<Timestamp> {
    runs.iter()
        .rev()
        .find(|r| r.restart_from.is_some())
        .map(|r| r.started_at)
}

/// What can change the result of the failed instance `inst` (running `wf`).
pub fn remedy(wf: &Workflow, inst: &InstanceRow, runs: &[RunRow], steps: &[StepRow]) -> Remedy {
    if let Some(deadline) = deadline(wf, inst, runs).filter(|d| *d <= Timestamp::now()) {
        let from = wf
            .steps
            .iter()
            .find(|s| !steps.iter().any(|r| r.key == s.id && r.status.is_done()))
            .map(|s| s.id.clone());
        return Remedy::DeadlinePassed {
            timeout: wf.timeout.unwrap_or_default(),
            deadline,
            from,
        };
    }
    if runs.is_empty() {
        return Remedy::NeverRan;
    }
    if runs
        .last()
        .and_then(|r| r.definition_hash.as_deref())
        .is_some_and(|h| h != inst.definition_hash)
    {
        return Remedy::Upgraded;
    }
    // A compensation's failure does not fail the instance: only the steps'.
    let failed: Vec<&StepRow> = steps
        .iter()
        .filter(|r| r.status == StepStatus::Failed && !r.key.is_compensation())
        .collect();
    if failed
        .iter()
        .any(|r| r.error_type != Some(ErrorType::Expression))
    {
        Remedy::RetryFailed
    } else {
        Remedy::Definition
    }
}

/// [`remedy`] for instance `id`, read from `store` (its pinned definition
/// included).
pub async fn remedy_of(store: &Store, inst: &InstanceRow) -> Result<Remedy, EngineError> {
    let wf = super::pinned::pinned_workflow(store, inst).await?;
    let runs = store.runs(&inst.id).await?;
    let steps = store.steps(&inst.id).await?;
    Ok(remedy(&wf, inst, &runs, &steps))
}

impl Remedy {
    /// What to do over HTTP, naming the routes and fields (`id`: the
    /// instance's id).
    pub fn api_advice(&self, id: &str) -> String {
        match self {
            Remedy::RetryFailed | Remedy::NeverRan | Remedy::Upgraded => format!(
                "`POST /api/v1/instances/{id}/retry` gives its failed steps a fresh attempt budget"
            ),
            Remedy::DeadlinePassed {
                timeout, from, ..
            } => format!(
                "its deadline (the workflow's `timeout: {}`) passed, so a resume would time out at once; `POST /api/v1/instances/{id}/restart` with `{{\"from\": \"{}\"}}` runs the steps again under a fresh timeout",
                crate::workflow::duration::format(timeout.as_millis() as u64),
                from.as_deref().unwrap_or("STEP"),
            ),
            Remedy::Definition => "a resume would fail the same way (it runs the pinned definition, whose expression failed); register a fixed workflow and start a new instance".to_string(),
        }
    }

    /// What to do, as a sentence naming the commands (`short`: the id as
    /// shown; `file`: the workflow file the instance was started from).
    pub fn advice(&self, short: &str, file: &str) -> String {
        match self {
            Remedy::RetryFailed => format!(
                "see the output with `wf logs {short}`; give the failed steps a fresh attempt budget with `wf resume {short} --retry-failed`"
            ),
            Remedy::DeadlinePassed {
                timeout,
                deadline,
                from,
            } => format!(
                "its deadline (the workflow's `timeout: {}`) passed at {deadline}, so a resume would time out at once; run the steps again under a fresh timeout with `wf restart {short} --from {}`, or start a new instance with `wf run {file}`",
                crate::workflow::duration::format(timeout.as_millis() as u64),
                from.as_deref().unwrap_or("STEP"),
            ),
            Remedy::Definition => format!(
                "a resume would fail the same way (it runs the pinned definition, whose expression failed); fix the workflow and start a new instance with `wf run {file}`"
            ),
            Remedy::NeverRan => format!(
                "none of its steps ran; once what it needs is set, `wf resume {short} --retry-failed` runs it"
            ),
            Remedy::Upgraded => format!(
                "it was upgraded since it failed; `wf resume {short} --retry-failed` continues it on its new definition"
            ),
        }
    }
}
