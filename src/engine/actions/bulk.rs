//! One action over many instances (`wf cancel`, `wf resume [--retry-failed]`
//! given several ids or a filter; the API's `/api/v1/bulk/{action}`; the
//! list's *Cancel… / Retry failed… / Resume…*): the selection, what the
//! action would do to each instance (the plan both interfaces show before
//! asking to go on, in the same words), and then each instance's turn
//! through the use case of one ([`super::cancel`], [`super::resume`]), so
//! that many are refused and recorded as one would be. Nothing here runs
//! an instance: each interface drives the runs the turns made ready, as it
//! drives one.

use super::control::holder_of;
use super::{CancelAsked, ListQuery, Resumable, Resume, RetryPlan};
use crate::engine::{EngineError, lease, pinned};
use crate::store::{InstanceRow, Store};
use crate::vocab::{Actor, InstanceId, InstanceStatus, ShownStatus, StepStatus, Timestamp};

/// The most instances one bulk action takes.
pub const MAX: usize = 1000;

/// The action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bulk {
    Cancel,
    RetryFailed,
    Resume,
}

impl Bulk {
    /// Its word in URLs and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Bulk::Cancel => "cancel",
            Bulk::RetryFailed => "retry",
            Bulk::Resume => "resume",
        }
    }

    pub fn parse(word: &str) -> Option<Bulk> {
        [Bulk::Cancel, Bulk::RetryFailed, Bulk::Resume]
            .into_iter()
            .find(|b| b.as_str() == word)
    }

    /// How it is said to a person: "cancel", "retry the failed steps of".
    pub fn verb(self) -> &'static str {
        match self {
            Bulk::Cancel => "cancel",
            Bulk::RetryFailed => "retry the failed steps of",
            Bulk::Resume => "resume",
        }
    }
}

/// What an action would do to one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Intent {
    /// It is canceled: these completed steps are compensated (newest
    /// first); the live process running it, if one does, acts on it.
    Cancel {
        compensate: Vec<String>,
        held_by: Option<String>,
    },
    /// Its failed steps get a fresh attempt budget.
    Retry(RetryPlan),
    /// It goes on from where it stands.
    Resume,
    /// It is left as it is, for this reason (what the action of one would
    /// refuse it with).
    Skip(String),
}

impl Intent {
    /// The plan in words, as both interfaces show it.
    pub fn text(&self) -> String {
        let quoted = |ids: &[String]| {
            ids.iter()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Intent::Cancel {
                compensate,
                held_by,
            } => {
                let mut t = if compensate.is_empty() {
                    "canceled; nothing to compensate".to_string()
                } else {
                    format!("canceled; compensates {}", quoted(compensate))
                };
                if let Some(h) = held_by {
                    t.push_str(&format!(" (its runner {h} does it)"));
                }
                t
            }
            Intent::Retry(p) => {
                let mut t = format!("retries {}", quoted(&p.failed));
                if let Some(rerun) = &p.rerun {
                    t.push_str("; ");
                    t.push_str(rerun);
                }
                t
            }
            Intent::Resume => "goes on from where it stands".to_string(),
            Intent::Skip(why) => format!("left as it is: {why}"),
        }
    }

    pub fn skipped(&self) -> bool {
        matches!(self, Intent::Skip(_))
    }
}

/// One instance and what the action would do to it.
#[derive(Debug, Clone)]
pub struct Planned {
    pub id: InstanceId,
    pub workflow: String,
    pub status: ShownStatus,
    pub intent: Intent,
}

/// How the instances are chosen: by id (any unique prefixes), or those a
/// list's filters match (at most [`MAX`], the newest).
#[derive(Debug, Clone)]
pub enum Selection {
    Ids(Vec<String>),
    Matching(ListQuery),
}

