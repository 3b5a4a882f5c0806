//! The rows of wf's history as the engine and the commands see them, the
//! same whichever backend stores them.

// The words rows are made of, for the backends that read and write them.
pub use crate::vocab::{
    AttemptOutcome, CancelRequest, ErrorType, InstanceId, InstanceStatus, RunEnd, StepStatus,
    Timestamp, UnitKey, UnitKeyBuf,
};
use serde_json::Value;

/// What `wf prune` removed (or, with `--dry-run`, would remove).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Pruned {
    pub instances: u64,
    pub runs: u64,
    pub steps: u64,
    pub attempts: u64,
    pub spans: u64,
    pub events: u64,
}

impl Pruned {
    pub fn add(&mut self, other: &Pruned) {
        self.instances += other.instances;
        self.runs += other.runs;
        self.steps += other.steps;
        self.attempts += other.attempts;
        self.spans += other.spans;
        self.events += other.events;
    }
}

#[derive(Debug, Clone)]
pub struct InstanceRow {
    pub id: InstanceId,
    pub workflow: String,
    pub status: InstanceStatus,
    pub definition: String,
    pub definition_hash: String,
    pub workflow_path: String,
    pub base_dir: String,
    pub inputs: Value,
    pub state: Value,
    pub error: Option<String>,
    pub wake_at: Option<Timestamp>,
    pub waiting_event: Option<String>,
    pub lease_owner: Option<String>,
    pub lease_expires_ms: Option<i64>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The `workflow:` step attempt that made this instance, if it is a child.
    pub parent: Option<ParentRef>,
    /// How many parents are above it: 0 for an instance started on its own.
    pub depth: i64,
    /// Its labels (`labels:`, `wf run --label`), rendered when it started.
    pub labels: Labels,
    /// Its place under its workflow's `queue:`, if it has one.
    pub queue: Option<super::QueuePlace>,
    /// Who started it (its `start` action's actor); none for an instance
    /// started by a `wf` before actions were recorded.
    pub started_by: Option<crate::vocab::Actor>,
}

/// An instance's labels: name -> value, in name order.
#[cfg(test)]
impl InstanceRow {
    /// An instance of `wf` for the engine's unit tests: `status`, pinned to
    /// `wf`, created now, with no inputs, state, lease or parent.
    pub fn for_test(
        wf: &crate::workflow::Workflow,
        id: &str,
        status: InstanceStatus,
    ) -> InstanceRow {
        let now = Timestamp::now();
        InstanceRow {
            id: id.into(),
            workflow: wf.name.clone(),
            status,
            definition: wf.source.clone(),
            definition_hash: wf.hash.clone(),
            workflow_path: format!("{}.yaml", wf.name),
            base_dir: ".".into(),
            inputs: serde_json::json!({}),
            state: serde_json::json!({}),
            error: None,
            wake_at: None,
            waiting_event: None,
            lease_owner: None,
            lease_expires_ms: None,
            created_at: now,
            updated_at: now,
            parent: None,
            depth: 0,
            labels: Labels::new(),
            queue: None,
            started_by: None,
        }
    }
}

pub type Labels = std::collections::BTreeMap<String, String>;

/// Labels as stored: a JSON object, or NULL for none.
pub fn labels_text(labels: &Labels) -> Option<String> {
    (!labels.is_empty()).then(|| serde_json::to_string(labels).unwrap_or_default())
}

/// Labels read back (a value that is not an object of strings is none).
pub fn labels_of(text: Option<&str>) -> Labels {
    text.and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default()
}

/// Children in the order they were made: by creation, then (made in one
/// commit) by step, item number and attempt.
pub fn sort_children(children: &mut [InstanceRow]) {
    children.sort_by_cached_key(|c| {
        let (step, item, attempt) = c.parent.as_ref().map_or((String::new(), None, 0), |p| {
            let key = p.key.parts();
            (key.step.to_string(), key.item, p.attempt)
        });
        (c.created_at, step, item, attempt)
    });
}

/// Where a child instance comes from: its parent, the unit key of the
/// `workflow:` step (or item) and the attempt that created it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentRef {
    pub id: InstanceId,
    pub key: UnitKeyBuf,
    pub attempt: i64,
}

/// A delivered event no step has taken yet.
#[derive(Debug, Clone)]
pub struct EventRow {
    pub id: i64,
    pub name: String,
    pub payload: String,
    pub traceparent: Option<String>,
}

