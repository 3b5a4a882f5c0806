//! `/metrics`' reads on SQLite (`store/metrics.rs`), and workers'
//! heartbeats.

use super::SqliteStore;
use crate::store::Result;
use crate::store::metrics::{BUCKETS, Histogram, MetricsRows, histogram_sql};
use rusqlite::params;

/// Seconds between two of wf's timestamps (RFC 3339, UTC, ms).
const SECONDS: &str = "((julianday(finished_at) - julianday(started_at)) * 86400.0)";

fn histogram(c: &rusqlite::Connection, table: &str) -> Result<Histogram> {
    let sql = histogram_sql(
        "d",
        &format!("(SELECT {SECONDS} AS d FROM {table} WHERE finished_at IS NOT NULL)"),
        "",
    );
    Ok(c.query_row(&sql, [], |r| {
        let mut le = Vec::with_capacity(BUCKETS.len());
        for i in 0..BUCKETS.len() {
            le.push(r.get::<_, i64>(2 + i)?.max(0) as u64);
        }
        Ok(Histogram {
            le,
            count: r.get::<_, i64>(0)?.max(0) as u64,
            sum: r.get(1)?,
        })
    })?)
}

impl SqliteStore {
    pub fn metrics(&self) -> Result<MetricsRows> {
        let c = &self.conn;
        let instances = c
            .prepare_cached(
                "SELECT workflow, status, count(*) FROM instances GROUP BY workflow, status ORDER BY 1, 2",
            )?
            .query_map([], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)?.max(0) as u64))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let attempts = c
            .prepare_cached(
                "SELECT outcome, count(*) FROM attempts WHERE outcome IS NOT NULL GROUP BY outcome ORDER BY 1",
            )?
            .query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)?.max(0) as u64)))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let workers = c
            .prepare_cached("SELECT name, heartbeat_ms FROM workers ORDER BY name")?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(MetricsRows {
            instances,
            attempts,
            attempt_seconds: histogram(c, "attempts")?,
            run_seconds: histogram(c, "runs")?,
            workers,
        })
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
        Ok(())
    }

    pub fn worker_gone(&self, name: &str) -> Result<()> {
        self.conn
            .prepare_cached("DELETE FROM workers WHERE name = ?1")?
            .execute([name])?;
        Ok(())
    }
}
