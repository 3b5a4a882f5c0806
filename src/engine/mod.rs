//! The engine: starts instances and drives them. `runner` is the scheduler
//! (the one place that decides what runs next and commits results), `shell`
//! and `http` are the step executors (the side effects), `context` builds what
//! `${{ }}` expressions see, `lease` keeps two processes from driving the
//! same instance at once (fencing the one that lost it), `procs` ends what a
//! crashed attempt left running, `restart` decides what `wf restart`
//! runs again, and `advice` what can change a failed instance's result.

pub mod actions;
pub mod advice;
pub mod context;
pub mod db;
pub mod drive;
pub mod fire;
pub mod hash_files;
pub mod hooks;
pub mod http;
pub mod lapse;
pub mod lease;
pub mod logs;
pub mod output;
pub mod output_files;
pub mod pinned;
pub mod procs;
pub mod redact;
pub mod registry;
pub mod restart;
pub mod runner;
pub mod scheduler;
pub mod script;
pub mod shell;
pub mod spawn;
pub mod stats;
pub mod stop;
pub mod tokens;
pub mod upgrade;
pub mod worker;

use crate::store::{self, InstanceRow, Store, StoreError};
use crate::vocab::{AttemptOutcome, ErrorType, InstanceId, InstanceStatus, ShownKey, Timestamp};
use crate::workflow::{DefinitionError, Workflow};
use serde_json::{Map, Value};
use std::path::Path;
use std::time::Duration;

pub use runner::{RunOptions, RunOutcome};

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Definition(#[from] DefinitionError),
    #[error("{0}")]
    Input(String),
    /// A required input not given: each interface says how to give it
    /// (`--input NAME=VALUE`, the body's `inputs`, the start form).
    #[error("missing required input `{0}`")]
    MissingInput(String),
    #[error("instance {id} is held by another process ({holder})")]
    Held { id: InstanceId, holder: String },
    #[error(
        "instance {id} was taken over by {holder} while this process was stalled past its lease; its steps were stopped and nothing more was recorded"
    )]
    LeaseLost { id: InstanceId, holder: String },
    /// The run's lease went unrenewed past its margin (`lapse`): its steps
    /// were stopped, their attempts recorded `interrupted`.
    #[error(
        "instance {id}: its lease was not renewed for {unrenewed} (the database did not answer), so its steps were stopped and recorded interrupted before another process could take it over; `wf resume {id}` (or a worker) goes on"
    )]
    LeaseLapsed { id: InstanceId, unrenewed: String },
    /// The run's lease lapsed, its steps stopped, and then `then` ended
    /// the run (the database stayed away, or another process took the
    /// instance over): `then`'s kind.
    #[error(
        "the lease on instance {id} was not renewed for {unrenewed}, so its steps were stopped before another process could take it over; then: {then}"
    )]
    Lapsed {
        id: InstanceId,
        unrenewed: String,
        then: Box<EngineError>,
    },
    #[error(
        "child instance {child} was taken over by {holder} while this process was stalled past its lease, as the end of its run was recorded with {id}'s: the run of {id} stopped, and `wf resume {id}` goes on from what was recorded"
    )]
    ChildLost {
        id: InstanceId,
        child: InstanceId,
        holder: String,
    },
    /// A resume (or a cancel's run) of an instance that cannot go on.
    #[error("instance {id} {why}")]
    NotResumable { id: InstanceId, why: Unresumable },
    /// A cancel of an instance that has ended.
    #[error("instance {id} is already {status}; there is nothing to cancel")]
    NothingToCancel {
        id: InstanceId,
        status: crate::vocab::InstanceStatus,
    },
    /// A named thing (a token, a step) that is not there.
    #[error("{0}")]
    NoSuch(String),
    /// A request the current state refuses (a name taken).
    #[error("{0}")]
    Refused(String),
    /// A copy into a database that holds history, not asked to continue.
    #[error(
        "{target} already holds history ({rows} rows); copy into an empty database, or continue an interrupted copy into it with --resume"
    )]
    HoldsHistory { target: String, rows: i64 },
    /// A signal to an instance that has ended.
    #[error("instance {id} is {status}; it takes no more events")]
    Ended {
        id: InstanceId,
        status: crate::vocab::InstanceStatus,
    },
    /// `wf run --id` of an instance that exists with the same definition
    /// and inputs: nothing to do but say what became of it.
    #[error("instance {} exists already, with the same definition and inputs: {}", .0.id, .0.status)]
    Exists(Box<store::InstanceRow>),
    /// An instance id that exists with another definition or other inputs
    /// (`wf run --id`, an API start's `Idempotency-Key`).
    #[error("an instance with id `{}` already exists, of another definition or with other inputs", .0.id)]
    Taken(Box<store::InstanceRow>),
    #[error(transparent)]
    Restart(#[from] restart::RestartError),
    /// No workflow is registered under `name`; `registered`: the names
    /// that are.
    #[error("no workflow is registered as `{name}` ({})", registry::registered_words(.registered))]
    NotRegistered {
        name: String,
        registered: Vec<String>,
    },
    /// A webhook delivery refused before anything was written.
    #[error(transparent)]
    Hook(#[from] hooks::HookError),
    #[error("{0}")]
    Internal(String),
}

/// Whose words a message names its remedies in: the CLI's flags and
/// commands (`--allow-gaps`, `wf resume ID --retry-failed`), or the API's
/// fields and routes (`allow_gaps`, `POST …/retry`). An error's `Display`
/// is the CLI's; `serve` asks for the API's where they differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Words {
    Cli,
    Http,
}

