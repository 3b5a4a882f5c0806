//! `/metrics`' reads on PostgreSQL (`store/metrics.rs`): the totals of
//! migration 14 and the deltas not folded into them yet, read together in
//! one statement each; the fold that moves deltas into totals; workers'
//! heartbeats, stamped by the server's clock.

use super::history::get;
use super::{Op, PgStore};
use crate::store::Result;
use crate::store::metrics::{BucketRow, CountRow, FORGET_WORKER_MS, MetricsRows};

/// The fold's advisory lock (tried, never waited for), one per schema.
macro_rules! fold_lock {
    () => {
        "pg_try_advisory_xact_lock(hashtextextended(current_schema() || ':metrics fold', 0))"
    };
}

/// Moves every committed delta into the totals, in one statement (so in
/// one transaction, which a lost reply makes safe to send again: a second
/// fold moves what is left). Queue rows that were zero before it, and that
/// it does not touch, are deleted (a key's series ends with its work). It
/// takes an advisory lock of its own (tried, never waited for: a fold that
/// finds another under way leaves the deltas to it, and two folds never
/// lock the same totals in opposite orders).
const FOLD: &str = concat!(
    "WITH lock AS (SELECT ",
    fold_lock!(),
    " AS got), \
     d AS (DELETE FROM metric_deltas WHERE (SELECT got FROM lock) \
           RETURNING metric, workflow, label, bucket, n, seconds), \
     c AS (INSERT INTO metric_counts (metric, workflow, label, n) \
           SELECT metric, workflow, label, sum(n) FROM d WHERE bucket IS NULL GROUP BY 1, 2, 3 \
           ON CONFLICT (metric, workflow, label) DO UPDATE SET n = metric_counts.n + excluded.n \
           RETURNING 1), \
     h AS (INSERT INTO metric_ends (metric, workflow, outcome, bucket, count, sum) \
           SELECT metric, workflow, label, bucket, sum(n), sum(seconds) FROM d WHERE bucket IS NOT NULL \
           GROUP BY 1, 2, 3, 4 \
           ON CONFLICT (metric, workflow, outcome, bucket) DO UPDATE SET count = metric_ends.count + excluded.count, \
           sum = metric_ends.sum + excluded.sum RETURNING 1), \
     z AS (DELETE FROM metric_counts m WHERE (SELECT got FROM lock) \
           AND m.metric IN ('queue_admitted', 'queue_depth') AND m.n = 0 \
           AND NOT EXISTS (SELECT 1 FROM d WHERE d.metric = m.metric AND d.workflow = m.workflow \
                           AND d.label = m.label) RETURNING 1) \
     SELECT (SELECT got FROM lock), (SELECT count(*) FROM d), pg_relation_size('metric_deltas')"
);

/// The size of the deltas' table past which a fold empties it with
/// `TRUNCATE`: deleted rows stay in its pages until a vacuum, and a vacuum
/// leaves the emptied pages, which every fold reads (after a prune of a
/// million instances, 363 MB: 64 ms a scrape).
const COMPACT_BYTES: i64 = 8 << 20;

/// The fold's advisory lock, taken first by [`PgStore::compact_metrics`]:
/// the same lock as [`FOLD`]'s, which then goes on in the transaction that
/// holds it (one expression for both: a compaction that took another lock
/// would truncate deltas a fold had not moved).
const FOLD_LOCK: &str = concat!("SELECT ", fold_lock!());

/// The totals and the deltas not folded yet, in one statement each: one
/// snapshot, which holds every change committed before it, folded or not
/// (a fold commits all or nothing). So a scrape shows at least what any
/// scrape before it showed, whichever server answered it and whether a
/// fold was under way: the counters never go down. (Reading the totals
/// alone after a fold of one's own would miss a delta that another
/// server's scrape, unable to fold meanwhile, had counted.)
const COUNTS_AND_DELTAS: &str = "SELECT metric, workflow, label, n FROM metric_counts \
     UNION ALL SELECT metric, workflow, label, sum(n)::bigint FROM metric_deltas \
     WHERE bucket IS NULL GROUP BY 1, 2, 3";
const ENDS_AND_DELTAS: &str = "SELECT metric, workflow, outcome, bucket, count, sum FROM metric_ends \
     UNION ALL SELECT metric, workflow, label, bucket, sum(n)::bigint, sum(seconds) FROM metric_deltas \
     WHERE bucket IS NOT NULL GROUP BY 1, 2, 3, 4";

/// A row of `metric, workflow, label, n`.
fn count_row(r: &tokio_postgres::Row) -> Result<CountRow> {
    Ok(CountRow {
        metric: get(r, 0)?,
        workflow: get(r, 1)?,
        label: get(r, 2)?,
        n: get(r, 3)?,
    })
}

impl PgStore {
    /// Folds the deltas into the totals, unless another fold is under way.
    pub(crate) async fn fold_metrics(&self) -> Result<()> {
        let rows = self.query(FOLD, &[]).await?;
        let Some(r) = rows.first() else {
            return Ok(());
        };
        let bytes: i64 = get(r, 2)?;
        if bytes > COMPACT_BYTES {
            self.compact_metrics().await;
        }
        Ok(())
    }

