//! The actions that make an instance run again or end (`wf cancel`,
//! `wf resume`, `wf resume --retry-failed`, `wf restart`, and the API's
//! routes and the inspector's buttons of the same names): what each checks
//! and records before anything runs, and the run it makes ready. The CLI
//! drives that run in its process, `wf serve` in the background; neither
//! decides what may run.

use super::super::drive::check_resumable;
use super::super::{EngineError, RunOptions, Unresumable, lease};
use crate::store::{ActionRow, InstanceRow, Store};
use crate::vocab::{
    ActionKind, Actor, CancelRequest, InstanceId, InstanceStatus, ShownStatus, Timestamp,
};

/// A run an action made ready: the instance, and the options to drive it
/// with (the caller adds its own: progress, a trace parent, an inline wait).
#[derive(Debug)]
pub struct ToRun {
    pub id: InstanceId,
    pub opts: RunOptions,
}

/// What [`cancel`] did: the request is recorded; `held_by` names the live
/// process that runs the instance (it acts on the request itself), else the
/// run that compensates and ends it is made ready.
#[derive(Debug)]
pub struct CancelAsked {
    pub run: ToRun,
    pub held_by: Option<String>,
}

/// The live process running `inst` when its status shows as `shown`
/// ([`lease::shown`]), if one is.
pub(super) fn holder_of(inst: &InstanceRow, shown: ShownStatus) -> Option<String> {
    (shown == ShownStatus::Stored(InstanceStatus::Running))
        .then(|| inst.lease_owner.clone().unwrap_or_default())
}

/// Asks instance `id` to cancel (`terminate`: without compensations).
/// Asked first, in the store, so that a process running it right now stops
/// too; an ended instance has nothing to cancel.
pub async fn cancel(
    store: &mut Store,
    id: &InstanceId,
    terminate: bool,
    by: &Actor,
    reason: &str,
) -> Result<CancelAsked, EngineError> {
    let inst = store.instance(id).await?;
    if inst.status.is_ended() {
        return Err(EngineError::NothingToCancel {
            id: id.clone(),
            status: inst.status,
        });
    }
    let ask = if terminate {
        CancelRequest::Terminate
    } else {
        CancelRequest::Cancel
    };
    let kind = if terminate {
        ActionKind::Terminate
    } else {
        ActionKind::Cancel
    };
    let action = ActionRow::on(id, kind, by, reason);
    store.request_cancel(id, ask, Some(&action)).await?;
    Ok(CancelAsked {
        run: ToRun {
            id: id.clone(),
            opts: RunOptions {
                cancel: true,
                terminate,
                actor: Some(by.clone()),
                ..RunOptions::default()
            },
        },
        held_by: holder_of(&inst, lease::shown(&inst, Timestamp::now().ms())),
    })
}

/// How a resume was asked: `now` fires a timer not yet due; `retry` gives
/// failed steps a fresh attempt budget.
#[derive(Debug, Clone, Copy, Default)]
pub struct Resume {
    pub now: bool,
    pub retry: bool,
    /// `cache:` steps run without looking for a kept result.
    pub no_cache: bool,
}

/// What [`resume`] made ready, the instance as it read it, and the status
/// it showed then.
#[derive(Debug)]
pub struct Resumable {
    pub run: ToRun,
    pub instance: InstanceRow,
    pub status: ShownStatus,
}

/// Checks that instance `id` can go on as `how` asks, before anything is
/// written: not while a live process runs it (held), never once completed,
/// canceled or skipped, a failed one only with `retry` and only while a
/// retry can help (its remedy says why not). The run checks again under
/// its lease.
pub async fn resume(
    store: &Store,
    id: &InstanceId,
    how: Resume,
    by: &Actor,
) -> Result<Resumable, EngineError> {
    let inst = store.instance(id).await?;
    let status = lease::shown(&inst, Timestamp::now().ms());
    if let Some(holder) = holder_of(&inst, status) {
        return Err(EngineError::Held {
            id: id.clone(),
            holder,
        });
    }
    if inst.status == InstanceStatus::Skipped {
        return Err(EngineError::NotResumable {
            id: id.clone(),
            why: Unresumable::Skipped,
        });
    }
    let action = if how.retry {
        (ActionKind::RetryFailed, String::new())
    } else if how.now {
        (ActionKind::Resume, "now".to_string())
    } else {
        (ActionKind::Resume, String::new())
    };
    let opts = RunOptions {
        fire_timers: how.now,
        retry_failed: how.retry,
        no_cache: how.no_cache,
        actor: Some(by.clone()),
        action: Some(action),
        ..RunOptions::default()
    };
    check_resumable(store, &inst, &opts).await?;
    Ok(Resumable {
        run: ToRun {
            id: id.clone(),
            opts,
        },
        instance: inst,
        status,
    })
}