/// Why an instance cannot be resumed; said after its id (CLI wording: a
/// failed one's remedy names the commands; the API says its own).
#[derive(Debug, thiserror::Error)]
pub enum Unresumable {
    #[error("already completed")]
    Completed,
    #[error("was canceled; it cannot be resumed")]
    Canceled,
    #[error("was skipped by its queue; it cannot be resumed")]
    Skipped,
    /// Failed, and not to be retried.
    #[error("failed{}; {}", .0.error_words(), .0.remedy.advice(&.0.short, &.0.file))]
    Failed(Box<FailedRun>),
}

/// A failed instance a resume refused: its error, and what can change its
/// result.
#[derive(Debug)]
pub struct FailedRun {
    pub error: Option<String>,
    pub remedy: advice::Remedy,
    /// Whether a retry was asked (and the remedy says why it would not help).
    pub retry: bool,
    /// The id as shown, and the workflow file: for the CLI's advice.
    pub short: String,
    pub file: String,
}

impl FailedRun {
    /// Its error as said after "failed": ` (ERROR)`, or nothing.
    pub fn error_words(&self) -> String {
        self.error
            .as_deref()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default()
    }
}

/// Why an attempt did not succeed.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub error_type: ErrorType,
    pub message: String,
}

impl Failure {
    pub fn new(error_type: ErrorType, message: String) -> Failure {
        Failure {
            error_type,
            message,
        }
    }
}

/// What an executor reports back about one attempt.
#[derive(Debug, Clone)]
pub struct AttemptResult {
    pub outcome: Result<Value, Failure>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: Option<i32>,
    /// Stopped by SIGINT/SIGTERM to the runner, not by its own doing.
    pub interrupted: bool,
    /// A server-requested delay before the next attempt (HTTP `Retry-After`).
    pub retry_after: Option<Duration>,
}

impl Default for AttemptResult {
    fn default() -> Self {
        AttemptResult {
            outcome: Ok(Value::Null),
            stdout: Vec::new(),
            stderr: Vec::new(),
            exit_code: None,
            interrupted: false,
            retry_after: None,
        }
    }
}

impl AttemptResult {
    pub fn failed(f: Failure) -> AttemptResult {
        AttemptResult {
            outcome: Err(f),
            ..AttemptResult::default()
        }
    }
}

