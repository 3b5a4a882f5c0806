//! The store's schedule interface (`wf schedule`, and the worker that
//! starts scheduled instances), over both backends.

use super::rows::{DefinitionRow, Fire, FireRecord, InstanceId, ScheduleRow};
use super::{Result, Store};

impl Store {
    /// Replaces the registered entries of `workflow` with `rows` (none:
    /// removes them), pinning the definition they run, in one transaction,
    /// if its entries are still `read` (what `rows` was made from): false,
    /// with nothing written, when a worker fired one of them (or another
    /// registration replaced them) since. A worker's fire does the same
    /// compare-and-set, so neither undoes the other.
    pub async fn register_schedules(
        &mut self,
        workflow: &str,
        rows: &[ScheduleRow],
        defs: &[DefinitionRow],
        read: &[ScheduleRow],
    ) -> Result<bool> {
        each!(self.register_schedules(workflow, rows, defs, read))
    }

    /// Removes the entries of `workflow`, recording `action` if there
    /// were any; how many there were.
    pub async fn remove_schedules(
        &mut self,
        workflow: &str,
        action: Option<&super::ActionRow>,
    ) -> Result<u64> {
        each!(self.remove_schedules(workflow, action))
    }

    /// Every registered entry, by workflow and position.
    pub async fn schedules(&self) -> Result<Vec<ScheduleRow>> {
        each!(self.schedules())
    }

    /// Applies a worker's decision for one entry (new instances, the moved
    /// cursor, a cancel) if the entry is still where it was read: for each
    /// of `fire.starts`, whether it started an instance (a fire time that
    /// already started one, in an earlier life of the entry, starts none:
    /// it is skipped, never an error). `None`, with nothing written, if
    /// another worker got there first.
    pub async fn fire_schedule(&mut self, fire: &Fire) -> Result<Option<Vec<bool>>> {
        each!(self.fire_schedule(fire))
    }

    /// The schedule entry and fire time that started instance `id`.
    pub async fn instance_fire(&self, id: &InstanceId) -> Result<Option<FireRecord>> {
        each!(self.instance_fire(id))
    }
}
