//! The registry of workflows: `wf workflow add` pins a definition under its
//! name with its triggers (its `on.schedule` entries through [`fire`], its
//! `on.webhook` by its hook name), and `wf serve` starts registered
//! workflows by name or by hook. A start records the instance due for the
//! workers (or queued), as `wf run --detach` does; it never runs it here.

use super::{EngineError, Origin, fire};
use crate::store::{self, InstanceRow, Refused, ScheduleRow, Store, WorkflowRow};
use crate::vocab::{ActionKind, Actor, InstanceId, Timestamp};
use crate::workflow::Workflow;
use serde_json::{Map, Value};
use std::path::Path;

/// The label a webhook's instance carries: the hook that started it
/// (`wf list --label wf.webhook=NAME`, the inspector's "started by").
pub const HOOK_LABEL: &str = "wf.webhook";

/// What [`register`] wrote.
#[derive(Debug)]
pub struct Registered {
    pub row: WorkflowRow,
    pub schedules: Vec<ScheduleRow>,
}

/// Registers `wf` (read from `path`) under its name, replacing what was
/// registered under it: its definition, its hook and its schedules (none if
/// the file has no `on.schedule` now).
pub async fn register(
    store: &mut Store,
    wf: &Workflow,
    path: &Path,
    by: &Actor,
    kind: ActionKind,
) -> Result<Registered, EngineError> {
    if crate::workflow::is_stdin(path) {
        return Err(EngineError::Input(
            "a registered workflow is read from a file, not stdin: its steps run in the file's directory".into(),
        ));
    }
    let (recorded_path, base_dir) = crate::workflow::origin(path);
    let row = WorkflowRow {
        name: wf.name.clone(),
        definition_hash: wf.hash.clone(),
        workflow_path: recorded_path,
        base_dir: base_dir.display().to_string(),
        hook: wf.webhook.as_ref().map(|w| w.name.clone()),
        registered_at: Timestamp::now(),
    };
    let detail = format!(
        "{} from {}",
        crate::vocab::short(&wf.hash),
        row.workflow_path
    );
    let action = store::ActionRow::global(kind, by, detail);
    match store
        .register_workflow(&row, &super::definitions_of(wf), &action)
        .await?
    {
        Ok(()) => {}
        Err(Refused::HookTaken(other)) => {
            return Err(EngineError::Input(format!(
                "{}: webhook `{}` is the hook of the registered workflow `{other}`: give it another `name` (or `wf workflow rm {other}`)",
                path.display(),
                row.hook.as_deref().unwrap_or_default()
            )));
        }
    }
    let schedules = if wf.schedules.is_empty() {
        store.remove_schedules(&wf.name, None).await?;
        Vec::new()
    } else {
        fire::register(store, wf, path).await?
    };
    Ok(Registered { row, schedules })
}

/// The definition registered as `row`, with the workflows it calls.
pub async fn definition(store: &Store, row: &WorkflowRow) -> Result<Workflow, EngineError> {
    let label = format!("{} (registered as {})", row.workflow_path, row.name);
    super::pinned::pinned_by_hash(store, &row.definition_hash, &label).await
}

/// The registry as `wf workflow list` shows it.
pub struct Listing {
    pub rows: Vec<WorkflowRow>,
    /// Each row's definition (`None`: it cannot be read).
    pub defs: Vec<Option<Workflow>>,
    /// Every schedule entry.
    pub schedules: Vec<ScheduleRow>,
    /// Each row's figures (`engine::stats`).
    pub stats: Vec<super::stats::Stats>,
}

/// Every registered workflow with its definition and its figures, and
/// every schedule entry (`wf workflow list`, the API's, the inspector's).
pub async fn listing(store: &Store) -> Result<Listing, EngineError> {
    let rows = store.workflows().await?;
    let schedules = store.schedules().await?;
    let mut defs = Vec::with_capacity(rows.len());
    let mut stats = Vec::with_capacity(rows.len());
    for r in &rows {
        defs.push(definition(store, r).await.ok());
        stats.push(super::stats::stats(store, &r.name).await?);
    }
    Ok(Listing {
        rows,
        defs,
        schedules,
        stats,
    })
}