/// What a runner that just took an instance over needs to know of it.
#[derive(Debug)]
pub struct History {
    pub instance: InstanceRow,
    pub steps: Vec<StepRow>,
    pub open: Vec<OpenAttempt>,
    /// Numbers of the runs left without an outcome.
    pub abandoned_runs: Vec<i64>,
    /// The highest run number so far (0 before the first run).
    pub last_run: i64,
    /// The definition the last run used (`wf upgrade` may have moved the
    /// instance since: its next run's root says so).
    pub last_definition: Option<String>,
    pub traces: std::collections::BTreeMap<i64, RunTrace>,
    pub uncounted: Vec<(UnitKeyBuf, i64)>,
    /// Finished attempts of abandoned runs whose span was never stored.
    pub unspanned: Vec<UnspannedAttempt>,
    pub events: Vec<EventRow>,
    pub cancel_requested: CancelRequest,
    /// When the takeover this history was read under set the lease's
    /// expiry, on this process's monotonic clock: no later than that (the
    /// statement about to be sent, or run once the write lock was taken),
    /// so that the lease lasts a TTL from then at least (`engine::lapse`).
    /// `None` when no takeover was made here.
    pub granted: Option<std::time::Instant>,
}

impl History {
    /// The history of an instance just made, leased already (its lease at
    /// epoch 0, as made): nothing ran, nothing was delivered. What a
    /// takeover of it would read, known without reading it.
    pub fn fresh(instance: InstanceRow) -> History {
        History {
            instance,
            steps: Vec::new(),
            open: Vec::new(),
            abandoned_runs: Vec::new(),
            last_run: 0,
            last_definition: None,
            traces: std::collections::BTreeMap::new(),
            uncounted: Vec::new(),
            unspanned: Vec::new(),
            events: Vec::new(),
            cancel_requested: CancelRequest::None,
            granted: None,
        }
    }
}

/// A runner's claim on an instance: the epoch its lease was taken with. Every
/// write of that runner checks it first ([`check_fence`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub instance: InstanceId,
    pub owner: String,
    pub epoch: i64,
}

#[derive(Debug, Clone)]
pub struct RunRow {
    pub number: i64,
    pub outcome: Option<RunEnd>,
    pub started_at: Timestamp,
    pub finished_at: Option<Timestamp>,
    /// `wf restart --from STEP`: the run started STEP again.
    pub restart_from: Option<String>,
    /// The definition it ran (none in a history imported from before
    /// runs recorded it).
    pub definition_hash: Option<String>,
}

/// A JSON value that is null on most rows (a step's `for_each` list, its
/// `set_state` patch), held off the row when it is: 8 bytes instead of 72, so
/// that the 10,000 rows of a resume or an inspect stay small. Reads as a
/// [`Value`] (`Null` when absent).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sparse(Option<Box<Value>>);

impl std::ops::Deref for Sparse {
    type Target = Value;
    fn deref(&self) -> &Value {
        static NULL: Value = Value::Null;
        self.0.as_deref().unwrap_or(&NULL)
    }
}

impl From<Value> for Sparse {
    fn from(v: Value) -> Sparse {
        Sparse((!v.is_null()).then(|| Box::new(v)))
    }
}

#[derive(Debug, Clone)]
pub struct StepRow {
    pub key: UnitKeyBuf,
    pub step_id: String,
    pub status: StepStatus,
    pub attempts: i64,
    pub budget_base: i64,
    pub outcome: Option<AttemptOutcome>,
    pub error_type: Option<ErrorType>,
    pub error_message: Option<String>,
    pub output: Value,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    pub retry_at: Option<Timestamp>,
    pub seq: Option<i64>,
    /// For a `for_each` step: the list it fans out over, fixed when it
    /// started; for a `matrix` step, its combinations (read [`StepRow::fan`]).
    pub items: Sparse,
    /// The `set_state` merge patch its success committed (Null: none).
    pub state_patch: Sparse,
}

