//! `wf prune` on PostgreSQL: ended instances and everything that belongs to
//! them, a bounded batch per transaction; rows another transaction holds
//! are skipped (`SKIP LOCKED`) and taken by a later batch or prune.

use super::{Op, Out, PgStore};
use crate::store::portable::Archive;
use crate::store::{Pruned, Result};

/// The next batch of ended instances (`$1` the statuses asked for) last
/// changed before `$2`, `$3` at most, locked, skipping those another
/// prune holds. In no order, as on SQLite: `ORDER BY updated_at` sorted
/// every remaining match for each batch, which made a prune of N instances
/// read N²/batch rows.
pub(super) const PRUNE_BATCH: &str = "SELECT id FROM instances WHERE status = ANY($1) \
     AND status IN ('completed', 'failed', 'canceled') AND updated_at < $2 \
     LIMIT $3 FOR UPDATE SKIP LOCKED";

/// Deletes the definitions nothing pins any more, as SQLite's prune does:
/// pinned by an instance, a schedule, a registered workflow, or (down the
/// tree) by the `children` of a pinned definition.
const UNPINNED_DEFINITIONS: &str = "WITH RECURSIVE pinned(hash) AS ( \
       SELECT definition_hash FROM instances \
       UNION SELECT definition_hash FROM schedules \
       UNION SELECT definition_hash FROM workflows \
       UNION SELECT child.value FROM pinned JOIN definitions d ON d.hash = pinned.hash \
             CROSS JOIN LATERAL json_each_text(COALESCE(d.children, '{}')::json) AS child \
     ) DELETE FROM definitions WHERE hash NOT IN (SELECT hash FROM pinned)";

impl PgStore {
    pub async fn prune(
        &self,
        before: &str,
        statuses: &[String],
        batch: usize,
        dry_run: bool,
        mut archive: Option<&mut dyn Archive>,
        by: &crate::vocab::Actor,
    ) -> Result<Pruned> {
        let words = statuses.join(",");
        let statuses = statuses.to_vec();
        if dry_run {
            let rows = self
                .query(
                    "WITH chosen AS (SELECT id, seq FROM instances WHERE status = ANY($1) \
                     AND status IN ('completed', 'failed', 'canceled') AND updated_at < $2) \
                     SELECT (SELECT count(*) FROM chosen), \
                     (SELECT count(*) FROM runs WHERE instance_id IN (SELECT id FROM chosen)), \
                     (SELECT count(*) FROM steps WHERE instance_id IN (SELECT id FROM chosen)), \
                     (SELECT count(*) FROM attempts WHERE instance_id IN (SELECT id FROM chosen)), \
                     (SELECT count(*) FROM spans WHERE instance_seq IN (SELECT seq FROM chosen)), \
                     (SELECT count(*) FROM events WHERE instance_id IN (SELECT id FROM chosen))",
                    &[&statuses, &before],
                )
                .await?;
            let get = |i: usize| -> u64 {
                rows.first()
                    .and_then(|r| r.try_get::<_, i64>(i).ok())
                    .unwrap_or(0) as u64
            };
            return Ok(Pruned {
                instances: get(0),
                runs: get(1),
                steps: get(2),
                attempts: get(3),
                spans: get(4),
                events: get(5),
            });
        }
        let mut total = Pruned::default();
        loop {
            let outs = self
                .pipeline(vec![
                    Op::Simple("BEGIN"),
                    Op::Query(
                        PRUNE_BATCH,
                        vec![
                            Box::new(statuses.clone()),
                            Box::new(before.to_string()),
                            Box::new(batch as i64),
                        ],
                    ),
                ])
                .await?;
            let ids: Vec<String> = outs
                .into_iter()
                .nth(1)
                .map(Out::rows)
                .unwrap_or_default()
                .iter()
                .filter_map(|r| r.try_get(0).ok())
                .collect();
            if ids.is_empty() {
                self.pipeline(vec![Op::Simple("COMMIT")]).await?;
                break;
            }
            // Archived first, durably, in the transaction that deletes them.
            if let Some(a) = archive.as_deref_mut() {
                let kept = match self.rows_of(ids.clone()).await {
                    Ok(mut rows) => match self.pinned_definitions(&ids).await {
                        Ok(definitions) => {
                            rows.explicit_commit_spans("postgresql");
                            a.keep(&rows, &definitions)
                        }
                        Err(e) => Err(e),
                    },
                    Err(e) => Err(e),
                };
                if let Err(e) = kept {
                    let _ = self.pipeline(vec![Op::Simple("ROLLBACK")]).await;
                    return Err(e);
                }
            }
            let delete = |sql: &'static str| Op::Exec(sql, vec![Box::new(ids.clone())]);
            let outs = self
                .pipeline(vec![
                    delete("DELETE FROM events WHERE instance_id = ANY($1)"),
                    delete(
                        "DELETE FROM spans WHERE instance_seq IN \
                         (SELECT seq FROM instances WHERE id = ANY($1))",
                    ),
                    delete("DELETE FROM attempts WHERE instance_id = ANY($1)"),
                    delete("DELETE FROM steps WHERE instance_id = ANY($1)"),
                    delete("DELETE FROM runs WHERE instance_id = ANY($1)"),
                    delete("DELETE FROM instances WHERE id = ANY($1)"),
                    delete("DELETE FROM schedule_fires WHERE instance_id = ANY($1)"),
                    delete("DELETE FROM actions WHERE instance_id = ANY($1)"),
                    super::actions::insert_action(&crate::store::actions::pruned(
                        by,
                        ids.len() as u64,
                        before,
                        &words,
                    )),
                    Op::Exec(UNPINNED_DEFINITIONS, vec![]),
                    Op::Simple("COMMIT"),
                ])
                .await;
            let outs = match outs {
                Ok(o) => o,
                Err(e) => {
                    let _ = self.pipeline(vec![Op::Simple("ROLLBACK")]).await;
                    return Err(e);
                }
            };
            total.add(&Pruned {
                events: outs[0].count(),
                spans: outs[1].count(),
                attempts: outs[2].count(),
                steps: outs[3].count(),
                runs: outs[4].count(),
                instances: outs[5].count(),
            });
        }
        // The `cache:` entries past their `ttl` (the others outlive the
        // instances they came from).
        self.pipeline(vec![Op::Exec(
            "DELETE FROM step_cache WHERE expires_ms <= $1",
            vec![Box::new(crate::vocab::Timestamp::now().ms())],
        )])
        .await?;
        // What it deleted lowered gauges by deltas: fold them now rather
        // than leave them all to the next scrape.
        self.fold_metrics().await?;
        Ok(total)
    }
}
