//! `wf list --json`: an array of these, newest first.

use super::ShownStatus;
use crate::store::{InstanceRow, Labels};
use crate::vocab::{InstanceId, Timestamp};

/// An instance in a listing: `{id, workflow, status, created_at,
/// updated_at, parent, labels, started_by}` (`parent`: the parent's id,
/// null for a root; `labels`: an object, `{}` for none).
#[derive(Debug, Clone, serde::Serialize)]
pub struct InstanceSummary<'a> {
    pub id: &'a InstanceId,
    pub workflow: &'a str,
    pub status: ShownStatus,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The instance whose `workflow:` step made this one (None: a root).
    pub parent: Option<&'a InstanceId>,
    pub labels: &'a Labels,
    /// Who started it (null for an instance from before actions were
    /// recorded).
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