impl StepRow {
    /// A step (or item, or compensation) that has not started.
    pub fn pending(key: impl Into<UnitKeyBuf>, step_id: &str) -> StepRow {
        StepRow {
            key: key.into(),
            step_id: step_id.into(),
            status: StepStatus::Pending,
            attempts: 0,
            budget_base: 0,
            outcome: None,
            error_type: None,
            error_message: None,
            output: Value::Null,
            started_at: None,
            finished_at: None,
            retry_at: None,
            seq: None,
            items: Sparse::default(),
            state_patch: Sparse::default(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct AttemptRow {
    pub step_key: UnitKeyBuf,
    pub attempt: i64,
    pub run: i64,
    pub outcome: Option<AttemptOutcome>,
    pub error_type: Option<ErrorType>,
    pub error_message: Option<String>,
    pub exit_code: Option<i64>,
    pub started_at: Timestamp,
    pub finished_at: Option<Timestamp>,
    /// A `cached` attempt: the attempt whose result it took.
    pub cached_from: Option<super::CachedFrom>,
}

/// An attempt about to start: which, in which run, and its span.
pub struct NewAttempt<'a> {
    pub key: &'a str,
    pub attempt: i64,
    pub run: i64,
    pub started_at: Timestamp,
    pub span_id: &'a str,
    pub started_ns: i64,
}

/// The end of an attempt, as recorded.
#[derive(Debug, Clone)]
pub struct AttemptEnd {
    pub outcome: AttemptOutcome,
    pub error_type: Option<ErrorType>,
    pub error_message: Option<String>,
    pub exit_code: Option<i64>,
    pub finished_at: Timestamp,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Where an attempt's processes run: what identifies its process group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessTag {
    /// `hostname/boot id` of the machine.
    pub host: String,
    /// The group's id, which is its leader's pid.
    pub pgid: i64,
    /// The leader's start time (clock ticks after boot).
    pub start: i64,
}

/// An attempt with no outcome: its runner died or lost the instance.
#[derive(Debug, Clone)]
pub struct OpenAttempt {
    pub key: UnitKeyBuf,
    pub attempt: i64,
    pub run: i64,
    /// Its span's id and start, when it has a span.
    pub span: Option<(String, i64)>,
    pub process: Option<ProcessTag>,
}

/// An attempt whose span the next run rebuilds from its row: a finished
/// attempt of a run that never closed whose span was never stored (a
/// successful attempt's span is stored by the commit after the one that
/// made its result durable, and wf may have died in between), or one that
/// crashed.
#[derive(Debug, Clone)]
pub struct UnspannedAttempt {
    pub key: UnitKeyBuf,
    pub attempt: i64,
    pub run: i64,
    pub span_id: String,
    pub started_ns: i64,
    pub finished_at: Option<Timestamp>,
    pub outcome: AttemptOutcome,
    pub error_type: Option<ErrorType>,
    pub error_message: Option<String>,
}

/// An attempt's number with its captured stdout and stderr.
pub type AttemptLogs = (i64, Vec<u8>, Vec<u8>);

/// A finished span, as stored. Ids are lowercase hex (32 and 16 digits).
#[derive(Debug, Clone, PartialEq)]
pub struct SpanRow {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub instance_id: InstanceId,
    pub run: i64,
    pub name: String,
    /// `internal` or `client`.
    pub kind: String,
    pub start_ns: i64,
    pub end_ns: i64,
    /// `unset`, `ok` or `error`.
    pub status: String,
    pub status_message: Option<String>,
    /// JSON object of attribute name -> string, number or bool.
    pub attributes: Value,
    /// JSON array of `{trace_id, span_id, attributes}`.
    pub links: Value,
}

/// The attributes every stored span of an instance starts with, which its
/// row and its instance already hold: `workflow.name` (the instance's
/// `workflow`) and `workflow.instance.id` (the row's `instance_id`). A span is
/// stored without them and given them back when read: 85 bytes of each span,
/// 300 of a shell step's 3.5 spans, which kept a step over 2 KiB
/// (bench/scale.py, issue 16).
const SPAN_WORKFLOW: &str = "workflow.name";
const SPAN_INSTANCE: &str = "workflow.instance.id";

/// The name of a state commit's span, the same on both backends; its
/// `db.system.name` says which (OpenTelemetry's semantic conventions).
pub const COMMIT_SPAN: &str = "wf.commit";

/// The values of `db.system.name` wf writes.
const SYSTEMS: [&str; 2] = ["sqlite", "postgresql"];

/// The attributes a slimmed span's name implies, which follow the two
/// above: a state commit's database and operation, the same on every one
/// (57 bytes of a shell step's). A `wf.commit` span's database is the one
/// it is stored in (`system`): a commit span is written by the commit it
/// times, into that commit's database; one moved to another database (`wf
/// db copy`, an archive) carries its database written out
/// (`portable::Batch::explicit_commit_spans`).
/// The two older names (one per backend) are still read.
fn implied_by_name<'a>(name: &str, system: &'a str) -> &'a [(&'static str, &'a str)] {
    match name {
        COMMIT_SPAN => match system {
            "sqlite" => &[
                ("db.system.name", "sqlite"),
                ("db.operation.name", "COMMIT"),
            ],
            "postgresql" => &[
                ("db.system.name", "postgresql"),
                ("db.operation.name", "COMMIT"),
            ],
            _ => &[],
        },
        "wf.sqlite.commit" => &[
            ("db.system.name", "sqlite"),
            ("db.operation.name", "COMMIT"),
        ],
        "wf.postgresql.commit" => &[
            ("db.system.name", "postgresql"),
            ("db.operation.name", "COMMIT"),
        ],
        _ => &[],
    }
}

impl SpanRow {
    /// Drops the two leading attributes that the instance already says,
    /// and then those the span's name implies (only when they lead with
    /// exactly those values, so that [`SpanRow::restore`] gives the same
    /// object back, in the same order).
    pub fn slim(&mut self, workflow: &str) {
        let Value::Object(m) = &mut self.attributes else {
            return;
        };
        let mut lead = m.iter();
        let slimmable = matches!(
            (lead.next(), lead.next()),
            (Some((k1, v1)), Some((k2, v2)))
                if k1 == SPAN_WORKFLOW && v1.as_str() == Some(workflow)
                && k2 == SPAN_INSTANCE && v2.as_str() == Some(self.instance_id.as_str())
        );
        if !slimmable {
            return;
        }
        // The database a commit span names is the one it goes to.
        let system = m
            .get("db.system.name")
            .and_then(Value::as_str)
            .and_then(|s| SYSTEMS.into_iter().find(|k| *k == s))
            .unwrap_or_default();
        let implied = implied_by_name(&self.name, system);
        let follows = !implied.is_empty()
            && m.len() >= 2 + implied.len()
            && m.iter()
                .skip(2)
                .zip(implied)
                .all(|((k, v), (ik, iv))| k == ik && v.as_str() == Some(iv));
        let drop = 2 + if follows { implied.len() } else { 0 };
        *m = std::mem::take(m).into_iter().skip(drop).collect();
    }

