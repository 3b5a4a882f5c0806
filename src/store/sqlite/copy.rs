//! `wf restart --as NEWID` on SQLite: a new instance made from the rows of
//! another (its instance row, runs, steps, and attempts with their logs), in
//! one transaction. The source's rows are only read.

use super::SqliteStore;
use super::history::instance;
use crate::store::{ActionRow, Result};
use rusqlite::params;

/// The new instance row: `?1`'s, named `?2`, created `?3` by `?4`, with
/// no lease.
const INSTANCE: &str = "INSERT INTO instances (id, workflow, status, definition_hash, workflow_path, base_dir, inputs, state, \
     outputs, error, wake_at, waiting_event, cancel_requested, lease_owner, lease_expires_ms, lease_epoch, \
     created_at, updated_at, labels, queue_key, queue_priority, queue_limits, queue_hold, admitted, started_by) \
     SELECT ?2, workflow, status, definition_hash, workflow_path, base_dir, inputs, state, outputs, error, \
     NULL, NULL, 0, NULL, NULL, 0, ?3, ?3, labels, queue_key, queue_priority, queue_limits, queue_hold, 0, ?4 \
     FROM instances WHERE id = ?1";

/// The statements that copy the rows of instance `?1` to `?2`.
const ROWS: &[&str] = &[
    "INSERT INTO runs (instance_id, number, outcome, started_at, finished_at, trace_id, span_id, \
     parent_span_id, started_ns, restart_from, definition_hash) \
     SELECT ?2, number, outcome, started_at, finished_at, trace_id, span_id, parent_span_id, started_ns, \
     restart_from, definition_hash FROM runs WHERE instance_id = ?1",
    "INSERT INTO steps (instance_id, key, step_id, status, attempts, budget_base, outcome, error_type, \
     error_message, output, started_at, finished_at, retry_at, seq, items, state_patch) \
     SELECT ?2, key, step_id, status, attempts, budget_base, outcome, error_type, error_message, output, \
     started_at, finished_at, retry_at, seq, items, state_patch FROM steps \
     WHERE instance_id = ?1",
    "INSERT INTO attempts (instance_id, step_key, attempt, run, outcome, error_type, error_message, \
     exit_code, started_at, finished_at, stdout, stderr, span_id, started_ns) \
     SELECT ?2, step_key, attempt, run, outcome, error_type, error_message, exit_code, started_at, \
     finished_at, stdout, stderr, span_id, started_ns FROM attempts \
     WHERE instance_id = ?1",
];

impl SqliteStore {
    /// Copies instance `from` to a new instance `to` (created now, no
    /// lease) and records `start` (its `start` action); false (nothing
    /// written) when `to` is taken.
    pub fn copy_instance(
        &mut self,
        from: &str,
        to: &str,
        now: &str,
        start: &ActionRow,
    ) -> Result<bool> {
        let tx = self.write()?;
        if instance(&tx, to).is_ok() {
            return Ok(false);
        }
        tx.execute(INSTANCE, params![from, to, now, start.actor])?;
        for sql in ROWS {
            tx.execute(sql, params![from, to])?;
        }
        super::actions::insert_action(&tx, start)?;
        tx.commit()?;
        Ok(true)
    }
}
