//! Typed exit status: the codes of docs/commands.md, and which error maps to which.

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

    /// The exit status an error stands for: its kind's
    /// ([`ErrorKind`](crate::error_kind::ErrorKind), the table both
    /// interfaces read).
    pub fn for_error(err: &anyhow::Error) -> ExitStatus {
        crate::error_kind::ErrorKind::of_chain(err).exit()
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
