//! `wf prune --json`.

use crate::store::Pruned;

/// What was deleted (or, with `--dry-run`, would be): `{instances, runs,
/// steps, attempts, spans, events, dry_run}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PruneView {
    pub instances: u64,
    pub runs: u64,
    pub steps: u64,
    pub attempts: u64,
    pub spans: u64,
    pub events: u64,
    /// Counted only; nothing was deleted.
    pub dry_run: bool,
}

impl PruneView {
    pub fn new(pruned: &Pruned, dry_run: bool) -> PruneView {
        PruneView {
            instances: pruned.instances,
            runs: pruned.runs,
            steps: pruned.steps,
            attempts: pruned.attempts,
            spans: pruned.spans,
            events: pruned.events,
            dry_run,
        }
    }
}
