//! The history's rows as `store::portable` names them, read from and
//! written to PostgreSQL. Most columns are the same here as on SQLite; a
//! span is not: PostgreSQL keeps its ids as a number and bytes and its
//! instance by sequence number (`schema.rs`), so a span's portable hex ids
//! and instance id are made in the statements that read it and taken
//! apart in those that write it. A batch is written in one transaction,
//! one statement a table (its columns sent as arrays), in one round trip.

use super::history::get;
use super::{Op, Param, PgStore};
use crate::store::Result;
use crate::store::portable::{Batch, Cell, Kind, Row, Rows, Scope, TABLES, Table};
use std::sync::OnceLock;

/// A column as read: its expression over the table (alias `t`).
fn read_expr(table: &Table, column: &str) -> String {
    match (table.name, column) {
        ("spans", "trace_id") => "encode(t.trace_id, 'hex')".into(),
        ("spans", "span_id") => "lpad(to_hex(t.span_id), 16, '0')".into(),
        ("spans", "parent_span_id") => "lpad(to_hex(t.parent_span_id), 16, '0')".into(),
        ("spans", "instance_id") => "i.id".into(),
        _ => format!("t.{column}"),
    }
}

/// The column of the table a portable column is written to, and its
/// value's expression over the arrays' row (alias `u`).
fn write_expr(table: &Table, column: &str) -> (String, String) {
    match (table.name, column) {
        ("spans", "trace_id") => (column.into(), "decode(u.trace_id, 'hex')".into()),
        ("spans", "span_id" | "parent_span_id") => (
            column.into(),
            format!("('x' || u.{column})::bit(64)::bigint"),
        ),
        ("spans", "instance_id") => (
            "instance_seq".into(),
            "(SELECT seq FROM instances WHERE id = u.instance_id)".into(),
        ),
        _ => (column.into(), format!("u.{column}")),
    }
}

fn array_type(kind: Kind) -> &'static str {
    match kind {
        Kind::Text => "text[]",
        Kind::Int => "int8[]",
        Kind::Blob => "bytea[]",
        Kind::Bool => "bool[]",
    }
}

/// The statements of each table, built once.
struct Statements {
    /// Per table of [`TABLES`]: the whole table (global), or the rows of
    /// the instances `$1` (an array of ids).
    select: Vec<String>,
    /// Per table: its rows from one array per column, those already there
    /// left as they are.
    insert: Vec<String>,
}

fn statements() -> &'static Statements {
    static BUILT: OnceLock<Statements> = OnceLock::new();
    BUILT.get_or_init(|| {
        let mut select = Vec::new();
        let mut insert = Vec::new();
        for table in TABLES {
            let cols: Vec<String> = table.column_names().map(|c| read_expr(table, c)).collect();
            let from = if table.name == "spans" {
                "spans t JOIN instances i ON i.seq = t.instance_seq".to_string()
            } else {
                format!("{} t", table.name)
            };
            let which = if table.name == "spans" {
                "i.id".to_string()
            } else {
                format!("t.{}", table.instance_column())
            };
            let order = match table.name {
                "instances" => "t.created_at, t.seq",
                "spans" => "i.seq, t.run, t.start_ns, t.span_id",
                "events" => "t.id",
                "actions" => "t.seq",
                _ => "1",
            };
            select.push(match table.scope {
                Scope::Global => format!("SELECT {} FROM {from}", cols.join(", ")),
                Scope::Instance => format!(
                    "SELECT {} FROM {from} WHERE {which} = ANY($1) ORDER BY {order}",
                    cols.join(", ")
                ),
            });
            let (targets, values): (Vec<String>, Vec<String>) =
                table.column_names().map(|c| write_expr(table, c)).unzip();
            let arrays: Vec<String> = table
                .columns
                .iter()
                .enumerate()
                .map(|(i, (_, kind))| format!("${}::{}", i + 1, array_type(*kind)))
                .collect();
            insert.push(format!(
                "INSERT INTO {} ({}) SELECT {} FROM unnest({}) AS u({}) ON CONFLICT DO NOTHING",
                table.name,
                targets.join(", "),
                values.join(", "),
                arrays.join(", "),
                table.column_names().collect::<Vec<_>>().join(", ")
            ));
        }
        Statements { select, insert }
    })
}

fn index_of(table: &Table) -> usize {
    TABLES
        .iter()
        .position(|t| t.name == table.name)
        .unwrap_or_default()
}

