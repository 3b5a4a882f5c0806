//! Schedules on SQLite: registered `on.schedule` entries and the fire times
//! they started. A fire is applied in one IMMEDIATE transaction that moves
//! the entry's cursor only if it is still where the worker read it, so two
//! workers never start the same fire time.

use super::SqliteStore;
use super::history;
use crate::store::Result;
use crate::store::rows::*;
use crate::vocab::Timestamp;
use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::Value;

const COLS: &str = "workflow, idx, spec, timezone, overlap, catchup_ms, inputs, state, definition_hash, \
    workflow_path, base_dir, next_fire_ms, buffered_ms, last_instance, last_fire_ms, skipped, registered_at";

fn schedule_from_row(r: &Row) -> rusqlite::Result<ScheduleRow> {
    let inputs: String = r.get(6)?;
    let state: String = r.get(7)?;
    Ok(ScheduleRow {
        workflow: r.get(0)?,
        idx: r.get(1)?,
        spec: r.get(2)?,
        timezone: r.get(3)?,
        overlap: r.get(4)?,
        catchup_ms: r.get(5)?,
        inputs: serde_json::from_str(&inputs).unwrap_or(Value::Null),
        state: serde_json::from_str(&state).unwrap_or(Value::Null),
        definition_hash: r.get(8)?,
        workflow_path: r.get(9)?,
        base_dir: r.get(10)?,
        next_fire_ms: r.get(11)?,
        buffered_ms: r.get(12)?,
        last_instance: r.get(13)?,
        last_fire_ms: r.get(14)?,
        skipped: r.get(15)?,
        registered_at: r.get(16)?,
    })
}

fn insert_schedule(c: &Connection, s: &ScheduleRow) -> Result<()> {
    c.execute(
        &format!(
            "INSERT INTO schedules ({COLS}) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17)"
        ),
        params![
            s.workflow,
            s.idx,
            s.spec,
            s.timezone,
            s.overlap,
            s.catchup_ms,
            s.inputs.to_string(),
            s.state.to_string(),
            s.definition_hash,
            s.workflow_path,
            s.base_dir,
            s.next_fire_ms,
            s.buffered_ms,
            s.last_instance,
            s.last_fire_ms,
            s.skipped,
            s.registered_at,
        ],
    )?;
    Ok(())
}

impl SqliteStore {
    /// Replaces the entries of `workflow` with `rows`, pinning `def`, if
    /// they are still `read` (the write lock, taken first, keeps workers
    /// out until the commit); false if they are not.
    pub fn register_schedules(
        &mut self,
        workflow: &str,
        rows: &[ScheduleRow],
        defs: &[DefinitionRow],
        read: &[ScheduleRow],
    ) -> Result<bool> {
        let tx = self.write()?;
        let now: Vec<ScheduleRow> = tx
            .prepare_cached(&format!(
                "SELECT {COLS} FROM schedules WHERE workflow = ?1 ORDER BY idx"
            ))?
            .query_map([workflow], schedule_from_row)?
            .collect::<rusqlite::Result<_>>()?;
        if now != read {
            return Ok(false);
        }
        for def in defs {
            history::insert_definition(&tx, def)?;
        }
        tx.execute("DELETE FROM schedules WHERE workflow = ?1", [workflow])?;
        for row in rows {
            insert_schedule(&tx, row)?;
        }
        tx.commit()?;
        Ok(true)
    }

    /// Removes the entries of `workflow`; how many there were.
    pub fn remove_schedules(
        &mut self,
        workflow: &str,
        action: Option<&crate::store::ActionRow>,
    ) -> Result<u64> {
        let tx = self.write()?;
        let n = tx.execute("DELETE FROM schedules WHERE workflow = ?1", [workflow])?;
        if n > 0
            && let Some(a) = action
        {
            super::actions::insert_action(&tx, a)?;
        }
        tx.commit()?;
        Ok(n as u64)
    }

