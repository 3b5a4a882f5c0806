//! `wf restart ID --from STEP`: what a restart resets. STEP and every step
//! that needs it (transitively, through `needs:` and the implicit "after the
//! previous step") run again; so do the steps that had not completed (failed,
//! canceled, never started) and the steps whose compensation ran (what they
//! did was undone), with everything downstream of them. Every other completed
//! or skipped step keeps its result.
//!
//! A reset row keeps its attempt count (attempt numbers continue) and starts
//! a fresh retry budget (`budget_base`, as `wf resume --retry-failed` does);
//! a reset `for_each` step forgets its list and its items are reset with it;
//! the compensation rows of reset steps are reset too. The state becomes the
//! workflow's initial state with the `set_state` patches the kept units
//! committed, applied in their commit order (`seq`).

use super::output::merge_patch;
use crate::store::StepRow;
use crate::vocab::{InstanceId, InstanceStatus, ShownStatus, StepStatus};
use crate::workflow::Workflow;
use serde_json::Value;
use std::collections::HashMap;

#[derive(Debug, thiserror::Error)]
pub enum RestartError {
    #[error("workflow `{workflow}` has no step `{step}` (its steps: {})", .valid.join(", "))]
    UnknownStep {
        workflow: String,
        step: String,
        valid: Vec<String>,
    },
    #[error(
        "instance {id} is {status}; only an ended instance (completed, failed or canceled) can be restarted{hint}"
    )]
    NotEnded {
        id: InstanceId,
        status: ShownStatus,
        hint: &'static str,
    },
    #[error(
        "step `{step}` completed before wf recorded state patches, so the state cannot be rebuilt without running it: restart from `{step}` or a step it needs"
    )]
    PatchUnknown { step: String },
}

/// What a restart changes: the rows it resets (as they become) and the
/// state the new run starts from.
#[derive(Debug)]
pub struct Plan {
    /// Ids of the steps run again, in definition order.
    pub reset_steps: Vec<String>,
    pub rows: Vec<StepRow>,
    pub state: Value,
}

/// Fills in the `set_state` patch each row committed, which the history
/// read leaves out (only a restart needs them).
pub async fn fill_patches(
    store: &crate::store::Store,
    id: &InstanceId,
    steps: &mut [StepRow],
) -> Result<(), crate::store::StoreError> {
    let mut patches: std::collections::HashMap<String, serde_json::Value> =
        store.state_patches(id).await?.into_iter().collect();
    for row in steps {
        if let Some(p) = patches.remove(row.key.as_str()) {
            row.state_patch = p.into();
        }
    }
    Ok(())
}

/// What `wf resume --retry-failed` of an instance that ended `status`
/// runs again besides its failed steps: the steps its failure's
/// compensations undid ([`compensated`]); none unless it failed. The run
/// decides by it (`drive`), and the inspector's confirmation says it
/// (`actions::retry_plan`).
pub fn undone_by_failure(wf: &Workflow, status: InstanceStatus, rows: &[StepRow]) -> Vec<String> {
    if status == InstanceStatus::Failed {
        compensated(wf, rows)
    } else {
        Vec::new()
    }
}

