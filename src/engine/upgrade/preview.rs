//! What `wf upgrade` would do, read only: for each instance asked for, its
//! [`Plan`], or why an upgrade does not move it (it runs, or has ended, or
//! is of another workflow). `--dry-run` prints this; the apply writes the
//! same plans, each checked again in its own commit.

use super::plan::{Instance, Plan, plan};
use crate::engine::{EngineError, lease, pinned};
use crate::store::{InstanceRow, ListFilter, StepRow, Store};
use crate::vocab::{InstanceId, InstanceStatus, ShownStatus, Timestamp};
use crate::workflow::Workflow;

/// Which instances an upgrade is asked for.
#[derive(Clone, Copy)]
pub enum Targets<'a> {
    Ids(&'a [InstanceId]),
    /// Every instance of the workflow that has not ended (those running
    /// are named, not moved).
    Workflow(&'a str),
}

/// Whether an upgrade moves an instance shown so (SPEC §3 Upgrades: not
/// running, not ended).
pub fn movable(status: ShownStatus) -> bool {
    matches!(
        status,
        ShownStatus::Interrupted
            | ShownStatus::Stored(
                InstanceStatus::Pending
                    | InstanceStatus::Queued
                    | InstanceStatus::Sleeping
                    | InstanceStatus::Waiting
                    | InstanceStatus::Failed
            )
    )
}

/// One instance's answer.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Preview {
    pub id: InstanceId,
    /// Its status as shown now.
    pub status: &'static str,
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// What an upgrade would do to it.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Moved as the plan says (unless the plan is refused).
    Planned { plan: Plan },
    /// Not moved: it runs (named by its holder) or has ended.
    NotMovable { holder: Option<String> },
    /// Not moved: it is an instance of another workflow.
    OtherWorkflow { workflow: String },
    /// Already on the new definition: nothing to do.
    Current,
}

/// The plan that moves `inst` (whose units' rows are `steps`) onto `new`,
/// with the definition it is pinned to now: what the preview shows and
/// the apply writes, each from the rows it read.
pub(super) async fn plan_of(
    store: &Store,
    inst: &InstanceRow,
    steps: &[StepRow],
    new: &Workflow,
    renames: &[(String, String)],
    allow_gaps: bool,
) -> Result<(Workflow, Plan), EngineError> {
    let old = pinned::pinned_workflow(store, inst).await?;
    let units: Vec<_> = steps
        .iter()
        .map(|r| (r.key.to_string(), r.status))
        .collect();
    let inputs = inst.inputs.as_object().cloned().unwrap_or_default();
    let instance = Instance {
        units: &units,
        inputs: &inputs,
        queue: inst.queue.as_ref(),
    };
    let planned = plan(&old, new, &instance, renames, allow_gaps);
    Ok((old, planned))
}