    /// Every entry, by workflow and position.
    pub fn schedules(&self) -> Result<Vec<ScheduleRow>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {COLS} FROM schedules ORDER BY workflow, idx"
        ))?;
        let rows = stmt
            .query_map([], schedule_from_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// Applies `fire` if its entry is still where the decision saw it;
    /// false (nothing written) if another worker moved it first or the
    /// entry was replaced or removed.
    pub fn fire_schedule(&mut self, fire: &Fire) -> Result<Option<Vec<bool>>> {
        let tx = self.write()?;
        let last = fire.starts.last();
        let moved = tx.execute(
            "UPDATE schedules SET next_fire_ms = ?1, buffered_ms = ?2, skipped = skipped + ?3, \
             last_fire_ms = COALESCE(?4, last_fire_ms) \
             WHERE workflow = ?5 AND idx = ?6 AND next_fire_ms = ?7 AND buffered_ms IS ?8 \
             AND definition_hash = ?9",
            params![
                fire.next_fire_ms,
                fire.buffered_ms,
                fire.skipped,
                last.map(|(_, t)| t),
                fire.workflow,
                fire.idx,
                fire.expect_next_ms,
                fire.expect_buffered_ms,
                fire.definition_hash,
            ],
        )?;
        if moved == 0 {
            return Ok(None);
        }
        let (spec, timezone): (String, Option<String>) = tx.query_row(
            "SELECT spec, timezone FROM schedules WHERE workflow = ?1 AND idx = ?2",
            params![fire.workflow, fire.idx],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let mut started = Vec::with_capacity(fire.starts.len());
        for (inst, fire_ms) in &fire.starts {
            // A fire time is started once: one that already started an
            // instance starts none now.
            let new = tx.execute(
                "INSERT INTO schedule_fires (workflow, idx, fire_ms, instance_id, spec, timezone) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (workflow, idx, fire_ms) DO NOTHING",
                params![fire.workflow, fire.idx, fire_ms, inst.id, spec, timezone],
            )? == 1;
            if new {
                history::insert_instance_row(
                    &tx,
                    inst,
                    &crate::store::actions::fire_detail(*fire_ms),
                )?;
            }
            started.push(new);
        }
        if let Some((_, t)) = last {
            // The instance the last fire time started (now, or before).
            tx.execute(
                "UPDATE schedules SET last_instance = COALESCE((SELECT instance_id FROM schedule_fires \
                 WHERE workflow = ?1 AND idx = ?2 AND fire_ms = ?3), last_instance) \
                 WHERE workflow = ?1 AND idx = ?2",
                params![fire.workflow, fire.idx, t],
            )?;
        }
        if let Some(id) = &fire.cancel {
            tx.execute(
                "UPDATE instances SET cancel_requested = MAX(cancel_requested, 1), updated_at = ?2 \
                 WHERE id = ?1 AND status IN ('pending', 'running', 'sleeping', 'waiting')",
                params![id, Timestamp::now()],
            )?;
        }
        tx.commit()?;
        Ok(Some(started))
    }

    /// The schedule entry and fire time that started instance `id`, if one did.
    pub fn instance_fire(&self, id: &str) -> Result<Option<FireRecord>> {
        instance_fire(&self.conn, id)
    }
}

/// [`SqliteStore::instance_fire`] on `c` (in a read snapshot's transaction).
pub(super) fn instance_fire(c: &Connection, id: &str) -> Result<Option<FireRecord>> {
    Ok(c.query_row(
        "SELECT workflow, idx, spec, timezone, fire_ms FROM schedule_fires WHERE instance_id = ?1",
        [id],
        |r| {
            let fire_ms: i64 = r.get(4)?;
            Ok(FireRecord {
                workflow: r.get(0)?,
                index: r.get(1)?,
                spec: r.get(2)?,
                timezone: r.get(3)?,
                fire_ms,
                fire_at: Timestamp::from_ms(fire_ms),
            })
        },
    )
    .optional()?)
}
