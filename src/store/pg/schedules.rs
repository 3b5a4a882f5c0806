//! Schedules on PostgreSQL, as on SQLite (`store/sqlite/schedules.rs`). A
//! worker locks the entry it fires with `FOR UPDATE SKIP LOCKED`, only if it
//! is still where the worker read it: a worker that comes second finds
//! nothing to lock and moves on, without waiting on the first. A
//! registration locks the workflow's entries (`FOR UPDATE`, after an
//! advisory lock on the workflow's name that orders registrations) and
//! writes only if they are still what it read.

use super::history::{NOTIFY, get, insert_definition, instance_params, json, p};
use super::{Op, Out, PgStore};
use crate::store::Result;
use crate::store::rows::*;
use crate::vocab::Timestamp;
use tokio_postgres::Row;

/// A scheduled instance (`$1`–`$15`, as `history::insert_instance`, and its
/// labels `$21`, queue `$22`–`$26` and actor `$27`) and its fire record
/// (`$16`–`$20`: workflow, entry, fire time, spec, zone), inserted only if
/// that fire time has none yet, with its `start` action (detail `$28`).
const START_ONCE: &str = concat!(
    "WITH f AS (INSERT INTO schedule_fires (workflow, idx, fire_ms, instance_id, spec, timezone) \
     VALUES ($16, $17, $18, $1, $19, $20) ON CONFLICT (workflow, idx, fire_ms) DO NOTHING RETURNING 1), \
     i AS (INSERT INTO instances (id, workflow, status, definition_hash, workflow_path, base_dir, \
     inputs, state, error, wake_at, waiting_event, lease_owner, lease_expires_ms, created_at, \
     updated_at, labels, queue_key, queue_priority, queue_limits, queue_hold, admitted, started_by) \
     SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, \
     $8::text, $9::text, $10::text, $11::text, $12::text, ",
    server_ms!(),
    " + $13::bigint, $14::text, $15::text, $21::text, $22::text, $23::bigint, $24::text, \
     $25::boolean, $26::boolean, $27::text FROM f RETURNING id), \
     a AS (INSERT INTO actions (instance_id, at, action, actor, detail) \
     SELECT id, $14::text, 'start', $27::text, $28::text FROM i WHERE $27::text IS NOT NULL) \
     SELECT count(*) FROM i"
);

macro_rules! cols {
    () => {
        "workflow, idx, spec, timezone, overlap, catchup_ms, inputs, state, definition_hash, \
         workflow_path, base_dir, next_fire_ms, buffered_ms, last_instance, last_fire_ms, skipped, \
         registered_at"
    };
}

fn schedule_row(r: &Row) -> Result<ScheduleRow> {
    Ok(ScheduleRow {
        workflow: get(r, 0)?,
        idx: get(r, 1)?,
        spec: get(r, 2)?,
        timezone: get(r, 3)?,
        overlap: get(r, 4)?,
        catchup_ms: get(r, 5)?,
        inputs: json(r, 6)?,
        state: json(r, 7)?,
        definition_hash: get(r, 8)?,
        workflow_path: get(r, 9)?,
        base_dir: get(r, 10)?,
        next_fire_ms: get(r, 11)?,
        buffered_ms: get(r, 12)?,
        last_instance: get(r, 13)?,
        last_fire_ms: get(r, 14)?,
        skipped: get(r, 15)?,
        registered_at: get(r, 16)?,
    })
}

