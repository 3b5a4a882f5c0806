//! `wf list`'s statements on SQLite: only the filters given are in them
//! (each a condition with its values), so each filter comes off its index.

use super::history::{INSTANCE_SUMMARY_COLS, instance_from_row};
use crate::store::Result;
use crate::store::rows::InstanceRow;
use crate::store::rows::{Lineage, ListFilter};
use rusqlite::Connection;

/// The filters of `f`, in the statements' order: each one's condition,
/// with a `#` where each of its values goes, and those values.
fn given(f: &ListFilter) -> Vec<(&'static str, Vec<&dyn rusqlite::ToSql>)> {
    let mut given: Vec<(&'static str, Vec<&dyn rusqlite::ToSql>)> = Vec::new();
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
    // Names are letters, digits, `_`, `.` and `-`: safe in a quoted key.
    for (name, value) in &f.labels {
        given.push((
            "json_extract(labels, '$.\"' || # || '\"') = #",
            vec![name, value],
        ));
    }
    if let Some(after) = &f.after {
        given.push((
            "(created_at, rowid) < (SELECT created_at, rowid FROM instances WHERE id = #)",
            vec![after],
        ));
    }
    given
}

/// The values of the filters of `f`, in [`given`]'s order.
fn given_values(f: &ListFilter) -> Vec<&dyn rusqlite::ToSql> {
    given(f).into_iter().flat_map(|(_, v)| v).collect()
}

/// `" AND …"` for each filter of `f`, the values numbered from ?1 in the
/// order of [`given`]; how many values they take. With a parent given,
/// its children come off `instances_by_parent` and are sorted (a few
/// thousand at most): the other conditions are marked `+` (no index), or
/// SQLite, to spare the sort, walks every instance of a status (or
/// workflow, or since a time) newest first until it met LIMIT children.
fn conditions(f: &ListFilter) -> (String, usize) {
    let by_parent = matches!(f.lineage, Lineage::ChildrenOf(_));
    let mut sql = String::new();
    let mut n = 0;
    for (cond, _) in given(f) {
        let plus = if by_parent && !cond.starts_with("parent_id") && !cond.starts_with('(') {
            "+"
        } else {
            ""
        };
        sql.push_str(" AND ");
        sql.push_str(plus);
        for (i, part) in cond.split('#').enumerate() {
            if i > 0 {
                n += 1;
                sql.push_str(&format!("?{n}"));
            }
            sql.push_str(part);
        }
    }
    if f.lineage == Lineage::Roots {
        sql.push_str(" AND parent_id IS NULL");
    }
    (sql, n)
}

/// `wf list`'s query: the values of the filters given (?1, ?2, … as
/// [`given`] orders them), then the limit. Only the filters given are in
/// it: `(?1 IS NULL OR status = ?1)` cannot use an index, so a status or
/// workflow that matched nothing walked every instance. With `status = ?1`
/// the newest matching rows come off `instances_by_status_created`
/// (`instances_by_workflow_created`) in order; a parent's children come off
/// `instances_by_parent`.
pub(super) fn list_sql(f: &ListFilter) -> String {
    let (conditions, n) = conditions(f);
    format!(
        "SELECT {INSTANCE_SUMMARY_COLS} FROM instances WHERE true{conditions} \
         ORDER BY created_at DESC, rowid DESC LIMIT ?{}",
        n + 1
    )
}

pub(super) fn list_instances(c: &Connection, f: &ListFilter) -> Result<Vec<InstanceRow>> {
    let mut stmt = c.prepare_cached(&list_sql(f))?;
    let limit = f.limit.map_or(-1, |n| n.min(i64::MAX as usize) as i64);
    let mut values = given_values(f);
    values.push(&limit);
    let rows = stmt.query_map(values.as_slice(), instance_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// How many instances the filters of `f` match (its limit aside).
pub(super) fn count_instances(c: &Connection, f: &ListFilter) -> Result<u64> {
    let (conditions, _) = conditions(f);
    let values = given_values(f);
    let n: i64 = c
        .prepare_cached(&format!(
            "SELECT count(*) FROM instances WHERE true{conditions}"
        ))?
        .query_row(values.as_slice(), |r| r.get(0))?;
    Ok(n.max(0) as u64)
}
