//! `wf list`'s statements, built once for both backends: only the filters
//! given are in them (`(?1 IS NULL OR status = ?1)` cannot use an index,
//! so a status that matched nothing walked every instance), each a
//! condition with its values, so each filter comes off its index. What
//! differs between SQLite and PostgreSQL is only the dialect: how a value
//! is written (`?n`, `$n`), how a label is read out of the JSON, which
//! column breaks ties, and where the limit goes. Each backend binds the
//! [`Param`]s with its own driver's types (`sqlite/list.rs`, `pg/list.rs`).

use super::rows::{Lineage, ListFilter};
use crate::vocab::{InstanceId, InstanceStatus, Timestamp};

/// The SQL a backend speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// A value a filter compares with, borrowed from the filter.
#[derive(Debug, Clone, Copy)]
pub enum Param<'a> {
    Status(&'a InstanceStatus),
    Text(&'a String),
    Time(&'a Timestamp),
    Id(&'a InstanceId),
}

/// One filter given: its condition, with `#` where each value goes.
struct Given<'a> {
    cond: String,
    /// Whether the condition reads `instances_by_parent` (or the cursor),
    /// which SQLite must keep to when a parent is given.
    indexed_by_parent: bool,
    params: Vec<Param<'a>>,
}

impl Dialect {
    /// The column that orders instances created in the same millisecond.
    fn tiebreak(self) -> &'static str {
        match self {
            Dialect::Sqlite => "rowid",
            Dialect::Postgres => "seq",
        }
    }

    /// Value number `n` (from 1).
    fn placeholder(self, n: usize) -> String {
        match self {
            Dialect::Sqlite => format!("?{n}"),
            Dialect::Postgres => format!("${n}"),
        }
    }

    /// A label's value (its name a `#`) compared with a `#`.
    fn label(self) -> &'static str {
        // Names are letters, digits, `_`, `.` and `-`: safe in a quoted key.
        match self {
            Dialect::Sqlite => "json_extract(labels, '$.\"' || # || '\"') = #",
            Dialect::Postgres => "(labels::jsonb ->> #) = #",
        }
    }

    /// The filters of `f`, in the statements' order.
    fn given(self, f: &ListFilter) -> Vec<Given<'_>> {
        fn one<'a>(cond: &str, p: Param<'a>) -> Given<'a> {
            Given {
                cond: cond.to_string(),
                indexed_by_parent: false,
                params: vec![p],
            }
        }
        let mut given = Vec::new();
        if let Some(status) = &f.status {
            given.push(one("status = #", Param::Status(status)));
        }
        if let Some(workflow) = &f.workflow {
            given.push(one("workflow = #", Param::Text(workflow)));
        }
        if let Some(since) = &f.since {
            given.push(one("created_at >= #", Param::Time(since)));
        }
        if let Lineage::ChildrenOf(parent) = &f.lineage {
            given.push(Given {
                indexed_by_parent: true,
                ..one("parent_id = #", Param::Id(parent))
            });
        }
        if let Some(key) = &f.queue {
            given.push(one("queue_key = #", Param::Text(key)));
        }
        if let Some(p) = &f.id_prefix {
            given.push(one("id >= #", Param::Text(&p.from)));
            if let Some(to) = &p.to {
                given.push(one("id < #", Param::Text(to)));
            }
        }
        if let Some(w) = &f.error_words {
            given.push(match self {
                Dialect::Sqlite => one(
                    "id IN (SELECT instance_id FROM instance_error_ids WHERE n IN \
                     (SELECT rowid FROM instance_errors WHERE instance_errors MATCH #))",
                    Param::Text(&w.fts5),
                ),
                // The expression of `instances_by_error_words`, as written
                // there, or the index is not used.
                Dialect::Postgres => one(
                    "error IS NOT NULL AND to_tsvector('simple', error) @@ to_tsquery('simple', #)",
                    Param::Text(&w.tsquery),
                ),
            });
        }
        for (name, value) in &f.labels {
            given.push(Given {
                cond: self.label().to_string(),
                indexed_by_parent: false,
                params: vec![Param::Text(name), Param::Text(value)],
            });
        }
        if let Some(after) = &f.after {
            let t = self.tiebreak();
            given.push(Given {
                indexed_by_parent: true,
                ..one(
                    &format!(
                        "(created_at, {t}) < (SELECT created_at, {t} FROM instances WHERE id = #)"
                    ),
                    Param::Id(after),
                )
            });
        }
        given
    }

    /// `" AND …"` for each filter of `f`, its values numbered from
    /// `first`; the number after the last. With a parent given on SQLite,
    /// its children come off `instances_by_parent` and are sorted (a few
    /// thousand at most): the other conditions are marked `+` (no index),
    /// or SQLite, to spare the sort, walks every instance of a status (or
    /// workflow, or since a time) newest first until it met LIMIT
    /// children. PostgreSQL's planner weighs that itself.
    fn conditions(self, f: &ListFilter, first: usize) -> (String, usize) {
        let by_parent = matches!(f.lineage, Lineage::ChildrenOf(_));
        let mut sql = String::new();
        let mut n = first;
        for g in self.given(f) {
            sql.push_str(" AND ");
            if self == Dialect::Sqlite && by_parent && !g.indexed_by_parent {
                sql.push('+');
            }
            for (i, part) in g.cond.split('#').enumerate() {
                if i > 0 {
                    sql.push_str(&self.placeholder(n));
                    n += 1;
                }
                sql.push_str(part);
            }
        }
        if f.lineage == Lineage::Roots {
            sql.push_str(" AND parent_id IS NULL");
        }
        (sql, n)
    }

    /// The values of `f`'s filters, in the statements' order.
    pub fn params(self, f: &ListFilter) -> Vec<Param<'_>> {
        self.given(f).into_iter().flat_map(|g| g.params).collect()
    }

    /// `wf list`'s query selecting `columns`, newest first. Its values:
    /// on SQLite [`Dialect::params`] then the limit (`-1`: none); on
    /// PostgreSQL the limit (`NULL`: none) then [`Dialect::params`].
    pub fn list(self, f: &ListFilter, columns: &str) -> String {
        let t = self.tiebreak();
        let (first, limit) = match self {
            Dialect::Sqlite => (1, None),
            Dialect::Postgres => (2, Some(1)),
        };
        let (conditions, next) = self.conditions(f, first);
        let limit = self.placeholder(limit.unwrap_or(next));
        format!(
            "SELECT {columns} FROM instances WHERE true{conditions} \
             ORDER BY created_at DESC, {t} DESC LIMIT {limit}"
        )
    }

    /// How many instances of each status in [`InstanceStatus::ALL`]
    /// `f`'s filters match (its status and limit aside), each counted up
    /// to `cap`: one row a status, `(status, n)`, in one statement whose
    /// values are [`Dialect::params`] of `f` without its status. Each
    /// count walks at most `cap` matches (of the status's index, for the
    /// filters it can serve), so a view of a million instances costs what
    /// one of `cap` does.
    pub fn count_by_status(self, f: &ListFilter, cap: u64) -> String {
        let (conditions, _) = self.conditions(f, 1);
        InstanceStatus::ALL
            .iter()
            .map(|s| {
                format!(
                    "SELECT '{s}', (SELECT count(*) FROM (SELECT 1 FROM instances \
                     WHERE status = '{s}'{conditions} LIMIT {cap}) AS m)",
                    s = s.as_str()
                )
            })
            .collect::<Vec<_>>()
            .join(" UNION ALL ")
    }

    /// How many instances `f`'s filters match, the limit aside; its values
    /// are [`Dialect::params`].
    pub fn count(self, f: &ListFilter) -> String {
        let (conditions, _) = self.conditions(f, 1);
        format!("SELECT count(*) FROM instances WHERE true{conditions}")
    }
}

