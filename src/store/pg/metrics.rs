//! `/metrics`' reads on PostgreSQL, as on SQLite (`store/sqlite/metrics.rs`);
//! a heartbeat is stamped by the server's clock.

use super::PgStore;
use super::history::get;
use crate::store::Result;
use crate::store::metrics::{BUCKETS, Histogram, MetricsRows, histogram_sql};
use std::sync::OnceLock;

fn histogram_statement(table: &str) -> &'static str {
    static ATTEMPTS: OnceLock<String> = OnceLock::new();
    static RUNS: OnceLock<String> = OnceLock::new();
    let cell = if table == "attempts" {
        &ATTEMPTS
    } else {
        &RUNS
    };
    cell.get_or_init(|| {
        histogram_sql(
            "d",
            &format!(
                "(SELECT extract(epoch from (finished_at::timestamptz - started_at::timestamptz))::float8 AS d \
                 FROM {table} WHERE finished_at IS NOT NULL) AS t"
            ),
            "::int",
        )
    })
}

impl PgStore {
    async fn histogram(&self, table: &str) -> Result<Histogram> {
        let rows = self.query(histogram_statement(table), &[]).await?;
        let Some(r) = rows.first() else {
            return Ok(Histogram::default());
        };
        let mut le = Vec::with_capacity(BUCKETS.len());
        for i in 0..BUCKETS.len() {
            le.push(get::<i64>(r, 2 + i)?.max(0) as u64);
        }
        Ok(Histogram {
            le,
            count: get::<i64>(r, 0)?.max(0) as u64,
            sum: get(r, 1)?,
        })
    }

    pub async fn metrics(&self) -> Result<MetricsRows> {
        let instances = self
            .query(
                "SELECT workflow, status, count(*) FROM instances GROUP BY workflow, status ORDER BY 1, 2",
                &[],
            )
            .await?
            .iter()
            .map(|r| Ok((get(r, 0)?, get(r, 1)?, get::<i64>(r, 2)?.max(0) as u64)))
            .collect::<Result<Vec<_>>>()?;
        let attempts = self
            .query(
                "SELECT outcome, count(*) FROM attempts WHERE outcome IS NOT NULL GROUP BY outcome ORDER BY 1",
                &[],
            )
            .await?
            .iter()
            .map(|r| Ok((get(r, 0)?, get::<i64>(r, 1)?.max(0) as u64)))
            .collect::<Result<Vec<_>>>()?;
        let workers = self
            .query("SELECT name, heartbeat_ms FROM workers ORDER BY name", &[])
            .await?
            .iter()
            .map(|r| Ok((get(r, 0)?, get(r, 1)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(MetricsRows {
            instances,
            attempts,
            attempt_seconds: self.histogram("attempts").await?,
            run_seconds: self.histogram("runs").await?,
            workers,
        })
    }

    pub async fn heartbeat(&self, name: &str, started_ms: i64) -> Result<()> {
        self.exec(
            concat!(
                "INSERT INTO workers (name, started_ms, heartbeat_ms) VALUES ($1, $2, ",
                server_ms!(),
                ") ON CONFLICT (name) DO UPDATE SET heartbeat_ms = excluded.heartbeat_ms, \
                 started_ms = excluded.started_ms"
            ),
            &[&name, &started_ms],
        )
        .await?;
        Ok(())
    }

    pub async fn worker_gone(&self, name: &str) -> Result<()> {
        self.exec("DELETE FROM workers WHERE name = $1", &[&name])
            .await?;
        Ok(())
    }
}