/// Progress callbacks, so the command layer can show what the engine does
/// without the engine knowing how it is shown.
pub trait Observer: Send + Sync {
    fn run_started(&self, _instance: &InstanceId, _workflow: &str, _run: i64, _total_steps: usize) {
    }
    fn step_started(&self, _key: &ShownKey, _attempt: i64) {}
    fn step_finished(
        &self,
        _key: &ShownKey,
        _attempt: i64,
        _outcome: AttemptOutcome,
        _error: Option<&Failure>,
        _elapsed: Duration,
    ) {
    }
    fn step_skipped(&self, _key: &ShownKey) {}
    /// A failed attempt will be retried after `delay`: attempt number
    /// `next_attempt` (in history), try `try_n` of the budget of
    /// `max_attempts` (they differ after `--retry-failed` or a restart).
    fn step_retrying(
        &self,
        _key: &ShownKey,
        _next_attempt: i64,
        _try_n: i64,
        _max_attempts: u32,
        _delay: Duration,
    ) {
    }
    /// A `for_each` step whose items all ended.
    fn fan_out_finished(&self, _key: &ShownKey, _items: usize) {}
    fn steps_replayed(&self, _count: usize) {}
    fn message(&self, _text: &str) {}
}

/// An observer that shows nothing: for runs whose progress no one watches
/// (a worker's, which reports each run's end itself; a child's in its
/// parent's process; one `wf serve` drives in the background).
pub struct Unobserved;

impl Observer for Unobserved {}

/// The one [`Unobserved`], for what needs a `'static` observer.
pub static UNOBSERVED: Unobserved = Unobserved;

/// Checks `--input` values against the workflow's declared inputs, applies
/// defaults, and returns the inputs object to pin.
pub fn resolve_inputs(wf: &Workflow, given: Map<String, Value>) -> Result<Value, EngineError> {
    let mut out = Map::new();
    for key in given.keys() {
        if !wf.inputs.contains_key(key) {
            let known: Vec<&str> = wf.inputs.keys().map(String::as_str).collect();
            return Err(EngineError::Input(if known.is_empty() {
                format!(
                    "unknown input `{key}`: workflow `{}` declares no inputs",
                    wf.name
                )
            } else {
                format!(
                    "unknown input `{key}` (workflow `{}` declares: {})",
                    wf.name,
                    known.join(", ")
                )
            }));
        }
    }
    for (name, spec) in &wf.inputs {
        match given.get(name) {
            Some(v) => {
                // Checked against the default's type when it has one: text
                // (`--input n=5`, a form's field) is read as that type.
                let v = typed_input(name, v, spec.default.as_ref())?;
                out.insert(name.clone(), v);
            }
            None => match &spec.default {
                Some(d) => {
                    out.insert(name.clone(), d.clone());
                }
                None if spec.required => {
                    return Err(EngineError::MissingInput(name.clone()));
                }
                None => {
                    out.insert(name.clone(), Value::Null);
                }
            },
        }
    }
    Ok(Value::Object(out))
}

/// Input `name`'s value `v` as the type of its default (a number, true or
/// false, a list, an object), before anything starts: text is read as
/// that type (a list or an object as JSON), and a value of another type is
/// refused, naming the input. An input without a default, or with a text
/// one, takes any value.
fn typed_input(name: &str, v: &Value, default: Option<&Value>) -> Result<Value, EngineError> {
    let (kind, example) = match default {
        Some(Value::Number(_)) => ("a number", "5"),
        Some(Value::Bool(_)) => ("true or false", "true"),
        Some(Value::Array(_)) => ("a list (JSON)", "[\"eu\", \"us\"]"),
        Some(Value::Object(_)) => ("an object (JSON)", "{\"key\": \"value\"}"),
        _ => return Ok(v.clone()),
    };
    let same = |v: &Value| {
        matches!(
            (v, default),
            (Value::Number(_), Some(Value::Number(_)))
                | (Value::Bool(_), Some(Value::Bool(_)))
                | (Value::Array(_), Some(Value::Array(_)))
                | (Value::Object(_), Some(Value::Object(_)))
        )
    };
    if same(v) {
        return Ok(v.clone());
    }
    let parsed = match v {
        Value::String(s) => serde_json::from_str::<Value>(s.trim()).ok().filter(same),
        _ => None,
    };
    parsed.ok_or_else(|| {
        let got = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        EngineError::Input(format!(
            "input `{name}` must be {kind}, e.g. {example}; got `{got}`"
        ))
    })
}

