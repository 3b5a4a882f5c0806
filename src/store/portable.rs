//! The history as rows any backend holds the same way: what `wf db copy`
//! moves between SQLite and PostgreSQL, what `wf db backup` of a
//! PostgreSQL history writes into a SQLite file, and what `wf prune
//! --archive` writes and `wf db import` reads back. Each table is named
//! once here with its columns and the kind of each ([`TABLES`]); each
//! backend says how it reads and writes a column of that kind
//! (`sqlite/portable.rs`, `pg/portable.rs`: PostgreSQL keeps a span's ids
//! as numbers and bytes, and its instance by sequence number, where the
//! portable row has SQLite's hex text and instance id). A table left out
//! is one whose rows belong to the database rather than the history:
//! `workers` (heartbeats), `migrations`, and `/metrics`' kept counts
//! (made again by the target's own triggers from the instances it is
//! given; its counters of ended attempts and runs start from zero, as a
//! new series).
//!
//! An instance moves with every row of it in one transaction of the
//! target, so a target holds an instance whole or not at all: a copy
//! interrupted at any moment is continued by skipping the instances it
//! holds (`--resume`).

use super::Store;
use serde_json::{Map, Value};

/// How a column's values are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Int,
    /// Bytes (captured output).
    Blob,
    /// SQLite keeps it as 0 or 1.
    Bool,
}

/// Whose rows a table holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The database's: copied first, whole.
    Global,
    /// One instance's: its `instance_id` column (the instance's own `id`
    /// for `instances`) says which.
    Instance,
}

/// A table of the history.
#[derive(Debug)]
pub struct Table {
    pub name: &'static str,
    pub scope: Scope,
    pub columns: &'static [(&'static str, Kind)],
}

impl Table {
    /// The column that names the instance a row belongs to.
    pub fn instance_column(&self) -> &'static str {
        if self.name == "instances" {
            "id"
        } else {
            "instance_id"
        }
    }

    pub fn column_names(&self) -> impl Iterator<Item = &'static str> {
        self.columns.iter().map(|(n, _)| *n)
    }
}

use Kind::{Blob, Bool, Int, Text};

