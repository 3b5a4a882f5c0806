//! `wf restart --as NEWID` on PostgreSQL: a new instance made from the rows
//! of another (its instance row, runs, steps, and attempts with their logs),
//! in one transaction. The source's rows are only read.

use super::history::p;
use super::{Op, PgStore};
use crate::store::Result;

const INSTANCE: &str = "INSERT INTO instances (id, workflow, status, definition_hash, workflow_path, base_dir, \
     inputs, state, outputs, error, wake_at, waiting_event, cancel_requested, lease_owner, lease_expires_ms, \
     lease_epoch, created_at, updated_at, labels, queue_key, queue_priority, queue_limits, queue_hold, admitted, \
     started_by) \
     SELECT $2, workflow, status, definition_hash, workflow_path, base_dir, inputs, state, outputs, error, \
     NULL, NULL, 0, NULL, NULL, 0, $3, $3, labels, queue_key, queue_priority, queue_limits, queue_hold, false, $4 \
     FROM instances WHERE id = $1";
const RUNS: &str = "INSERT INTO runs (instance_id, number, outcome, started_at, finished_at, trace_id, span_id, \
     parent_span_id, started_ns, restart_from, definition_hash) \
     SELECT $2, number, outcome, started_at, finished_at, trace_id, span_id, parent_span_id, started_ns, \
     restart_from, definition_hash FROM runs WHERE instance_id = $1";
const STEPS: &str = "INSERT INTO steps (instance_id, key, step_id, status, attempts, budget_base, outcome, \
     error_type, error_message, output, started_at, finished_at, retry_at, seq, items, state_patch) \
     SELECT $2, key, step_id, status, attempts, budget_base, outcome, error_type, error_message, output, \
     started_at, finished_at, retry_at, seq, items, state_patch FROM steps WHERE instance_id = $1";
const ATTEMPTS: &str = "INSERT INTO attempts (instance_id, step_key, attempt, run, outcome, error_type, \
     error_message, exit_code, started_at, finished_at, stdout, stderr, span_id, started_ns) \
     SELECT $2, step_key, attempt, run, outcome, error_type, error_message, exit_code, started_at, \
     finished_at, stdout, stderr, span_id, started_ns FROM attempts WHERE instance_id = $1";

impl PgStore {
    /// Copies instance `from` to a new instance `to` (created now, no
    /// lease); false (nothing written) when `to` is taken. (Two copies to
    /// the same new id at once: the second fails on the primary key.)
    pub async fn copy_instance(
        &self,
        from: &str,
        to: &str,
        now: &str,
        start: &crate::store::ActionRow,
    ) -> Result<bool> {
        let taken = self
            .query("SELECT 1 FROM instances WHERE id = $1", &[&to])
            .await?;
        if !taken.is_empty() {
            return Ok(false);
        }
        let args = || vec![p(from.to_string()), p(to.to_string())];
        let mut instance = args();
        instance.push(p(now.to_string()));
        instance.push(p(start.actor.clone()));
        self.pipeline(vec![
            Op::Simple("BEGIN"),
            // The copied attempts and runs ended once, in the source, and
            // were counted then (`/metrics`, migration 14's triggers).
            Op::Simple("SET LOCAL wf.copying = 'on'"),
            Op::Exec(INSTANCE, instance),
            Op::Exec(RUNS, args()),
            Op::Exec(STEPS, args()),
            Op::Exec(ATTEMPTS, args()),
            super::actions::insert_action(start),
            Op::Simple("COMMIT"),
        ])
        .await?;
        Ok(true)
    }
}
