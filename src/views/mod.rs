//! The JSON documents `wf` prints (`wf … --json`, `wf trace --format json`,
//! `wf worker --json`'s lines) and that `wf serve` serves: one struct per
//! shape, each built from the store rows it shows.
//!
//! Why a module of its own: the shapes are a contract (docs/commands.md,
//! docs/traces.md; fields may be added, none renamed), and two interfaces
//! show them, `commands/` and `serve/` (the API), neither of which may
//! call the other. So they live here, below both: an interface fetches the
//! rows, builds the view and prints or serves it. A view holds the words of
//! `vocab` (statuses, outcomes, ids, times), which serialize as their text,
//! and borrows what it shows from the rows. Its fields are in the order they
//! are printed (serde_json keeps it), and `tests.rs` snapshots every shape
//! (`snapshots/`): a snapshot that changes is a change of the contract.
//!
//! - `status.rs`: [`ShownStatus`], an instance's status as shown
//!   (`interrupted` for a `running` one whose runner is gone).
//! - `run.rs`: [`RunReport`], how a run of `wf run`, `resume`, `restart` or
//!   `cancel` ended.
//! - `instance.rs`: [`InstanceView`], `wf inspect`.
//! - `list.rs`: [`InstanceSummary`], a line of `wf list`.
//! - `logs.rs`: [`LogsView`], `wf logs`.
//! - `result.rs`: [`ResultView`], `wf result`.
//! - `signal.rs`: [`SignalView`], `wf signal`.
//! - `prune.rs`: [`PruneView`], `wf prune`.
//! - `db.rs`: [`CheckView`], `wf db check`.
//! - `queue.rs`: [`QueueView`], `wf queue list`; [`QueueLineView`], `wf
//!   queue show KEY`; [`QueueStanding`], an instance's place in its queue
//!   (`wf inspect`).
//! - `schedule.rs`: [`ScheduleView`], [`ScheduleAdded`], `wf schedule list`
//!   and `add`.
//! - `trace.rs`: [`TraceRunView`], [`SpanView`], `wf trace --format json`.
//! - `validate.rs`: [`ValidView`], [`InvalidView`], `wf validate`.
//! - `worker.rs`: [`WorkerLine`], a line of `wf worker --json`.
//! - `workflow.rs`: [`WorkflowView`], `wf workflow list` and `add`.
//! - `accepted.rs`: [`Accepted`], [`RestartAccepted`], [`Started`], what
//!   `wf serve` answers for an action it accepted.

mod accepted;
mod bulk;
pub mod compare;
mod db;
mod instance;
mod list;
mod logs;
mod prune;
mod queue;
mod result;
mod run;
mod schedule;
mod signal;
mod status;
mod token;
mod trace;
mod validate;
mod worker;
mod workflow;

#[cfg(test)]
mod tests;

pub use accepted::{Accepted, Accepting, HookPing, RestartAccepted, Started};
pub use bulk::{ACTIONS as BULK_ACTIONS, BulkAnswer, BulkLine, OUTCOMES as BULK_OUTCOMES};
pub use compare::{CompareRow, CompareView, UnitInRun, compare};
pub use db::CheckView;
pub use instance::{
    ActionView, AttemptView, DefinitionUse, EventView, FireView, InstanceView, RunView,
    StepAttempt, StepView, definition_texts, definition_uses, inspect_view, ordered, ordered_steps,
    removed, unit_labels,
};
pub use list::{CountsView, InstanceSummary, ended_at};
pub use logs::{LogView, LogsView};
pub use prune::PruneView;
pub use queue::{MemberView, QueueLineView, QueueStanding, QueueView};
pub use result::ResultView;
pub use run::{RunReport, RunStatus};
pub use schedule::{ScheduleAdded, ScheduleView};
pub use signal::SignalView;
pub use status::ShownStatus;
pub use token::{TokenAdded, TokenView};
pub use trace::{SpanView, TraceRunView, run_numbers};
pub use validate::{InvalidView, Position, ValidView};
pub use worker::WorkerLine;
pub use workflow::{InputView, StatsView, TriggerSchedule, WebhookView, WorkflowView};
