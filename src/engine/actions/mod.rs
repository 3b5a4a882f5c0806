//! The use cases both interfaces offer on instances (`wf signal`,
//! `wf cancel`, `wf resume [--retry-failed]`, `wf restart`, `wf result`,
//! `wf inspect`, `wf list`; the API's routes and the inspector's buttons of
//! the same names): what each checks and writes before anything runs, in
//! one place, so the CLI and `wf serve` refuse and record the same things.
//! An action that runs something returns the run it made ready
//! ([`ToRun`], `control.rs`): the CLI drives it in its process, the server
//! in the background.

pub mod bulk;
mod control;
mod listing;

pub use control::{CancelAsked, Resumable, Resume, ToRun, cancel, resume};
pub use listing::{
    COUNT_CAP, Counts, ListQuery, StatusCount, children_counts, counts, list, list_status,
};

use super::{EngineError, RunOptions, redact::Redactor, restart};
use crate::store::{ActionRow, InstanceRow, Store};
use crate::vocab::{ActionKind, Actor, InstanceId, InstanceStatus, Timestamp};
use crate::workflow::{Action, Workflow};
use serde_json::{Value, json};

/// What [`signal`] did beyond delivering: an event no step waits for is
/// kept, and said.
#[derive(Debug, Default)]
pub struct Delivered {
    /// Why the event will likely not be taken (a misspelt name).
    pub warning: Option<String>,
}

/// Delivers event `event` with `payload` to instance `id` (its workflow's
/// secrets, as far as this process knows their values, masked in it); a
/// waiting instance that waits for it becomes due for the workers.
pub async fn signal(
    store: &mut Store,
    id: &InstanceId,
    event: &str,
    payload: Value,
    traceparent: Option<&str>,
    by: &Actor,
) -> Result<Delivered, EngineError> {
    if event.trim().is_empty() {
        return Err(EngineError::Input("event name is empty".into()));
    }
    if event.starts_with(crate::vocab::CHILD_EVENT_PREFIX) {
        return Err(EngineError::Input(format!(
            "event names that start with `{}` are the ends of child instances, which wf delivers itself",
            crate::vocab::CHILD_EVENT_PREFIX
        )));
    }
    let inst = store.instance(id).await?;
    if inst.status.is_ended() {
        return Err(EngineError::Ended {
            id: id.clone(),
            status: inst.status,
        });
    }
    let mut payload = payload;
    let mut out = Delivered::default();
    if let Ok(wf) = super::pinned::pinned_workflow(store, &inst).await {
        Redactor::for_secrets(&wf.secrets).value(&mut payload);
        // Names match exactly: a misspelt one would wait in the store for
        // ever. It is kept (a restart or a later step may want it), but said.
        out.warning = unknown_event(&wf, event);
    }
    let wakes = inst.status == InstanceStatus::Waiting
        && inst
            .waiting_event
            .as_deref()
            .is_some_and(|e| e.split(',').any(|n| n == event));
    let action = ActionRow::on(id, ActionKind::Signal, by, event);
    store
        .deliver_event(id, event, &payload, traceparent, wakes, &action)
        .await?;
    Ok(out)
}

