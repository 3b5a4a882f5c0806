//! `cache:` entries on SQLite: kept (replacing the one of their step and
//! key) in the commit that records their attempt, and found until they
//! expire.

use super::history::cached;
use crate::store::{CacheEntry, CachedFrom, Result};
use crate::vocab::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;

/// Keeps a `cache:` step's result, replacing the entry of its step and key.
pub(super) fn put_cache(c: &Connection, e: &CacheEntry) -> Result<()> {
    cached(
        c,
        "INSERT INTO step_cache (workflow, step_id, cache_key, part, instance_id, unit_key, attempt, \
         output, state_patch, created_at, expires_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
         ON CONFLICT (workflow, step_id, cache_key, part) DO UPDATE SET instance_id=excluded.instance_id, \
         unit_key=excluded.unit_key, attempt=excluded.attempt, output=excluded.output, \
         state_patch=excluded.state_patch, created_at=excluded.created_at, expires_ms=excluded.expires_ms",
        params![
            e.workflow,
            e.step_id,
            e.key,
            e.part,
            e.from.instance.as_str(),
            e.unit_key,
            e.from.attempt,
            e.output.to_string(),
            (!e.state_patch.is_null()).then(|| e.state_patch.to_string()),
            e.created_at,
            e.expires_at.map(Timestamp::ms),
        ],
    )?;
    Ok(())
}

/// The entry of a `cache:` step's key not expired at `now`, if any.
pub(super) fn cache_entry(
    c: &Connection,
    (workflow, step_id, key, part): (&str, &str, &str, &str),
    now: Timestamp,
) -> Result<Option<CacheEntry>> {
    Ok(c.query_row(
        "SELECT instance_id, unit_key, attempt, output, state_patch, created_at, expires_ms \
             FROM step_cache WHERE workflow=?1 AND step_id=?2 AND cache_key=?3 AND part=?4 \
             AND (expires_ms IS NULL OR expires_ms > ?5)",
        params![workflow, step_id, key, part, now.ms()],
        |r| {
            let output: String = r.get(3)?;
            let patch: Option<String> = r.get(4)?;
            Ok(CacheEntry {
                workflow: workflow.into(),
                step_id: step_id.into(),
                key: key.into(),
                part: part.into(),
                from: CachedFrom {
                    instance: r.get::<_, String>(0)?.into(),
                    attempt: r.get(2)?,
                },
                unit_key: r.get(1)?,
                output: serde_json::from_str(&output).unwrap_or(Value::Null),
                state_patch: patch
                    .and_then(|p| serde_json::from_str(&p).ok())
                    .unwrap_or(Value::Null),
                created_at: r.get(5)?,
                expires_at: r.get::<_, Option<i64>>(6)?.map(Timestamp::from_ms),
            })
        },
    )
    .optional()?)
}
