//! The one table of what kind of failure an error is, and what each
//! interface says for it: the CLI's exit code (docs/commands.md) and the
//! API's HTTP status and `code` (docs/api.md). Both interfaces read it, so
//! the same refusal cannot exit 2 in one and answer 500 in the other; both
//! mappings are exhaustive matches, and a test reads the two docs' tables
//! back and checks every row against them.

use crate::engine::EngineError;
use crate::engine::hooks::HookError;
use crate::exit::{ExitStatus, UsageError};
use crate::store::StoreError;
use crate::workflow::DefinitionError;

/// What went wrong, as both interfaces tell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A bad flag, parameter, body, input, label, step or event; an ended
    /// instance signaled; a workflow file that does not validate.
    Invalid,
    /// An id prefix that matches several instances.
    Ambiguous,
    /// No valid token (the API).
    Unauthorized,
    /// A webhook whose signature does not check.
    BadSignature,
    /// A cookie-authenticated change from another site.
    CrossSite,
    /// A token (or session) whose scope does not cover the request.
    Forbidden,
    /// No such instance, registered workflow, hook or route.
    NotFound,
    /// A route that does not take the method.
    MethodNotAllowed,
    /// An instance id or idempotency key used with other inputs; nothing
    /// to cancel.
    Conflict,
    /// A resume of a completed, canceled or failed instance.
    NotResumable,
    /// The instance is run by another process, or this one lost it.
    Held,
    /// A request that took too long.
    Timeout,
    /// A body over the server's limit.
    TooLarge,
    /// The database could not be reached again within `WF_DB_RETRY`.
    Unreachable,
    /// The database cannot serve now, though nothing is wrong with the
    /// request: locked past the busy timeout, missing, or its file
    /// replaced under a server; a webhook's key not set.
    Unavailable,
    /// A corrupt record, a database error, or a bug.
    Internal,
}

impl ErrorKind {
    /// Every kind, for the tests that hold the table to the docs.
    pub const ALL: [ErrorKind; 16] = [
        ErrorKind::Invalid,
        ErrorKind::Ambiguous,
        ErrorKind::Unauthorized,
        ErrorKind::BadSignature,
        ErrorKind::CrossSite,
        ErrorKind::Forbidden,
        ErrorKind::NotFound,
        ErrorKind::MethodNotAllowed,
        ErrorKind::Conflict,
        ErrorKind::NotResumable,
        ErrorKind::Held,
        ErrorKind::Timeout,
        ErrorKind::TooLarge,
        ErrorKind::Unreachable,
        ErrorKind::Unavailable,
        ErrorKind::Internal,
    ];

    /// The CLI's exit status for it.
    pub fn exit(self) -> ExitStatus {
        match self {
            ErrorKind::Invalid
            | ErrorKind::Ambiguous
            | ErrorKind::Unauthorized
            | ErrorKind::BadSignature
            | ErrorKind::CrossSite
            | ErrorKind::Forbidden
            | ErrorKind::NotFound
            | ErrorKind::MethodNotAllowed
            | ErrorKind::Conflict
            | ErrorKind::TooLarge => ExitStatus::Usage,
            ErrorKind::NotResumable
            | ErrorKind::Timeout
            | ErrorKind::Unavailable
            | ErrorKind::Internal => ExitStatus::Failure,
            ErrorKind::Held => ExitStatus::Held,
            ErrorKind::Unreachable => ExitStatus::Unreachable,
        }
    }

