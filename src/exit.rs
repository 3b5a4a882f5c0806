//! Typed exit status: the codes of docs/commands.md, and which error maps to which.

use crate::engine::EngineError;
use crate::store::StoreError;
use crate::workflow::DefinitionError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// Completed, or the command succeeded.
    Success,
    /// The workflow failed (or a runtime error).
    Failure,
    /// Usage or definition error.
    Usage,
    /// The instance is sleeping or waiting.
    Suspended,
    Canceled,
    /// The instance is held by another process.
    Held,
    /// The database could not be reached (after `WF_DB_RETRY`).
    Unreachable,
    Interrupted,
}

impl ExitStatus {
    pub fn code(self) -> u8 {
        match self {
            ExitStatus::Success => 0,
            ExitStatus::Failure => 1,
            ExitStatus::Usage => 2,
            ExitStatus::Suspended => 3,
            ExitStatus::Canceled => 4,
            ExitStatus::Held => 5,
            ExitStatus::Unreachable => 6,
            ExitStatus::Interrupted => 130,
        }
    }

    /// The exit status an error stands for.
    pub fn for_error(err: &anyhow::Error) -> ExitStatus {
        for cause in err.chain() {
            if cause.is::<DefinitionError>()
                || cause.is::<UsageError>()
                || cause.is::<crate::engine::restart::RestartError>()
            {
                return ExitStatus::Usage;
            }
            if let Some(e) = cause.downcast_ref::<EngineError>() {
                return match e {
                    EngineError::Held { .. }
                    | EngineError::LeaseLost { .. }
                    | EngineError::ChildLost { .. } => ExitStatus::Held,
                    EngineError::Definition(_)
                    | EngineError::Input(_)
                    | EngineError::MissingInput(_)
                    | EngineError::Restart(_) => ExitStatus::Usage,
                    EngineError::Store(s) => Self::for_store(s),
                    EngineError::NotResumable(_) | EngineError::Internal(_) => ExitStatus::Failure,
                    EngineError::Exists(_) | EngineError::Taken(_) => ExitStatus::Usage,
                };
            }
            if let Some(s) = cause.downcast_ref::<StoreError>() {
                return Self::for_store(s);
            }
        }
        ExitStatus::Failure
    }

    fn for_store(e: &StoreError) -> ExitStatus {
        match e {
            StoreError::NotFound(_) | StoreError::Ambiguous { .. } => ExitStatus::Usage,
            StoreError::Unreachable { .. } => ExitStatus::Unreachable,
            _ => ExitStatus::Failure,
        }
    }
}

impl From<ExitStatus> for std::process::ExitCode {
    fn from(s: ExitStatus) -> Self {
        std::process::ExitCode::from(s.code())
    }
}

/// A bad flag value or argument, found before anything ran (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);