    /// Puts back what [`SpanRow::slim`] dropped, for a span read from the
    /// database `system` (`sqlite`, `postgresql`). Every stored span names
    /// its instance (a span of none is not kept), so one without
    /// `workflow.instance.id` was slimmed; spans stored whole are left as
    /// they are.
    pub fn restore(&mut self, workflow: &str, system: &str) {
        let Value::Object(m) = &mut self.attributes else {
            return;
        };
        if m.contains_key(SPAN_INSTANCE) {
            return;
        }
        let mut whole = serde_json::Map::new();
        whole.insert(SPAN_WORKFLOW.into(), workflow.into());
        whole.insert(SPAN_INSTANCE.into(), self.instance_id.as_str().into());
        let implied = implied_by_name(&self.name, system);
        if !implied.is_empty() && implied.iter().all(|(k, _)| !m.contains_key(*k)) {
            for (k, v) in implied {
                whole.insert((*k).into(), (*v).into());
            }
        }
        whole.extend(std::mem::take(m));
        *m = whole;
    }

    /// Whether [`SpanRow::restore`] has something to put back.
    pub fn is_slim(&self) -> bool {
        self.attributes
            .as_object()
            .is_some_and(|m| !m.contains_key(SPAN_INSTANCE))
    }
}

/// A run's trace identity: (trace_id, root span_id, parent_span_id, started_ns).
pub type RunTrace = (String, String, Option<String>, i64);

/// An instance a worker may have to drive, with its lease.
#[derive(Debug, Clone)]
pub struct DueInstance {
    pub id: InstanceId,
    pub status: InstanceStatus,
    pub lease_owner: Option<String>,
    pub lease_expires_ms: Option<i64>,
}

/// A registered workflow (`wf workflow add`): the definition pinned under
/// its name, which the API starts by name, and the hook its `on.webhook`
/// answers at.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowRow {
    pub name: String,
    pub definition_hash: String,
    pub workflow_path: String,
    pub base_dir: String,
    /// `on.webhook.name`: `POST /hooks/NAME` (unique across the registry).
    pub hook: Option<String>,
    pub registered_at: Timestamp,
}

