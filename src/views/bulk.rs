//! One action over many instances, as `wf cancel … --json`, `wf resume …
//! --json` and the API's `/api/v1/bulk/{action}` print it: a line per
//! instance.

use super::ShownStatus;
use crate::vocab::InstanceId;

/// `{id, workflow, status, plan, outcome, detail}`: `plan` what the
/// action would do to it (the words the inspector's confirmation shows);
/// `outcome` `planned` (a dry run), `canceled`, `canceling` (its runner,
/// or the server in the background, ends it), `resumed`, `resuming` (the
/// server runs it in the background), `skipped` (left as it is: `detail`
/// says why) or `failed` (`detail` says what went wrong); `status` the
/// status it was left in.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct BulkLine {
    pub id: InstanceId,
    pub workflow: String,
    pub status: ShownStatus,
    pub plan: String,
    #[schema(schema_with = outcome)]
    pub outcome: &'static str,
    pub detail: String,
}

impl BulkLine {
    /// The line of `p` with its outcome and detail.
    pub fn of(
        p: &crate::engine::actions::bulk::Planned,
        outcome: &'static str,
        detail: String,
    ) -> BulkLine {
        BulkLine {
            id: p.id.clone(),
            workflow: p.workflow.clone(),
            status: p.status,
            plan: p.intent.text(),
            outcome,
            detail,
        }
    }
}

/// The words a [`BulkLine`]'s `outcome` takes.
pub const OUTCOMES: &[&str] = &[
    "planned",
    "canceled",
    "canceling",
    "resumed",
    "resuming",
    "skipped",
    "failed",
];

fn outcome() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    crate::vocab::words("What became of the instance", OUTCOMES)
}

/// `POST /api/v1/bulk/{action}`'s answer: `{action, instances}`, a line
/// per instance.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct BulkAnswer {
    /// `cancel`, `retry` or `resume`.
    #[schema(schema_with = action)]
    pub action: &'static str,
    pub instances: Vec<BulkLine>,
}

/// The words of a bulk action, as its route names it.
pub const ACTIONS: &[&str] = &["cancel", "retry", "resume"];

fn action() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    crate::vocab::words("The action", ACTIONS)
}