/// Every table a history's rows are in, in the order they are written (a
/// row's references first).
pub static TABLES: &[Table] = &[
    Table {
        name: "definitions",
        scope: Scope::Global,
        columns: &[
            ("hash", Text),
            ("source", Text),
            ("step_ids", Text),
            ("compiled", Text),
            ("children", Text),
        ],
    },
    Table {
        name: "workflows",
        scope: Scope::Global,
        columns: &[
            ("name", Text),
            ("definition_hash", Text),
            ("workflow_path", Text),
            ("base_dir", Text),
            ("hook", Text),
            ("registered_at", Text),
        ],
    },
    Table {
        name: "schedules",
        scope: Scope::Global,
        columns: &[
            ("workflow", Text),
            ("idx", Int),
            ("spec", Text),
            ("timezone", Text),
            ("overlap", Text),
            ("catchup_ms", Int),
            ("inputs", Text),
            ("state", Text),
            ("definition_hash", Text),
            ("workflow_path", Text),
            ("base_dir", Text),
            ("next_fire_ms", Int),
            ("buffered_ms", Int),
            ("last_instance", Text),
            ("last_fire_ms", Int),
            ("skipped", Int),
            ("registered_at", Text),
        ],
    },
    Table {
        name: "admissions",
        scope: Scope::Global,
        columns: &[("queue_key", Text), ("at_ms", Int)],
    },
    // `wf serve`'s named tokens (their hashes): the servers of the target
    // honour them. Their sessions stay behind (a browser signs in again).
    Table {
        name: "tokens",
        scope: Scope::Global,
        columns: &[
            ("name", Text),
            ("hash", Text),
            ("scope", Text),
            ("created_at", Text),
            ("created_by", Text),
            ("last_used_at", Text),
        ],
    },
    // The results `cache:` steps keep: of the database, not of an instance
    // (a prune of the instance an entry came from keeps it).
    Table {
        name: "step_cache",
        scope: Scope::Global,
        columns: &[
            ("workflow", Text),
            ("step_id", Text),
            ("cache_key", Text),
            ("part", Text),
            ("instance_id", Text),
            ("unit_key", Text),
            ("attempt", Int),
            ("output", Text),
            ("state_patch", Text),
            ("created_at", Text),
            ("expires_ms", Int),
        ],
    },
    Table {
        name: "instances",
        scope: Scope::Instance,
        columns: &[
            ("id", Text),
            ("workflow", Text),
            ("status", Text),
            ("definition_hash", Text),
            ("workflow_path", Text),
            ("base_dir", Text),
            ("inputs", Text),
            ("state", Text),
            ("outputs", Text),
            ("error", Text),
            ("wake_at", Text),
            ("waiting_event", Text),
            ("cancel_requested", Int),
            ("lease_owner", Text),
            ("lease_expires_ms", Int),
            ("lease_epoch", Int),
            ("created_at", Text),
            ("updated_at", Text),
            ("parent_id", Text),
            ("parent_key", Text),
            ("parent_attempt", Int),
            ("depth", Int),
            ("labels", Text),
            ("queue_key", Text),
            ("queue_priority", Int),
            ("queue_limits", Text),
            ("queue_hold", Bool),
            ("admitted", Bool),
            ("started_by", Text),
        ],
    },
    Table {
        name: "runs",
        scope: Scope::Instance,
        columns: &[
            ("instance_id", Text),
            ("number", Int),
            ("outcome", Text),
            ("started_at", Text),
            ("finished_at", Text),
            ("trace_id", Text),
            ("span_id", Text),
            ("parent_span_id", Text),
            ("started_ns", Int),
            ("restart_from", Text),
            ("definition_hash", Text),
        ],
    },
    Table {
        name: "steps",
        scope: Scope::Instance,
        columns: &[
            ("instance_id", Text),
            ("key", Text),
            ("step_id", Text),
            ("status", Text),
            ("attempts", Int),
            ("budget_base", Int),
            ("outcome", Text),
            ("error_type", Text),
            ("error_message", Text),
            ("output", Text),
            ("started_at", Text),
            ("finished_at", Text),
            ("retry_at", Text),
            ("seq", Int),
            ("items", Text),
            ("state_patch", Text),
        ],
    },
    Table {
        name: "attempts",
        scope: Scope::Instance,
        columns: &[
            ("instance_id", Text),
            ("step_key", Text),
            ("attempt", Int),
            ("run", Int),
            ("outcome", Text),
            ("error_type", Text),
            ("error_message", Text),
            ("exit_code", Int),
            ("started_at", Text),
            ("finished_at", Text),
            ("stdout", Blob),
            ("stderr", Blob),
            ("span_id", Text),
            ("started_ns", Int),
            ("proc_host", Text),
            ("proc_pgid", Int),
            ("proc_start", Int),
            ("cached_from", Text),
        ],
    },
    Table {
        name: "events",
        scope: Scope::Instance,
        columns: &[
            ("id", Int),
            ("instance_id", Text),
            ("name", Text),
            ("payload", Text),
            ("traceparent", Text),
            ("received_at", Text),
            ("consumed_by", Text),
        ],
    },
    Table {
        name: "spans",
        scope: Scope::Instance,
        columns: &[
            ("trace_id", Text),
            ("span_id", Text),
            ("parent_span_id", Text),
            ("instance_id", Text),
            ("run", Int),
            ("name", Text),
            ("kind", Text),
            ("start_ns", Int),
            ("end_ns", Int),
            ("status", Text),
            ("status_message", Text),
            ("attributes", Text),
            ("links", Text),
            ("exported", Bool),
        ],
    },
    Table {
        name: "locks",
        scope: Scope::Instance,
        columns: &[
            ("lock_key", Text),
            ("instance_id", Text),
            ("unit_key", Text),
        ],
    },
    Table {
        name: "schedule_fires",
        scope: Scope::Instance,
        columns: &[
            ("workflow", Text),
            ("idx", Int),
            ("fire_ms", Int),
            ("instance_id", Text),
            ("spec", Text),
            ("timezone", Text),
        ],
    },
    // An instance's actions, in the order recorded (the target numbers
    // them anew, in that order). The actions on no instance (the
    // registry's, tokens', prunes') belong to the database they were made
    // in, as its workers' heartbeats do.
    Table {
        name: "actions",
        scope: Scope::Instance,
        columns: &[
            ("instance_id", Text),
            ("at", Text),
            ("action", Text),
            ("actor", Text),
            ("detail", Text),
        ],
    },
];

/// The table named `name`.
pub fn table(name: &str) -> Option<&'static Table> {
    TABLES.iter().find(|t| t.name == name)
}

