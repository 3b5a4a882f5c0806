//! When the process group of a started attempt is recorded (docs/execution.md: the
//! next runner on this host ends what a crashed attempt left running).
//!
//! A group is recorded once its attempt has run [`RECORD_AFTER`], not as it
//! starts. An attempt that ends sooner (most shell steps: a `/bin/true` step
//! takes about a millisecond) never needs the record: its end is committed,
//! and nothing of it runs. Until the record is written, a runner that takes
//! the instance over finds the attempt's processes as it finds those of an
//! attempt whose runner died before recording anything: by the variables
//! they were given (`WF_INSTANCE_ID`, `WF_STEP_ID`, `WF_ATTEMPT`), whose
//! groups it ends (`procs::unrecorded`); and the step's direct child dies
//! with its runner (its parent-death signal). The record cost a write per
//! step: on PostgreSQL a statement, ~50 µs of a `/bin/true` step's wall time
//! and ~140 µs of CPU (wf's and the server's) while the step's process
//! needed it (`bench/pg.py`).

use super::Runner;
use crate::engine::EngineError;
use crate::store::{ProcessTag, RunStore, Write};
use crate::vocab::UnitKeyBuf;
use std::time::{Duration, Instant};

/// How long an attempt runs before its process group is recorded.
pub(super) const RECORD_AFTER: Duration = Duration::from_millis(20);

/// A started attempt's process group, not recorded yet.
pub(super) struct PendingGroup {
    key: UnitKeyBuf,
    attempt: i64,
    tag: ProcessTag,
    started: Instant,
}

impl Runner<'_> {
    /// Notes the group of an attempt that just started, to record once it
    /// has run `RECORD_AFTER`.
    /// The lease's watch kills it if the lease lapses and it outlives the
    /// run's stop (`lapse`).
    pub(super) fn group_started(&mut self, key: UnitKeyBuf, attempt: i64, tag: ProcessTag) {
        if let Ok(pgid) = i32::try_from(tag.pgid) {
            self.lost.watch().group_started(pgid);
            self.live_groups.insert((key.clone(), attempt), pgid);
        }
        self.started_groups.push(PendingGroup {
            key,
            attempt,
            tag,
            started: Instant::now(),
        });
    }

    /// An attempt ended: its group, if not recorded yet, never will be.
    pub(super) fn group_ended(&mut self, key: &str, attempt: i64) {
        self.started_groups
            .retain(|g| !(g.key == key && g.attempt == attempt));
        if let Some(pgid) = self.live_groups.remove(&(UnitKeyBuf::new(key), attempt)) {
            self.lost.watch().group_ended(pgid);
        }
    }

    /// How long until the next group is due to be recorded, if any waits.
    pub(super) fn next_group_due(&self) -> Option<Duration> {
        self.started_groups
            .iter()
            .map(|g| RECORD_AFTER.saturating_sub(g.started.elapsed()))
            .min()
    }

    /// Records the groups of attempts that have run `RECORD_AFTER`, in one
    /// transaction that is not fsynced: a process group does not outlive
    /// the machine.
    pub(super) async fn record_groups(
        &mut self,
        store: &mut impl RunStore,
    ) -> Result<(), EngineError> {
        if !self
            .started_groups
            .iter()
            .any(|g| g.started.elapsed() >= RECORD_AFTER)
        {
            return Ok(());
        }
        let (due, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.started_groups)
            .into_iter()
            .partition(|g| g.started.elapsed() >= RECORD_AFTER);
        self.started_groups = waiting;
        let writes: Vec<Write> = due
            .into_iter()
            .map(|g| Write::AttemptProcess {
                key: g.key,
                attempt: g.attempt,
                tag: g.tag,
            })
            .collect();
        store.commit_unsynced(&self.fence, &writes).await?;
        Ok(())
    }
}
