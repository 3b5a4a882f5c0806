//! `wf list`'s statements, built once for both backends: only the filters
//! given are in them (`(?1 IS NULL OR status = ?1)` cannot use an index,
//! so a status that matched nothing walked every instance), each a
//! condition with its values, so each filter comes off its index. What
//! differs between SQLite and PostgreSQL is only the dialect: how a value
//! is written (`?n`, `$n`), how a label is read out of the JSON, which
//! column breaks ties, and where the limit goes. Each backend binds the
//! [`Param`]s with its own driver's types (`sqlite/list.rs`, `pg/list.rs`).

use super::list_filter::{Lineage, ListFilter};
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
    kind: Kind,
    params: Vec<Param<'a>>,
}

/// What a condition reads, for SQLite's choice of an index
/// ([`Dialect::conditions`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The status.
    Status,
    /// `instances_by_parent`, or the cursor (kept whatever the index).
    Parent,
    /// An id prefix or an error's words: the few matches they name.
    Matches,
    Other,
}

/// Which way SQLite reads a listing's matches. PostgreSQL's planner, with
/// the statistics of each column, picks its own way, but for an error's
/// words, whose share it cannot tell (it walked 200,000 errors newest
/// first for words none of them held: 419 ms), and is told
/// [`Drive::Matches`] by an order its index cannot give.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Drive {
    /// SQLite's choice.
    #[default]
    Auto,
    /// From the matches an id prefix (the primary key's range) or an
    /// error's words (their index) name, then sorted: the other
    /// conditions and the order kept off their indexes. For a few
    /// thousand matches.
    Matches,
    /// Newest first off `instances_by_created`, each row checked against
    /// the prefix or the words: for words that many instances match, of
    /// which a page's worth is met early.
    Newest,
    /// The words' matches as they come off their index, joined to their
    /// instances (no order: for counting the first of them).
    Joined,
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
    fn given<'a>(self, f: &'a ListFilter, drive: Drive) -> Vec<Given<'a>> {
        fn one<'b>(cond: &str, p: Param<'b>) -> Given<'b> {
            Given {
                cond: cond.to_string(),
                kind: Kind::Other,
                params: vec![p],
            }
        }
        let mut given = Vec::new();
        if let Some(status) = &f.status {
            given.push(Given {
                kind: Kind::Status,
                ..one("status = #", Param::Status(status))
            });
        }
        if let Some(workflow) = &f.workflow {
            given.push(one("workflow = #", Param::Text(workflow)));
        }
        if let Some(since) = &f.since {
            given.push(one("created_at >= #", Param::Time(since)));
        }
        if let Lineage::ChildrenOf(parent) = &f.lineage {
            given.push(Given {
                kind: Kind::Parent,
                ..one("parent_id = #", Param::Id(parent))
            });
        }
        if let Some(key) = &f.queue {
            given.push(one("queue_key = #", Param::Text(key)));
        }
        let matches = |g: Given<'a>| Given {
            kind: Kind::Matches,
            ..g
        };
        if let Some(p) = &f.id_prefix {
            given.push(matches(one("id >= #", Param::Text(&p.from))));
            if let Some(to) = &p.to {
                given.push(matches(one("id < #", Param::Text(to))));
            }
        }
        if let Some(w) = &f.error_words {
            given.push(matches(match self {
                Dialect::Sqlite => one(
                    match drive {
                        Drive::Joined => "instance_errors MATCH #",
                        Drive::Newest => {
                            "EXISTS (SELECT 1 FROM instance_error_ids e \
                             WHERE e.instance_id = instances.id AND e.n IN \
                             (SELECT rowid FROM instance_errors WHERE instance_errors MATCH #))"
                        }
                        Drive::Auto | Drive::Matches => {
                            "id IN (SELECT instance_id FROM instance_error_ids WHERE n IN \
                             (SELECT rowid FROM instance_errors WHERE instance_errors MATCH #))"
                        }
                    },
                    Param::Text(&w.fts5),
                ),
                // The expression of `instances_by_error_words`, as written
                // there, or the index is not used.
                Dialect::Postgres => one(
                    "error IS NOT NULL AND to_tsvector('simple', error) @@ to_tsquery('simple', #)",
                    Param::Text(&w.tsquery),
                ),
            }));
        }
        for (name, value) in &f.labels {
            given.push(Given {
                cond: self.label().to_string(),
                kind: Kind::Other,
                params: vec![Param::Text(name), Param::Text(value)],
            });
        }
        if let Some(after) = &f.after {
            let t = self.tiebreak();
            given.push(Given {
                kind: Kind::Parent,
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
    /// `first`; the number after the last. SQLite, which keeps no numbers
    /// of each status or each workflow, is told which index to read by
    /// marking the conditions it must not read one for with `+`:
    /// - with a parent given, its children come off `instances_by_parent`
    ///   and are sorted (a few thousand at most); else SQLite, to spare
    ///   the sort, walks every instance of a status (or workflow, or since
    ///   a time) newest first until it met LIMIT children;
    /// - so with `running` asked for (the instances being run: a few, one
    ///   per runner), off `instances_by_status_created`; else SQLite walks
    ///   a workflow's every instance (90 ms at 400,000;
    ///   `bench/inspector.py`);
    /// - and as `drive` says for an id prefix or an error's words.
    ///
    /// PostgreSQL's planner weighs all that itself.
    fn conditions(self, f: &ListFilter, first: usize, drive: Drive) -> (String, usize) {
        let by_parent = matches!(f.lineage, Lineage::ChildrenOf(_));
        let by_status = !by_parent && f.status == Some(InstanceStatus::Running);
        let mut sql = String::new();
        let mut n = first;
        for g in self.given(f, drive) {
            sql.push_str(" AND ");
            let off_index = match g.kind {
                Kind::Parent => false,
                _ if by_parent => true,
                Kind::Status if by_status => false,
                _ if by_status => true,
                Kind::Matches => drive == Drive::Newest,
                Kind::Status | Kind::Other => matches!(drive, Drive::Matches | Drive::Joined),
            };
            if self == Dialect::Sqlite && off_index {
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
        self.given(f, Drive::Auto)
            .into_iter()
            .flat_map(|g| g.params)
            .collect()
    }

    /// `wf list`'s query selecting `columns`, newest first, read as
    /// `drive` says. Its values:
    /// on SQLite [`Dialect::params`] then the limit (`-1`: none); on
    /// PostgreSQL the limit (`NULL`: none) then [`Dialect::params`].
    pub fn list(self, f: &ListFilter, columns: &str, drive: Drive) -> String {
        let t = self.tiebreak();
        let (first, limit) = match self {
            Dialect::Sqlite => (1, None),
            Dialect::Postgres => (2, Some(1)),
        };
        let (conditions, next) = self.conditions(f, first, drive);
        let limit = self.placeholder(limit.unwrap_or(next));
        // Off the index of the order too: the matches are sorted.
        let order = match (self, drive) {
            (Dialect::Sqlite, Drive::Matches) => format!("+created_at DESC, +{t} DESC"),
            (Dialect::Postgres, Drive::Matches) => format!("created_at || '' DESC, {t} + 0 DESC"),
            _ => format!("created_at DESC, {t} DESC"),
        };
        format!(
            "SELECT {columns} FROM instances WHERE true{conditions} \
             ORDER BY {order} LIMIT {limit}"
        )
    }

    /// How many instances of each status in [`InstanceStatus::ALL`]
    /// `f`'s filters match (its status and limit aside): rows of `(status,
    /// n)` from one statement whose values are [`Dialect::params`] of `f`
    /// without its status, each read so that a view of a million
    /// instances costs what one of `cap` does. Each status is counted up
    /// to `cap` matches off its index; but with an id prefix or an error's
    /// words ([`ListFilter::counts_a_sample`]), which name their matches
    /// directly, the first `cap` matches in all are counted by status (a
    /// status walked whole for the few it holds of them would cost a
    /// second and more at a million instances).
    pub fn count_by_status(self, f: &ListFilter, cap: u64) -> String {
        if f.counts_a_sample() {
            // SQLite: the words' matches as their index gives them, not
            // all of them gathered first (200,000 of them: a second).
            let (from, drive) = match (self, &f.error_words) {
                (Dialect::Sqlite, Some(_)) => (
                    "instance_errors JOIN instance_error_ids e ON e.n = instance_errors.rowid \
                     JOIN instances ON instances.id = e.instance_id",
                    Drive::Joined,
                ),
                _ => ("instances", Drive::Matches),
            };
            let (conditions, _) = self.conditions(f, 1, drive);
            return format!(
                "SELECT status, count(*) FROM (SELECT instances.status AS status FROM {from} \
                 WHERE true{conditions} LIMIT {cap}) AS m GROUP BY status"
            );
        }
        let (conditions, _) = self.conditions(f, 1, Drive::Auto);
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
        let (conditions, _) = self.conditions(f, 1, Drive::Auto);
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
        let sql = Dialect::Sqlite.list(&filter(), "id", Drive::Auto);
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
        let sql = Dialect::Postgres.list(&filter(), "id", Drive::Auto);
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