/// One value of a column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    Null,
    Int(i64),
    Text(String),
    Blob(Vec<u8>),
    Bool(bool),
}

/// A row: its cells in the order of its table's columns.
pub type Row = Vec<Cell>;

/// The rows of one table.
#[derive(Debug, Clone)]
pub struct Rows {
    pub table: &'static Table,
    pub rows: Vec<Row>,
}

/// Some instances, each with every row of it, read in one snapshot.
#[derive(Debug, Default)]
pub struct Batch {
    /// The instances' ids, in creation order.
    pub ids: Vec<String>,
    /// Per instance-scoped table, in [`TABLES`] order, the rows of these
    /// instances.
    pub tables: Vec<Rows>,
}

impl Batch {
    /// The batch of those of `ids` that `keep` says yes to.
    pub fn only(self, keep: impl Fn(&str) -> bool) -> Batch {
        let ids: Vec<String> = self.ids.into_iter().filter(|i| keep(i)).collect();
        let kept: std::collections::HashSet<&str> = ids.iter().map(String::as_str).collect();
        let tables = self
            .tables
            .into_iter()
            .map(|t| {
                let at = t
                    .table
                    .column_names()
                    .position(|c| c == t.table.instance_column())
                    .unwrap_or(0);
                Rows {
                    table: t.table,
                    rows: t
                        .rows
                        .into_iter()
                        .filter(|r| matches!(&r[at], Cell::Text(i) if kept.contains(i.as_str())))
                        .collect(),
                }
            })
            .collect();
        Batch { ids, tables }
    }
}

/// A row as a JSON object (column -> value; bytes as base64), for archives.
pub fn row_json(table: &Table, row: &Row) -> Map<String, Value> {
    use base64::Engine as _;
    table
        .columns
        .iter()
        .zip(row)
        .map(|((name, _), cell)| {
            let v = match cell {
                Cell::Null => Value::Null,
                Cell::Int(n) => Value::from(*n),
                Cell::Text(t) => Value::from(t.as_str()),
                Cell::Blob(b) => Value::from(base64::engine::general_purpose::STANDARD.encode(b)),
                Cell::Bool(b) => Value::from(*b),
            };
            ((*name).to_string(), v)
        })
        .collect()
}

/// A row read back from [`row_json`]'s object: each column as its kind
/// says; a column missing is NULL. `Err` names the column whose value is
/// not of its kind.
pub fn row_of_json(table: &Table, object: &Map<String, Value>) -> Result<Row, String> {
    use base64::Engine as _;
    table
        .columns
        .iter()
        .map(|(name, kind)| {
            let v = object.get(*name).unwrap_or(&Value::Null);
            let bad = || format!("{}.{name}: {v} is not {kind:?}", table.name);
            Ok(match (kind, v) {
                (_, Value::Null) => Cell::Null,
                (Kind::Int, Value::Number(n)) => Cell::Int(n.as_i64().ok_or_else(bad)?),
                (Kind::Text, Value::String(s)) => Cell::Text(s.clone()),
                (Kind::Bool, Value::Bool(b)) => Cell::Bool(*b),
                (Kind::Blob, Value::String(s)) => Cell::Blob(
                    base64::engine::general_purpose::STANDARD
                        .decode(s)
                        .map_err(|_| bad())?,
                ),
                _ => return Err(bad()),
            })
        })
        .collect()
}

// The store's calls, each backend's below it (`each!`).
impl super::Store {
    /// Every row of a table of the whole database's ([`Scope::Global`]).
    pub async fn portable_global(&self, table: &'static Table) -> super::Result<Vec<Row>> {
        each!(self.portable_global(table))
    }

