//! `wf result ID --json`.

use super::ShownStatus;
use crate::store::InstanceRow;
use crate::vocab::InstanceId;
use serde_json::Value;

/// `{id, status, outputs, error}`, whatever the status.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ResultView<'a> {
    pub id: &'a InstanceId,
    pub status: ShownStatus,
    /// The workflow's `outputs` once completed (`{}` when it declares
    /// none); null otherwise.
    pub outputs: &'a Value,
    /// Why it failed.
    #[schema(required)]
    pub error: Option<&'a str>,
}

impl<'a> ResultView<'a> {
    /// `inst`, with the outputs read with it (null unless it completed).
    pub fn new(inst: &'a InstanceRow, outputs: &'a Value) -> ResultView<'a> {
        ResultView {
            id: &inst.id,
            status: ShownStatus::of(inst),
            outputs,
            error: inst.error.as_deref(),
        }
    }
}
