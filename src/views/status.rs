//! An instance's status as `wf` shows it, in tables and in JSON.

use crate::store::InstanceRow;
use crate::vocab::{InstanceStatus, Timestamp};
use std::fmt;

/// An instance's status as shown: the stored one, except that a `running`
/// instance whose runner is gone (its lease expired, or its holder was a
/// process of this host that died) is `interrupted`, which `wf resume` or a
/// worker continues. Serializes as its word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShownStatus {
    Stored(InstanceStatus),
    Interrupted,
}

impl ShownStatus {
    /// `inst`'s status now.
    pub fn of(inst: &InstanceRow) -> ShownStatus {
        ShownStatus::at(inst, Timestamp::now().ms())
    }

    /// `inst`'s status at `now_ms` (unix ms): a lease that expires later
    /// keeps it `running` while its holder lives.
    pub fn at(inst: &InstanceRow, now_ms: i64) -> ShownStatus {
        if crate::engine::lease::interrupted(inst, now_ms) {
            return ShownStatus::Interrupted;
        }
        ShownStatus::Stored(inst.status)
    }

    /// The word shown.
    pub const fn as_str(self) -> &'static str {
        match self {
            ShownStatus::Stored(s) => s.as_str(),
            ShownStatus::Interrupted => "interrupted",
        }
    }
}

impl fmt::Display for ShownStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for ShownStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}
