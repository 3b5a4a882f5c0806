//! `wf prune --json`.

use crate::store::Pruned;

/// What was deleted (or, with `--dry-run`, would be): `{instances, runs,
/// steps, attempts, spans, events, dry_run}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PruneView {
    /// The rows, by table.
    #[serde(flatten)]
    pub pruned: Pruned,
    /// Counted only; nothing was deleted.
    pub dry_run: bool,
}

impl PruneView {
    pub fn new(pruned: &Pruned, dry_run: bool) -> PruneView {
        PruneView {
            pruned: *pruned,
            dry_run,
        }
    }
}
