//! The store's registry of workflows (`wf workflow add|rm|list`): the
//! definitions `wf serve` starts by name and by webhook, over both backends.
//! A workflow's schedules live beside it (`schedules.rs`); removing the
//! workflow removes them.

use super::rows::{DefinitionRow, WorkflowRow};
use super::{Result, Store};

/// An instance of a workflow, as its recent history reads it
/// ([`Store::recent`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Recent {
    pub id: crate::vocab::InstanceId,
    pub status: crate::vocab::InstanceStatus,
    pub created_at: crate::vocab::Timestamp,
    /// When it last changed: when it ended, for an ended one.
    pub updated_at: crate::vocab::Timestamp,
}

/// Why a registration was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Its `on.webhook.name` is the hook of this other registered workflow.
    HookTaken(String),
}

impl Store {
    /// Pins `row`'s definition (and `defs`, the definitions it calls) under
    /// its name, replacing what was registered under it, in one
    /// transaction; refused, with nothing written, when its hook is another
    /// workflow's.
    pub async fn register_workflow(
        &mut self,
        row: &WorkflowRow,
        defs: &[DefinitionRow],
        action: &super::ActionRow,
    ) -> Result<std::result::Result<(), Refused>> {
        each!(self.register_workflow(row, defs, action))
    }

    /// Removes workflow `name` and its schedules, recording `action`;
    /// whether anything was registered under it (nothing is recorded
    /// when not).
    pub async fn remove_workflow(&mut self, name: &str, action: &super::ActionRow) -> Result<bool> {
        each!(self.remove_workflow(name, action))
    }

    /// Every registered workflow, by name.
    pub async fn workflows(&self) -> Result<Vec<WorkflowRow>> {
        each!(self.workflows())
    }

    /// The workflow registered as `name`.
    pub async fn registered(&self, name: &str) -> Result<Option<WorkflowRow>> {
        each!(self.registered(name))
    }

    /// The newest `limit` instances of workflow `workflow` started at or
    /// after `since` (any time: `None`), newest first (`wf workflow list`'s
    /// figures).
    pub async fn recent(
        &self,
        workflow: &str,
        since: Option<crate::vocab::Timestamp>,
        limit: usize,
    ) -> Result<Vec<Recent>> {
        each!(self.recent(workflow, since, limit))
    }

    /// The workflow whose webhook is `hook`.
    pub async fn hook(&self, hook: &str) -> Result<Option<WorkflowRow>> {
        each!(self.hook(hook))
    }
}
