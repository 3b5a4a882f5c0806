//! `wf list`'s statements on SQLite, built by `store::list_sql` (only the
//! filters given are in them), their values bound with rusqlite's types.

use super::history::{INSTANCE_SUMMARY_COLS, instance_from_row};
use crate::store::Result;
use crate::store::list_sql::{Dialect, Drive, Param};
use crate::store::{InstanceRow, ListFilter};
use crate::vocab::{InstanceId, InstanceStatus};
use rusqlite::{Connection, ToSql};

/// The values of `f`'s filters, in the statements' order.
fn values(f: &ListFilter) -> Vec<&dyn ToSql> {
    Dialect::Sqlite
        .params(f)
        .into_iter()
        .map(|p| -> &dyn ToSql {
            match p {
                Param::Status(s) => s,
                Param::Text(t) => t,
                Param::Time(t) => t,
                Param::Id(i) => i,
            }
        })
        .collect()
}

/// How many matches of an id prefix or an error's words past which a
/// listing walks the newest instances, checking each, rather than sorting
/// the matches: at this share of a history or more, a page's worth is met
/// within the newest few thousand instances; below it, sorting them costs
/// less than walking a history they are scarce in (154 ms for words no
/// instance of a million has; `bench/inspector.py`).
const FEW_MATCHES: i64 = 5_000;

/// How `f`'s listing is read ([`Drive`]): as SQLite picks, unless it has an
/// id prefix or an error's words, whose matches are counted (up to
/// [`FEW_MATCHES`]) to choose between sorting them and walking the newest
/// instances.
fn drive(c: &Connection, f: &ListFilter) -> Result<Drive> {
    let mut few = false;
    if let Some(w) = &f.error_words {
        let n: i64 = c
            .prepare_cached(
                "SELECT count(*) FROM (SELECT 1 FROM instance_errors \
                 WHERE instance_errors MATCH ?1 LIMIT ?2)",
            )?
            .query_row(rusqlite::params![w.fts5, FEW_MATCHES], |r| r.get(0))?;
        few |= n < FEW_MATCHES;
    }
    if let Some(p) = &f.id_prefix {
        use rusqlite::types::Value as Sql;
        let to = p.to.clone().map_or(Sql::Blob(Vec::new()), Sql::Text);
        let n: i64 = c
            .prepare_cached(
                "SELECT count(*) FROM (SELECT 1 FROM instances WHERE id >= ?1 AND id < ?2 LIMIT ?3)",
            )?
            .query_row(rusqlite::params![p.from, to, FEW_MATCHES], |r| r.get(0))?;
        few |= n < FEW_MATCHES;
    }
    Ok(
        match (f.error_words.is_some() || f.id_prefix.is_some(), few) {
            (false, _) => Drive::Auto,
            (true, true) => Drive::Matches,
            (true, false) => Drive::Newest,
        },
    )
}

/// `wf list`'s query: with `status = ?1` the newest matching rows come off
/// `instances_by_status_created` (`instances_by_workflow_created`) in
/// order; a parent's children come off `instances_by_parent`.
pub(super) fn list_sql(f: &ListFilter, drive: Drive) -> String {
    Dialect::Sqlite.list(f, INSTANCE_SUMMARY_COLS, drive)
}

pub(super) fn list_instances(c: &Connection, f: &ListFilter) -> Result<Vec<InstanceRow>> {
    let mut stmt = c.prepare_cached(&list_sql(f, drive(c, f)?))?;
    let limit = f.limit.map_or(-1, |n| n.min(i64::MAX as usize) as i64);
    let mut values = values(f);
    values.push(&limit);
    let rows = stmt.query_map(values.as_slice(), instance_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// How many instances the filters of `f` match (its limit aside).
pub(super) fn count_instances(c: &Connection, f: &ListFilter) -> Result<u64> {
    let n: i64 = c
        .prepare_cached(&Dialect::Sqlite.count(f))?
        .query_row(values(f).as_slice(), |r| r.get(0))?;
    Ok(n.max(0) as u64)
}

/// How many instances of each status the filters of `f` match (its
/// status and limit aside), each counted up to `cap`.
pub(super) fn count_by_status(
    c: &Connection,
    f: &ListFilter,
    cap: u64,
) -> Result<Vec<(InstanceStatus, u64)>> {
    let f = ListFilter {
        status: None,
        ..f.clone()
    };
    let mut stmt = c.prepare_cached(&Dialect::Sqlite.count_by_status(&f, cap))?;
    let rows = stmt.query_map(values(&f).as_slice(), |r| {
        Ok((r.get::<_, InstanceStatus>(0)?, r.get::<_, i64>(1)?))
    })?;
    rows.map(|r| Ok(r.map(|(s, n)| (s, n.max(0) as u64))?))
        .collect()
}

/// How many children each of `parents` has (those with none left out).
pub(super) fn children_counts(
    c: &Connection,
    parents: &[InstanceId],
) -> Result<Vec<(InstanceId, u64)>> {
    if parents.is_empty() {
        return Ok(Vec::new());
    }
    let marks = (1..=parents.len())
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut stmt = c.prepare_cached(&format!(
        "SELECT parent_id, count(*) FROM instances WHERE parent_id IN ({marks}) GROUP BY parent_id"
    ))?;
    let values: Vec<&dyn ToSql> = parents.iter().map(|p| p as &dyn ToSql).collect();
    let rows = stmt.query_map(values.as_slice(), |r| {
        Ok((r.get::<_, InstanceId>(0)?, r.get::<_, i64>(1)?))
    })?;
    rows.map(|r| Ok(r.map(|(p, n)| (p, n.max(0) as u64))?))
        .collect()
}
