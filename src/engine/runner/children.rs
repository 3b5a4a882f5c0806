//! Children of `workflow:` steps run in the parent's process, concurrently
//! with its other steps: each is driven as `wf resume CHILD` would drive it
//! (its own connection, its own lease, its own run), as a future the
//! parent's loop polls. Whoever ends a child delivers its end to the parent
//! in the child's last commit, so the parent learns of it by its events
//! whether the child ran here or elsewhere: one that another process holds
//! (a worker that claimed it first) is left to it, and one that already
//! ended is not run again.

use super::{EngineError, InstanceId, Observer, RunOptions};
use crate::store::{Location, Store};
use futures_util::future::LocalBoxFuture;
use futures_util::stream::{FuturesUnordered, StreamExt as _};
use std::time::Duration;

/// What a child run in this process reports: nothing (its step hears of
/// its end through the parent's events). Its lines are not printed: the
/// parent's are.
struct Quiet;

impl Observer for Quiet {}

static QUIET: Quiet = Quiet;

/// The children running in this process; each reports, when its run
/// ended, why it could not run, if it could not.
pub(super) struct InProcess {
    location: Location,
    running: FuturesUnordered<LocalBoxFuture<'static, Option<String>>>,
}

impl InProcess {
    pub(super) fn new(location: Location) -> InProcess {
        InProcess {
            location,
            running: FuturesUnordered::new(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// Starts driving child `id` (with the parent's inline wait).
    pub(super) fn start(&mut self, id: InstanceId, inline_wait: Duration) {
        let location = self.location.clone();
        self.running.push(Box::pin(async move {
            let opts = RunOptions {
                inline_wait,
                ..RunOptions::default()
            };
            let ran = match Store::open(&location).await {
                Ok(mut store) => crate::engine::drive::drive(&mut store, &id, opts, &QUIET)
                    .await
                    .map(|_| ()),
                Err(e) => Err(EngineError::from(e)),
            };
            match ran {
                // Held elsewhere or ended already: its end reaches the
                // parent all the same. Anything else leaves it for `wf
                // resume CHILD` or a worker, and is said.
                Ok(()) | Err(EngineError::Held { .. } | EngineError::NotResumable(_)) => None,
                Err(e) => Some(format!(
                    "child instance {id} could not run here: {e}; the step waits for it (`wf resume {id}`)"
                )),
            }
        }));
    }

    /// Resolves when a child's run ended (with why it could not run, if it
    /// could not); never while none runs.
    pub(super) async fn next_ended(&mut self) -> Option<String> {
        match self.running.next().await {
            Some(said) => said,
            None => std::future::pending().await,
        }
    }

    /// Waits for every child running here; what they could not do.
    pub(super) async fn finish(&mut self) -> Vec<String> {
        let mut said = Vec::new();
        while let Some(s) = self.running.next().await {
            said.extend(s);
        }
        said
    }
}