/// The previews of `targets` moved onto `new`.
pub async fn preview(
    store: &Store,
    targets: Targets<'_>,
    new: &Workflow,
    renames: &[(String, String)],
    allow_gaps: bool,
) -> Result<Vec<Preview>, EngineError> {
    let ids: Vec<InstanceId> = match targets {
        Targets::Ids(ids) => ids.to_vec(),
        // A listing's rows leave the pinned text out: each is read whole.
        Targets::Workflow(name) => store
            .list_instances(&ListFilter {
                workflow: Some(name.to_string()),
                ..ListFilter::default()
            })
            .await?
            .into_iter()
            .filter(|i| !i.status.is_ended())
            .map(|i| i.id)
            .collect(),
    };
    let mut rows: Vec<InstanceRow> = Vec::with_capacity(ids.len());
    for id in &ids {
        rows.push(store.instance(id).await?);
    }
    let now = Timestamp::now().ms();
    let mut out = Vec::with_capacity(rows.len());
    for inst in rows {
        let shown = lease::shown(&inst, now);
        let outcome = if inst.workflow != new.name {
            Outcome::OtherWorkflow {
                workflow: inst.workflow.clone(),
            }
        } else if inst.definition_hash == new.hash && !inst.status.is_ended() {
            Outcome::Current
        } else if !movable(shown) {
            Outcome::NotMovable {
                holder: inst
                    .lease_owner
                    .clone()
                    .filter(|_| shown == ShownStatus::Stored(InstanceStatus::Running)),
            }
        } else {
            let steps = store.steps(&inst.id).await?;
            let (_, plan) = plan_of(store, &inst, &steps, new, renames, allow_gaps).await?;
            Outcome::Planned { plan }
        };
        out.push(Preview {
            id: inst.id,
            status: shown.as_str(),
            outcome,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    //! Previews read from a real SQLite store: a pending instance is
    //! planned, a running one is named with its holder and not moved, one
    //! of another workflow is left alone, and `--workflow` leaves out the
    //! ended ones.

    use super::*;
    use crate::engine::upgrade::Fate;
    use crate::store::Location;

    const OLD: &str = "name: w\nsteps:\n  - id: a\n    run: echo a\n  - id: b\n    run: exit 1\n";
    const NEW: &str = "name: w\nsteps:\n  - id: a\n    run: echo a\n  - id: b\n    run: echo fixed\n  - id: c\n    run: echo c\n";

    fn row(wf: &Workflow, id: &str, status: InstanceStatus, holder: Option<&str>) -> InstanceRow {
        InstanceRow {
            lease_owner: holder.map(str::to_string),
            lease_expires_ms: holder.map(|_| Timestamp::now().ms() + 60_000),
            ..InstanceRow::for_test(wf, id, status)
        }
    }

    #[test]
    fn a_preview_plans_what_may_move_and_names_what_may_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let old = Workflow::from_pinned(OLD, "w.yaml").expect("valid");
        let new = Workflow::from_pinned(NEW, "w.yaml").expect("valid");
        let other = Workflow::from_pinned(
            "name: other\nsteps:\n  - id: x\n    run: echo x\n",
            "o.yaml",
        )
        .expect("valid");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let mut store = Store::open(&Location::Sqlite(dir.path().join("wf.db")))
                .await
                .expect("open");
            let rows = [
                (row(&old, "pending", InstanceStatus::Pending, None), &old),
                (
                    row(&old, "running", InstanceStatus::Running, Some("elsewhere:1")),
                    &old,
                ),
                (row(&old, "done", InstanceStatus::Completed, None), &old),
                (row(&other, "other", InstanceStatus::Pending, None), &other),
            ];
            for (r, wf) in &rows {
                let defs = crate::engine::definitions_of(wf);
                assert!(store.create_instance(r, &defs, "", &|_| true).await.expect("create"));
            }
            let ids: Vec<InstanceId> = ["pending", "running", "other"]
                .into_iter()
                .map(InstanceId::from)
                .collect();
            let got = preview(&store, Targets::Ids(&ids), &new, &[], false)
                .await
                .expect("preview");
            assert_eq!(got.len(), 3);
            let Outcome::Planned { plan } = &got[0].outcome else {
                panic!("{:?}", got[0]);
            };
            assert_eq!((plan.from.as_str(), plan.to.as_str()), (old.hash.as_str(), new.hash.as_str()));
            assert_eq!(plan.count(Fate::Unchanged), 1, "{plan:?}");
            assert_eq!(plan.count(Fate::Changed), 1, "{plan:?}");
            assert_eq!(plan.count(Fate::New), 1, "{plan:?}");
            assert!(matches!(
                &got[1].outcome,
                Outcome::NotMovable { holder: Some(h) } if h == "elsewhere:1"
            ));
            assert_eq!(got[1].status, "running");
            assert!(matches!(&got[2].outcome, Outcome::OtherWorkflow { workflow } if workflow == "other"));

            let by_name = preview(&store, Targets::Workflow("w"), &new, &[], false)
                .await
                .expect("preview");
            let named: Vec<&str> = by_name.iter().map(|p| p.id.as_str()).collect();
            assert_eq!(named.len(), 2, "the ended one is left out: {named:?}");
            assert!(named.contains(&"pending") && named.contains(&"running"));
        });
    }
}
