//! `/metrics`' reads on SQLite (`store/metrics.rs`): the counts the
//! triggers of migration 17 keep (`metric_counts`, `metric_ends`), and
//! workers' heartbeats.

use super::SqliteStore;
use crate::store::Result;
use crate::store::metrics::{BucketRow, CountRow, FORGET_WORKER_MS, MetricsRows};
use rusqlite::params;

/// A row of `metric, workflow, label, n`.
fn count_row(r: &rusqlite::Row) -> rusqlite::Result<CountRow> {
    Ok(CountRow {
        metric: r.get(0)?,
        workflow: r.get(1)?,
        label: r.get(2)?,
        n: r.get(3)?,
    })
}

impl SqliteStore {
    pub fn kept_instance_counts(&self) -> Result<MetricsRows> {
        let counts = self
            .conn
            .prepare_cached(
                "SELECT metric, workflow, label, n FROM metric_counts \
                 WHERE metric IN ('instances', 'roots')",
            )?
            .query_map([], count_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(MetricsRows::of(counts, Vec::new(), Vec::new()))
    }

    pub fn metrics(&self) -> Result<MetricsRows> {
        let c = &self.conn;
        let counts = c
            .prepare_cached("SELECT metric, workflow, label, n FROM metric_counts")?
            .query_map([], count_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let buckets = c
            .prepare_cached(
                "SELECT metric, workflow, outcome, bucket, count, sum FROM metric_ends",
            )?
            .query_map([], |r| {
                Ok(BucketRow {
                    metric: r.get(0)?,
                    workflow: r.get(1)?,
                    outcome: r.get(2)?,
                    bucket: r.get(3)?,
                    count: r.get(4)?,
                    sum: r.get(5)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let workers = c
            .prepare_cached("SELECT name, heartbeat_ms FROM workers ORDER BY name")?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(MetricsRows::of(counts, buckets, workers))
    }

    pub fn heartbeat(&self, name: &str, started_ms: i64) -> Result<()> {
        let now = chrono::Utc::now().timestamp_millis();
        self.conn
            .prepare_cached(
                "INSERT INTO workers (name, started_ms, heartbeat_ms) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (name) DO UPDATE SET heartbeat_ms = excluded.heartbeat_ms, \
                 started_ms = excluded.started_ms",
            )?
            .execute(params![name, started_ms, now])?;
        self.conn
            .prepare_cached("DELETE FROM workers WHERE heartbeat_ms < ?1")?
            .execute([now - FORGET_WORKER_MS])?;
        Ok(())
    }

    pub fn worker_gone(&self, name: &str) -> Result<()> {
        self.conn
            .prepare_cached("DELETE FROM workers WHERE name = ?1")?
            .execute([name])?;
        Ok(())
    }
}
