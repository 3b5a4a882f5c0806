//! How a run ended, as `wf run`, `resume`, `restart` and `cancel` print it
//! with `--json`.

use super::ShownStatus;
use crate::engine::RunOutcome;
use crate::vocab::{InstanceId, RunEnd};
use std::fmt;

/// `{id, status, exit_code}`: the instance, how its run ended and the exit
/// code that stands for it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunReport<'a> {
    pub id: &'a InstanceId,
    pub status: RunStatus,
    pub exit_code: u8,
}

/// What `status` says: how the run ended, or, when nothing ran, where the
/// instance is. Serializes as its word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// The run's outcome (`completed`, `failed`, `sleeping`, `waiting`,
    /// `canceled`, `interrupted`).
    Ended(RunEnd),
    /// `wf run --id` of an instance that exists with the same definition
    /// and inputs: its status; nothing ran.
    Exists(ShownStatus),
    /// `wf cancel` of an instance another process runs: it was asked to
    /// cancel, and will.
    Canceling,
}

impl RunStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            RunStatus::Ended(end) => end.as_str(),
            RunStatus::Exists(status) => status.as_str(),
            RunStatus::Canceling => "canceling",
        }
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for RunStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'a> RunReport<'a> {
    /// A run of `id` that ended with `outcome`, for which the command exits
    /// `exit_code`.
    pub fn ended(id: &'a InstanceId, outcome: &RunOutcome, exit_code: u8) -> RunReport<'a> {
        RunReport {
            id,
            status: RunStatus::Ended(outcome.end()),
            exit_code,
        }
    }

    /// `wf run --id` of instance `id`, which exists (as `status`) with the
    /// same definition and inputs.
    pub fn exists(id: &'a InstanceId, status: ShownStatus, exit_code: u8) -> RunReport<'a> {
        RunReport {
            id,
            status: RunStatus::Exists(status),
            exit_code,
        }
    }

    /// `wf cancel` of `id`, which another process runs: asked to cancel.
    pub fn canceling(id: &'a InstanceId) -> RunReport<'a> {
        RunReport {
            id,
            status: RunStatus::Canceling,
            exit_code: 0,
        }
    }
}
