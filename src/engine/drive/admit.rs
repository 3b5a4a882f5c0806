//! Admission before a run (`queue:`, docs/flow-control.md): an instance of
//! a workflow with a queue runs only once its key has room for it. The
//! store decides and records (`Store::admit`, `store::queue`); this waits,
//! up to the inline wait, for the room to come (a slot freed, the rate's
//! window moved, a debounce ended), renewing the lease meanwhile, and
//! otherwise leaves the instance `queued` for a worker to admit.

use super::super::lapse::{Lapse, LeaseNews, Watch};
use super::super::lease::{self, Heartbeat};
use super::super::runner::{RunOptions, RunOutcome};
use super::super::{EngineError, Observer};
use crate::store::queue::{Admission, Blocked};
use crate::store::{self, Store};
use crate::vocab::{CancelRequest, InstanceStatus, Timestamp};
use std::time::{Duration, Instant};

/// How often a waiting run asks again when nothing wakes it sooner (on
/// PostgreSQL a freed slot's notification wakes it at once).
const ASK_EVERY: Duration = Duration::from_millis(200);

/// Admits the instance `fence` holds, waiting up to `opts.inline_wait`:
/// `None` to run it, or how the run ends without opening (`Queued`, the
/// lease released; `Skipped`, ended by its queue meanwhile). A cancel asked
/// while it waits lets it run at once, to be canceled.
pub(super) async fn admit(
    store: &mut Store,
    fence: &store::Fence,
    history: &mut store::History,
    opts: &RunOptions,
    observer: &dyn Observer,
    ttl: Duration,
    watch: &Watch,
) -> Result<Option<RunOutcome>, EngineError> {
    let id = &fence.instance;
    let Some(place) = &history.instance.queue else {
        return Ok(None);
    };
    if place.admitted || history.cancel_requested != CancelRequest::None {
        return Ok(None);
    }
    let deadline = Instant::now() + opts.inline_wait;
    let mut heartbeat: Option<(Heartbeat, LeaseNews)> = None;
    let mut said: Option<(usize, Blocked)> = None;
    loop {
        let admission = match store.admit(fence, &lease::holder_alive).await {
            Ok(a) => a,
            Err(e) => {
                drop(heartbeat);
                return match skipped_meanwhile(store, id, &e).await {
                    Some(why) => Ok(Some(RunOutcome::Skipped(why))),
                    None => Err(e.into()),
                };
            }
        };
        let Admission::Waiting {
            key,
            position,
            ahead,
            blocked,
        } = admission
        else {
            return Ok(None);
        };
        let why = waiting_why(&key, position, ahead, &blocked);
        if said.as_ref() != Some(&(position, blocked.clone())) {
            observer.message(&format!("queued: {why}"));
            said = Some((position, blocked.clone()));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            drop(heartbeat);
            store.release(fence).await?;
            // An ended instance asked to run again (`wf restart`,
            // `--retry-failed`) is left as it ended: nothing was reset, and
            // no worker takes it up; the command is to be given again.
            if history.instance.status.is_ended() {
                return Ok(Some(RunOutcome::Queued(format!(
                    "{why}; it was not started again: give the command again when its queue has room"
                ))));
            }
            return Ok(Some(RunOutcome::Queued(why)));
        }
        let (_, news) = heartbeat
            .get_or_insert_with(|| Heartbeat::start(store.location(), fence.clone(), ttl, watch));
        // A lapse stops nothing here (nothing runs yet): the run that
        // follows hears of it.
        if let Some(Lapse::TakenBy(holder)) = news.now() {
            drop(heartbeat);
            return Err(EngineError::LeaseLost {
                id: id.clone(),
                holder,
            });
        }
        let (cancel, _) = store.poll(id).await?;
        if cancel != CancelRequest::None {
            history.cancel_requested = cancel;
            return Ok(None);
        }
        // A time that admits it by itself (a debounce, the rate's window)
        // is waited for exactly; else until something may have freed a slot.
        let soon = match blocked {
            Blocked::Debounce { until_ms } | Blocked::Rate { until_ms, .. } => {
                let ms = (until_ms - Timestamp::now().ms()).max(1) as u64;
                Duration::from_millis(ms).min(ASK_EVERY)
            }
            _ => ASK_EVERY,
        };
        store.wait_for_work(soon.min(left)).await;
    }
}

/// Where a queued instance stands, in words.
fn waiting_why(key: &str, position: usize, ahead: usize, blocked: &Blocked) -> String {
    let behind = match ahead {
        0 => "first in line".to_string(),
        1 => "1 instance ahead".to_string(),
        n => format!("{n} instances ahead"),
    };
    format!(
        "queue `{key}`, position {position} ({behind}): {}",
        blocked.describe()
    )
}

/// An admission refused by the fence because a newer instance of the key
/// debounced this one meanwhile: why it was skipped.
async fn skipped_meanwhile(
    store: &Store,
    id: &crate::vocab::InstanceId,
    e: &store::StoreError,
) -> Option<String> {
    if !matches!(e, store::StoreError::Fenced { .. }) {
        return None;
    }
    let inst = store.instance(id).await.ok()?;
    (inst.status == InstanceStatus::Skipped)
        .then(|| inst.error.unwrap_or_else(|| "skipped by its queue".into()))
}
