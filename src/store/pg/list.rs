//! `wf list`'s statements on PostgreSQL, built by `store::list_sql` as
//! SQLite's are (only the filters given are in them), their parameters
//! bound with tokio-postgres's types.

use super::history::{SUMMARY_COLS, get, instance_row};
use super::{PgStore, Text};
use crate::store::Result;
use crate::store::list_sql::{Dialect, Param};
use crate::store::rows::{InstanceRow, ListFilter};
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
pub(super) fn list_sql(f: &ListFilter) -> String {
    Dialect::Postgres.list(f, SUMMARY_COLS)
}

impl PgStore {
    /// Only the filters given are in the statement (`list_sql`).
    pub async fn list_instances(&self, f: &ListFilter) -> Result<Vec<InstanceRow>> {
        let sql = list_sql(f);
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
}
