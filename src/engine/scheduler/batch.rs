//! The scheduler's boundary with its driver: the batch of writes the run
//! decided since its last commit, which the driver adds its own to (spans,
//! the run's end, a child's opening) and takes to commit, and what the
//! driver may ask of the run's state. The fields stay private to the
//! scheduler; this is all the driver sees of them.

use super::{Scheduler, Stop};
use crate::store::{InstanceRow, Write};
use crate::vocab::InstanceId;

impl Scheduler {
    /// Adds a write the driver made (a span, a child's first decisions,
    /// the run's end) to the coming commit.
    pub fn push_write(&mut self, w: Write) {
        self.writes.push(w);
    }

    pub fn extend_writes(&mut self, ws: impl IntoIterator<Item = Write>) {
        self.writes.extend(ws);
    }

    /// The batch to commit, taken: the scheduler starts a new one.
    pub fn take_writes(&mut self) -> Vec<Write> {
        std::mem::take(&mut self.writes)
    }

    /// The batch so far, not committed yet.
    pub fn batch(&self) -> &[Write] {
        &self.writes
    }

    /// The writes decided since the run's opening, not committed yet.
    pub fn decided(&self) -> &[Write] {
        &self.writes[self.opening.min(self.writes.len())..]
    }

    /// The run's opening writes went in with a commit: a later error no
    /// longer keeps them.
    pub fn opening_committed(&mut self) {
        self.opening = 0;
    }

    /// Makes child `id`, which the coming commit creates, leased to
    /// `owner` until `expires_ms` (the driver's clock), so that its run
    /// starts without a takeover of its own: its row as leased. None when
    /// this batch does not create it, or it has a queue (admitted as it is
    /// first driven).
    pub fn lease_child(
        &mut self,
        id: &InstanceId,
        owner: &str,
        expires_ms: i64,
    ) -> Option<InstanceRow> {
        let row = self.writes.iter_mut().find_map(|w| match w {
            Write::CreateChild(row) if row.id == *id && row.queue.is_none() => Some(row),
            _ => None,
        })?;
        row.lease_owner = Some(owner.to_string());
        row.lease_expires_ms = Some(expires_ms);
        Some((**row).clone())
    }

    /// How many units have ended and are done (a run's replayed work).
    pub fn units_done(&self) -> usize {
        self.records.values().filter(|r| r.status.is_done()).count()
    }

    /// Whether any unit's attempt is in flight.
    pub fn has_running(&self) -> bool {
        !self.running.is_empty()
    }

    /// Why running steps are being stopped, if they are.
    pub fn stopped(&self) -> Option<Stop> {
        self.stop
    }

    /// Cancel without compensations (`wf cancel --terminate`).
    pub fn set_terminate(&mut self, terminate: bool) {
        self.terminate = terminate;
    }
}
