//! `wf prune` on SQLite: ended instances and everything that belongs to
//! them, deleted a bounded batch per transaction so that a runner waiting
//! for the write lock never waits long.

use super::SqliteStore;
use crate::store::portable::Archive;
use crate::store::{Pruned, Result};
use rusqlite::{Connection, params};

/// The instances a prune takes: ended, with a listed status, last changed
/// before the cutoff (`?1`: JSON list of statuses, `?2`: RFC 3339).
pub(super) const CHOSEN: &str = "SELECT id FROM instances WHERE status IN (SELECT value FROM json_each(?1)) \
     AND status IN ('completed', 'failed', 'canceled') AND updated_at < ?2";

/// One batch of what a prune takes (`?3`: the batch size).
pub(super) fn chosen_batch() -> String {
    format!("{CHOSEN} LIMIT ?3")
}

/// Deletes the definitions nothing pins any more. A definition is pinned
/// by an instance, a schedule or a registered workflow (`wf workflow add`),
/// and by every definition it pins in turn: a pinned definition's
/// `children` (the workflows its `workflow:` steps call) stay whole, down
/// the tree, for the children its instances have yet to make.
const UNPINNED_DEFINITIONS: &str = "WITH RECURSIVE pinned(hash) AS ( \
       SELECT definition_hash FROM instances \
       UNION SELECT definition_hash FROM schedules \
       UNION SELECT definition_hash FROM workflows \
       UNION SELECT child.value FROM pinned JOIN definitions d ON d.hash = pinned.hash, \
             json_each(d.children) AS child \
     ) DELETE FROM definitions WHERE hash NOT IN (SELECT hash FROM pinned)";

/// Rows of each table that belong to the instances `ids_sql` selects.
fn counts(c: &Connection, ids_sql: &str, p: impl rusqlite::Params + Copy) -> Result<Pruned> {
    let count = |table: &str, column: &str| -> Result<u64> {
        let n: i64 = c.query_row(
            &format!("SELECT count(*) FROM {table} WHERE {column} IN ({ids_sql})"),
            p,
            |r| r.get(0),
        )?;
        Ok(n as u64)
    };
    Ok(Pruned {
        instances: count("instances", "id")?,
        runs: count("runs", "instance_id")?,
        steps: count("steps", "instance_id")?,
        attempts: count("attempts", "instance_id")?,
        spans: count("spans", "instance_id")?,
        events: count("events", "instance_id")?,
    })
}

impl SqliteStore {
    pub fn prune(
        &mut self,
        before: &str,
        statuses: &[String],
        batch: usize,
        dry_run: bool,
        mut archive: Option<&mut dyn Archive>,
        by: &crate::vocab::Actor,
    ) -> Result<Pruned> {
        let words = statuses.join(",");
        let statuses = serde_json::to_string(statuses).unwrap_or_else(|_| "[]".into());
        if dry_run {
            return counts(&self.conn, CHOSEN, params![statuses, before]);
        }
        let mut total = Pruned::default();
        loop {
            let tx = self.write()?;
            let ids: Vec<String> = {
                let mut stmt = tx.prepare(&chosen_batch())?;
                stmt.query_map(params![statuses, before, batch as i64], |r| r.get(0))?
                    .collect::<Result<_, _>>()?
            };
            if ids.is_empty() {
                break;
            }
            let list = serde_json::to_string(&ids).unwrap_or_else(|_| "[]".into());
            // Archived first, durably, in the transaction that deletes them.
            if let Some(a) = archive.as_deref_mut() {
                let mut rows = super::portable::rows_of(&tx, ids.clone())?;
                rows.explicit_commit_spans("sqlite");
                let definitions = super::portable::pinned_definitions(&tx, &list)?;
                a.keep(&rows, &definitions)?;
            }
            let chosen = "SELECT value FROM json_each(?1)";
            let mut removed = Pruned::default();
            for (table, column, n) in [
                ("events", "instance_id", &mut removed.events),
                ("spans", "instance_id", &mut removed.spans),
                ("attempts", "instance_id", &mut removed.attempts),
                ("steps", "instance_id", &mut removed.steps),
                ("runs", "instance_id", &mut removed.runs),
                ("instances", "id", &mut removed.instances),
            ] {
                *n = tx.execute(
                    &format!("DELETE FROM {table} WHERE {column} IN ({chosen})"),
                    [&list],
                )? as u64;
            }
            tx.execute(
                &format!("DELETE FROM schedule_fires WHERE instance_id IN ({chosen})"),
                [&list],
            )?;
            tx.execute(
                &format!("DELETE FROM actions WHERE instance_id IN ({chosen})"),
                [&list],
            )?;
            super::actions::insert_action(
                &tx,
                &crate::store::actions::pruned(by, removed.instances, before, &words),
            )?;
            tx.execute(UNPINNED_DEFINITIONS, [])?;
            tx.commit()?;
            total.add(&removed);
        }
        // The `cache:` entries past their `ttl` (the others outlive the
        // instances they came from).
        let tx = self.write()?;
        tx.execute(
            "DELETE FROM step_cache WHERE expires_ms <= ?1",
            [crate::vocab::Timestamp::now().ms()],
        )?;
        tx.commit()?;
        Ok(total)
    }

    /// Rebuilds the file without the space deleted rows left, and folds the
    /// WAL back into it: what was pruned is gone from the disk too.
    pub fn vacuum(&mut self) -> Result<()> {
        self.conn
            .execute_batch("VACUUM; PRAGMA wal_checkpoint(TRUNCATE);")?;
        Ok(())
    }
}
