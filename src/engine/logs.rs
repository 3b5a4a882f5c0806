//! The captured output of step attempts (`wf logs`, the API's `logs`):
//! read at one moment, with what to say when there is none.

use super::EngineError;
use crate::store::Store;
use crate::vocab::{AttemptOutcome, InstanceId, UnitKey, UnitKeyBuf};

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
                        key: UnitKeyBuf::new(step),
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

/// What a follower of a step's attempt (`wf logs --follow`, the API's
/// `?follow=1`) finds at one look.
#[derive(Debug)]
pub enum Look {
    /// No attempt yet; `true`: the instance has ended, so none will come.
    None(bool),
    /// Attempt `n` runs: its output is in its live copy ([`live_since`]).
    Running(i64),
    /// Attempt `n` ended: its outcome and its stored stdout and stderr.
    Ended(i64, AttemptOutcome, Vec<u8>, Vec<u8>),
}

/// Looks at attempt `attempt` of `step` (default: its last).
pub async fn look(
    store: &Store,
    id: &InstanceId,
    step: &str,
    attempt: Option<i64>,
) -> Result<Look, EngineError> {
    let last = store
        .attempts(id)
        .await?
        .into_iter()
        .filter(|a| a.step_key == step && attempt.is_none_or(|n| a.attempt == n))
        .max_by_key(|a| a.attempt);
    let Some(a) = last else {
        return Ok(Look::None(store.instance(id).await?.status.is_ended()));
    };
    Ok(match a.outcome {
        None => Look::Running(a.attempt),
        Some(outcome) => {
            let (out, err) = store
                .attempt_logs(id, step, Some(a.attempt))
                .await?
                .map(|(_, o, e)| (o, e))
                .unwrap_or_default();
            Look::Ended(a.attempt, outcome, out, err)
        }
    })
}

/// What the live copy of stream `ext` (`out` or `err`) of attempt `n` of
/// `step` holds from byte `from` on, if it can be read (`live_dir`: the
/// store's [`Store::live_dir`]).
pub fn live_since(
    live_dir: &std::path::Path,
    id: &InstanceId,
    step: &str,
    n: i64,
    ext: &str,
    from: usize,
) -> Option<Vec<u8>> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let path = live_dir.join(&**id).join(format!("{step}.{n}.{ext}"));
    let mut f = std::fs::File::open(path).ok()?;
    f.seek(SeekFrom::Start(from as u64)).ok()?;
    let mut more = Vec::new();
    f.read_to_end(&mut more).ok()?;
    Some(more)
}

/// The key of the unit `step` names: a `matrix` combination may be named
/// by its values, as it is shown (`build[os=linux,arch=arm64]`); any
/// other name is its own key.
pub async fn unit_key(store: &Store, id: &InstanceId, step: &str) -> Result<String, EngineError> {
    let parts = UnitKey::parse(step);
    if parts.item.is_some() || !step.contains('[') {
        return Ok(step.to_string());
    }
    let steps = store.steps(id).await?;
    Ok(crate::views::unit_labels(&steps)
        .into_iter()
        .find(|(_, label)| label == step)
        .map_or_else(|| step.to_string(), |(key, _)| key))
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
    Ok(EngineError::NoSuch(match attempt {
        Some(n) if exists => format!("step `{step}` of instance {id} has no attempt {n}"),
        _ if exists || (step != base && defined.iter().any(|d| d == base)) => {
            format!("step `{step}` of instance {id} has no attempts")
        }
        _ => {
            let mut names = defined;
            names.extend(
                known
                    .into_iter()
                    .filter(|k| !k.is_step())
                    .map(|k| k.to_string()),
            );
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
    pub key: UnitKeyBuf,
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
) -> Result<(Vec<UnitKeyBuf>, Vec<String>), EngineError> {
    let known = store.steps(id).await?.into_iter().map(|s| s.key).collect();
    let inst = store.instance(id).await?;
    let defined = store
        .definition_step_ids(&inst.definition_hash)
        .await?
        .unwrap_or_default();
    Ok((known, defined))
}