/// The labels of an instance of `wf` with `inputs` (resolved): the file's
/// `labels:`, rendered from the inputs, then those `given` (`wf run
/// --label`), which win.
pub fn render_labels(
    wf: &Workflow,
    inputs: &Value,
    given: &[(String, String)],
) -> Result<store::Labels, EngineError> {
    let ctx = serde_json::json!({ "inputs": inputs });
    let mut labels = store::Labels::new();
    for (name, t) in &wf.labels {
        let value = t
            .render_text(&ctx)
            .map_err(|e| EngineError::Input(format!("label `{name}`: {e}")))?;
        labels.insert(name.clone(), value);
    }
    labels.extend(given.iter().cloned());
    Ok(labels)
}

/// The place under its workflow's `queue:` of an instance with `inputs`
/// (resolved): the key and priority rendered, the limits as the store
/// applies them; none without a `queue:`.
pub fn render_queue(
    wf: &Workflow,
    inputs: &Value,
) -> Result<Option<store::QueuePlace>, EngineError> {
    let Some(q) = &wf.queue else {
        return Ok(None);
    };
    let ctx = serde_json::json!({ "inputs": inputs });
    let key = match &q.key {
        None => wf.name.clone(),
        Some(t) => t
            .render_text(&ctx)
            .map_err(|e| EngineError::Input(format!("queue.key: {e}")))?,
    };
    if key.is_empty() || key.len() > 256 {
        return Err(EngineError::Input(format!(
            "queue.key renders as `{key}`: a key is 1 to 256 bytes"
        )));
    }
    let priority = match &q.priority {
        None => store::queue::DEFAULT_PRIORITY,
        Some(t) => {
            let text = t
                .render_text(&ctx)
                .map_err(|e| EngineError::Input(format!("queue.priority: {e}")))?;
            match text.trim().parse::<i64>() {
                Ok(p) if crate::workflow::queue::PRIORITIES.contains(&p) => p,
                _ => {
                    return Err(EngineError::Input(format!(
                        "queue.priority renders as `{text}`: a priority is a whole number from 0 to 9"
                    )));
                }
            }
        }
    };
    let ms = |d: std::time::Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    Ok(Some(store::QueuePlace {
        key,
        priority,
        limits: store::QueueLimits {
            concurrency: q.concurrency,
            rate: q.rate.map(|r| store::queue::RateLimit {
                count: r.count,
                period_ms: ms(r.period),
            }),
            hold: q.hold_while_suspended,
            on_full: match q.on_full {
                crate::workflow::queue::OnFull::Queue => store::queue::OnFull::Queue,
                crate::workflow::queue::OnFull::Skip => store::queue::OnFull::Skip,
                crate::workflow::queue::OnFull::CancelPrevious => {
                    store::queue::OnFull::CancelPrevious
                }
            },
            debounce_ms: q.debounce.map(ms),
        },
        admitted: false,
    }))
}

/// The definitions an instance of `wf` pins: its own first, then those of
/// the workflows it calls (and they call), each once.
pub fn definitions_of(wf: &Workflow) -> Vec<store::DefinitionRow> {
    fn walk(wf: &Workflow, out: &mut Vec<store::DefinitionRow>) {
        if out.iter().any(|d| d.hash == wf.hash) {
            return;
        }
        out.push(store::DefinitionRow {
            hash: wf.hash.clone(),
            source: wf.source.clone(),
            step_ids: wf.steps.iter().map(|s| s.id.clone()).collect(),
            compiled: wf.compiled(),
            children: wf
                .children
                .iter()
                .map(|(path, child)| (path.clone(), child.hash.clone()))
                .collect(),
        });
        for child in wf.children.values() {
            walk(child, out);
        }
    }
    let mut out = Vec::new();
    walk(wf, &mut out);
    out
}

