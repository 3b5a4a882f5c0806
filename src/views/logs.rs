//! `wf logs ID [STEP] --json`: the captured output of attempts.

use crate::vocab::{AttemptOutcome, InstanceId};
use std::borrow::Cow;

/// `{id, logs}`: the attempts shown, in the order read.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct LogsView<'a> {
    pub id: &'a InstanceId,
    pub logs: Vec<LogView<'a>>,
}

/// One attempt's captured output: `{step, attempt, outcome, stdout,
/// stderr}`, text decoded as UTF-8 (a byte that is not is replaced by
/// U+FFFD). Secrets were masked before it was stored.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct LogView<'a> {
    /// The unit's key: `id`, `id[n]` or `id:compensate`.
    pub step: &'a str,
    pub attempt: i64,
    /// None while it runs.
    #[schema(required)]
    pub outcome: Option<AttemptOutcome>,
    pub stdout: Cow<'a, str>,
    pub stderr: Cow<'a, str>,
}

impl<'a> LogView<'a> {
    /// Attempt `attempt` of unit `step`, as stored.
    pub fn new(
        step: &'a str,
        attempt: i64,
        outcome: Option<AttemptOutcome>,
        stdout: &'a [u8],
        stderr: &'a [u8],
    ) -> LogView<'a> {
        LogView {
            step,
            attempt,
            outcome,
            stdout: String::from_utf8_lossy(stdout),
            stderr: String::from_utf8_lossy(stderr),
        }
    }
}