impl PgStore {
    pub async fn register_schedules(
        &self,
        workflow: &str,
        rows: &[ScheduleRow],
        defs: &[DefinitionRow],
        read: &[ScheduleRow],
    ) -> Result<bool> {
        let outs = self
            .pipeline(vec![
                Op::Simple("BEGIN"),
                Op::Query(
                    "SELECT pg_advisory_xact_lock(hashtext('wf schedules ' || $1::text))",
                    vec![p(workflow.to_string())],
                ),
                Op::Query(
                    concat!(
                        "SELECT ",
                        cols!(),
                        " FROM schedules WHERE workflow = $1 ORDER BY idx FOR UPDATE"
                    ),
                    vec![p(workflow.to_string())],
                ),
            ])
            .await?;
        let now = outs
            .into_iter()
            .nth(2)
            .map(Out::rows)
            .unwrap_or_default()
            .iter()
            .map(schedule_row)
            .collect::<Result<Vec<_>>>();
        if now.as_deref().ok() != Some(read) {
            // A worker fired an entry (or another registration replaced
            // them) since they were read.
            self.pipeline(vec![Op::Simple("ROLLBACK")]).await?;
            return now.map(|_| false);
        }
        let mut ops: Vec<Op> = defs.iter().map(insert_definition).collect();
        ops.push(Op::Exec(
            "DELETE FROM schedules WHERE workflow = $1",
            vec![p(workflow.to_string())],
        ));
        for s in rows {
            ops.push(Op::Exec(
                concat!(
                    "INSERT INTO schedules (",
                    cols!(),
                    ") VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17)"
                ),
                vec![
                    p(s.workflow.clone()),
                    p(s.idx),
                    p(s.spec.clone()),
                    p(s.timezone.clone()),
                    p(s.overlap.clone()),
                    p(s.catchup_ms),
                    p(s.inputs.to_string()),
                    p(s.state.to_string()),
                    p(s.definition_hash.clone()),
                    p(s.workflow_path.clone()),
                    p(s.base_dir.clone()),
                    p(s.next_fire_ms),
                    p(s.buffered_ms),
                    p(s.last_instance.clone()),
                    p(s.last_fire_ms),
                    p(s.skipped),
                    p(s.registered_at),
                ],
            ));
        }
        // Workers waiting for work look at schedules again.
        ops.push(Op::Query(NOTIFY, vec![]));
        ops.push(Op::Simple("COMMIT"));
        if let Err(e) = self.pipeline(ops).await {
            let _ = self.pipeline(vec![Op::Simple("ROLLBACK")]).await;
            return Err(e);
        }
        Ok(true)
    }

    pub async fn remove_schedules(
        &self,
        workflow: &str,
        action: Option<&crate::store::ActionRow>,
    ) -> Result<u64> {
        let Some(a) = action else {
            return self
                .exec("DELETE FROM schedules WHERE workflow = $1", &[&workflow])
                .await;
        };
        let mut params = vec![p(workflow.to_string())];
        params.extend(super::actions::action_params(a));
        let outs = self
            .pipeline(vec![Op::Query(
                "WITH s AS (DELETE FROM schedules WHERE workflow = $1 RETURNING 1), \
                 a AS (INSERT INTO actions (instance_id, at, action, actor, detail) \
                 SELECT $2, $3, $4, $5, $6 WHERE EXISTS (SELECT 1 FROM s)) \
                 SELECT count(*) FROM s",
                params,
            )])
            .await?;
        let rows = outs.into_iter().next().map(Out::rows).unwrap_or_default();
        Ok(rows
            .first()
            .map(|r| get::<i64>(r, 0))
            .transpose()?
            .map_or(0, |n| u64::try_from(n).unwrap_or(0)))
    }

    pub async fn schedules(&self) -> Result<Vec<ScheduleRow>> {
        let rows = self
            .query(
                concat!("SELECT ", cols!(), " FROM schedules ORDER BY workflow, idx"),
                &[],
            )
            .await?;
        rows.iter().map(schedule_row).collect()
    }

