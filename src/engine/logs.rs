//! The captured output of step attempts (`wf logs`, the API's `logs`):
//! read at one moment, with what to say when there is none.

use super::EngineError;
use crate::store::Store;
use crate::vocab::{AttemptOutcome, InstanceId, UnitKey};

/// The logs of instance `id`: of `step`'s attempt `attempt` (the last by
/// default), or, with no step, of every attempt; all read at one moment.
pub async fn read(
    store: &Store,
    id: &InstanceId,
    step: Option<&str>,
    attempt: Option<i64>,
) -> Result<Vec<Logged>, EngineError> {
    if step.is_none() && attempt.is_some() {
        return Err(EngineError::Input("--attempt needs a STEP".into()));
    }
    store
        .snapshot(async |store: &Store| -> Result<Vec<Logged>, EngineError> {
            let mut logs = Vec::new();
            match step {
                Some(step) => {
                    let Some((n, stdout, stderr)) = store.attempt_logs(id, step, attempt).await?
                    else {
                        return Err(no_attempt(store, id, step, attempt).await?);
                    };
                    let outcome = store
                        .attempts(id)
                        .await?
                        .into_iter()
                        .find(|a| a.step_key == step && a.attempt == n)
                        .and_then(|a| a.outcome);
                    logs.push(Logged {
                        key: step.to_string(),
                        attempt: n,
                        outcome,
                        stdout,
                        stderr,
                    });
                }
                None => {
                    for a in store.attempts(id).await? {
                        if let Some((_, stdout, stderr)) =
                            store.attempt_logs(id, &a.step_key, Some(a.attempt)).await?
                        {
                            logs.push(Logged {
                                key: a.step_key,
                                attempt: a.attempt,
                                outcome: a.outcome,
                                stdout,
                                stderr,
                            });
                        }
                    }
                }
            }
            Ok(logs)
        })
        .await
}

/// Refuses a step instance `id` has no rows for and its definition does
/// not name (what `--follow` waits for must be able to come).
pub async fn check_step(store: &Store, id: &InstanceId, step: &str) -> Result<(), EngineError> {
    let (known, defined) = step_names(store, id).await?;
    let base = UnitKey::parse(step).step;
    if !known.iter().any(|k| k == step) && !defined.iter().any(|d| d == base) {
        return Err(EngineError::Input(format!(
            "instance {id} has no step `{step}`"
        )));
    }
    Ok(())
}

/// Why `wf logs ID STEP` has nothing to show: no such attempt, a step of the
/// workflow that has none yet, or no such step (naming every step of the
/// instance's pinned definition, and the items and compensations it ran).
async fn no_attempt(
    store: &Store,
    id: &InstanceId,
    step: &str,
    attempt: Option<i64>,
) -> Result<EngineError, EngineError> {
    let (known, defined) = step_names(store, id).await?;
    let base = UnitKey::parse(step).step;
    let exists = known.iter().any(|k| k == step) || defined.iter().any(|d| d == step);
    Ok(EngineError::Input(match attempt {
        Some(n) if exists => format!("step `{step}` of instance {id} has no attempt {n}"),
        _ if exists || (step != base && defined.iter().any(|d| d == base)) => {
            format!("step `{step}` of instance {id} has no attempts")
        }
        _ => {
            let mut names = defined;
            names.extend(known.into_iter().filter(|k| !UnitKey::parse(k).is_step()));
            let mut seen = std::collections::HashSet::new();
            names.retain(|n| seen.insert(n.clone()));
            format!(
                "instance {id} has no step `{step}` (steps: {})",
                names.join(", ")
            )
        }
    }))
}

/// One attempt's captured output, as read.
pub struct Logged {
    pub key: String,
    pub attempt: i64,
    pub outcome: Option<AttemptOutcome>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// The keys of the steps the instance has rows for (items and
/// compensations included), and the step ids of its pinned definition.
async fn step_names(
    store: &Store,
    id: &InstanceId,
) -> Result<(Vec<String>, Vec<String>), EngineError> {
    let known = store.steps(id).await?.into_iter().map(|s| s.key).collect();
    let inst = store.instance(id).await?;
    let defined = store
        .definition_step_ids(&inst.definition_hash)
        .await?
        .unwrap_or_default();
    Ok((known, defined))
}