/// The instances `sel` names, newest first for a filter, in the order
/// given for ids (each once); more than [`MAX`] is refused.
pub async fn select(store: &Store, sel: &Selection) -> Result<Vec<InstanceId>, EngineError> {
    let ids = match sel {
        Selection::Ids(refs) => {
            let mut ids: Vec<InstanceId> = Vec::new();
            for r in refs {
                let id = store.resolve_id(r).await?;
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
            ids
        }
        Selection::Matching(q) => {
            let q = ListQuery {
                limit: MAX,
                after: None,
                count_more: true,
                ..q.clone()
            };
            let (rows, more) = super::list(store, &q).await?;
            if more > 0 {
                return Err(EngineError::Input(format!(
                    "the filters match {} instances; one action takes {MAX} at most: narrow them",
                    rows.len() + more
                )));
            }
            rows.into_iter().map(|r| r.id).collect()
        }
    };
    if ids.len() > MAX {
        return Err(EngineError::Input(format!(
            "{} instances given; one action takes {MAX} at most",
            ids.len()
        )));
    }
    Ok(ids)
}

/// What `bulk` would do to each of `ids`, read only.
pub async fn plan(
    store: &Store,
    bulk: Bulk,
    ids: &[InstanceId],
    by: &Actor,
) -> Result<Vec<Planned>, EngineError> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let inst = store.instance(id).await?;
        let status = lease::shown(&inst, Timestamp::now().ms());
        let intent = match intent(store, bulk, &inst, status, by).await {
            Ok(i) => i,
            // Refused as the action of one would refuse it: said, not
            // fatal to the others.
            Err(e) if refusal(&e) => Intent::Skip(e.to_string()),
            Err(e) => return Err(e),
        };
        out.push(Planned {
            id: id.clone(),
            workflow: inst.workflow.clone(),
            status,
            intent,
        });
    }
    Ok(out)
}

/// Whether `e` is an action's refusal of one instance (rather than a
/// failure to read the history).
fn refusal(e: &EngineError) -> bool {
    !matches!(e, EngineError::Store(_))
}

async fn intent(
    store: &Store,
    bulk: Bulk,
    inst: &InstanceRow,
    status: ShownStatus,
    by: &Actor,
) -> Result<Intent, EngineError> {
    match bulk {
        Bulk::Cancel => {
            if inst.status.is_ended() {
                return Ok(Intent::Skip(format!("it is {status}; nothing to cancel")));
            }
            let wf = pinned::pinned_workflow(store, inst).await?;
            let rows = store.steps(&inst.id).await?;
            let mut done: Vec<_> = rows
                .iter()
                .filter(|r| {
                    r.status == StepStatus::Completed
                        && !r.key.is_compensation()
                        && wf
                            .steps
                            .iter()
                            .any(|s| s.id == r.step_id && s.compensate.is_some())
                })
                .collect();
            // Undone newest first, as the saga does.
            done.sort_by_key(|r| std::cmp::Reverse(r.seq));
            Ok(Intent::Cancel {
                compensate: done.iter().map(|r| r.key.to_string()).collect(),
                held_by: holder_of(inst, status),
            })
        }
        Bulk::RetryFailed | Bulk::Resume => {
            let retry = bulk == Bulk::RetryFailed;
            if retry && inst.status != InstanceStatus::Failed {
                return Ok(Intent::Skip(format!(
                    "it is {status}, not failed; `resume` continues one that has not ended"
                )));
            }
            super::resume(
                store,
                &inst.id,
                Resume {
                    now: false,
                    retry,
                    no_cache: false,
                },
                by,
            )
            .await?;
            Ok(if retry {
                Intent::Retry(super::retry_plan(store, &inst.id).await?)
            } else {
                Intent::Resume
            })
        }
    }
}

/// What one instance's turn did.
#[derive(Debug)]
pub enum Turn {
    /// The cancel is recorded (its runner, or the run made ready, acts on
    /// it).
    Canceled(Box<CancelAsked>),
    /// Ready to go on: the run to drive.
    Resumed(Box<Resumable>),
    /// Left as it is, and why.
    Skipped(String),
}

/// `bulk` done to instance `id` through the use case of one, unless its
/// plan says to leave it (re-checked now: it may have changed since the
/// plan was shown). `reason` is a cancel's.
pub async fn apply(
    store: &mut Store,
    bulk: Bulk,
    id: &InstanceId,
    by: &Actor,
    reason: &str,
) -> Result<Turn, EngineError> {
    let inst = store.instance(id).await?;
    let status = lease::shown(&inst, Timestamp::now().ms());
    let turn = match bulk {
        Bulk::Cancel if inst.status.is_ended() => {
            Turn::Skipped(format!("it is {status}; nothing to cancel"))
        }
        Bulk::Cancel => {
            Turn::Canceled(Box::new(super::cancel(store, id, false, by, reason).await?))
        }
        Bulk::RetryFailed if inst.status != InstanceStatus::Failed => {
            Turn::Skipped(format!("it is {status}, not failed"))
        }
        Bulk::RetryFailed | Bulk::Resume => {
            let retry = bulk == Bulk::RetryFailed;
            match super::resume(
                store,
                id,
                Resume {
                    now: false,
                    retry,
                    no_cache: false,
                },
                by,
            )
            .await
            {
                Ok(r) => Turn::Resumed(Box::new(r)),
                Err(e) if refusal(&e) => Turn::Skipped(e.to_string()),
                Err(e) => return Err(e),
            }
        }
    };
    Ok(turn)
}
