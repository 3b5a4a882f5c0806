//! The words every layer shares: the states of instances, steps, attempts
//! and runs, what `wf cancel` asked, error types, instance ids, unit keys
//! and timestamps; who did what (actors, actions) and what a token may
//! do. They are types here and text only at the edges: the database
//! columns (`store`) and the JSON and tables the commands print.

mod actor;
mod error_type;
mod key;
mod schema;
mod status;
mod time;

pub use actor::Actor;
pub use error_type::ErrorType;
pub use key::{
    CHILD_EVENT_PREFIX, COMPENSATE_SUFFIX, InstanceId, ShownKey, UnitKey, UnitKeyBuf, child_event,
    split_awaited,
};
pub(crate) use schema::schema;
pub use schema::words;
pub use status::{
    ActionKind, AttemptOutcome, CancelRequest, InstanceStatus, RunEnd, ShownStatus, StepStatus,
    TokenScope,
};
pub use time::Timestamp;

/// What tables and details show of an id or a definition's hash: its
/// first 12 characters (all of a shorter one).
pub fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// A stored word this build does not know: a corrupt row, or one written by
/// a newer `wf`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{word}`")]
pub struct UnknownWord {
    pub what: &'static str,
    pub word: String,
}