    /// Empties the deltas' table to no pages: holding the fold's lock (no
    /// other fold deletes meanwhile) and the table's (no commit adds a
    /// delta meanwhile: commits wait at most `lock_timeout`, 100 ms, for
    /// it, once after a bulk change), it folds every delta, then truncates.
    /// Best effort: when either lock is not had, a later fold tries again.
    async fn compact_metrics(&self) {
        let locked = self
            .pipeline(vec![Op::Simple("BEGIN"), Op::Query(FOLD_LOCK, vec![])])
            .await
            .ok()
            .and_then(|outs| outs.into_iter().nth(1))
            .and_then(|out| {
                out.rows()
                    .first()
                    .and_then(|r| r.try_get::<_, bool>(0).ok())
            })
            .unwrap_or(false);
        let done = locked
            && self
                .pipeline(vec![
                    Op::Simple("SET LOCAL lock_timeout = '100ms'"),
                    Op::Simple("LOCK TABLE metric_deltas IN ACCESS EXCLUSIVE MODE"),
                    Op::Query(FOLD, vec![]),
                    Op::Simple("TRUNCATE metric_deltas"),
                    Op::Simple("COMMIT"),
                ])
                .await
                .is_ok();
        if !done {
            let _ = self.pipeline(vec![Op::Simple("ROLLBACK")]).await;
        }
    }

    /// The totals and the deltas not folded yet of the instances' counts,
    /// in one statement, folding nothing.
    pub async fn kept_instance_counts(&self) -> Result<MetricsRows> {
        let counts = self
            .query(
                "SELECT metric, workflow, label, n FROM metric_counts \
                 WHERE metric IN ('instances', 'roots') \
                 UNION ALL SELECT metric, workflow, label, sum(n)::bigint FROM metric_deltas \
                 WHERE bucket IS NULL AND metric IN ('instances', 'roots') GROUP BY 1, 2, 3",
                &[],
            )
            .await?
            .iter()
            .map(count_row)
            .collect::<Result<Vec<_>>>()?;
        Ok(MetricsRows::of(counts, Vec::new(), Vec::new()))
    }

    pub async fn metrics(&self) -> Result<MetricsRows> {
        // Folded first, so that the deltas each read adds up stay few.
        self.fold_metrics().await?;
        let counts = self
            .query(COUNTS_AND_DELTAS, &[])
            .await?
            .iter()
            .map(count_row)
            .collect::<Result<Vec<_>>>()?;
        let buckets = self
            .query(ENDS_AND_DELTAS, &[])
            .await?
            .iter()
            .map(|r| {
                Ok(BucketRow {
                    metric: get(r, 0)?,
                    workflow: get(r, 1)?,
                    outcome: get(r, 2)?,
                    bucket: i64::from(get::<i32>(r, 3)?),
                    count: get(r, 4)?,
                    sum: get(r, 5)?,
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
        self.fold_metrics().await?;
        Ok(())
    }

    pub async fn worker_gone(&self, name: &str) -> Result<()> {
        self.exec("DELETE FROM workers WHERE name = $1", &[&name])
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bulk of deltas past [`COMPACT_BYTES`] (a prune of many instances)
    /// is folded whole, every one counted once, and the table is left with
    /// no pages; the counts stay right across the folds before and after.
    #[test]
    fn a_bulk_of_deltas_is_folded_whole_and_its_table_emptied() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let Some(store) = PgStore::for_test("wf_metrics_compact").await else {
                eprintln!("PostgreSQL only (WF_TEST_PG): not run");
                return;
            };
            let bulk = "INSERT INTO metric_deltas (metric, workflow, label, bucket, n, seconds) \
                        SELECT 'attempts', 'w', 'ok', 0, 1, 0.001 FROM generate_series(1, 200000)";
            store.exec(bulk, &[]).await.expect("bulk");
            let size = "SELECT pg_relation_size('metric_deltas')";
            let bytes: i64 =
                get(&store.query(size, &[]).await.expect("size")[0], 0).expect("bytes");
            assert!(bytes > COMPACT_BYTES, "{bytes}");
            let m = store.metrics().await.expect("metrics");
            assert_eq!(m.attempts, vec![("w".into(), "ok".into(), 200_000)]);
            let bytes: i64 =
                get(&store.query(size, &[]).await.expect("size")[0], 0).expect("bytes");
            assert_eq!(bytes, 0, "truncated");
            store
                .exec(
                    "INSERT INTO metric_deltas (metric, workflow, label, bucket, n, seconds) \
                     VALUES ('attempts', 'w', 'ok', 0, 2, 0.002)",
                    &[],
                )
                .await
                .expect("one more");
            let m = store.metrics().await.expect("metrics");
            assert_eq!(m.attempts, vec![("w".into(), "ok".into(), 200_002)]);
        });
    }
}