/// Checks that every secret the workflow names is set in our environment.
pub fn check_secrets(wf: &Workflow) -> Result<(), EngineError> {
    match missing_secret(wf) {
        Some(name) => Err(unset_secret(name)),
        None => Ok(()),
    }
}

/// The error of a secret not set in our environment.
pub fn unset_secret(name: &str) -> EngineError {
    EngineError::Input(format!(
        "secret `{name}` is not set: export {name} in the environment of wf"
    ))
}

/// The first secret the workflow names that is not set in our environment.
pub fn missing_secret(wf: &Workflow) -> Option<&str> {
    wf.secrets
        .iter()
        .find(|name| std::env::var_os(name).is_none())
        .map(String::as_str)
}

/// Checks an instance id given by the user (`--id`, `--as`).
///
/// An id is a path segment (of the live logs' folder, of the inspector's
/// `/instances/ID`), so `.` and `..`, which name another place, are refused.
pub fn check_id(id: &str) -> Result<(), EngineError> {
    if id.is_empty()
        || id.len() > 128
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    {
        return Err(EngineError::Input(format!(
            "invalid instance id `{id}`: use up to 128 letters, digits, `-`, `_` and `.`"
        )));
    }
    if id.chars().all(|c| c == '.') && id.len() <= 2 {
        return Err(EngineError::Input(format!(
            "invalid instance id `{id}`: `.` and `..` name a folder, not an instance"
        )));
    }
    Ok(())
}

/// Where an instance's definition came from: the path it records, and the
/// directory its steps run in.
#[derive(Debug, Clone)]
pub struct Origin {
    pub path: String,
    pub base_dir: String,
}

impl Origin {
    /// Where a workflow file read from `workflow_path` runs.
    pub fn of(workflow_path: &Path) -> Origin {
        let (path, base_dir) = crate::workflow::origin(workflow_path);
        Origin {
            path,
            base_dir: base_dir.display().to_string(),
        }
    }
}

/// Creates a new instance of `wf` (read from `origin`) pinning its
/// definition, leased to `owner` (who drives it next: no worker may claim
/// it first); nothing is written unless what it is given checks out
/// ([`new_instance`], then [`record_instance`]).
pub async fn create_instance_at(
    store: &mut Store,
    new: NewInstance<'_>,
    detail: &str,
) -> Result<InstanceId, EngineError> {
    let (wf, owner) = (new.wf, new.owner);
    let row = new_instance(new)?;
    record_instance(store, wf, row, owner, detail).await
}

/// What a new instance is made of: its definition and where it was read
/// from, its inputs (resolved), its id (`None`: a random one), who drives
/// it first (`None`: the workers), and its labels (rendered).
pub struct NewInstance<'a> {
    pub wf: &'a Workflow,
    pub origin: &'a Origin,
    pub inputs: Value,
    pub id: Option<InstanceId>,
    pub owner: Option<&'a str>,
    pub labels: store::Labels,
    /// Who starts it (its `start` action's actor).
    pub started_by: crate::vocab::Actor,
}

