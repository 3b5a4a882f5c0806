//! `wf db check --json` and `GET /api/v1/db/check`: whether the history is
//! sound, and each problem with the instance it hurts.

use crate::store::Finding;

/// `{sound, problems: [{check, instance, detail}]}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct CheckView<'a> {
    pub sound: bool,
    pub problems: &'a [Finding],
}

impl<'a> CheckView<'a> {
    pub fn new(problems: &'a [Finding]) -> CheckView<'a> {
        CheckView {
            sound: problems.is_empty(),
            problems,
        }
    }
}
