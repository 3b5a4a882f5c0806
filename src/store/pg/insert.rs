//! The PostgreSQL statements that add to the history: a pinned
//! definition, an instance (started on its own, by a schedule or queued),
//! a child made in its parent's commit, and their parameters.

use super::history::p;
use super::text::escape_opt;
use super::{Op, Param};
use crate::store::rows::*;

/// Pins a definition (text, step ids, compiled form, the hashes of the
/// workflows it calls) if new; a compiled form written by another wf
/// version is replaced.
pub(super) fn insert_definition(def: &DefinitionRow) -> Op {
    Op::Exec(
        "INSERT INTO definitions (hash, source, step_ids, compiled, children) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (hash) DO UPDATE SET compiled = excluded.compiled \
         WHERE definitions.compiled IS DISTINCT FROM excluded.compiled",
        vec![
            p(def.hash.clone()),
            p(def.source.clone()),
            p(serde_json::to_string(&def.step_ids).unwrap_or_default()),
            p(def.compiled.clone()),
            p(def.children_column()),
        ],
    )
}

/// Inserts an instance whose definition is pinned (nothing if the id is taken).
/// The lease `i` holds (its expiry by this process's clock) is stored as the
/// same time left by the server's clock.
macro_rules! insert_instance_sql {
    () => {
        concat!(
            "INSERT INTO instances (id, workflow, status, definition_hash, workflow_path, base_dir, \
         inputs, state, error, wake_at, waiting_event, lease_owner, lease_expires_ms, created_at, \
         updated_at, parent_id, parent_key, parent_attempt, depth, labels, \
         queue_key, queue_priority, queue_limits, queue_hold, admitted, started_by) \
         VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,",
            server_ms!(),
            " + $13,$14,$15,$16,$17,$18,$19,$20,$21,$22,$23,$24,$25,$26) ON CONFLICT (id) DO NOTHING"
        )
    };
}

/// After `WITH c AS (INSERT INTO instances … RETURNING id)`: the CTE
/// that records the new instance's `start` action, by its `started_by`
/// (`$26`, none: no action) with its detail (`$27`).
macro_rules! start_action_cte {
    () => {
        ", a AS (INSERT INTO actions (instance_id, at, action, actor, detail) \
         SELECT id, $14, 'start', $26, $27 FROM c WHERE $26::text IS NOT NULL) "
    };
}

/// An instance (nothing if its id is taken) and, by its `started_by`
/// (none: no action, as on SQLite), its `start` action with `detail`:
/// [`Out::counted`](super::Out::counted) 1 when inserted.
pub(super) fn insert_instance(i: &InstanceRow, detail: &str) -> Op {
    let mut params = child_params(i);
    params.push(p(detail.to_string()));
    Op::Query(
        concat!(
            "WITH c AS (",
            insert_instance_sql!(),
            " RETURNING id)",
            start_action_cte!(),
            "SELECT count(*) FROM c"
        ),
        params,
    )
}

/// [`Write::CreateChild`](crate::store::Write::CreateChild): the child,
/// and a notification to idle workers (sent when the parent's transaction
/// commits), which may claim it as they claim any due instance.
pub(super) fn insert_child(i: &InstanceRow) -> Op {
    let mut params = child_params(i);
    params.push(p(i
        .parent
        .as_ref()
        .map(crate::store::actions::child_start_detail)
        .unwrap_or_default()));
    Op::Exec(
        concat!(
            "WITH c AS (",
            insert_instance_sql!(),
            " RETURNING id)",
            start_action_cte!(),
            "SELECT pg_notify('wf_' || current_schema(), '')"
        ),
        params,
    )
}

/// [`insert_instance`]'s parameters: the instance's, then its parent's.
fn child_params(i: &InstanceRow) -> Vec<Param> {
    let mut params = instance_params(i);
    params.extend([
        p(i.parent.as_ref().map(|x| x.id.to_string())),
        p(i.parent.as_ref().map(|x| x.key.clone())),
        p(i.parent.as_ref().map(|x| x.attempt)),
        p(i.depth),
        p(labels_text(&i.labels)),
    ]);
    params.extend(queue_params(i));
    params.push(p(i.started_by.clone()));
    params
}

/// An instance's queue columns (`queue_cols!`), as parameters.
pub(super) fn queue_params(i: &InstanceRow) -> [Param; 5] {
    let q = i.queue.as_ref();
    [
        p(q.map(|q| q.key.clone())),
        p(q.map_or(crate::store::queue::DEFAULT_PRIORITY, |q| q.priority)),
        p(q.map(|q| q.limits.to_text())),
        p(q.is_some_and(|q| q.limits.hold)),
        p(q.is_some_and(|q| q.admitted)),
    ]
}

/// The parameters of [`insert_instance`], in its order; `$13` is the
/// lease's time left in ms (the statement adds the server's clock).
pub(super) fn instance_params(i: &InstanceRow) -> Vec<Param> {
    vec![
        p(i.id.clone()),
        p(i.workflow.clone()),
        p(i.status),
        p(i.definition_hash.clone()),
        p(i.workflow_path.clone()),
        p(i.base_dir.clone()),
        p(i.inputs.to_string()),
        p(i.state.to_string()),
        p(escape_opt(&i.error)),
        p(i.wake_at),
        p(i.waiting_event.clone()),
        p(i.lease_owner.clone()),
        p(i.lease_expires_ms
            .map(|at| at - chrono::Utc::now().timestamp_millis())),
        p(i.created_at),
        p(i.updated_at),
    ]
}
