//! How a run closes, decided here with the rest of the run: the status the
//! instance is left in (and when it wakes, what it waits for, why it
//! failed), the retries a failed or canceled run abandons, its parent's
//! event when a child ends, and the locks its units still hold. The
//! driver (`drive::close_run`) writes the run's root span and its end,
//! gives up the lease, and commits the batch.

use super::Scheduler;
use crate::engine::EngineError;
use crate::engine::runner::RunOutcome;
use crate::store::{ParentRef, Write};
use crate::vocab::{InstanceId, InstanceStatus, StepStatus, Timestamp, child_event};

/// What [`Scheduler::close`] decided beyond its writes.
#[derive(Debug, Clone, PartialEq)]
pub struct Closed {
    /// The instance's status as the run leaves it.
    pub status: InstanceStatus,
    /// The parent's event (name, payload text) when a child ended.
    pub parent_event: Option<(String, String)>,
}

impl Scheduler {
    /// Closes the run of instance `id` (a child of `parent`) that ended
    /// with `outcome`: decides and writes the instance's status, the
    /// parent's event in the same commit (whoever ends the child wakes the
    /// parent), and the release of the locks the run's units still hold.
    /// `idle`: stopped while it only waited for a timer or an event, so it
    /// stays sleeping or waiting, as it was.
    pub fn close(
        &mut self,
        id: &InstanceId,
        parent: Option<&ParentRef>,
        outcome: &RunOutcome,
        idle: bool,
        now: Timestamp,
    ) -> Result<Closed, EngineError> {
        match outcome {
            RunOutcome::Failed(_) => {
                self.abandon_retries(StepStatus::Failed, "the workflow failed", now);
            }
            RunOutcome::Canceled => {
                self.abandon_retries(StepStatus::Canceled, "the instance was canceled", now);
            }
            _ => {}
        }
        use InstanceStatus as S;
        let (status, wake_at, waiting_event, error) = match outcome {
            RunOutcome::Completed => (S::Completed, None, None, None),
            RunOutcome::Failed(reason) => (S::Failed, None, None, Some(reason.clone())),
            RunOutcome::Sleeping(wake) => (S::Sleeping, Some(*wake), None, None),
            RunOutcome::Waiting(event) => (S::Waiting, self.next_wake(), Some(event.clone()), None),
            RunOutcome::Canceled => (S::Canceled, None, None, None),
            RunOutcome::Interrupted if idle => match self.suspend_outcome(self.next_wake(), now) {
                RunOutcome::Waiting(event) => (S::Waiting, self.next_wake(), Some(event), None),
                RunOutcome::Sleeping(wake) => (S::Sleeping, Some(wake), None, None),
                _ => (S::Running, None, None, None),
            },
            // Left `running` without a lease: `wf list` shows it as
            // interrupted, `wf resume` continues it.
            RunOutcome::Interrupted => (S::Running, None, None, None),
            // (Decided before a run opens: `drive::admit`.)
            RunOutcome::Queued(_) => (S::Queued, None, None, None),
            RunOutcome::Skipped(why) => (S::Skipped, None, None, Some(why.clone())),
        };
        let mut parent_event = None;
        if let Some(parent) = parent
            && status.is_ended()
        {
            let outputs = self.writes.iter().rev().find_map(|w| match w {
                Write::Outputs(v) => Some(v.clone()),
                _ => None,
            });
            let end = super::ChildEndEvent {
                status,
                outputs,
                error: error.clone(),
            };
            let payload =
                serde_json::to_value(&end).map_err(|e| EngineError::Internal(e.to_string()))?;
            let name = child_event(id);
            parent_event = Some((name.clone(), payload.to_string()));
            self.writes.push(Write::NotifyParent {
                parent: parent.id.clone(),
                name,
                payload,
            });
        }
        self.release_locks();
        self.writes.push(Write::Status {
            status,
            wake_at,
            waiting_event,
            error,
        });
        Ok(Closed {
            status,
            parent_event,
        })
    }

    /// Closes a run that stopped on an error: what it decided and did not
    /// commit is dropped, as a failed transaction drops it (the run's
    /// opening aside), and the locks its units hold go with it.
    pub fn close_on_error(&mut self, keep: impl IntoIterator<Item = Write>) {
        self.writes.truncate(self.opening);
        self.writes.extend(keep);
        self.release_locks();
    }

    /// Whatever step locks the run's units took and did not give back (a
    /// lock taken for a unit that never started) go with the run.
    fn release_locks(&mut self) {
        if self.wf.has_locks() {
            self.writes.push(Write::ReleaseLocks);
        }
    }
}
