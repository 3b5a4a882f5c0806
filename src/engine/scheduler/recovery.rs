//! What a dead (or stalled) predecessor's unfinished attempts become: each
//! is `crashed`, counted towards its unit's `max_attempts`, and its unit is
//! retried (at once) or fails for good, naming the way out. Pure: the
//! driver rebuilds the attempts' spans and ends their leftover processes.

use crate::store::{AttemptEnd, OpenAttempt, StepRow, Write};
use crate::vocab::{AttemptOutcome, ErrorType, InstanceId, StepStatus, Timestamp, UnitKeyBuf};
use crate::workflow::Workflow;
use std::collections::HashMap;

/// Why a crashed attempt failed, as recorded.
pub const CRASHED: &str = "the process running this attempt died before it finished";

/// The writes that close `open` (attempts with no outcome) at `now`, with
/// their units' rows in `records` updated to match.
pub fn close_crashed(
    id: &InstanceId,
    wf: &Workflow,
    open: &[OpenAttempt],
    uncounted: &HashMap<UnitKeyBuf, Vec<i64>>,
    records: &mut HashMap<UnitKeyBuf, StepRow>,
    now: Timestamp,
) -> Vec<Write> {
    let mut writes = Vec::new();
    for a in open {
        let key = a.key.clone();
        writes.push(Write::EndAttempt {
            key: key.clone(),
            attempt: a.attempt,
            end: AttemptEnd {
                outcome: AttemptOutcome::Crashed,
                error_type: Some(ErrorType::Crashed),
                error_message: Some(CRASHED.into()),
                exit_code: None,
                finished_at: now,
                stdout: Vec::new(),
                stderr: Vec::new(),
            },
        });
        let Some(rec) = records.get_mut(&key) else {
            continue;
        };
        let Some(step) = wf.step(&rec.step_id) else {
            continue;
        };
        let retry = match (&step.compensate, key.is_compensation()) {
            (Some(c), true) => &c.retry,
            _ => &step.retry,
        };
        rec.outcome = Some(AttemptOutcome::Crashed);
        rec.error_type = Some(ErrorType::Crashed);
        rec.error_message = Some(CRASHED.into());
        let base = rec.budget_base;
        let not_counted = uncounted
            .get(&key)
            .map_or(0, |v| v.iter().filter(|&&n| n > base).count() as i64);
        let used = rec.attempts.max(a.attempt) - base - not_counted;
        if used >= i64::from(retry.max_attempts) || !retry.is_retryable(&ErrorType::Crashed) {
            rec.status = StepStatus::Failed;
            rec.finished_at = Some(now);
            rec.error_message = Some(format!(
                "{CRASHED} ({used} of {} attempt(s) used; `wf resume {id} --retry-failed` gives it another)",
                retry.max_attempts
            ));
        } else {
            rec.status = StepStatus::Retrying;
            rec.retry_at = None;
        }
        writes.push(Write::Step(Box::new(rec.clone())));
    }
    writes
}
