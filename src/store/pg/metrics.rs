//! `/metrics`' reads on PostgreSQL (`store/metrics.rs`): the totals of
//! migration 14 and the deltas not folded into them yet, read together in
//! one statement each; the fold that moves deltas into totals; workers'
//! heartbeats, stamped by the server's clock.

use super::PgStore;
use super::history::get;
use crate::store::Result;
use crate::store::metrics::{BucketRow, CountRow, FORGET_WORKER_MS, MetricsRows};

/// Moves every committed delta into the totals, in one statement (so in
/// one transaction, which a lost reply makes safe to send again: a second
/// fold moves what is left). Queue rows that were zero before it, and that
/// it does not touch, are deleted (a key's series ends with its work). It
/// takes an advisory lock of its own (tried, never waited for: a fold that
/// finds another under way leaves the deltas to it, and two folds never
/// lock the same totals in opposite orders).
const FOLD: &str = "WITH lock AS (SELECT pg_try_advisory_xact_lock(hashtextextended(current_schema() || ':metrics fold', 0)) AS got), \
     d AS (DELETE FROM metric_deltas WHERE (SELECT got FROM lock) \
           RETURNING metric, workflow, label, bucket, n, seconds), \
     c AS (INSERT INTO metric_counts (metric, workflow, label, n) \
           SELECT metric, workflow, label, sum(n) FROM d WHERE bucket IS NULL GROUP BY 1, 2, 3 \
           ON CONFLICT (metric, workflow, label) DO UPDATE SET n = metric_counts.n + excluded.n \
           RETURNING 1), \
     h AS (INSERT INTO metric_buckets (metric, workflow, bucket, count, sum) \
           SELECT metric, workflow, bucket, sum(n), sum(seconds) FROM d WHERE bucket IS NOT NULL \
           GROUP BY 1, 2, 3 \
           ON CONFLICT (metric, workflow, bucket) DO UPDATE SET count = metric_buckets.count + excluded.count, \
           sum = metric_buckets.sum + excluded.sum RETURNING 1), \
     z AS (DELETE FROM metric_counts m WHERE (SELECT got FROM lock) \
           AND m.metric IN ('queue_admitted', 'queue_depth') AND m.n = 0 \
           AND NOT EXISTS (SELECT 1 FROM d WHERE d.metric = m.metric AND d.workflow = m.workflow \
                           AND d.label = m.label) RETURNING 1) \
     SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM c), (SELECT count(*) FROM h), \
            (SELECT count(*) FROM z)";

impl PgStore {
    /// Folds the deltas into the totals, unless another fold is under way.
    pub(super) async fn fold_metrics(&self) -> Result<()> {
        self.query(FOLD, &[]).await?;
        Ok(())
    }

    pub async fn metrics(&self) -> Result<MetricsRows> {
        self.fold_metrics().await?;
        let counts = self
            .query(
                "SELECT metric, workflow, label, n FROM metric_counts \
                 UNION ALL SELECT metric, workflow, label, sum(n)::bigint FROM metric_deltas \
                 WHERE bucket IS NULL GROUP BY 1, 2, 3",
                &[],
            )
            .await?
            .iter()
            .map(|r| {
                Ok(CountRow {
                    metric: get(r, 0)?,
                    workflow: get(r, 1)?,
                    label: get(r, 2)?,
                    n: get(r, 3)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let buckets = self
            .query(
                "SELECT metric, workflow, bucket, count, sum FROM metric_buckets \
                 UNION ALL SELECT metric, workflow, bucket, sum(n)::bigint, sum(seconds) FROM metric_deltas \
                 WHERE bucket IS NOT NULL GROUP BY 1, 2, 3",
                &[],
            )
            .await?
            .iter()
            .map(|r| {
                Ok(BucketRow {
                    metric: get(r, 0)?,
                    workflow: get(r, 1)?,
                    bucket: i64::from(get::<i32>(r, 2)?),
                    count: get(r, 3)?,
                    sum: get(r, 4)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let workers = self
            .query("SELECT name, heartbeat_ms FROM workers ORDER BY name", &[])
            .await?
            .iter()
            .map(|r| Ok((get(r, 0)?, get(r, 1)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(MetricsRows::of(counts, buckets, workers))
    }

    /// A worker's heartbeat; it also folds the metrics' deltas, so that
    /// they stay few between scrapes (or with nobody scraping).
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
        self.exec(
            concat!(
                "DELETE FROM workers WHERE heartbeat_ms < ",
                server_ms!(),
                " - $1"
            ),
            &[&FORGET_WORKER_MS],
        )
        .await?;
        self.fold_metrics().await
    }

    pub async fn worker_gone(&self, name: &str) -> Result<()> {
        self.exec("DELETE FROM workers WHERE name = $1", &[&name])
            .await?;
        Ok(())
    }
}
