//! The SQLite statements that read the history (an instance's rows, the
//! history a takeover reads) and deliver to it (new instances, events,
//! cancel requests), and the mapping of their rows to
//! [`rows`](crate::store::rows) (the types, shared by both backends: this
//! file was `records.rs`, a name that read as a twin of `rows.rs`). Used
//! only through [`Store`](super::Store); functions take a `&Connection` so
//! that the store can group several in one transaction (one fsync per
//! step, not one per statement). Leases and claims are in `lease`, spans in
//! `spans`, what a runner commits in `write`, listings (`wf list`) in
//! `list`.

use super::super::rows::*;
use crate::store::{QueueLimits, QueuePlace, Result, StoreError};
use crate::vocab::Timestamp;
use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::Value;

/// Runs a statement through the connection's statement cache: the engine
/// issues the same few statements for every step, and parsing them each time
/// costs more than running them.
pub(super) fn cached(
    c: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<usize> {
    c.prepare_cached(sql)?.execute(params)
}

pub(super) fn json_col(row: &Row, idx: usize) -> rusqlite::Result<Value> {
    let text: Option<String> = row.get(idx)?;
    Ok(match text {
        None => Value::Null,
        Some(t) => serde_json::from_str(&t).unwrap_or(Value::Null),
    })
}

/// Instance columns, with the pinned definition's text from `definitions`.
const INSTANCE_COLS: &str = "id, workflow, status, \
    (SELECT source FROM definitions d WHERE d.hash = instances.definition_hash), definition_hash, \
    workflow_path, base_dir, inputs, state, error, wake_at, waiting_event, lease_owner, lease_expires_ms, \
    created_at, updated_at, parent_id, parent_key, parent_attempt, depth, labels, \
    queue_key, queue_priority, queue_limits, queue_hold, admitted, started_by";

/// The same columns without the definition text, for listings.
pub(super) const INSTANCE_SUMMARY_COLS: &str = "id, workflow, status, '', definition_hash, \
    workflow_path, base_dir, inputs, state, error, wake_at, waiting_event, lease_owner, lease_expires_ms, \
    created_at, updated_at, parent_id, parent_key, parent_attempt, depth, labels, \
    queue_key, queue_priority, queue_limits, queue_hold, admitted, started_by";

pub(super) fn instance_from_row(r: &Row) -> rusqlite::Result<InstanceRow> {
    Ok(InstanceRow {
        id: r.get(0)?,
        workflow: r.get(1)?,
        status: r.get(2)?,
        definition: r.get(3)?,
        definition_hash: r.get(4)?,
        workflow_path: r.get(5)?,
        base_dir: r.get(6)?,
        inputs: json_col(r, 7)?,
        state: json_col(r, 8)?,
        error: r.get(9)?,
        wake_at: r.get(10)?,
        waiting_event: r.get(11)?,
        lease_owner: r.get(12)?,
        lease_expires_ms: r.get(13)?,
        created_at: r.get(14)?,
        updated_at: r.get(15)?,
        parent: parent_of(r.get(16)?, r.get(17)?, r.get(18)?),
        depth: r.get(19)?,
        labels: labels_of(r.get::<_, Option<String>>(20)?.as_deref()),
        queue: match r.get::<_, Option<String>>(21)? {
            None => None,
            Some(key) => Some(QueuePlace {
                key,
                priority: r.get(22)?,
                limits: QueueLimits::of_text(&r.get::<_, Option<String>>(23)?.unwrap_or_default()),
                admitted: r.get(25)?,
            }),
        },
        started_by: r.get(26)?,
    })
}

/// A child's [`ParentRef`] from its columns (all set, or none).
pub(super) fn parent_of(
    id: Option<String>,
    key: Option<String>,
    attempt: Option<i64>,
) -> Option<ParentRef> {
    Some(ParentRef {
        id: id?.into(),
        key: key?.into(),
        attempt: attempt?,
    })
}

/// Inserts an instance, pinning `defs` (its own definition and those of
/// the workflows it calls) where new.
pub(super) fn insert_instance(
    c: &Connection,
    i: &InstanceRow,
    defs: &[DefinitionRow],
    detail: &str,
) -> Result<()> {
    for def in defs {
        insert_definition(c, def)?;
    }
    insert_instance_row(c, i, detail)
}

/// Pins a definition (text, step ids, compiled form, the hashes of the
/// workflows it calls) if new; a compiled form written by another wf
/// version is replaced.
pub(super) fn insert_definition(c: &Connection, def: &DefinitionRow) -> Result<()> {
    cached(
        c,
        "INSERT INTO definitions (hash, source, step_ids, compiled, children) VALUES (?1, ?2, ?3, ?4, ?5) \
         ON CONFLICT(hash) DO UPDATE SET compiled = excluded.compiled \
         WHERE compiled IS NOT excluded.compiled",
        params![
            def.hash,
            def.source,
            serde_json::to_string(&def.step_ids).unwrap_or_default(),
            def.compiled,
            def.children_column(),
        ],
    )?;
    Ok(())
}

/// A pinned definition, if stored.
pub(super) fn definition(c: &Connection, hash: &str) -> Result<Option<DefinitionRow>> {
    let row = c
        .prepare_cached(
            "SELECT source, step_ids, compiled, children FROM definitions WHERE hash = ?1",
        )?
        .query_row([hash], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, Option<String>>(3)?,
            ))
        })
        .optional()?;
    let Some((source, step_ids, compiled, children)) = row else {
        return Ok(None);
    };
    Ok(Some(DefinitionRow {
        hash: hash.to_string(),
        source,
        step_ids: serde_json::from_str(&step_ids).unwrap_or_default(),
        compiled,
        children: DefinitionRow::children_of(children.as_deref()).map_err(StoreError::Corrupt)?,
    }))
}