/// The rows of a query over `table`'s columns.
fn rows_of(table: &Table, rows: &[tokio_postgres::Row]) -> Result<Vec<Row>> {
    rows.iter()
        .map(|r| {
            table
                .columns
                .iter()
                .enumerate()
                .map(|(i, (_, kind))| {
                    Ok(match kind {
                        Kind::Text => get::<Option<String>>(r, i)?.map_or(Cell::Null, Cell::Text),
                        Kind::Int => get::<Option<i64>>(r, i)?.map_or(Cell::Null, Cell::Int),
                        Kind::Blob => get::<Option<Vec<u8>>>(r, i)?.map_or(Cell::Null, Cell::Blob),
                        Kind::Bool => get::<Option<bool>>(r, i)?.map_or(Cell::Null, Cell::Bool),
                    })
                })
                .collect()
        })
        .collect()
}

/// The statement that writes `rows` of `table`: one array per column.
fn insert_op(table: &'static Table, rows: &[Row]) -> Op {
    let params: Vec<Param> = table
        .columns
        .iter()
        .enumerate()
        .map(|(i, (_, kind))| -> Param {
            let cells = rows.iter().map(|r| &r[i]);
            match kind {
                Kind::Text => Box::new(
                    cells
                        .map(|c| match c {
                            Cell::Text(t) => Some(t.clone()),
                            _ => None,
                        })
                        .collect::<Vec<_>>(),
                ),
                Kind::Int => Box::new(
                    cells
                        .map(|c| match c {
                            Cell::Int(n) => Some(*n),
                            _ => None,
                        })
                        .collect::<Vec<_>>(),
                ),
                Kind::Blob => Box::new(
                    cells
                        .map(|c| match c {
                            Cell::Blob(b) => Some(b.clone()),
                            _ => None,
                        })
                        .collect::<Vec<_>>(),
                ),
                Kind::Bool => Box::new(
                    cells
                        .map(|c| match c {
                            Cell::Bool(b) => Some(*b),
                            _ => None,
                        })
                        .collect::<Vec<_>>(),
                ),
            }
        })
        .collect();
    Op::Exec(statements().insert[index_of(table)].as_str(), params)
}

impl PgStore {
    /// Every row of a table of the whole database's ([`Scope::Global`]).
    pub async fn portable_global(&self, table: &'static Table) -> Result<Vec<Row>> {
        let sql = statements().select[index_of(table)].as_str();
        let rows = self.query(sql, &[]).await?;
        rows_of(table, &rows)
    }

    /// The next `limit` instances after `after` (creation order), with
    /// every row of each.
    pub async fn portable_batch(&self, after: Option<&str>, limit: usize) -> Result<Batch> {
        self.rows_of(self.portable_ids(after, limit).await?).await
    }

