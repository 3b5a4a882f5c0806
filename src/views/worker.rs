//! `wf worker --json`: a line per run that ends.

use crate::engine::{EngineError, RunOutcome};
use crate::vocab::{InstanceId, RunEnd};

/// One line of `wf worker --json`: `{id, outcome, reason}` when a run
/// ended, `{id, error}` when it ended in an error (not a workflow
/// failure: the database, a definition that no longer loads).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(untagged)]
pub enum WorkerLine<'a> {
    Ended {
        id: &'a InstanceId,
        outcome: RunEnd,
        /// The failure, the wake-up time or the awaited event.
        reason: Option<String>,
    },
    Error {
        id: &'a InstanceId,
        error: String,
    },
}

impl<'a> WorkerLine<'a> {
    /// The run of `id` ended with `outcome`.
    pub fn ended(id: &'a InstanceId, outcome: &RunOutcome) -> WorkerLine<'a> {
        WorkerLine::Ended {
            id,
            outcome: outcome.end(),
            reason: match outcome {
                RunOutcome::Failed(r)
                | RunOutcome::Waiting(r)
                | RunOutcome::Queued(r)
                | RunOutcome::Skipped(r) => Some(r.clone()),
                RunOutcome::Sleeping(t) => Some(t.to_string()),
                RunOutcome::Completed | RunOutcome::Canceled | RunOutcome::Interrupted => None,
            },
        }
    }

    /// The run of `id` ended in `error`.
    pub fn error(id: &'a InstanceId, error: &EngineError) -> WorkerLine<'a> {
        WorkerLine::Error {
            id,
            error: error.to_string(),
        }
    }
}