    /// The ids of the next `limit` instances after `after`, in creation
    /// order.
    pub async fn portable_ids(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> super::Result<Vec<String>> {
        each!(self.portable_ids(after, limit))
    }

    /// The next `limit` instances after `after` (creation order), with
    /// every row of each.
    pub async fn portable_batch(&self, after: Option<&str>, limit: usize) -> super::Result<Batch> {
        each!(self.portable_batch(after, limit))
    }

    /// Which of `ids` this database holds.
    pub async fn portable_present(&self, ids: &[String]) -> super::Result<Vec<String>> {
        each!(self.portable_present(ids))
    }

    /// Writes `global` rows and `batch` in one transaction; rows already
    /// there are left as they are.
    pub async fn portable_write(&mut self, global: &[Rows], batch: &Batch) -> super::Result<()> {
        each!(self.portable_write(global, batch))
    }

    /// Writes `batch`, none of whose instances this database holds, in one
    /// transaction: a copy's batch (on PostgreSQL with `COPY`, its fastest
    /// way in; on SQLite as [`Store::portable_write`]).
    pub async fn portable_load(&mut self, batch: &Batch) -> super::Result<()> {
        match self {
            super::Store::Sqlite(s) => s.portable_write(&[], batch),
            super::Store::Postgres(p) => p.portable_load(batch).await,
            super::Store::Lent(shared) => Box::pin(shared.take().await?.portable_load(batch)).await,
        }
    }

    /// How many rows of the history this database holds, by table.
    pub async fn portable_counts(&self) -> super::Result<Vec<(&'static str, i64)>> {
        each!(self.portable_counts())
    }

    /// How many instances this database holds.
    pub async fn portable_instance_count(&self) -> super::Result<u64> {
        Ok(self
            .portable_counts()
            .await?
            .iter()
            .find(|(t, _)| *t == "instances")
            .map_or(0, |(_, n)| *n as u64))
    }
}

impl Batch {
    /// Writes out what a commit span's name implies in the database it was
    /// stored in (`system`): its `db.system.name` and `db.operation.name`
    /// are dropped when it is stored and put back, naming the database it
    /// is read from, when it is read (`SpanRow::slim`, `SpanRow::restore`).
    /// Moved to another database, it would name that one; with them
    /// written, it names the database whose commit it timed, wherever it
    /// is read.
    pub fn explicit_commit_spans(&mut self, system: &str) {
        for rows in &mut self.tables {
            if rows.table.name != "spans" {
                continue;
            }
            let at = |name: &str| rows.table.column_names().position(|c| c == name);
            let (Some(name), Some(attributes)) = (at("name"), at("attributes")) else {
                continue;
            };
            for row in &mut rows.rows {
                if !matches!(&row[name], Cell::Text(n) if n == super::COMMIT_SPAN) {
                    continue;
                }
                let Cell::Text(text) = &row[attributes] else {
                    continue;
                };
                let Ok(Value::Object(stored)) = serde_json::from_str::<Value>(text) else {
                    continue;
                };
                // Stored whole, or with its database written: as it is.
                if stored.contains_key("workflow.instance.id")
                    || stored.contains_key("db.system.name")
                {
                    continue;
                }
                let mut out = Map::new();
                out.insert("db.system.name".into(), Value::from(system));
                out.insert("db.operation.name".into(), Value::from("COMMIT"));
                out.extend(stored);
                row[attributes] = Cell::Text(Value::Object(out).to_string());
            }
        }
    }