/// The events `wf`'s steps wait for, each once, in file order.
fn waited_for(wf: &Workflow) -> Vec<&str> {
    let mut waits: Vec<&str> = wf
        .steps
        .iter()
        .filter_map(|s| match &s.action {
            Action::WaitForEvent { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    let mut seen = std::collections::HashSet::new();
    waits.retain(|n| seen.insert(*n));
    waits
}

/// The events an instance takes, for a form to offer: those it waits for
/// now first, then the others its workflow's steps wait for.
pub async fn signal_events(store: &Store, id: &InstanceId) -> Result<Vec<String>, EngineError> {
    let inst = store.instance(id).await?;
    let mut names: Vec<String> = inst
        .waiting_event
        .as_deref()
        .map(|e| e.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    if let Ok(wf) = super::pinned::pinned_workflow(store, &inst).await {
        for n in waited_for(&wf) {
            if !names.iter().any(|m| m == n) {
                names.push(n.to_string());
            }
        }
    }
    Ok(names)
}

/// Why no step of `wf` will take `event`, if none will.
fn unknown_event(wf: &Workflow, event: &str) -> Option<String> {
    let waits = waited_for(wf);
    if waits.contains(&event) {
        return None;
    }
    Some(match waits.as_slice() {
        [] => format!(
            "workflow {} never waits for an event; `{event}` is stored but no step will take it",
            wf.name
        ),
        names => format!(
            "workflow {} never waits for `{event}` (it waits for {}); the event is stored",
            wf.name,
            names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// A restart made ready: the run (of the original, or of its copy, with
/// its definition), and the steps that run again.
#[derive(Debug)]
pub struct Restart {
    pub run: ToRun,
    pub reset_steps: Vec<String>,
}

/// Checks that ended instance `id` can restart from step `from` and, with
/// `as_id`, copies it there first. Refused before anything is written: a
/// live holder is named, an instance that has not ended is an input error.
pub async fn prepare_restart(
    store: &mut Store,
    id: &InstanceId,
    from: &str,
    as_id: Option<&str>,
    by: &Actor,
) -> Result<Restart, EngineError> {
    let inst = store.instance(id).await?;
    let shown = super::lease::shown(&inst, Timestamp::now().ms());
    if let Some(holder) = control::holder_of(&inst, shown) {
        return Err(EngineError::Held {
            holder,
            id: id.clone(),
        });
    }
    restart::check_ended(id, shown)?;
    let (wf, reset_steps) = plan_restart(store, &inst, from).await?;
    super::check_secrets(&wf)?;
    let target = match as_id {
        Some(new) => {
            super::check_id(new)?;
            let new = InstanceId::from(new);
            let start = ActionRow::on(&new, ActionKind::Start, by, format!("copy of {id}"));
            if !store
                .copy_instance(id, &new, Timestamp::now(), &start)
                .await?
            {
                return Err(EngineError::Input(format!(
                    "an instance with id `{new}` already exists"
                )));
            }
            new
        }
        None => id.clone(),
    };
    Ok(Restart {
        run: ToRun {
            id: target,
            opts: RunOptions {
                restart: Some(from.to_string()),
                workflow: Some(std::sync::Arc::new(wf)),
                actor: Some(by.clone()),
                action: Some((ActionKind::Restart, format!("from {from}"))),
                ..RunOptions::default()
            },
        },
        reset_steps,
    })
}

/// The definition of `inst`, and the steps a restart from `from` runs
/// again (what `wf restart` prints before it runs them).
async fn plan_restart(
    store: &Store,
    inst: &InstanceRow,
    from: &str,
) -> Result<(Workflow, Vec<String>), EngineError> {
    let wf = super::pinned::pinned_workflow(store, inst).await?;
    let mut rows = store.steps(&inst.id).await?;
    restart::fill_patches(store, &inst.id, &mut rows).await?;
    let plan = restart::plan(&wf, &rows, from)?;
    Ok((wf, plan.reset_steps))
}

/// What a restart from step `from` runs again, as the CLI says it before
/// it runs and the inspector's confirmation before it is confirmed:
/// "from `c`: `c`, `d` run again".
pub fn restart_words(from: &str, reset_steps: &[String]) -> String {
    let steps: Vec<String> = reset_steps.iter().map(|s| format!("`{s}`")).collect();
    format!("from `{from}`: {} run again", steps.join(", "))
}

/// The steps a restart of instance `id` from `from` would run again; reads
/// only (the inspector's confirmation).
pub async fn restart_plan(
    store: &Store,
    id: &InstanceId,
    from: &str,
) -> Result<Vec<String>, EngineError> {
    let inst = store.instance(id).await?;
    Ok(plan_restart(store, &inst, from).await?.1)
}

/// What `wf resume --retry-failed` of an instance would run, read only
/// (the inspector's confirmation says it before, as the run does when it
/// starts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPlan {
    /// The failed steps (units) that get a fresh attempt budget.
    pub failed: Vec<String>,
    /// After compensations undid steps: what runs again, and why (the
    /// run's own words).
    pub rerun: Option<String>,
}

/// The [`RetryPlan`] of instance `id` now.
pub async fn retry_plan(store: &Store, id: &InstanceId) -> Result<RetryPlan, EngineError> {
    let inst = store.instance(id).await?;
    let wf = super::pinned::pinned_workflow(store, &inst).await?;
    let mut rows = store.steps(id).await?;
    let failed = rows
        .iter()
        .filter(|r| r.status == crate::vocab::StepStatus::Failed)
        .map(|r| r.key.to_string())
        .collect();
    let compensated = restart::undone_by_failure(&wf, inst.status, &rows);
    let rerun = match compensated.first() {
        Some(from) => {
            restart::fill_patches(store, id, &mut rows).await?;
            let plan = restart::plan(&wf, &rows, from)?;
            Some(restart::retry_note(&plan.reset_steps, &compensated))
        }
        None => None,
    };
    Ok(RetryPlan { failed, rerun })
}

/// The status and the outputs of instance `id` at one moment (a restart in
/// between clears the outputs): `{}` for a completed instance without
/// `outputs:`, null for one not completed.
pub async fn result(store: &Store, id: &InstanceId) -> Result<(InstanceRow, Value), EngineError> {
    store
        .snapshot(async |s: &Store| -> Result<_, EngineError> {
            let inst = s.instance(id).await?;
            let outputs = if inst.status == InstanceStatus::Completed {
                s.outputs(id).await?.unwrap_or_else(|| json!({}))
            } else {
                Value::Null
            };
            Ok((inst, outputs))
        })
        .await
}

/// What `wf inspect` reads of an instance.
#[derive(Debug)]
pub struct Inspected {
    /// Its rows, of one moment.
    pub view: crate::store::InstanceView,
    /// Its definition's step ids, in file order.
    pub step_ids: Vec<String>,
    /// Queued: where it stands in its queue now.
    pub standing: Option<crate::store::queue::Admission>,
}

/// Reads what `wf inspect` shows of instance `id` (`attempts`: every
/// attempt too).
pub async fn inspect(
    store: &Store,
    id: &InstanceId,
    attempts: bool,
) -> Result<Inspected, EngineError> {
    // One snapshot: a step's row and the state its commit patched together.
    let view = store.view(id, attempts).await?;
    // Step order comes from the pinned definition's step list (no YAML parse needed).
    let step_ids = match store
        .definition_step_ids(&view.instance.definition_hash)
        .await?
    {
        Some(ids) => ids,
        None => Workflow::from_pinned(&view.instance.definition, &view.instance.workflow_path)
            .map(|wf| wf.steps.into_iter().map(|s| s.id).collect())
            .unwrap_or_default(),
    };
    let standing = match &view.instance.queue {
        Some(q) if !q.admitted && view.instance.status == InstanceStatus::Queued => {
            store
                .queue_standing(id, &super::lease::holder_alive)
                .await?
        }
        _ => None,
    };
    Ok(Inspected {
        view,
        step_ids,
        standing,
    })
}

/// The ids of instance `id` and its children, `depth` levels down, depth
/// first (`wf trace`'s order).
pub async fn with_descendants(
    store: &Store,
    id: InstanceId,
    depth: usize,
) -> Result<Vec<InstanceId>, crate::store::StoreError> {
    let mut ids = vec![id.clone()];
    if depth > 0 {
        for child in store.children(&id).await? {
            ids.extend(Box::pin(with_descendants(store, child.id, depth - 1)).await?);
        }
    }
    Ok(ids)
}

/// The spans of instances `ids` as one OTLP/JSON `ExportTraceServiceRequest`,
/// streamed from the store to `out`.
pub async fn write_otlp(
    store: &Store,
    ids: &[InstanceId],
    out: &mut impl std::io::Write,
) -> Result<(), crate::telemetry::otlp::OtlpError> {
    use crate::telemetry::otlp;
    let mut request = otlp::RequestWriter::new(out, &otlp::resource());
    for id in ids {
        store.each_span(id, |row| request.span(row)).await?;
    }
    request.finish()
}

/// One queue key as `wf queue show KEY` shows it: where it stands (as `wf
/// queue list` says; none when nothing holds or waits for its slots) and
/// its line, at most `limit` of each.
pub struct QueueShown {
    pub summary: Option<crate::store::queue::QueueSummary>,
    pub line: crate::store::queue_line::QueueLine,
}

/// Reads key `key`'s standing and line.
pub async fn queue_show(store: &Store, key: &str, limit: usize) -> Result<QueueShown, EngineError> {
    let line = store.queue_line(key, limit).await?;
    let summary = store.queues().await?.into_iter().find(|q| q.key == key);
    Ok(QueueShown { summary, line })
}

/// A definition an instance ran (or runs next), with its text.
pub struct DefinitionText {
    pub hash: String,
    /// Its first run.
    pub from_run: i64,
    pub source: String,
}

/// Every definition instance `id` ran or runs next, oldest first (one for
/// an instance never upgraded).
pub async fn definitions(
    store: &Store,
    id: &InstanceId,
) -> Result<Vec<DefinitionText>, EngineError> {
    let inst = store.instance(id).await?;
    let runs = store.runs(id).await?;
    definitions_of_runs(store, &inst, &runs).await
}

/// [`definitions`] of `inst`, whose runs (`runs`) the caller has read.
pub async fn definitions_of_runs(
    store: &Store,
    inst: &InstanceRow,
    runs: &[crate::store::RunRow],
) -> Result<Vec<DefinitionText>, EngineError> {
    let id = &inst.id;
    let mut out = Vec::new();
    for (hash, from_run) in super::upgrade::uses(runs, &inst.definition_hash) {
        let source = match store.definition(hash).await? {
            Some(d) => d.source,
            None => {
                return Err(EngineError::Store(crate::store::StoreError::Corrupt(
                    format!("instance {id}: its definition {hash} is missing"),
                )));
            }
        };
        out.push(DefinitionText {
            hash: hash.to_string(),
            from_run,
            source,
        });
    }
    Ok(out)
}