/// One registered `on.schedule` entry (`wf schedule add`), with where it is:
/// the next fire time not yet taken, and what `overlap` keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleRow {
    pub workflow: String,
    /// Position in the workflow's `on.schedule`.
    pub idx: i64,
    /// The cron expression, or `every 30s`.
    pub spec: String,
    /// The zone of a cron expression (`None` for `every`).
    pub timezone: Option<String>,
    pub overlap: String,
    pub catchup_ms: i64,
    /// The resolved inputs of the instances it starts, and their initial state.
    pub inputs: Value,
    pub state: Value,
    /// The pinned definition the instances run.
    pub definition_hash: String,
    pub workflow_path: String,
    pub base_dir: String,
    /// The next fire time not yet taken (unix ms).
    pub next_fire_ms: i64,
    /// `buffer_one`: a fire time waiting for the previous instance to end.
    pub buffered_ms: Option<i64>,
    /// The newest instance it started, and that one's fire time.
    pub last_instance: Option<InstanceId>,
    pub last_fire_ms: Option<i64>,
    /// Fire times that started nothing (missed beyond `catchup`, or skipped
    /// by `overlap`).
    pub skipped: i64,
    pub registered_at: Timestamp,
}

/// A workflow definition as pinned: its text, step ids and compiled form,
/// and the definitions of the workflows its `workflow:` steps call.
#[derive(Debug, Clone)]
pub struct DefinitionRow {
    /// Its text's hash, or, when it calls workflows, its text's and
    /// theirs (`workflow::children::tree_hash`).
    pub hash: String,
    pub source: String,
    pub step_ids: Vec<String>,
    pub compiled: Option<String>,
    /// The path as written in a `workflow:` step -> the hash of the
    /// definition it called when this one was pinned. Empty: none.
    pub children: std::collections::BTreeMap<String, String>,
}

impl DefinitionRow {
    /// `children` as its column holds it: a JSON object, or NULL for none.
    pub fn children_column(&self) -> Option<String> {
        (!self.children.is_empty())
            .then(|| serde_json::to_string(&self.children).unwrap_or_default())
    }

    /// `children` from its column.
    pub fn children_of(
        column: Option<&str>,
    ) -> Result<std::collections::BTreeMap<String, String>, String> {
        match column {
            None => Ok(Default::default()),
            Some(text) => {
                serde_json::from_str(text).map_err(|e| format!("definitions.children: {e}"))
            }
        }
    }
}

/// What a worker decided for one schedule entry, applied in one transaction
/// only if the entry is still where the decision saw it (`expect_*`): of two
/// workers deciding together, one applies and the other is refused.
#[derive(Debug, Clone)]
pub struct Fire {
    pub workflow: String,
    pub idx: i64,
    pub definition_hash: String,
    pub expect_next_ms: i64,
    pub expect_buffered_ms: Option<i64>,
    pub next_fire_ms: i64,
    pub buffered_ms: Option<i64>,
    /// Added to the entry's `skipped`.
    pub skipped: i64,
    /// New instances (already due), each with the fire time it is for.
    pub starts: Vec<(InstanceRow, i64)>,
    /// An instance to ask to cancel (`overlap: cancel_previous`).
    pub cancel: Option<InstanceId>,
}

/// Which schedule entry and fire time started an instance.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FireRecord {
    pub workflow: String,
    pub index: i64,
    pub spec: String,
    pub timezone: Option<String>,
    #[serde(skip)]
    pub fire_ms: i64,
    pub fire_at: Timestamp,
}

/// An event delivered to an instance, as `wf inspect` lists it.
#[derive(Debug, Clone)]
pub struct DeliveredEvent {
    pub name: String,
    /// The payload, JSON text (`{}` when `wf signal` gave none).
    pub payload: String,
    pub received_at: Timestamp,
    /// The step (key) whose `wait_for_event` took it; None while none has.
    pub consumed_by: Option<String>,
}