#[cfg(test)]
mod tests {
    //! The statements as each backend used to spell them by hand.

    use super::*;

    fn filter() -> ListFilter {
        ListFilter {
            status: Some(InstanceStatus::Failed),
            labels: vec![("team".into(), "a".into())],
            lineage: Lineage::ChildrenOf(InstanceId::from("p")),
            after: Some(InstanceId::from("c")),
            limit: Some(5),
            ..ListFilter::default()
        }
    }

    #[test]
    fn sqlite_numbers_the_values_first_and_keeps_to_the_parent_index() {
        let sql = Dialect::Sqlite.list(&filter(), "id");
        assert_eq!(
            sql,
            "SELECT id FROM instances WHERE true AND +status = ?1 AND parent_id = ?2 \
             AND +json_extract(labels, '$.\"' || ?3 || '\"') = ?4 \
             AND (created_at, rowid) < (SELECT created_at, rowid FROM instances WHERE id = ?5) \
             ORDER BY created_at DESC, rowid DESC LIMIT ?6"
        );
        assert_eq!(Dialect::Sqlite.params(&filter()).len(), 5);
    }

    #[test]
    fn postgres_puts_the_limit_first() {
        let sql = Dialect::Postgres.list(&filter(), "id");
        assert_eq!(
            sql,
            "SELECT id FROM instances WHERE true AND status = $2 AND parent_id = $3 \
             AND (labels::jsonb ->> $4) = $5 \
             AND (created_at, seq) < (SELECT created_at, seq FROM instances WHERE id = $6) \
             ORDER BY created_at DESC, seq DESC LIMIT $1"
        );
        assert_eq!(
            Dialect::Postgres.count(&ListFilter {
                lineage: Lineage::Roots,
                ..ListFilter::default()
            }),
            "SELECT count(*) FROM instances WHERE true AND parent_id IS NULL"
        );
    }
}
