//! What `cache:` keeps (issue 60): the results of completed attempts of
//! `cache:` steps (`step_cache`), and the attempt a `cached` one took its
//! result from (`attempts.cached_from`), as the store reads and writes them.

use super::{Result, Store};
use crate::vocab::{InstanceId, Timestamp};
use serde_json::Value;

impl Store {
    /// The entry a `cache:` step's attempt would take its result from:
    /// of `workflow`'s step `step_id` with the rendered `key` and the
    /// unit's `part`, not expired at `now`.
    pub async fn cache_entry(
        &self,
        at: (&str, &str, &str, &str),
        now: Timestamp,
    ) -> Result<Option<CacheEntry>> {
        each!(self.cache_entry(at, now))
    }
}

/// The attempt a `cached` one took its result from (stored `INSTANCE#N`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct CachedFrom {
    pub instance: InstanceId,
    pub attempt: i64,
}

impl CachedFrom {
    /// As the `attempts.cached_from` column holds it.
    pub fn text(&self) -> String {
        format!("{}#{}", self.instance, self.attempt)
    }

    /// Reads the column (None for a value no wf wrote).
    pub fn parse(text: &str) -> Option<CachedFrom> {
        let (id, n) = text.rsplit_once('#')?;
        Some(CachedFrom {
            instance: id.into(),
            attempt: n.parse().ok()?,
        })
    }
}

/// The result of a completed attempt of a `cache:` step, kept for the
/// next attempt of that step with the same key (`step_cache`).
#[derive(Debug, Clone, PartialEq)]
pub struct CacheEntry {
    pub workflow: String,
    pub step_id: String,
    /// The rendered `cache.key`.
    pub key: String,
    /// The unit's value: the SHA-256 of an item's or a combination's JSON,
    /// empty for a step's own unit.
    pub part: String,
    /// The attempt that made it.
    pub from: CachedFrom,
    pub unit_key: String,
    pub output: Value,
    /// Its `set_state` patch (Null: none).
    pub state_patch: Value,
    pub created_at: Timestamp,
    /// When it stops being found (None: never).
    pub expires_at: Option<Timestamp>,
}