    /// The API's HTTP status for it.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorKind::Invalid => 400,
            ErrorKind::Unauthorized | ErrorKind::BadSignature => 401,
            ErrorKind::CrossSite | ErrorKind::Forbidden => 403,
            ErrorKind::NotFound => 404,
            ErrorKind::MethodNotAllowed => 405,
            ErrorKind::Timeout => 408,
            // An ambiguous prefix is well formed: the ids there are now
            // make it name several, as a missing one is a 404.
            ErrorKind::Ambiguous
            | ErrorKind::Conflict
            | ErrorKind::NotResumable
            | ErrorKind::Held => 409,
            ErrorKind::TooLarge => 413,
            ErrorKind::Internal => 500,
            ErrorKind::Unreachable | ErrorKind::Unavailable => 503,
        }
    }

    /// The API's `error.code` for it.
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::Invalid => "invalid",
            ErrorKind::Ambiguous => "ambiguous",
            ErrorKind::Unauthorized => "unauthorized",
            ErrorKind::BadSignature => "bad_signature",
            ErrorKind::CrossSite => "cross_site",
            ErrorKind::Forbidden => "forbidden",
            ErrorKind::NotFound => "not_found",
            ErrorKind::MethodNotAllowed => "method_not_allowed",
            ErrorKind::Conflict => "conflict",
            ErrorKind::NotResumable => "not_resumable",
            ErrorKind::Held => "held",
            ErrorKind::Timeout => "timeout",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::Unreachable | ErrorKind::Unavailable => "unavailable",
            ErrorKind::Internal => "internal",
        }
    }

    /// The kind of an error from the store.
    pub fn of_store(e: &StoreError) -> ErrorKind {
        match e {
            StoreError::NotFound(_) => ErrorKind::NotFound,
            StoreError::Ambiguous { .. } => ErrorKind::Ambiguous,
            StoreError::Unreachable { .. } => ErrorKind::Unreachable,
            StoreError::Busy(_) | StoreError::Open { .. } => ErrorKind::Unavailable,
            StoreError::Fenced { .. } => ErrorKind::Held,
            StoreError::TooNew { .. }
            | StoreError::Sql(_)
            | StoreError::ReadOnly(_)
            | StoreError::Corrupt(_)
            | StoreError::Committed => ErrorKind::Internal,
        }
    }

    /// The kind of an error from the engine.
    pub fn of_engine(e: &EngineError) -> ErrorKind {
        match e {
            EngineError::Store(s) => ErrorKind::of_store(s),
            EngineError::Lapsed { then, .. } => ErrorKind::of_engine(then),
            EngineError::Definition(_) | EngineError::Input(_) | EngineError::MissingInput(_) => {
                ErrorKind::Invalid
            }
            EngineError::Restart(r) => ErrorKind::of_restart(r),
            EngineError::NoSuch(_) => ErrorKind::NotFound,
            EngineError::Refused(_) => ErrorKind::Conflict,
            EngineError::Held { .. }
            | EngineError::LeaseLost { .. }
            | EngineError::LeaseLapsed { .. }
            | EngineError::ChildLost { .. } => ErrorKind::Held,
            EngineError::NotResumable { .. } => ErrorKind::NotResumable,
            EngineError::Exists(_)
            | EngineError::Ended { .. }
            | EngineError::HoldsHistory { .. }
            | EngineError::Taken(_)
            | EngineError::NothingToCancel { .. } => ErrorKind::Conflict,
            EngineError::Internal(_) => ErrorKind::Internal,
            EngineError::NotRegistered { .. } => ErrorKind::NotFound,
            EngineError::Hook(h) => match h {
                HookError::Unknown(_) => ErrorKind::NotFound,
                HookError::KeyUnset { .. } => ErrorKind::Unavailable,
                HookError::BadSignature => ErrorKind::BadSignature,
                HookError::NotJson(_) | HookError::Render { .. } => ErrorKind::Invalid,
            },
        }
    }

    /// The kind of a refused restart: a step the workflow does not have is
    /// not found; an instance whose state refuses it, a conflict.
    pub fn of_restart(e: &crate::engine::restart::RestartError) -> ErrorKind {
        use crate::engine::restart::RestartError;
        match e {
            RestartError::UnknownStep { .. } => ErrorKind::NotFound,
            RestartError::NotEnded { .. } | RestartError::PatchUnknown { .. } => {
                ErrorKind::Conflict
            }
        }
    }

    /// The kind of an error at the command edge: the first cause in its
    /// chain that is one of `wf`'s own; anything else failed (exit 1).
    pub fn of_chain(err: &anyhow::Error) -> ErrorKind {
        for cause in err.chain() {
            if cause.is::<DefinitionError>() || cause.is::<UsageError>() {
                return ErrorKind::Invalid;
            }
            if let Some(r) = cause.downcast_ref::<crate::engine::restart::RestartError>() {
                return ErrorKind::of_restart(r);
            }
            if let Some(e) = cause.downcast_ref::<EngineError>() {
                return ErrorKind::of_engine(e);
            }
            if let Some(s) = cause.downcast_ref::<StoreError>() {
                return ErrorKind::of_store(s);
            }
        }
        ErrorKind::Internal
    }
}

#[cfg(test)]
mod tests {
    //! The table against the docs a user reads: every row of docs/api.md's
    //! error table is some kind's (status, code, exit), every kind has its
    //! row, and every exit code a kind gives is in docs/commands.md.

    use super::*;
    use std::collections::BTreeSet;

    fn doc(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("docs")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The rows of the table under `heading` in `text`, as cells.
    fn table(text: &str, heading: &str) -> Vec<Vec<String>> {
        let at = text
            .find(heading)
            .unwrap_or_else(|| panic!("no `{heading}`"));
        text[at..]
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2)
            .map(|l| {
                l.trim_matches('|')
                    .split('|')
                    .map(|c| c.trim().trim_matches('`').to_string())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn every_kind_is_a_row_of_the_api_docs_and_every_row_a_kind() {
        let rows: BTreeSet<(u16, String, u8)> = table(&doc("api.md"), "## Errors")
            .into_iter()
            .map(|r| {
                (
                    r[0].parse().expect("status"),
                    r[1].clone(),
                    r[2].parse().expect("exit"),
                )
            })
            .collect();
        let kinds: BTreeSet<(u16, String, u8)> = ErrorKind::ALL
            .iter()
            .map(|k| (k.http_status(), k.code().to_string(), k.exit().code()))
            .collect();
        assert_eq!(
            kinds, rows,
            "docs/api.md's error table and ErrorKind differ"
        );
    }

    #[test]
    fn every_exit_code_a_kind_gives_is_documented() {
        let codes: BTreeSet<u8> = table(&doc("commands.md"), "## Exit codes")
            .into_iter()
            .map(|r| r[0].parse().expect("code"))
            .collect();
        for k in ErrorKind::ALL {
            assert!(
                codes.contains(&k.exit().code()),
                "{k:?} exits {}",
                k.exit().code()
            );
        }
        // And the statuses the CLI gives for what is not an error.
        for s in [
            ExitStatus::Success,
            ExitStatus::Suspended,
            ExitStatus::Canceled,
            ExitStatus::Interrupted,
        ] {
            assert!(codes.contains(&s.code()), "{s:?}");
        }
    }

    #[test]
    fn the_store_and_engine_errors_fall_where_the_docs_say() {
        let missing = StoreError::NotFound("x".into());
        assert_eq!(ErrorKind::of_store(&missing), ErrorKind::NotFound);
        let busy = EngineError::Store(StoreError::Busy("locked".into()));
        assert_eq!(ErrorKind::of_engine(&busy).http_status(), 503);
        let held = EngineError::Held {
            id: crate::vocab::InstanceId::from("a"),
            holder: "h".into(),
        };
        assert_eq!(ErrorKind::of_engine(&held).exit(), ExitStatus::Held);
        let chained = anyhow::Error::new(UsageError("bad".into())).context("while parsing");
        assert_eq!(ErrorKind::of_chain(&chained), ErrorKind::Invalid);
    }
}
