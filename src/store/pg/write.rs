//! One [`Write`] as the statement that applies it, for the writes `batch`
//! does not group and for the process-group record.

use super::Op;
use super::records::{opt_json, p};
use super::text::escape_opt;
use crate::store::Write;
use crate::store::rows::now;

/// [`Write::Release`]: the lease given up, and a notification to idle
/// workers (sent when the transaction commits).
const RELEASE_IN_COMMIT: &str = "WITH r AS (UPDATE instances SET lease_expires_ms=NULL WHERE id=$1) \
     SELECT pg_notify('wf_' || current_schema(), '')";

/// The request that puts `w` in the store.
pub(super) fn write_op(id: &str, w: &Write) -> Op {
    let id = id.to_string();
    match w {
        Write::StartAttempt {
            key,
            attempt,
            run,
            started_at,
            span_id,
            started_ns,
        } => Op::Exec(
            "INSERT INTO attempts (instance_id, step_key, attempt, run, started_at, span_id, started_ns) \
             VALUES ($1,$2,$3,$4,$5,$6,$7)",
            vec![
                p(id),
                p(key.clone()),
                p(*attempt),
                p(*run),
                p(*started_at),
                p(span_id.clone()),
                p(*started_ns),
            ],
        ),
        Write::EndAttempt { key, attempt, end } => Op::Exec(
            "UPDATE attempts SET outcome=$4, error_type=$5, error_message=$6, exit_code=$7, finished_at=$8, \
             stdout=$9, stderr=$10, proc_host=NULL, proc_pgid=NULL, proc_start=NULL \
             WHERE instance_id=$1 AND step_key=$2 AND attempt=$3",
            vec![
                p(id),
                p(key.clone()),
                p(*attempt),
                p(end.outcome),
                p(end.error_type.clone()),
                p(escape_opt(&end.error_message)),
                p(end.exit_code),
                p(end.finished_at),
                p(end.stdout.clone()),
                p(end.stderr.clone()),
            ],
        ),
        Write::AttemptProcess { key, attempt, tag } => Op::Exec(
            "UPDATE attempts SET proc_host=$4, proc_pgid=$5, proc_start=$6 \
             WHERE instance_id=$1 AND step_key=$2 AND attempt=$3",
            vec![
                p(id),
                p(key.clone()),
                p(*attempt),
                p(tag.host.clone()),
                p(tag.pgid),
                p(tag.start),
            ],
        ),
        Write::Step(s) => Op::Exec(
            "INSERT INTO steps (instance_id, key, step_id, status, attempts, outcome, error_type, error_message, \
             output, started_at, finished_at, retry_at, seq, budget_base, items, state_patch) \
             VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16) \
             ON CONFLICT (instance_id, key) DO UPDATE SET status=excluded.status, attempts=excluded.attempts, \
             budget_base=excluded.budget_base, \
             outcome=excluded.outcome, error_type=excluded.error_type, error_message=excluded.error_message, \
             output=excluded.output, started_at=excluded.started_at, finished_at=excluded.finished_at, \
             retry_at=excluded.retry_at, seq=excluded.seq, items=excluded.items, \
             state_patch=COALESCE(excluded.state_patch, steps.state_patch)",
            vec![
                p(id),
                p(s.key.clone()),
                p(s.step_id.clone()),
                p(s.status),
                p(s.attempts),
                p(s.outcome),
                p(s.error_type.clone()),
                p(escape_opt(&s.error_message)),
                p(opt_json(&s.output)),
                p(s.started_at),
                p(s.finished_at),
                p(s.retry_at),
                p(s.seq),
                p(s.budget_base),
                p(opt_json(&s.items)),
                p(opt_json(&s.state_patch)),
            ],
        ),
        Write::State(state) => Op::Exec(
            "UPDATE instances SET state=$2, updated_at=$3 WHERE id=$1",
            vec![p(id), p(state.to_string()), p(now())],
        ),
        // The layout `batch` writes spans in (by the instance's `seq`).
        Write::Span(s) => super::batch::insert_span(&id, s),
        Write::TakeEvent { event, key } => Op::Exec(
            "UPDATE events SET consumed_by=$2 WHERE id=$1",
            vec![p(*event), p(key.clone())],
        ),
        Write::Status {
            status,
            wake_at,
            waiting_event,
            error,
        } => Op::Exec(
            "UPDATE instances SET status=$2, wake_at=$3, waiting_event=$4, error=$5, updated_at=$6 WHERE id=$1",
            vec![
                p(id),
                p(*status),
                p(*wake_at),
                p(waiting_event.clone()),
                p(escape_opt(error)),
                p(now()),
            ],
        ),
        Write::CloseAbandonedRuns => Op::Exec(
            "UPDATE runs SET outcome='crashed', finished_at=$2 WHERE instance_id=$1 AND outcome IS NULL",
            vec![p(id), p(now())],
        ),
        Write::Reopen => Op::Exec(
            "UPDATE instances SET cancel_requested=0, outputs=NULL WHERE id=$1",
            vec![p(id)],
        ),
        Write::Outputs(v) => Op::Exec(
            "UPDATE instances SET outputs=$2 WHERE id=$1",
            vec![p(id), p(v.to_string())],
        ),
        Write::StartRun {
            run,
            trace,
            restart_from,
        } => Op::Exec(
            "INSERT INTO runs (instance_id, number, started_at, trace_id, span_id, parent_span_id, started_ns, \
             restart_from) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)",
            vec![
                p(id),
                p(*run),
                p(now()),
                p(trace.0.clone()),
                p(trace.1.clone()),
                p(trace.2.clone()),
                p(trace.3),
                p(restart_from.clone()),
            ],
        ),
        Write::FinishRun { run, outcome } => Op::Exec(
            "UPDATE runs SET outcome=$3, finished_at=$4 WHERE instance_id=$1 AND number=$2",
            vec![p(id), p(*run), p(*outcome), p(now())],
        ),
        // In a fenced transaction: the instance is ours. Idle workers are
        // woken, as by `release`, when it commits.
        Write::Release => Op::Exec(RELEASE_IN_COMMIT, vec![p(id)]),
    }
}