/// The row a new instance of `wf` starts as, with every check of what it
/// is given made (its id, the queue key and priority its inputs render,
/// `WF_LEASE_TTL`), touching no database: `wf run` makes it before it
/// opens (or creates) one, so that a refusal leaves nothing behind.
pub fn new_instance(new: NewInstance<'_>) -> Result<InstanceRow, EngineError> {
    let NewInstance {
        wf,
        origin,
        inputs,
        id,
        owner,
        labels,
        started_by,
    } = new;
    let ttl = lease::ttl().map_err(EngineError::Input)?;
    // A secret's value given as an input is masked like everywhere else.
    let mut inputs = inputs;
    let redactor = redact::Redactor::for_secrets(&wf.secrets);
    redactor.value(&mut inputs);
    // A label rendered from an input that held a secret's value is masked too.
    let labels: store::Labels = labels
        .into_iter()
        .map(|(k, v)| (k, redactor.text(&v)))
        .collect();
    let id = match id {
        Some(id) => {
            check_id(id.as_str())?;
            id
        }
        None => InstanceId::random(),
    };
    let now = Timestamp::now();
    // Leased to the run that drives it now; or, detached, due at once for
    // the first worker with room (as a schedule's fire is).
    // With a queue, it is queued (and debounced) until its queue admits it,
    // which may be at once (`Store::create_instance`).
    let queue = render_queue(wf, &inputs)?;
    let (status, wake_at) = match (&queue, owner) {
        (Some(q), _) => (
            InstanceStatus::Queued,
            q.limits
                .debounce_ms
                .map(|d| Timestamp::from_ms(now.ms() + d)),
        ),
        (None, Some(_)) => (InstanceStatus::Running, None),
        (None, None) => (InstanceStatus::Pending, Some(now)),
    };
    let row = InstanceRow {
        id: id.clone(),
        workflow: wf.name.clone(),
        status,
        definition: wf.source.clone(),
        definition_hash: wf.hash.clone(),
        workflow_path: origin.path.clone(),
        base_dir: origin.base_dir.clone(),
        inputs,
        state: Value::Object(wf.state.clone()),
        error: None,
        wake_at,
        waiting_event: None,
        lease_owner: owner.map(str::to_string),
        lease_expires_ms: owner.map(|_| chrono::Utc::now().timestamp_millis() + lease::ttl_ms(ttl)),
        created_at: now,
        updated_at: now,
        parent: None,
        depth: 0,
        labels,
        queue,
        started_by: Some(started_by),
    };
    Ok(row)
}

/// Records `row`, made by [`new_instance`] (leased to `owner`, if any),
/// and its `start` action with `detail`: its id, or why not (an instance
/// of that id exists).
pub async fn record_instance(
    store: &mut Store,
    wf: &Workflow,
    row: InstanceRow,
    owner: Option<&str>,
    detail: &str,
) -> Result<InstanceId, EngineError> {
    let id = row.id.clone();
    if !store
        .create_instance(&row, &definitions_of(wf), detail, &lease::holder_alive)
        .await?
    {
        let existing = store.instance(&id).await?;
        // Leased to this process: the creation's reply was lost, and the
        // store sent it again (PostgreSQL). It is this run's instance.
        if owner.is_some() && existing.lease_owner.as_deref() == owner {
            return Ok(id);
        }
        if existing.definition_hash == row.definition_hash && existing.inputs == row.inputs {
            return Err(EngineError::Exists(Box::new(existing)));
        }
        return Err(EngineError::Taken(Box::new(existing)));
    }
    Ok(id)
}

/// Where `v` holds a NUL character (U+0000) in a string or a key, as a
/// path (`.data.a[2]`), if it does: wf stores no such text, on either
/// backend (PostgreSQL's text and jsonb cannot hold it), so a request that
/// brings one is refused before anything is written.
pub fn nul_in(v: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    match v {
        Value::String(s) => s.contains('\0').then(String::new),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| nul_in(item).map(|p| format!("[{i}]{p}"))),
        Value::Object(m) => nul_in_fields(m, &[]),
        _ => None,
    }
}

/// [`nul_in`] of an object's fields, but those named in `free` (free JSON,
/// kept as JSON text, where a NUL is an escape).
pub fn nul_in_fields(
    m: &serde_json::Map<String, serde_json::Value>,
    free: &[&str],
) -> Option<String> {
    m.iter()
        .filter(|(k, _)| !free.contains(&k.as_str()))
        .find_map(|(k, item)| {
            if k.contains('\0') {
                Some(format!(".{}", k.escape_debug()))
            } else {
                nul_in(item).map(|p| format!(".{k}{p}"))
            }
        })
}