/// The children of instance `id` (made by its `workflow:` steps), oldest first.
pub(super) fn children(c: &Connection, id: &str) -> Result<Vec<InstanceRow>> {
    let mut stmt = c.prepare_cached(&format!(
        "SELECT {INSTANCE_SUMMARY_COLS} FROM instances WHERE parent_id = ?1 ORDER BY created_at, id"
    ))?;
    let rows = stmt.query_map([id], instance_from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Inserts an instance whose definition is already pinned.
/// Inserts an instance (nothing if its id is taken) and its `start`
/// action, by its `started_by`, with `detail`.
pub(super) fn insert_instance_row(c: &Connection, i: &InstanceRow, detail: &str) -> Result<()> {
    let inserted = cached(
        c,
        "INSERT INTO instances (id, workflow, status, definition_hash, workflow_path, base_dir, inputs, state, \
         error, wake_at, waiting_event, lease_owner, lease_expires_ms, created_at, updated_at, \
         parent_id, parent_key, parent_attempt, depth, labels, \
         queue_key, queue_priority, queue_limits, queue_hold, admitted, started_by) \
         VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22,?23,?24,?25,?26) \
         ON CONFLICT(id) DO NOTHING",
        params![
            i.id,
            i.workflow,
            i.status,
            i.definition_hash,
            i.workflow_path,
            i.base_dir,
            i.inputs.to_string(),
            i.state.to_string(),
            i.error,
            i.wake_at,
            i.waiting_event,
            i.lease_owner,
            i.lease_expires_ms,
            i.created_at,
            i.updated_at,
            i.parent.as_ref().map(|p| p.id.as_str()),
            i.parent.as_ref().map(|p| p.key.as_str()),
            i.parent.as_ref().map(|p| p.attempt),
            i.depth,
            labels_text(&i.labels),
            i.queue.as_ref().map(|q| q.key.as_str()),
            i.queue
                .as_ref()
                .map_or(crate::store::queue::DEFAULT_PRIORITY, |q| q.priority),
            i.queue.as_ref().map(|q| q.limits.to_text()),
            i.queue.as_ref().is_some_and(|q| q.limits.hold),
            i.queue.as_ref().is_some_and(|q| q.admitted),
            i.started_by,
        ],
    )?;
    if inserted == 1
        && let Some(actor) = &i.started_by
    {
        super::actions::insert_action(
            c,
            &crate::store::ActionRow {
                instance: Some(i.id.clone()),
                at: i.created_at,
                action: crate::vocab::ActionKind::Start,
                actor: actor.clone(),
                detail: detail.to_string(),
            },
        )?;
    }
    Ok(())
}

/// The step ids of a pinned definition, in file order.
pub(super) fn definition_step_ids(c: &Connection, hash: &str) -> Result<Option<Vec<String>>> {
    let text: Option<String> = c
        .query_row(
            "SELECT step_ids FROM definitions WHERE hash = ?1",
            [hash],
            |r| r.get(0),
        )
        .optional()?;
    Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
}

pub(super) fn instance(c: &Connection, id: &str) -> Result<InstanceRow> {
    c.query_row(
        &format!("SELECT {INSTANCE_COLS} FROM instances WHERE id = ?1"),
        [id],
        instance_from_row,
    )
    .optional()?
    .ok_or_else(|| StoreError::NotFound(id.into()))
}

/// Updates an instance's status and the suspension details that go with it.
/// An instance's status; one that stops running gives its queue slot back
/// (unless it only sleeps or waits with `hold_while_suspended`).
pub(super) fn set_instance_status(
    c: &Connection,
    id: &str,
    status: &InstanceStatus,
    wake_at: Option<&Timestamp>,
    waiting_event: Option<&str>,
    error: Option<&str>,
) -> Result<()> {
    cached(
        c,
        "UPDATE instances SET status=?2, wake_at=?3, waiting_event=?4, error=?5, updated_at=?6, \
         admitted = admitted AND (?2 IN ('running', 'queued') OR (?2 IN ('sleeping', 'waiting') AND queue_hold)) \
         WHERE id=?1",
        params![id, status, wake_at, waiting_event, error, Timestamp::now()],
    )?;
    Ok(())
}

/// Asks whatever process drives the instance to cancel it.
pub(super) fn request_cancel(c: &Connection, id: &str, ask: CancelRequest) -> Result<()> {
    cached(
        c,
        "UPDATE instances SET cancel_requested=MAX(cancel_requested, ?3), updated_at=?2 WHERE id=?1",
        params![id, Timestamp::now(), ask.as_i64()],
    )?;
    Ok(())
}

pub(super) fn cancel_requested(c: &Connection, id: &str) -> Result<CancelRequest> {
    let n = c
        .prepare_cached("SELECT cancel_requested FROM instances WHERE id=?1")?
        .query_row([id], |r| r.get::<_, i64>(0))?;
    Ok(CancelRequest::from_i64(n))
}

/// Delivers an event to an instance; `wake` makes a waiting instance due
/// for `wf worker` at once.
pub(super) fn insert_event(
    c: &Connection,
    id: &str,
    name: &str,
    payload: &Value,
    traceparent: Option<&str>,
    wake: bool,
) -> Result<()> {
    let now = Timestamp::now();
    cached(
        c,
        "INSERT INTO events (instance_id, name, payload, traceparent, received_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![id, name, payload.to_string(), traceparent, now],
    )?;
    if wake {
        cached(
            c,
            "UPDATE instances SET wake_at=?2 WHERE id=?1",
            params![id, now],
        )?;
    }
    Ok(())
}

/// Events delivered to the instance, not taken, after event `after`.
pub(super) fn events_after(c: &Connection, id: &str, after: i64) -> Result<Vec<EventRow>> {
    let mut stmt = c.prepare_cached(
        "SELECT id, name, payload, traceparent FROM events WHERE instance_id=?1 \
         AND consumed_by IS NULL AND id > ?2 ORDER BY id",
    )?;
    let rows = stmt.query_map(params![id, after], |r| {
        Ok(EventRow {
            id: r.get(0)?,
            name: r.get(1)?,
            payload: r.get(2)?,
            traceparent: r.get(3)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Every event delivered to an instance, in the order received.
pub(super) fn delivered_events(c: &Connection, id: &str) -> Result<Vec<DeliveredEvent>> {
    let mut stmt = c.prepare_cached(
        "SELECT name, payload, received_at, consumed_by FROM events WHERE instance_id=?1 ORDER BY id",
    )?;
    let rows = stmt.query_map([id], |r| {
        Ok(DeliveredEvent {
            name: r.get(0)?,
            payload: r.get(1)?,
            received_at: r.get(2)?,
            consumed_by: r.get(3)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Marks an event taken by the step (key) that waited for it.
pub(super) fn take_event(c: &Connection, event: i64, key: &str) -> Result<()> {
    cached(
        c,
        "UPDATE events SET consumed_by=?2 WHERE id=?1",
        params![event, key],
    )?;
    Ok(())
}

/// `Write::TakeEventNamed`: the one event named `name` not taken yet.
pub(super) fn take_event_named(c: &Connection, id: &str, name: &str, key: &str) -> Result<()> {
    cached(
        c,
        "UPDATE events SET consumed_by=?3 \
         WHERE instance_id=?1 AND name=?2 AND consumed_by IS NULL",
        params![id, name, key],
    )?;
    Ok(())
}

/// Each run's trace: number -> (trace id, root span id, parent, start ns).
pub(super) fn run_traces(
    c: &Connection,
    id: &str,
) -> Result<std::collections::BTreeMap<i64, RunTrace>> {
    let mut stmt = c.prepare(
        "SELECT number, trace_id, span_id, parent_span_id, COALESCE(started_ns, 0) FROM runs \
         WHERE instance_id=?1 AND trace_id IS NOT NULL",
    )?;
    let rows = stmt.query_map([id], |r| {
        Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) fn history(c: &Connection, id: &str) -> Result<History> {
    let instance = instance(c, id)?;
    let (last_run, abandoned, last_definition): (i64, Option<String>, Option<String>) = c.query_row(
        "SELECT COALESCE(MAX(number), 0), group_concat(CASE WHEN outcome IS NULL THEN number END), \
         (SELECT definition_hash FROM runs WHERE instance_id=?1 ORDER BY number DESC LIMIT 1) \
         FROM runs WHERE instance_id=?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    let mut abandoned_runs: Vec<i64> = abandoned
        .unwrap_or_default()
        .split(',')
        .filter_map(|n| n.parse().ok())
        .collect();
    abandoned_runs.sort_unstable();
    let unspanned = if abandoned_runs.is_empty() {
        Vec::new()
    } else {
        unspanned_attempts(c, id)?
    };
    Ok(History {
        steps: steps(c, id)?,
        open: open_attempts(c, id)?,
        abandoned_runs,
        last_run,
        last_definition,
        traces: run_traces(c, id)?,
        uncounted: uncounted_attempts(c, id)?,
        unspanned,
        events: events_after(c, id, 0)?,
        cancel_requested: cancel_requested(c, id)?,
        instance,
        granted: None,
    })
}

pub(super) fn set_outputs(c: &Connection, id: &str, outputs: &Value) -> Result<()> {
    cached(
        c,
        "UPDATE instances SET outputs=?2 WHERE id=?1",
        params![id, outputs.to_string()],
    )?;
    Ok(())
}

/// `wf restart`: no cancel request, no result.
pub(super) fn reopen(c: &Connection, id: &str) -> Result<()> {
    cached(
        c,
        "UPDATE instances SET cancel_requested=0, outputs=NULL WHERE id=?1",
        params![id],
    )?;
    Ok(())
}

pub(super) fn outputs(c: &Connection, id: &str) -> Result<Option<Value>> {
    let text: Option<String> = c
        .prepare_cached("SELECT outputs FROM instances WHERE id=?1")?
        .query_row([id], |r| r.get(0))
        .optional()?
        .flatten();
    Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
}

pub(super) fn set_state(c: &Connection, id: &str, state: &Value) -> Result<()> {
    cached(
        c,
        "UPDATE instances SET state=?2, updated_at=?3 WHERE id=?1",
        params![id, state.to_string(), Timestamp::now()],
    )?;
    Ok(())
}

// ---- runs ----

/// Records run `number` and its trace.
pub(super) fn start_run(
    c: &Connection,
    id: &str,
    number: i64,
    t: &RunTrace,
    restart_from: Option<&str>,
    definition_hash: &str,
) -> Result<()> {
    cached(
        c,
        "INSERT INTO runs (instance_id, number, started_at, trace_id, span_id, parent_span_id, started_ns, \
         restart_from, definition_hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            id,
            number,
            Timestamp::now(),
            t.0,
            t.1,
            t.2,
            t.3,
            restart_from,
            definition_hash
        ],
    )?;
    Ok(())
}

pub(super) fn finish_run(c: &Connection, id: &str, number: i64, outcome: &RunEnd) -> Result<()> {
    cached(
        c,
        "UPDATE runs SET outcome=?3, finished_at=?4 WHERE instance_id=?1 AND number=?2",
        params![id, number, outcome, Timestamp::now()],
    )?;
    Ok(())
}

/// Runs left without an outcome by a process that died are closed as `crashed`.
pub(super) fn close_abandoned_runs(c: &Connection, id: &str) -> Result<()> {
    cached(
        c,
        "UPDATE runs SET outcome='crashed', finished_at=?2 WHERE instance_id=?1 AND outcome IS NULL",
        params![id, Timestamp::now()],
    )?;
    Ok(())
}

pub(super) fn runs(c: &Connection, id: &str) -> Result<Vec<RunRow>> {
    let mut stmt = c.prepare(
        "SELECT number, outcome, started_at, finished_at, restart_from, definition_hash FROM runs WHERE instance_id=?1 \
         ORDER BY number",
    )?;
    let rows = stmt.query_map([id], |r| {
        Ok(RunRow {
            number: r.get(0)?,
            outcome: r.get(1)?,
            started_at: r.get(2)?,
            finished_at: r.get(3)?,
            restart_from: r.get(4)?,
            definition_hash: r.get(5)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

// ---- steps ----

pub(super) fn steps(c: &Connection, id: &str) -> Result<Vec<StepRow>> {
    let mut stmt = c.prepare(
        "SELECT key, step_id, status, attempts, budget_base, outcome, error_type, error_message, output, \
         started_at, finished_at, retry_at, seq, items FROM steps WHERE instance_id=?1",
    )?;
    let rows = stmt.query_map([id], |r| {
        Ok(StepRow {
            key: r.get(0)?,
            step_id: r.get(1)?,
            status: r.get(2)?,
            attempts: r.get(3)?,
            budget_base: r.get(4)?,
            outcome: r.get(5)?,
            error_type: r.get(6)?,
            error_message: r.get(7)?,
            output: json_col(r, 8)?,
            started_at: r.get(9)?,
            finished_at: r.get(10)?,
            retry_at: r.get(11)?,
            seq: r.get(12)?,
            items: json_col(r, 13)?.into(),
            // Only a restart needs them (`state_patches`): not held for
            // every step of every read.
            state_patch: Default::default(),
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The `set_state` patch each step row committed (`wf restart`).
pub(super) fn state_patches(c: &Connection, id: &str) -> Result<Vec<(String, Value)>> {
    let mut stmt = c.prepare(
        "SELECT key, state_patch FROM steps WHERE instance_id=?1 AND state_patch IS NOT NULL",
    )?;
    let rows = stmt.query_map([id], |r| Ok((r.get(0)?, json_col(r, 1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Writes a step's row as the engine sees it now (insert or replace).
pub(super) fn put_step(c: &Connection, instance_id: &str, s: &StepRow) -> Result<()> {
    cached(
        c,
        "INSERT INTO steps (instance_id, key, step_id, status, attempts, outcome, error_type, error_message, \
         output, started_at, finished_at, retry_at, seq, budget_base, items, state_patch) \
         VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16) \
         ON CONFLICT(instance_id, key) DO UPDATE SET status=excluded.status, attempts=excluded.attempts, \
         budget_base=excluded.budget_base, \
         outcome=excluded.outcome, error_type=excluded.error_type, error_message=excluded.error_message, \
         output=excluded.output, started_at=excluded.started_at, finished_at=excluded.finished_at, \
         retry_at=excluded.retry_at, seq=excluded.seq, items=excluded.items, state_patch=COALESCE(excluded.state_patch, steps.state_patch)",
        params![
            instance_id,
            s.key,
            s.step_id,
            s.status,
            s.attempts,
            s.outcome,
            s.error_type,
            s.error_message,
            if s.output.is_null() {
                None
            } else {
                Some(s.output.to_string())
            },
            s.started_at,
            s.finished_at,
            s.retry_at,
            s.seq,
            s.budget_base,
            if s.items.is_null() {
                None
            } else {
                Some(s.items.to_string())
            },
            if s.state_patch.is_null() {
                None
            } else {
                Some(s.state_patch.to_string())
            }
        ],
    )?;
    Ok(())
}

// ---- attempts ----

pub(super) fn insert_attempt(c: &Connection, instance_id: &str, a: &NewAttempt) -> Result<()> {
    cached(
        c,
        "INSERT INTO attempts (instance_id, step_key, attempt, run, started_at, span_id, started_ns) \
         VALUES (?1,?2,?3,?4,?5,?6,?7)",
        params![
            instance_id,
            a.key,
            a.attempt,
            a.run,
            a.started_at,
            a.span_id,
            a.started_ns
        ],
    )?;
    Ok(())
}

pub(super) fn finish_attempt(
    c: &Connection,
    instance_id: &str,
    key: &str,
    attempt: i64,
    end: &AttemptEnd,
) -> Result<()> {
    cached(
        c,
        "UPDATE attempts SET outcome=?4, error_type=?5, error_message=?6, exit_code=?7, finished_at=?8, \
         stdout=?9, stderr=?10, proc_host=NULL, proc_pgid=NULL, proc_start=NULL \
         WHERE instance_id=?1 AND step_key=?2 AND attempt=?3",
        params![
            instance_id,
            key,
            attempt,
            end.outcome,
            end.error_type,
            end.error_message,
            end.exit_code,
            end.finished_at,
            end.stdout,
            end.stderr
        ],
    )?;
    Ok(())
}

/// Records which process group an attempt started.
pub(super) fn set_attempt_process(
    c: &Connection,
    instance_id: &str,
    key: &str,
    attempt: i64,
    p: &ProcessTag,
) -> Result<()> {
    cached(
        c,
        "UPDATE attempts SET proc_host=?4, proc_pgid=?5, proc_start=?6 \
         WHERE instance_id=?1 AND step_key=?2 AND attempt=?3",
        params![instance_id, key, attempt, p.host, p.pgid, p.start],
    )?;
    Ok(())
}

/// Attempts with no outcome: their process died with the runner.
pub(super) fn open_attempts(c: &Connection, instance_id: &str) -> Result<Vec<OpenAttempt>> {
    let mut stmt = c.prepare(
        "SELECT step_key, attempt, run, span_id, COALESCE(started_ns, 0), proc_host, proc_pgid, proc_start \
         FROM attempts WHERE instance_id=?1 AND outcome IS NULL ORDER BY step_key, attempt",
    )?;
    let rows = stmt.query_map([instance_id], |r| {
        let span: Option<String> = r.get(3)?;
        let host: Option<String> = r.get(5)?;
        let pgid: Option<i64> = r.get(6)?;
        let start: Option<i64> = r.get(7)?;
        Ok(OpenAttempt {
            key: r.get(0)?,
            attempt: r.get(1)?,
            run: r.get(2)?,
            span: match span {
                Some(s) => Some((s, r.get(4)?)),
                None => None,
            },
            process: match (host, pgid, start) {
                (Some(host), Some(pgid), Some(start)) => Some(ProcessTag { host, pgid, start }),
                _ => None,
            },
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Attempts that do not count towards `max_attempts` (interrupted or
/// canceled): (step key, attempt).
/// [`UnspannedAttempt`]s: finished attempts of runs without an outcome
/// that have no span row.
fn unspanned_attempts(c: &Connection, id: &str) -> Result<Vec<UnspannedAttempt>> {
    let mut stmt = c.prepare(
        "SELECT step_key, attempt, run, span_id, COALESCE(started_ns, 0), finished_at, outcome, \
         error_type, error_message FROM attempts a WHERE instance_id=?1 AND outcome IS NOT NULL \
         AND span_id IS NOT NULL \
         AND run IN (SELECT number FROM runs WHERE instance_id=?1 AND outcome IS NULL) \
         AND NOT EXISTS (SELECT 1 FROM spans s WHERE s.instance_id=?1 AND s.run=a.run \
           AND s.span_id=a.span_id)",
    )?;
    let rows = stmt.query_map([id], |r| {
        Ok(UnspannedAttempt {
            key: r.get(0)?,
            attempt: r.get(1)?,
            run: r.get(2)?,
            span_id: r.get(3)?,
            started_ns: r.get(4)?,
            finished_at: r.get(5)?,
            outcome: r.get(6)?,
            error_type: r.get(7)?,
            error_message: r.get(8)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) fn uncounted_attempts(
    c: &Connection,
    instance_id: &str,
) -> Result<Vec<(UnitKeyBuf, i64)>> {
    let mut stmt = c.prepare(
        "SELECT step_key, attempt FROM attempts WHERE instance_id=?1 \
         AND outcome IN ('interrupted', 'canceled')",
    )?;
    let rows = stmt.query_map([instance_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) fn attempts(c: &Connection, instance_id: &str) -> Result<Vec<AttemptRow>> {
    let mut stmt = c.prepare(
        "SELECT step_key, attempt, run, outcome, error_type, error_message, exit_code, started_at, finished_at, \
         cached_from FROM attempts WHERE instance_id=?1 ORDER BY started_at, step_key, attempt",
    )?;
    let rows = stmt.query_map([instance_id], |r| {
        Ok(AttemptRow {
            step_key: r.get(0)?,
            attempt: r.get(1)?,
            run: r.get(2)?,
            outcome: r.get(3)?,
            error_type: r.get(4)?,
            error_message: r.get(5)?,
            exit_code: r.get(6)?,
            started_at: r.get(7)?,
            finished_at: r.get(8)?,
            cached_from: r
                .get::<_, Option<String>>(9)?
                .as_deref()
                .and_then(crate::store::CachedFrom::parse),
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Captured stdout and stderr of one attempt (the last one when `attempt` is None).
pub(super) fn attempt_logs(
    c: &Connection,
    instance_id: &str,
    key: &str,
    attempt: Option<i64>,
) -> Result<Option<AttemptLogs>> {
    Ok(c
        .query_row(
            "SELECT attempt, COALESCE(stdout, x''), COALESCE(stderr, x'') FROM attempts \
             WHERE instance_id=?1 AND step_key=?2 AND (?3 IS NULL OR attempt=?3) ORDER BY attempt DESC LIMIT 1",
            params![instance_id, key, attempt],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?)
}
