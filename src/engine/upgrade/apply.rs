//! `wf upgrade` applied to one instance, the way a worker writes: the
//! instance is taken over (a live holder refuses it: it runs, and is named),
//! its plan is made from the history that takeover read in the same
//! transaction, written in one commit under that fence which also gives
//! the lease back. A kill between the takeover and the commit leaves it on its
//! old definition with a dead holder, whom the next taker replaces at once;
//! a worker racing it sees it whole on one definition or the other.

use super::plan::{Fate, Plan, queue_after};
use super::preview::{movable, plan_of};
use crate::engine::{EngineError, definitions_of, lease};
use crate::store::{ActionRow, StepRow, Store, UpgradeTo, Write};
use crate::vocab::{
    ActionKind, Actor, InstanceId, InstanceStatus, ShownStatus, StepStatus, UnitKey, UnitKeyBuf,
};
use crate::workflow::Workflow;
use serde_json::Value;

/// The definition an upgrade moves instances onto, and where its file is.
pub struct Target {
    pub wf: std::sync::Arc<Workflow>,
    pub workflow_path: String,
    pub base_dir: String,
}

/// What an upgrade did to one instance.
#[derive(Debug, Clone)]
pub enum Applied {
    /// Moved onto the new definition as the plan says.
    Upgraded(Plan),
    /// Not moved: the plan says why.
    Refused(Plan),
    /// Not moved: its status is not one an upgrade moves.
    NotMovable { status: ShownStatus },
    /// Not moved: it runs, held by `holder`.
    Held { holder: String },
    /// Not moved: it is an instance of another workflow.
    OtherWorkflow { workflow: String },
    /// Already on the new definition (an upgrade done before, or by
    /// another process since the preview): nothing written.
    Current,
}

/// How long the upgrade's own lease lasts: it is given back at once.
const TTL: std::time::Duration = std::time::Duration::from_secs(30);

/// Upgrades instance `id` onto `to` (`renames`: `--map`), recorded as
/// `actor`'s.
pub async fn apply(
    store: &mut Store,
    id: &InstanceId,
    to: &Target,
    renames: &[(String, String)],
    allow_gaps: bool,
    actor: &Actor,
) -> Result<Applied, EngineError> {
    let owner = lease::owner_name();
    let taken = store
        .take_over(id, &owner, lease::ttl_ms(TTL), lease::holder_alive)
        .await?;
    let (fence, history) = match taken {
        Ok(t) => t,
        Err(holder) => return Ok(Applied::Held { holder }),
    };
    let inst = history.instance;
    // Taken over: a `running` one's holder was gone (it was interrupted).
    let status = match inst.status {
        InstanceStatus::Running => ShownStatus::Interrupted,
        s => ShownStatus::Stored(s),
    };
    let decided = if inst.workflow != to.wf.name {
        Ok(Applied::OtherWorkflow {
            workflow: inst.workflow.clone(),
        })
    } else if inst.definition_hash == to.wf.hash {
        Ok(Applied::Current)
    } else if !movable(status) {
        Ok(Applied::NotMovable { status })
    } else {
        let written = async {
            let (old, planned) =
                plan_of(store, &inst, &history.steps, &to.wf, renames, allow_gaps).await?;
            if planned.is_refused() {
                return Ok(Applied::Refused(planned));
            }
            let mut inputs = inst.inputs.as_object().cloned().unwrap_or_default();
            inputs.extend(planned.inputs_added.clone());
            let inputs = Value::Object(inputs);
            // The plan was not refused, so it renders.
            let queue = queue_after(inst.queue.as_ref(), &to.wf, &inputs).unwrap_or(None);
            let mut writes = vec![Write::Upgrade(Box::new(UpgradeTo {
                definitions: definitions_of(&to.wf),
                definition_hash: to.wf.hash.clone(),
                workflow_path: to.workflow_path.clone(),
                base_dir: to.base_dir.clone(),
                inputs,
                queue,
                renames: renames.iter().filter(|(o, n)| o != n).cloned().collect(),
            }))];
            writes.extend(step_writes(&planned, &old, &to.wf, &history.steps));
            writes.push(Write::Action(Box::new(ActionRow::on(
                id,
                ActionKind::Upgrade,
                actor,
                format!(
                    "from {} to {}",
                    crate::vocab::short(&planned.from),
                    crate::vocab::short(&planned.to)
                ),
            ))));
            // The lease is given back in the same commit: no moment where
            // the instance is moved but still held (a kill there would
            // leave a dead holder on an instance already moved).
            writes.push(Write::Release);
            store.commit(&fence, &writes).await?;
            Ok::<_, EngineError>(Applied::Upgraded(planned))
        };
        written.await
    };
    // Given back whatever else was decided: the next worker or resume
    // takes it.
    if !matches!(decided, Ok(Applied::Upgraded(_))) {
        let _ = store.release(&fence).await;
    }
    decided
}

/// The rows the plan changes: an open row of a removed step ends
/// `canceled` (a timer with no step would be left behind), and a changed
/// step that has not ended runs again from the new definition (`pending`,
/// with a fresh retry budget), unless it sleeps or waits as the same kind
/// of step, which keeps its wake time or its event.
fn step_writes(planned: &Plan, old: &Workflow, new: &Workflow, rows: &[StepRow]) -> Vec<Write> {
    let mut out = Vec::new();
    for s in &planned.steps {
        let old_id = s.from.as_deref().unwrap_or(&s.step);
        let of_step = rows
            .iter()
            .filter(|r| UnitKey::parse(r.key.as_str()).step == old_id);
        match s.fate {
            Fate::Removed => {
                for r in of_step.filter(|r| !r.status.is_ended() && r.status != StepStatus::Pending)
                {
                    let mut row = r.clone();
                    row.status = StepStatus::Canceled;
                    row.retry_at = None;
                    out.push(Write::Step(Box::new(row)));
                }
            }
            Fate::Changed => {
                let same_kind = old
                    .step(old_id)
                    .zip(new.step(&s.step))
                    .is_some_and(|(a, b)| {
                        super::plan::kind(&a.action) == super::plan::kind(&b.action)
                    });
                for r in of_step {
                    let keeps =
                        same_kind && matches!(r.status, StepStatus::Sleeping | StepStatus::Waiting);
                    if keeps || r.status == StepStatus::Pending || r.status.is_done() {
                        continue;
                    }
                    // Keyed as the new step's (`--map` renamed it in this
                    // commit's `Write::Upgrade`, written first).
                    let key =
                        UnitKeyBuf::new(format!("{}{}", s.step, &r.key.as_str()[old_id.len()..]));
                    let mut row = StepRow::pending(key, &s.step);
                    row.attempts = r.attempts;
                    row.budget_base = r.attempts;
                    out.push(Write::Step(Box::new(row)));
                }
            }
            Fate::Kept | Fate::New | Fate::Unchanged => {}
        }
    }
    out
}