/// What a read command shows of one instance, read in one snapshot: a
/// step's row and the state its commit patched are seen together or not at
/// all (separate reads could see one commit's step row and miss its state).
#[derive(Debug, Clone)]
pub struct InstanceView {
    pub instance: InstanceRow,
    pub runs: Vec<RunRow>,
    pub steps: Vec<StepRow>,
    /// Every attempt, when asked for ([`Store::view`](super::Store::view)).
    pub attempts: Vec<AttemptRow>,
    /// Every event delivered, in the order received.
    pub events: Vec<DeliveredEvent>,
    /// The schedule entry and fire time that started it, if one did.
    pub fire: Option<FireRecord>,
    /// Its children (instances its `workflow:` steps made), oldest first,
    /// without their definitions' text.
    pub children: Vec<InstanceRow>,
    /// Who did what to it, oldest first.
    pub actions: Vec<super::ActionRow>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn span(attributes: Value) -> SpanRow {
        SpanRow {
            trace_id: "0".repeat(32),
            span_id: "1".repeat(16),
            parent_span_id: None,
            instance_id: "i1".into(),
            run: 1,
            name: "wf/step".into(),
            kind: "internal".into(),
            start_ns: 1,
            end_ns: 2,
            status: "unset".into(),
            status_message: None,
            attributes,
            links: json!([]),
        }
    }

    #[test]
    fn a_slimmed_span_is_restored_whole_in_its_order() {
        let whole = json!({"workflow.name": "wf", "workflow.instance.id": "i1", "workflow.step.id": "s", "a": 1});
        let mut row = span(whole.clone());
        row.slim("wf");
        assert_eq!(row.attributes, json!({"workflow.step.id": "s", "a": 1}));
        assert!(row.is_slim());
        row.restore("wf", "sqlite");
        assert_eq!(
            serde_json::to_string(&row.attributes).unwrap(),
            serde_json::to_string(&whole).unwrap()
        );
    }

    #[test]
    fn a_commit_span_is_stored_without_what_its_name_implies() {
        for (name, system) in [
            ("wf.commit", "sqlite"),
            ("wf.commit", "postgresql"),
            // Names older databases hold.
            ("wf.sqlite.commit", "sqlite"),
            ("wf.postgresql.commit", "postgresql"),
        ] {
            let whole = json!({"workflow.name": "wf", "workflow.instance.id": "i1",
                "db.system.name": system, "db.operation.name": "COMMIT"});
            let mut row = span(whole.clone());
            row.name = name.into();
            row.slim("wf");
            assert_eq!(row.attributes, json!({}), "{name}");
            row.restore("wf", system);
            assert_eq!(
                serde_json::to_string(&row.attributes).unwrap(),
                serde_json::to_string(&whole).unwrap()
            );
        }
        // Other values, or in another order, are kept as they are (in a
        // SQLite database: a `wf.commit` span naming PostgreSQL cannot be
        // in one, but one with the older SQLite name can).
        let legacy = json!({"db.system.name": "postgresql", "db.operation.name": "COMMIT"});
        for rest in [
            legacy.clone(),
            json!({"db.operation.name": "COMMIT", "db.system.name": "sqlite"}),
            json!({"db.system.name": "sqlite"}),
            json!({"db.system.name": "sqlite", "db.operation.name": "COMMIT", "x": 1}),
            json!({"db.system.name": "mysql", "db.operation.name": "COMMIT"}),
        ] {
            let mut whole = json!({"workflow.name": "wf", "workflow.instance.id": "i1"});
            whole
                .as_object_mut()
                .unwrap()
                .extend(rest.as_object().unwrap().clone());
            let names = if rest == legacy {
                &["wf.sqlite.commit"][..]
            } else {
                &["wf.commit", "wf.sqlite.commit"]
            };
            for name in names {
                let mut row = span(whole.clone());
                row.name = name.to_string();
                row.slim("wf");
                row.restore("wf", "sqlite");
                assert_eq!(
                    serde_json::to_string(&row.attributes).unwrap(),
                    serde_json::to_string(&whole).unwrap(),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn a_span_that_does_not_lead_with_its_instance_is_stored_whole() {
        for whole in [
            json!({"workflow.instance.id": "i1", "workflow.name": "wf", "b": 2}),
            json!({"workflow.name": "other", "workflow.instance.id": "i1"}),
            json!({"workflow.name": "wf", "workflow.instance.id": "***"}),
            json!({"workflow.name": "wf", "b": 2, "workflow.instance.id": "i1"}),
        ] {
            let mut row = span(whole.clone());
            row.slim("wf");
            assert_eq!(row.attributes, whole);
            row.restore("wf", "sqlite");
            assert_eq!(
                serde_json::to_string(&row.attributes).unwrap(),
                serde_json::to_string(&whole).unwrap()
            );
        }
    }
}
