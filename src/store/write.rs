//! What a runner changes, as data. The engine decides (which attempt starts,
//! what a result means for its step, the state, the spans to keep) and
//! collects its decisions as [`Write`]s; the store applies a batch of them
//! atomically, under the runner's fence ([`Store::commit`]). The engine never
//! reads the database in the middle of a batch, so the same batch means the
//! same thing to any backend.

use super::rows::*;
use super::{CacheEntry, CachedFrom};
use serde_json::Value;

/// One change to the instance a runner holds.
#[derive(Debug, Clone)]
pub enum Write {
    /// An attempt recorded before its command starts.
    StartAttempt {
        key: UnitKeyBuf,
        attempt: i64,
        run: i64,
        started_at: Timestamp,
        span_id: String,
        started_ns: i64,
    },
    /// An attempt's outcome, logs and error. Its process group is
    /// forgotten: only an attempt without an outcome needs it (a crashed
    /// runner's leftovers), and it was 56 of a step's bytes on PostgreSQL.
    EndAttempt {
        key: UnitKeyBuf,
        attempt: i64,
        end: AttemptEnd,
    },
    /// A `cached` attempt's source: the attempt whose result it took.
    AttemptCachedFrom {
        key: UnitKeyBuf,
        attempt: i64,
        from: CachedFrom,
    },
    /// The result of a completed attempt of a `cache:` step, kept (or
    /// replacing the entry of the same step and key) for later attempts.
    PutCache(Box<CacheEntry>),
    /// The process group an attempt started.
    AttemptProcess {
        key: UnitKeyBuf,
        attempt: i64,
        tag: ProcessTag,
    },
    /// A step (or item, or compensation) row, as it now is.
    Step(Box<StepRow>),
    /// The instance's committed state.
    State(Value),
    /// An ended span.
    Span(Box<SpanRow>),
    /// A delivered event taken by a waiting step.
    TakeEvent {
        event: i64,
        key: UnitKeyBuf,
    },
    /// The event named `name` not taken yet, taken by a waiting step: the
    /// end of a child run in this process, handed to its parent's run
    /// rather than read back, whose event this batch (or an earlier one)
    /// inserts, its id unknown until then (`Write::Child`). A child's
    /// event name is the child's own: there is one such event.
    TakeEventNamed {
        name: String,
        key: UnitKeyBuf,
    },
    /// The instance's status and what it waits for.
    Status {
        status: InstanceStatus,
        wake_at: Option<Timestamp>,
        waiting_event: Option<String>,
        error: Option<String>,
    },
    /// `wf restart`: the instance's cancel request and result (`outputs`)
    /// belong to the ending it is restarted from; both are cleared.
    Reopen,
    /// Runs left without an outcome by a runner that died become `crashed`.
    CloseAbandonedRuns,
    /// The instance's result (`outputs:`), rendered when it completed.
    Outputs(Value),
    /// An action recorded with what it did (SPEC §3 Actions are
    /// recorded): the resume, retry or restart a run opens for, in the
    /// commit that opens it.
    Action(Box<super::ActionRow>),
    /// A new run and its trace (and the step it restarts from, if it does),
    /// on the definition it runs (the instance's, read under the fence).
    StartRun {
        run: i64,
        trace: RunTrace,
        restart_from: Option<String>,
        definition_hash: String,
    },
    FinishRun {
        run: i64,
        outcome: RunEnd,
    },
    /// A step `lock:` held by unit `key`'s attempt, given back as the
    /// attempt ends (in the commit that records its end).
    ReleaseLock {
        key: UnitKeyBuf,
    },
    /// Every step `lock:` the instance holds, given back: when a run opens
    /// (a dead predecessor's) and when it closes.
    ReleaseLocks,
    /// The lease given up in the run's last commit, when nothing else is
    /// left to do under it (no live export): one commit fewer per run.
    Release,
    /// A child instance made by a `workflow:` step's attempt, in the
    /// transaction that records the attempt (its definition was pinned
    /// with the parent's): one child per attempt, or none. Nothing if its
    /// id is taken.
    CreateChild(Box<InstanceRow>),
    /// A completed child whose parent's saga compensates the step that made
    /// it (a `workflow:` step without a `compensate:` of its own): asked to
    /// run its own compensations, as a cancel of it would, and due at once
    /// (`pending`) for whoever runs it; its end is delivered to `parent`
    /// as before. Nothing unless it is still `completed` and `parent`'s.
    CompensateChild {
        child: InstanceId,
        parent: InstanceId,
    },
    /// A child ended: the event its parent's step waits for, delivered in
    /// the child's last commit (so whoever ends the child wakes the parent).
    NotifyParent {
        parent: InstanceId,
        name: String,
        payload: Value,
    },
    /// Writes to a child instance its parent runs in its process, under
    /// the child's own fence: the opening of its first run, after the
    /// `CreateChild` of the batch that made it (leased to this process),
    /// so that the commit that makes the child also records its first
    /// attempts; and the last commit of a child's run that ended, so that
    /// the commit that records the end of the parent's step records the
    /// child's too (`engine::runner::children`). Refused, with the whole
    /// batch, unless that fence holds: the error names the child
    /// (`StoreError::Fenced`).
    Child(Box<ChildWrites>),
    /// `wf upgrade`: the instance moved onto another definition, in the
    /// commit that resets its steps as the plan says (`engine::upgrade`).
    Upgrade(Box<UpgradeTo>),
}