/// What a start asks for.
#[derive(Debug)]
pub struct Start {
    pub inputs: Map<String, Value>,
    /// Labels over the file's.
    pub labels: Vec<(String, String)>,
    /// The instance's id (an idempotency key's); `None`: a random one.
    pub id: Option<InstanceId>,
    /// Who starts it, and the detail its `start` action records (an
    /// idempotency key, a webhook's delivery).
    pub by: Actor,
    pub detail: String,
}

/// What a start did.
#[derive(Debug)]
pub struct Started {
    pub instance: InstanceRow,
    /// False: the id was started before (a redelivery), this is that instance.
    pub created: bool,
}

/// Records an instance of registered workflow `row` for the workers (due at
/// once, or queued by its `queue:`). An id that exists with the same
/// definition and inputs gives that instance back (`created` false); with
/// other ones, [`EngineError::Taken`].
pub async fn start(
    store: &mut Store,
    row: &WorkflowRow,
    wf: &Workflow,
    req: Start,
) -> Result<Started, EngineError> {
    let inputs = super::resolve_inputs(wf, req.inputs)?;
    let labels = super::render_labels(wf, &inputs, &req.labels)?;
    let origin = Origin {
        path: row.workflow_path.clone(),
        base_dir: row.base_dir.clone(),
    };
    let id = req.id.unwrap_or_else(InstanceId::random);
    let new = super::NewInstance {
        wf,
        origin: &origin,
        inputs,
        id: Some(id.clone()),
        owner: None,
        labels,
        started_by: req.by,
    };
    match super::create_instance_at(store, new, &req.detail).await {
        Ok(_) => Ok(Started {
            instance: store.instance(&id).await?,
            created: true,
        }),
        Err(EngineError::Exists(existing)) => Ok(Started {
            instance: *existing,
            created: false,
        }),
        Err(e) => Err(e),
    }
}

/// The instance id an idempotency key stands for, within `scope` (a
/// workflow's name, a hook's): the same key always names the same instance,
/// and keys of different scopes never collide.
pub fn keyed_id(scope: &str, key: &str) -> InstanceId {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(scope.as_bytes());
    h.update([0]);
    h.update(key.as_bytes());
    let digest = hex::encode(h.finalize());
    InstanceId::from(format!("k{}", &digest[..31]))
}

/// Whether `e` is the store saying an instance does not exist.
pub fn is_not_found(e: &EngineError) -> bool {
    matches!(e, EngineError::Store(store::StoreError::NotFound(_)))
}

/// The registered workflow `name`, or why there is none.
pub async fn registered(store: &Store, name: &str) -> Result<WorkflowRow, EngineError> {
    match store.registered(name).await? {
        Some(row) => Ok(row),
        None => Err(not_registered(store, name).await?),
    }
}

/// Removes the registration of workflow `name` with its triggers (`wf
/// workflow rm`); the instances it started stay.
pub async fn unregister(store: &mut Store, name: &str, by: &Actor) -> Result<(), EngineError> {
    let action = store::ActionRow::global(ActionKind::WorkflowRm, by, name);
    if store.remove_workflow(name, &action).await? {
        return Ok(());
    }
    Err(not_registered(store, name).await?)
}

async fn not_registered(store: &Store, name: &str) -> Result<EngineError, EngineError> {
    let registered = store
        .workflows()
        .await?
        .into_iter()
        .map(|r| r.name)
        .collect();
    Ok(EngineError::NotRegistered {
        name: name.to_string(),
        registered,
    })
}

/// What is registered, said after a name that is not: the names, or how to
/// register one.
pub fn registered_words(names: &[String]) -> String {
    if names.is_empty() {
        "none is registered: `wf workflow add FILE` registers one".to_string()
    } else {
        format!("registered: {}", names.join(", "))
    }
}