    pub async fn fire_schedule(&self, fire: &Fire) -> Result<Option<Vec<bool>>> {
        let outs = self
            .pipeline(vec![
                Op::Simple("BEGIN"),
                Op::Query(
                    "SELECT spec, timezone FROM schedules WHERE workflow = $1 AND idx = $2 \
                     AND next_fire_ms = $3 AND buffered_ms IS NOT DISTINCT FROM $4 \
                     AND definition_hash = $5 FOR UPDATE SKIP LOCKED",
                    vec![
                        p(fire.workflow.clone()),
                        p(fire.idx),
                        p(fire.expect_next_ms),
                        p(fire.expect_buffered_ms),
                        p(fire.definition_hash.clone()),
                    ],
                ),
            ])
            .await?;
        let row = outs.into_iter().nth(1).map(Out::rows).unwrap_or_default();
        let Some(row) = row.first() else {
            // Taken, replaced or removed meanwhile.
            self.pipeline(vec![Op::Simple("ROLLBACK")]).await?;
            return Ok(None);
        };
        let spec: String = get(row, 0)?;
        let timezone: Option<String> = get(row, 1)?;
        let last = fire.starts.last();
        let mut ops = Vec::new();
        // A fire time is started once: one that already started an
        // instance starts none now (the instance is inserted only with its
        // fire record). Each statement's count says which.
        for (inst, fire_ms) in &fire.starts {
            let mut params = instance_params(inst);
            params.extend([
                p(fire.workflow.clone()),
                p(fire.idx),
                p(*fire_ms),
                p(spec.clone()),
                p(timezone.clone()),
                p(crate::store::labels_text(&inst.labels)),
            ]);
            params.extend(super::history::queue_params(inst));
            params.extend([
                p(inst.started_by.clone()),
                p(crate::store::actions::fire_detail(*fire_ms)),
            ]);
            ops.push(Op::Query(START_ONCE, params));
        }
        // The instance the last fire time started (now, or before).
        ops.push(Op::Exec(
            "UPDATE schedules SET next_fire_ms = $1, buffered_ms = $2, skipped = skipped + $3, \
             last_instance = COALESCE((SELECT instance_id FROM schedule_fires \
               WHERE workflow = $5 AND idx = $6 AND fire_ms = $4), last_instance), \
             last_fire_ms = COALESCE($4, last_fire_ms) \
             WHERE workflow = $5 AND idx = $6",
            vec![
                p(fire.next_fire_ms),
                p(fire.buffered_ms),
                p(fire.skipped),
                p(last.map(|(_, t)| *t)),
                p(fire.workflow.clone()),
                p(fire.idx),
            ],
        ));
        if let Some(id) = &fire.cancel {
            ops.push(Op::Exec(
                "UPDATE instances SET cancel_requested = GREATEST(cancel_requested, 1), updated_at = $2 \
                 WHERE id = $1 AND status IN ('pending', 'running', 'sleeping', 'waiting')",
                vec![p(id.clone()), p(Timestamp::now())],
            ));
        }
        if !fire.starts.is_empty() || fire.cancel.is_some() {
            ops.push(Op::Query(NOTIFY, vec![]));
        }
        ops.push(Op::Simple("COMMIT"));
        let outs = match self.pipeline(ops).await {
            Ok(outs) => outs,
            Err(e) => {
                let _ = self.pipeline(vec![Op::Simple("ROLLBACK")]).await;
                return Err(e);
            }
        };
        Ok(Some(
            outs.iter()
                .take(fire.starts.len())
                .map(|o| o.counted() == 1)
                .collect(),
        ))
    }

    pub async fn instance_fire(&self, id: &str) -> Result<Option<FireRecord>> {
        let rows = self.query(INSTANCE_FIRE, &[&id]).await?;
        rows.first().map(fire_row).transpose()
    }
}

pub(super) const INSTANCE_FIRE: &str =
    "SELECT workflow, idx, spec, timezone, fire_ms FROM schedule_fires WHERE instance_id = $1";

/// A row of [`INSTANCE_FIRE`].
pub(super) fn fire_row(r: &tokio_postgres::Row) -> Result<FireRecord> {
    let fire_ms: i64 = get(r, 4)?;
    Ok(FireRecord {
        workflow: get(r, 0)?,
        index: get(r, 1)?,
        spec: get(r, 2)?,
        timezone: get(r, 3)?,
        fire_ms,
        fire_at: Timestamp::from_ms(fire_ms),
    })
}