    /// The definitions the instances `ids` pin, and those of the workflows
    /// they call, down the tree.
    pub(super) async fn pinned_definitions(&self, ids: &[String]) -> Result<Vec<Row>> {
        static SQL: OnceLock<String> = OnceLock::new();
        let table = crate::store::portable::table("definitions").unwrap_or(&TABLES[0]);
        let sql = SQL.get_or_init(|| {
            format!(
                "WITH RECURSIVE pinned(hash) AS ( \
                   SELECT definition_hash FROM instances WHERE id = ANY($1) \
                   UNION SELECT child.value FROM pinned JOIN definitions d ON d.hash = pinned.hash \
                         CROSS JOIN LATERAL json_each_text(COALESCE(d.children, '{{}}')::json) AS child \
                 ) SELECT {} FROM definitions t WHERE hash IN (SELECT hash FROM pinned)",
                table
                    .column_names()
                    .map(|c| read_expr(table, c))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        });
        let rows = self.query(sql.as_str(), &[&ids]).await?;
        rows_of(table, &rows)
    }

    /// Instances `ids` with every row of each.
    pub(super) async fn rows_of(&self, ids: Vec<String>) -> Result<Batch> {
        let mut batch = Batch {
            ids,
            tables: Vec::new(),
        };
        if batch.ids.is_empty() {
            return Ok(batch);
        }
        for table in TABLES.iter().filter(|t| t.scope == Scope::Instance) {
            let sql = statements().select[index_of(table)].as_str();
            let rows = self.query(sql, &[&batch.ids]).await?;
            batch.tables.push(Rows {
                table,
                rows: rows_of(table, &rows)?,
            });
        }
        Ok(batch)
    }

    /// The ids of the next `limit` instances after `after`, in creation
    /// order.
    pub async fn portable_ids(&self, after: Option<&str>, limit: usize) -> Result<Vec<String>> {
        let rows = self
            .query(
                "SELECT id FROM instances WHERE $1::text IS NULL OR (created_at, seq) > \
                 (SELECT created_at, seq FROM instances WHERE id = $1) \
                 ORDER BY created_at, seq LIMIT $2",
                &[&after, &(limit as i64)],
            )
            .await?;
        rows.iter().map(|r| get(r, 0)).collect()
    }

    /// Which of `ids` this database holds.
    pub async fn portable_present(&self, ids: &[String]) -> Result<Vec<String>> {
        let rows = self
            .query("SELECT id FROM instances WHERE id = ANY($1)", &[&ids])
            .await?;
        rows.iter().map(|r| get(r, 0)).collect()
    }

    /// Writes `global` rows and `batch` in one transaction (rows already
    /// here are left as they are), then moves the events' sequence past the
    /// ids written, so the events delivered here next do not take them.
    pub async fn portable_write(&self, global: &[Rows], batch: &Batch) -> Result<()> {
        let mut ops = vec![Op::Simple("BEGIN")];
        for rows in global.iter().chain(&batch.tables) {
            if !rows.rows.is_empty() {
                ops.push(insert_op(rows.table, &rows.rows));
            }
        }
        ops.push(Op::Query(
            "SELECT setval(pg_get_serial_sequence('events', 'id'), \
             GREATEST((SELECT max(id) FROM events), 1))",
            Vec::new(),
        ));
        ops.push(Op::Simple("COMMIT"));
        self.pipeline(ops).await?;
        Ok(())
    }

    /// How many rows of the history this database holds, by table.
    pub async fn portable_counts(&self) -> Result<Vec<(&'static str, i64)>> {
        let mut out = Vec::new();
        for table in TABLES {
            let sql = format!("SELECT count(*) FROM {}", table.name);
            let rows = self.query(super::Text::Built(&sql), &[]).await?;
            out.push((
                table.name,
                rows.first().map(|r| get(r, 0)).transpose()?.unwrap_or(0),
            ));
        }
        Ok(out)
    }
}

impl PgStore {
    /// The catalog's checks: every table and column of the history is
    /// there, at the schema version this wf knows: (check, what is wrong).
    pub async fn integrity(&self) -> Result<Vec<(&'static str, String)>> {
        let mut out = Vec::new();
        let rows = self
            .query(
                "SELECT table_name, column_name FROM information_schema.columns \
                 WHERE table_schema = current_schema()",
                &[],
            )
            .await?;
        let mut have = std::collections::HashSet::new();
        for r in &rows {
            have.insert((get::<String>(r, 0)?, get::<String>(r, 1)?));
        }
        for table in TABLES {
            for column in table.column_names() {
                // A span's instance is its sequence number here.
                let column = if (table.name, column) == ("spans", "instance_id") {
                    "instance_seq"
                } else {
                    column
                };
                if !have.contains(&(table.name.to_string(), column.to_string())) {
                    out.push((
                        "catalog",
                        format!("table {} has no column {column}", table.name),
                    ));
                }
            }
        }
        let rows = self
            .query("SELECT max(version) FROM migrations", &[])
            .await?;
        let version: Option<i64> = rows.first().map(|r| get(r, 0)).transpose()?.flatten();
        let known = super::schema::MIGRATIONS.len() as i64;
        if version != Some(known) {
            out.push((
                "catalog",
                format!(
                    "the schema is at version {}, this wf's is {known}",
                    version.map_or("none".into(), |v| v.to_string())
                ),
            ));
        }
        Ok(out)
    }

    /// The rows of a statement of two text columns.
    pub async fn pairs(&self, sql: &'static str) -> Result<Vec<(Option<String>, Option<String>)>> {
        let rows = self.query(sql, &[]).await?;
        rows.iter().map(|r| Ok((get(r, 0)?, get(r, 1)?))).collect()
    }

    /// The instances held under a lease: (id, holder, expiry).
    pub async fn leases(&self) -> Result<Vec<crate::store::Lease>> {
        let rows = self
            .query(
                "SELECT id, lease_owner, lease_expires_ms FROM instances WHERE lease_owner IS NOT NULL",
                &[],
            )
            .await?;
        rows.iter()
            .map(|r| Ok((get(r, 0)?, get(r, 1)?, get(r, 2)?)))
            .collect()
    }
}