/// What [`Write::Upgrade`] writes: the new definition pinned (with the
/// workflows it calls) and the instance on it, with the inputs the new
/// definition adds.
#[derive(Debug, Clone)]
pub struct UpgradeTo {
    pub definitions: Vec<DefinitionRow>,
    pub definition_hash: String,
    pub workflow_path: String,
    pub base_dir: String,
    pub inputs: Value,
    /// Its new place under the new definition's `queue:` (`Some(None)`: no
    /// queue), not admitted: it is admitted there when it next runs (a
    /// `queued` one stays queued, under the new key; one whose queue is
    /// gone is due at once). `None`: its place stays as it is.
    pub queue: Option<Option<super::QueuePlace>>,
    /// Steps renamed (`--map OLD=NEW`): every row of OLD's units (the
    /// step's, its items', its compensation's, their attempts, the events
    /// they took, the locks they hold, the children they made) keyed as
    /// NEW's, before the plan's step rows are written.
    pub renames: Vec<(String, String)>,
}

/// The statements that key the rows of step `?2`'s units as step `?3`'s in
/// instance `?1` ([`UpgradeTo::renames`]): a unit's key is its step's id,
/// then `[n]` for an item and `:compensate` for a compensation. SQLite's
/// placeholders; PostgreSQL's write `$n` for `?n`.
pub const RENAME_UNITS: [&str; 5] = [
    "UPDATE steps SET key = ?3 || substr(key, length(?2) + 1), step_id = ?3 \
     WHERE instance_id = ?1 AND step_id = ?2",
    "UPDATE attempts SET step_key = ?3 || substr(step_key, length(?2) + 1) \
     WHERE instance_id = ?1 AND (step_key = ?2 OR substr(step_key, 1, length(?2) + 1) IN (?2 || '[', ?2 || ':'))",
    "UPDATE events SET consumed_by = ?3 || substr(consumed_by, length(?2) + 1) \
     WHERE instance_id = ?1 AND (consumed_by = ?2 OR substr(consumed_by, 1, length(?2) + 1) IN (?2 || '[', ?2 || ':'))",
    "UPDATE locks SET unit_key = ?3 || substr(unit_key, length(?2) + 1) \
     WHERE instance_id = ?1 AND (unit_key = ?2 OR substr(unit_key, 1, length(?2) + 1) IN (?2 || '[', ?2 || ':'))",
    "UPDATE instances SET parent_key = ?3 || substr(parent_key, length(?2) + 1) \
     WHERE parent_id = ?1 AND (parent_key = ?2 OR substr(parent_key, 1, length(?2) + 1) IN (?2 || '[', ?2 || ':'))",
];

/// What [`Write::Child`] writes: `writes`, to the instance `fence` holds.
#[derive(Debug, Clone)]
pub struct ChildWrites {
    pub fence: super::Fence,
    pub writes: Vec<Write>,
}
