//! `wf list --json`: an array of these, newest first.

use super::ShownStatus;
use crate::store::{InstanceRow, Labels};
use crate::vocab::{InstanceId, Timestamp};

/// An instance in a listing: `{id, workflow, status, created_at,
/// updated_at, ended_at, duration_ms, parent, labels, started_by}`
/// (`ended_at` and `duration_ms`, from its creation to its end: null until
/// it ends; `parent`: the parent's id, null for a root; `labels`: an
/// object, `{}` for none).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct InstanceSummary<'a> {
    pub id: &'a InstanceId,
    pub workflow: &'a str,
    pub status: ShownStatus,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// When it ended (completed, failed, canceled, skipped).
    #[schema(required)]
    pub ended_at: Option<Timestamp>,
    /// From its creation to its end, as `wf workflow list`'s figures
    /// count it (a wait in its queue included).
    #[schema(required)]
    pub duration_ms: Option<i64>,
    /// The instance whose `workflow:` step made this one (None: a root).
    #[schema(required)]
    pub parent: Option<&'a InstanceId>,
    pub labels: &'a Labels,
    /// Who started it (null for an instance from before actions were
    /// recorded).
    #[schema(required)]
    pub started_by: Option<&'a crate::vocab::Actor>,
}

impl<'a> InstanceSummary<'a> {
    /// `inst`, whose status was found to be `status` (a listing that
    /// filters on the status shown tells it once).
    pub fn new(inst: &'a InstanceRow, status: ShownStatus) -> InstanceSummary<'a> {
        InstanceSummary {
            id: &inst.id,
            workflow: &inst.workflow,
            status,
            created_at: inst.created_at,
            updated_at: inst.updated_at,
            ended_at: ended_at(inst),
            duration_ms: ended_at(inst).map(|t| t.ms() - inst.created_at.ms()),
            parent: inst.parent.as_ref().map(|p| &p.id),
            labels: &inst.labels,
            started_by: inst.started_by.as_ref(),
        }
    }
}

impl<'a> From<&'a InstanceRow> for InstanceSummary<'a> {
    /// `inst` with its status now.
    fn from(inst: &'a InstanceRow) -> InstanceSummary<'a> {
        InstanceSummary::new(inst, ShownStatus::of(inst))
    }
}

/// When `inst` ended: its last change, once its status is an end.
pub fn ended_at(inst: &InstanceRow) -> Option<Timestamp> {
    inst.status.is_ended().then_some(inst.updated_at)
}

/// `wf list --counts --json` (and the API's counts): `{statuses: [{status,
/// count, at_least}], total, at_least}`, every status in the list filter's
/// order; `at_least`: the count stopped at its cap (10,000), more match.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct CountsView {
    pub statuses: Vec<StatusCountView>,
    pub total: u64,
    pub at_least: bool,
}

/// One status's count in a [`CountsView`].
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct StatusCountView {
    pub status: ShownStatus,
    pub count: u64,
    pub at_least: bool,
}

impl From<&crate::engine::actions::Counts> for CountsView {
    fn from(c: &crate::engine::actions::Counts) -> CountsView {
        CountsView {
            statuses: c
                .statuses
                .iter()
                .map(|s| StatusCountView {
                    status: s.status,
                    count: s.count,
                    at_least: s.at_least,
                })
                .collect(),
            total: c.total,
            at_least: c.at_least,
        }
    }
}