    /// No instance of the batch is held by anyone.
    pub(super) fn clear_leases(&mut self) {
        for rows in &mut self.tables {
            if rows.table.name != "instances" {
                continue;
            }
            let at = |name: &str| rows.table.column_names().position(|c| c == name);
            let (Some(owner), Some(expires)) = (at("lease_owner"), at("lease_expires_ms")) else {
                continue;
            };
            for row in &mut rows.rows {
                row[owner] = Cell::Null;
                row[expires] = Cell::Null;
            }
        }
    }
}

impl super::Store {
    /// Writes a consistent copy of the whole history to `dest`, a new
    /// SQLite file (the portable file any wf opens with `--db`): on SQLite
    /// one read transaction copies its pages (the online backup); on PostgreSQL
    /// the rows of one REPEATABLE READ snapshot are copied into a new
    /// database there ([`super::transfer::copy`]). Its leases are cleared: their holders
    /// write to this database, not to the backup, so what was in flight
    /// there is an orphan a worker takes up at once. Not synced here.
    /// Returns how many instances it holds.
    pub async fn backup_to(
        &self,
        dest: &std::path::Path,
        progress: &mut dyn FnMut(u64, u64),
    ) -> super::Result<u64> {
        match self {
            super::Store::Sqlite(s) => {
                let n = s.backup_into(dest)?;
                Ok(n)
            }
            super::Store::Postgres(_) => {
                let mut target = super::Store::open(&super::Location::Sqlite(dest.into())).await?;
                let copied =
                    super::transfer::copy(self, &mut target, false, true, progress).await?;
                drop(target);
                super::sqlite::single_file(dest)?;
                Ok(copied.written)
            }
            super::Store::Lent(shared) => {
                Box::pin(shared.take().await?.backup_to(dest, progress)).await
            }
        }
    }
}

/// What keeps the instances a prune deletes (`wf prune --archive`): each
/// batch is handed to it with the definitions its instances pin, inside
/// the transaction that then deletes them, and must be durable when
/// `keep` returns.
pub trait Archive {
    fn keep(&mut self, batch: &Batch, definitions: &[Row]) -> super::Result<()>;
}

/// The version of an archive's records ([`record`]).
pub const RECORD_VERSION: u64 = 1;

/// Instance `id` of `batch` as one self-contained archive record: its row,
/// every row of it by table, and the definitions it pins (`definitions`:
/// those of the batch; the ones it needs are kept).
pub fn record(batch: &Batch, id: &str, definitions: &[Row]) -> Value {
    let mut out = Map::new();
    out.insert("wf_archive".into(), Value::from(RECORD_VERSION));
    let mut pinned: Vec<String> = Vec::new();
    for rows in &batch.tables {
        let at = rows
            .table
            .column_names()
            .position(|c| c == rows.table.instance_column())
            .unwrap_or(0);
        let mine: Vec<Value> = rows
            .rows
            .iter()
            .filter(|r| matches!(&r[at], Cell::Text(i) if i == id))
            .map(|r| Value::Object(row_json(rows.table, r)))
            .collect();
        if rows.table.name == "instances" {
            if let Some(Value::String(h)) = mine.first().and_then(|i| i.get("definition_hash")) {
                pinned.push(h.clone());
            }
            out.insert(
                "instance".into(),
                mine.into_iter().next().unwrap_or(Value::Null),
            );
        } else {
            out.insert(rows.table.name.into(), Value::Array(mine));
        }
    }
    // Its definition, and those of the workflows it calls, down the tree.
    let defs = table("definitions").unwrap_or(&TABLES[0]);
    let by_hash = |h: &str| {
        definitions
            .iter()
            .find(|d| matches!(&d[0], Cell::Text(x) if x == h))
    };
    let mut kept = Vec::new();
    while let Some(h) = pinned.pop() {
        if kept.iter().any(|(k, _): &(String, Value)| *k == h) {
            continue;
        }
        let Some(d) = by_hash(&h) else { continue };
        if let Some(Cell::Text(children)) = d.get(4)
            && let Ok(Value::Object(c)) = serde_json::from_str::<Value>(children)
        {
            pinned.extend(c.values().filter_map(|v| v.as_str().map(String::from)));
        }
        kept.push((h, Value::Object(row_json(defs, d))));
    }
    out.insert(
        "definitions".into(),
        Value::Array(kept.into_iter().map(|(_, v)| v).collect()),
    );
    Value::Object(out)
}

/// An archive record read back ([`record`]): its instance as a batch of
/// one, and its definitions. `Err` says what is wrong with it.
pub fn of_record(v: &Value) -> Result<(Batch, Vec<Row>), String> {
    let o = v.as_object().ok_or("not a JSON object")?;
    match o.get("wf_archive").and_then(Value::as_u64) {
        Some(RECORD_VERSION) => {}
        Some(n) => return Err(format!("record version {n}, newer than this wf reads")),
        None => return Err("not a wf archive record (no `wf_archive`)".into()),
    }
    let objects = |name: &str| -> Vec<&Map<String, Value>> {
        match o.get(name) {
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_object).collect(),
            Some(Value::Object(one)) => vec![one],
            _ => Vec::new(),
        }
    };
    let mut batch = Batch::default();
    for t in TABLES.iter().filter(|t| t.scope == Scope::Instance) {
        let name = if t.name == "instances" {
            "instance"
        } else {
            t.name
        };
        let rows = objects(name)
            .into_iter()
            .map(|r| row_of_json(t, r))
            .collect::<Result<Vec<_>, _>>()?;
        if t.name == "instances" {
            let [row] = rows.as_slice() else {
                return Err("a record holds one instance".into());
            };
            match &row[0] {
                Cell::Text(id) => batch.ids.push(id.clone()),
                _ => return Err("the instance has no id".into()),
            }
        }
        batch.tables.push(Rows { table: t, rows });
    }
    let defs = table("definitions").ok_or("no definitions table")?;
    let definitions = objects("definitions")
        .into_iter()
        .map(|r| row_of_json(defs, r))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((batch, definitions))
}
