//! `wf list`'s statements on PostgreSQL, built by `store::list_sql` as
//! SQLite's are (only the filters given are in them), their parameters
//! bound with tokio-postgres's types.

use super::history::{SUMMARY_COLS, get, instance_row};
use super::{PgStore, Text};
use crate::store::Result;
use crate::store::list_sql::{Dialect, Drive, Param};
use crate::store::{InstanceRow, ListFilter};
use crate::vocab::{InstanceId, InstanceStatus};
use tokio_postgres::types::ToSql;

/// A parameter of a statement, borrowed.
type Arg<'a> = &'a (dyn ToSql + Sync);

/// The parameters of `f`'s filters, in the statements' order (after the
/// limit, in [`list_sql`]'s).
pub(super) fn filter_params(f: &ListFilter) -> Vec<Arg<'_>> {
    Dialect::Postgres
        .params(f)
        .into_iter()
        .map(|p| -> Arg<'_> {
            match p {
                Param::Status(s) => s,
                Param::Text(t) => t,
                Param::Time(t) => t,
                Param::Id(i) => i,
            }
        })
        .collect()
}

/// `wf list`'s statement: `status = $2` reads the newest matching rows off
/// `instances_by_status_created`, `parent_id = $2` a parent's children off
/// `instances_by_parent`. `$1` is the limit, then the parameters of
/// [`filter_params`].
pub(super) fn list_sql(f: &ListFilter, drive: Drive) -> String {
    Dialect::Postgres.list(f, SUMMARY_COLS, drive)
}

/// How many matches of an error's words past which the planner is left to
/// walk the newest instances (as SQLite's `FEW_MATCHES`).
const FEW_MATCHES: i64 = 5_000;

impl PgStore {
    /// How `f`'s listing is read: with an error's words, their matches are
    /// counted off their index (up to [`FEW_MATCHES`]) and, when fewer,
    /// sorted rather than met walking the newest instances.
    async fn drive(&self, f: &ListFilter) -> Result<Drive> {
        let Some(w) = &f.error_words else {
            return Ok(Drive::Auto);
        };
        let rows = self
            .query(
                "SELECT count(*) FROM (SELECT 1 FROM instances WHERE error IS NOT NULL \
                 AND to_tsvector('simple', error) @@ to_tsquery('simple', $1) LIMIT $2) AS m",
                &[&w.tsquery, &FEW_MATCHES],
            )
            .await?;
        let n: i64 = match rows.first() {
            Some(r) => get(r, 0)?,
            None => 0,
        };
        Ok(if n < FEW_MATCHES {
            Drive::Matches
        } else {
            Drive::Auto
        })
    }

    /// Only the filters given are in the statement (`list_sql`).
    pub async fn list_instances(&self, f: &ListFilter) -> Result<Vec<InstanceRow>> {
        let sql = list_sql(f, self.drive(f).await?);
        let limit = f.limit.map(|n| n.min(i64::MAX as usize) as i64);
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&limit];
        params.extend(filter_params(f));
        let rows = self.query(Text::Built(&sql), &params).await?;
        rows.iter().map(instance_row).collect()
    }

    pub async fn count_instances(&self, f: &ListFilter) -> Result<u64> {
        let params = filter_params(f);
        let rows = self
            .query(Text::Built(&Dialect::Postgres.count(f)), &params)
            .await?;
        let n: i64 = match rows.first() {
            Some(r) => get(r, 0)?,
            None => 0,
        };
        Ok(n.max(0) as u64)
    }

    /// How many instances of each status the filters of `f` match (its
    /// status and limit aside), each counted up to `cap`.
    pub async fn count_by_status(
        &self,
        f: &ListFilter,
        cap: u64,
    ) -> Result<Vec<(InstanceStatus, u64)>> {
        let f = ListFilter {
            status: None,
            ..f.clone()
        };
        let sql = Dialect::Postgres.count_by_status(&f, cap);
        let rows = self.query(Text::Built(&sql), &filter_params(&f)).await?;
        rows.iter()
            .map(|r| {
                let s: InstanceStatus = get(r, 0)?;
                let n: i64 = get(r, 1)?;
                Ok((s, n.max(0) as u64))
            })
            .collect()
    }

    /// How many children each of `parents` has (those with none left out).
    pub async fn children_counts(&self, parents: &[InstanceId]) -> Result<Vec<(InstanceId, u64)>> {
        if parents.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<&str> = parents.iter().map(InstanceId::as_str).collect();
        let rows = self
            .query(
                "SELECT parent_id, count(*) FROM instances WHERE parent_id = ANY($1) GROUP BY parent_id",
                &[&ids],
            )
            .await?;
        rows.iter()
            .map(|r| {
                let p: String = get(r, 0)?;
                let n: i64 = get(r, 1)?;
                Ok((InstanceId::from(p), n.max(0) as u64))
            })
            .collect()
    }
}
