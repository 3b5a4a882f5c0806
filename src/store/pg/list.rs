//! `wf list`'s statements on PostgreSQL, as SQLite's (`sqlite/list.rs`):
//! only the filters given are in them, each a condition with its
//! parameters, so each filter comes off its index.

use super::PgStore;
use super::history::{get, instance_row};
use crate::store::Result;
use crate::store::rows::{InstanceRow, Lineage, ListFilter};
use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};
use tokio_postgres::types::ToSql;

/// A parameter of a statement, borrowed.
type Arg<'a> = &'a (dyn ToSql + Sync);

/// The filters of `f`, in the statements' order: each one's condition,
/// with a `#` where each of its parameters goes, and those parameters.
fn given(f: &ListFilter) -> Vec<(&'static str, Vec<Arg<'_>>)> {
    let mut given: Vec<(&'static str, Vec<Arg<'_>>)> = Vec::new();
    if let Some(status) = &f.status {
        given.push(("status = #", vec![status]));
    }
    if let Some(workflow) = &f.workflow {
        given.push(("workflow = #", vec![workflow]));
    }
    if let Some(since) = &f.since {
        given.push(("created_at >= #", vec![since]));
    }
    if let Lineage::ChildrenOf(parent) = &f.lineage {
        given.push(("parent_id = #", vec![parent]));
    }
    if let Some(key) = &f.queue {
        given.push(("queue_key = #", vec![key]));
    }
    for (name, value) in &f.labels {
        given.push(("(labels::jsonb ->> #) = #", vec![name, value]));
    }
    if let Some(after) = &f.after {
        given.push((
            "(created_at, seq) < (SELECT created_at, seq FROM instances WHERE id = #)",
            vec![after],
        ));
    }
    given
}

/// The parameters of the filters given, in the statements' order (after
/// the limit, in `list_sql`'s).
pub(super) fn filter_params(f: &ListFilter) -> Vec<Arg<'_>> {
    given(f).into_iter().flat_map(|(_, v)| v).collect()
}

/// `" AND …"` for each filter of `f`, its parameters numbered from `$first`.
fn conditions(f: &ListFilter, first: usize) -> String {
    let mut sql = String::new();
    let mut n = first;
    for (cond, _) in given(f) {
        sql.push_str(" AND ");
        for (i, part) in cond.split('#').enumerate() {
            if i > 0 {
                sql.push_str(&format!("${n}"));
                n += 1;
            }
            sql.push_str(part);
        }
    }
    if f.lineage == Lineage::Roots {
        sql.push_str(" AND parent_id IS NULL");
    }
    sql
}

/// `sql` as the `&'static str` [`PgStore::query`] takes (its cache of
/// prepared statements is keyed by the text's address): each distinct text
/// is leaked once and the same address handed out after. `wf list`'s
/// statements are made from the filters given, so there are at most 48 of
/// them (status, workflow and since each there or not, times three
/// lineages, for the list and the count) for each number of `--label`s,
/// whatever the values (those are parameters): the leak is bounded. Spelling out every combination as a
/// literal, as before, stopped being readable at 24 of each.
fn interned(sql: String) -> &'static str {
    static TEXTS: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    // A panic elsewhere while holding it leaves a set that is still whole.
    let mut texts = TEXTS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(text) = texts.get(sql.as_str()) {
        return text;
    }
    let text: &'static str = Box::leak(sql.into_boxed_str());
    texts.insert(text);
    text
}

/// `wf list`'s statement: only the filters given are in it.
/// `($2 IS NULL OR status = $2)` cannot use an index in a generic plan,
/// while `status = $2` reads the newest matching rows off
/// `instances_by_status_created`, `parent_id = $2` a parent's children off
/// `instances_by_parent` (as on SQLite, `sqlite::list::list_sql`). `$1` is the
/// limit, then the parameters of [`filter_params`].
pub(super) fn list_sql(f: &ListFilter) -> &'static str {
    interned(format!(
        "SELECT id, workflow, status, '', definition_hash, \
         workflow_path, base_dir, inputs, state, error, wake_at, waiting_event, lease_owner, {}, \
         created_at, updated_at, parent_id, parent_key, parent_attempt, depth, labels, {} \
         FROM instances WHERE true{} ORDER BY created_at DESC, seq DESC LIMIT $1",
        lease_left!(),
        queue_cols!(),
        conditions(f, 2)
    ))
}

/// `list_sql`'s count: how many instances its filters match, the limit
/// aside; the parameters of [`filter_params`] from `$1`.
pub(super) fn count_sql(f: &ListFilter) -> &'static str {
    interned(format!(
        "SELECT count(*) FROM instances WHERE true{}",
        conditions(f, 1)
    ))
}

impl PgStore {
    /// Only the filters given are in the statement (`list_sql`).
    pub async fn list_instances(&self, f: &ListFilter) -> Result<Vec<InstanceRow>> {
        let sql = list_sql(f);
        let limit = f.limit.map(|n| n.min(i64::MAX as usize) as i64);
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&limit];
        params.extend(filter_params(f));
        let rows = self.query(sql, &params).await?;
        rows.iter().map(instance_row).collect()
    }

    pub async fn count_instances(&self, f: &ListFilter) -> Result<u64> {
        let params = filter_params(f);
        let rows = self.query(count_sql(f), &params).await?;
        let n: i64 = match rows.first() {
            Some(r) => get(r, 0)?,
            None => 0,
        };
        Ok(n.max(0) as u64)
    }
}
