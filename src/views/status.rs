//! An instance's status as `wf` shows it, in tables and in JSON.

use crate::store::InstanceRow;
use crate::vocab::Timestamp;

pub use crate::vocab::ShownStatus;

/// Where a shown status is read: its rows and the clock, with the lease
/// rule of `engine::lease` (so the word itself can live in `vocab`).
impl ShownStatus {
    /// `inst`'s status now.
    pub fn of(inst: &InstanceRow) -> ShownStatus {
        ShownStatus::at(inst, Timestamp::now().ms())
    }

    /// `inst`'s status at `now_ms` (unix ms): a lease that expires later
    /// keeps it `running` while its holder lives.
    pub fn at(inst: &InstanceRow, now_ms: i64) -> ShownStatus {
        crate::engine::lease::shown(inst, now_ms)
    }
}
