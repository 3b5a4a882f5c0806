//! `cache:` entries on PostgreSQL, as on SQLite (`sqlite/cache.rs`); they
//! are written with the batch that records their attempt (`write.rs`).

use super::PgStore;
use super::history::get;
use crate::store::{CacheEntry, CachedFrom, Result};
use crate::vocab::Timestamp;
use serde_json::Value;

const CACHE_ENTRY: &str = "SELECT instance_id, unit_key, attempt, output, state_patch, created_at, expires_ms \
     FROM step_cache WHERE workflow=$1 AND step_id=$2 AND cache_key=$3 AND part=$4 \
     AND (expires_ms IS NULL OR expires_ms > $5)";

impl PgStore {
    /// The entry of a `cache:` step's key not expired at `now`.
    pub async fn cache_entry(
        &self,
        (workflow, step_id, key, part): (&str, &str, &str, &str),
        now: Timestamp,
    ) -> Result<Option<CacheEntry>> {
        let rows = self
            .query(CACHE_ENTRY, &[&workflow, &step_id, &key, &part, &now.ms()])
            .await?;
        let Some(r) = rows.first() else {
            return Ok(None);
        };
        let json = |s: Option<String>| {
            s.and_then(|s| serde_json::from_str(&s).ok())
                .unwrap_or(Value::Null)
        };
        Ok(Some(CacheEntry {
            workflow: workflow.into(),
            step_id: step_id.into(),
            key: key.into(),
            part: part.into(),
            from: CachedFrom {
                instance: get::<String>(r, 0)?.into(),
                attempt: get(r, 2)?,
            },
            unit_key: get(r, 1)?,
            output: json(get(r, 3)?),
            state_patch: json(get(r, 4)?),
            created_at: get(r, 5)?,
            expires_at: get::<Option<i64>>(r, 6)?.map(Timestamp::from_ms),
        }))
    }
}