/// What a retry of failed steps after compensations runs, as the run
/// says it when it starts and the inspector's confirmation before:
/// "running `a`, `b` again: the failure's compensations undid `a`".
pub fn retry_note(reset_steps: &[String], compensated: &[String]) -> String {
    let quoted = |ids: &[String]| {
        ids.iter()
            .map(|s| format!("`{s}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "running {} again: the failure's compensations undid {}",
        quoted(reset_steps),
        quoted(compensated)
    )
}

/// The steps whose compensation ran, in definition order: what
/// `wf resume --retry-failed` must run again besides the failed steps, with
/// what depends on them, as a restart from the first of them would (an
/// instance never ends `completed` with work undone; every step such a
/// plan resets is downstream of one of its seeds, so starting from the
/// first adds nothing).
pub fn compensated(wf: &Workflow, rows: &[StepRow]) -> Vec<String> {
    wf.steps
        .iter()
        .filter(|s| {
            rows.iter().any(|r| {
                r.step_id == s.id && r.key.is_compensation() && r.status != StepStatus::Pending
            })
        })
        .map(|s| s.id.clone())
        .collect()
}

/// Why `status` cannot be restarted (None: it can).
pub fn check_ended(id: &InstanceId, status: ShownStatus) -> Result<(), RestartError> {
    use InstanceStatus as S;
    let hint = match status {
        ShownStatus::Stored(S::Completed | S::Failed | S::Canceled | S::Skipped) => return Ok(()),
        ShownStatus::Stored(S::Sleeping | S::Waiting) => {
            "; `wf resume` continues it, `wf cancel` ends it"
        }
        ShownStatus::Interrupted | ShownStatus::Stored(S::Running) => "; `wf resume` continues it",
        ShownStatus::Stored(S::Queued) => {
            "; `wf worker` (or `wf resume`) runs it once its queue admits it, `wf cancel` ends it"
        }
        ShownStatus::Stored(S::Pending) => "",
    };
    Err(RestartError::NotEnded {
        id: id.clone(),
        status,
        hint,
    })
}

/// The plan of a restart of an instance of `wf` whose rows are `rows` from
/// step `from`.
pub fn plan<'a>(
    wf: &Workflow,
    rows: impl IntoIterator<Item = &'a StepRow>,
    from: &str,
) -> Result<Plan, RestartError> {
    let Some(start) = wf.steps.iter().position(|s| s.id == from) else {
        return Err(RestartError::UnknownStep {
            workflow: wf.name.clone(),
            step: from.into(),
            valid: wf.steps.iter().map(|s| s.id.clone()).collect(),
        });
    };
    let rows: Vec<&StepRow> = rows.into_iter().collect();
    let index: HashMap<&str, usize> = wf
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    // Seeds: STEP, the steps that did not complete, those compensated.
    let mut reset = vec![false; wf.steps.len()];
    let mut seeds = vec![start];
    for (i, step) in wf.steps.iter().enumerate() {
        let done = rows.iter().any(|r| r.key == step.id && r.status.is_done());
        if !done {
            seeds.push(i);
        }
    }
    for r in &rows {
        if r.key.is_compensation()
            && r.status != StepStatus::Pending
            && let Some(&i) = index.get(r.step_id.as_str())
        {
            seeds.push(i);
        }
    }
    // Downstream, transitively: steps are in an order where needs come first
    // (validation rejects cycles), but walk dependents to not rely on it.
    let mut dependents = vec![Vec::new(); wf.steps.len()];
    for (i, s) in wf.steps.iter().enumerate() {
        for &d in &s.needs {
            dependents[d].push(i);
        }
    }
    while let Some(i) = seeds.pop() {
        if std::mem::replace(&mut reset[i], true) {
            continue;
        }
        seeds.extend(dependents[i].iter().copied());
    }

    let is_reset = |r: &StepRow| index.get(r.step_id.as_str()).is_some_and(|&i| reset[i]);
    let mut out = Vec::new();
    let mut kept: Vec<&StepRow> = Vec::new();
    for r in &rows {
        if is_reset(r) {
            let mut row = StepRow::pending(r.key.clone(), &r.step_id);
            row.attempts = r.attempts;
            row.budget_base = r.attempts;
            out.push(row);
        } else {
            kept.push(r);
        }
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));

    // The state: the initial one, then the kept units' patches in commit order.
    let mut committed: Vec<&StepRow> = kept
        .into_iter()
        .filter(|r| r.status == StepStatus::Completed && !r.key.is_compensation())
        .collect();
    committed.sort_by_key(|r| r.seq.unwrap_or(0));
    let mut state = Value::Object(wf.state.clone());
    for r in committed {
        if r.state_patch.is_null() {
            // A for_each step's own row commits no patch (its items do).
            let step = wf.step(&r.step_id);
            let patches =
                step.is_some_and(|s| s.set_state.is_some() && (!s.fans_out() || r.key != s.id));
            if patches {
                return Err(RestartError::PatchUnknown {
                    step: r.step_id.clone(),
                });
            }
            continue;
        }
        merge_patch(&mut state, &r.state_patch);
    }
    Ok(Plan {
        reset_steps: wf
            .steps
            .iter()
            .zip(&reset)
            .filter(|(_, r)| **r)
            .map(|(s, _)| s.id.clone())
            .collect(),
        rows: out,
        state,
    })
}
