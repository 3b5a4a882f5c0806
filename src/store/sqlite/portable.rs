//! The history's rows as `store::portable` names them, read from and
//! written to SQLite: each column as its kind (a flag is 0 or 1 here).
//! Reads take the instances in creation order (`created_at`, then rowid:
//! the order they were made in), a batch at a time by key, so a copy of
//! any size costs the same per instance.

use super::SqliteStore;
use crate::store::Result;
use crate::store::portable::{Batch, Cell, Kind, Row, Rows, Scope, TABLES, Table};
use rusqlite::types::{ToSqlOutput, Value, ValueRef};
use rusqlite::{Connection, params_from_iter};

/// A column's value as read.
fn cell(kind: Kind, v: ValueRef<'_>) -> Cell {
    match (kind, v) {
        (_, ValueRef::Null) => Cell::Null,
        (Kind::Bool, ValueRef::Integer(n)) => Cell::Bool(n != 0),
        (_, ValueRef::Integer(n)) => Cell::Int(n),
        (Kind::Blob, ValueRef::Blob(b) | ValueRef::Text(b)) => Cell::Blob(b.to_vec()),
        (_, ValueRef::Text(t) | ValueRef::Blob(t)) => {
            Cell::Text(String::from_utf8_lossy(t).into_owned())
        }
        (_, ValueRef::Real(f)) => Cell::Text(f.to_string()),
    }
}

/// A cell as written.
fn value(c: &Cell) -> ToSqlOutput<'_> {
    match c {
        Cell::Null => ToSqlOutput::Owned(Value::Null),
        Cell::Int(n) => ToSqlOutput::Owned(Value::Integer(*n)),
        Cell::Text(t) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
        Cell::Blob(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
        Cell::Bool(b) => ToSqlOutput::Owned(Value::Integer(i64::from(*b))),
    }
}

/// The rows `sql` selects of `table`'s columns.
fn select(c: &Connection, table: &'static Table, sql: &str, args: &[&str]) -> Result<Vec<Row>> {
    let mut stmt = c.prepare_cached(sql)?;
    let mut rows = stmt.query(params_from_iter(args))?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let mut row = Vec::with_capacity(table.columns.len());
        for (i, (_, kind)) in table.columns.iter().enumerate() {
            row.push(cell(*kind, r.get_ref(i)?));
        }
        out.push(row);
    }
    Ok(out)
}

fn columns(table: &Table) -> String {
    table.column_names().collect::<Vec<_>>().join(", ")
}

/// Instances `ids` with every row of each.
pub(super) fn rows_of(c: &Connection, ids: Vec<String>) -> Result<Batch> {
    let mut batch = Batch {
        ids,
        tables: Vec::new(),
    };
    if batch.ids.is_empty() {
        return Ok(batch);
    }
    let marks = vec!["?"; batch.ids.len()].join(", ");
    let args: Vec<&str> = batch.ids.iter().map(String::as_str).collect();
    for table in TABLES.iter().filter(|t| t.scope == Scope::Instance) {
        let order = match table.name {
            "instances" => "created_at, rowid",
            "spans" | "events" => "rowid",
            "actions" => "seq",
            _ => "1",
        };
        let sql = format!(
            "SELECT {} FROM {} WHERE {} IN ({marks}) ORDER BY {order}",
            columns(table),
            table.name,
            table.instance_column()
        );
        batch.tables.push(Rows {
            table,
            rows: select(c, table, &sql, &args)?,
        });
    }
    Ok(batch)
}

/// The definitions the instances of `ids` (a JSON list) pin, and those of
/// the workflows they call, down the tree.
pub(super) fn pinned_definitions(c: &Connection, ids: &str) -> Result<Vec<Row>> {
    let table = crate::store::portable::table("definitions").unwrap_or(&TABLES[0]);
    let sql = format!(
        "WITH RECURSIVE pinned(hash) AS ( \
           SELECT definition_hash FROM instances WHERE id IN (SELECT value FROM json_each(?1)) \
           UNION SELECT child.value FROM pinned JOIN definitions d ON d.hash = pinned.hash, \
                 json_each(d.children) AS child \
         ) SELECT {} FROM definitions WHERE hash IN (SELECT hash FROM pinned)",
        columns(table)
    );
    select(c, table, &sql, &[ids])
}

/// Inserts `rows` of `table` (a row already there is left as it is).
fn insert(c: &Connection, table: &Table, rows: &[Row]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let marks = vec!["?"; table.columns.len()].join(", ");
    let sql = format!(
        "INSERT OR IGNORE INTO {} ({}) VALUES ({marks})",
        table.name,
        columns(table)
    );
    let mut stmt = c.prepare_cached(&sql)?;
    for row in rows {
        stmt.execute(params_from_iter(row.iter().map(value)))?;
    }
    Ok(())
}

impl SqliteStore {
    /// Every row of a table of the whole database's ([`Scope::Global`]).
    pub fn portable_global(&self, table: &'static Table) -> Result<Vec<Row>> {
        let sql = format!("SELECT {} FROM {}", columns(table), table.name);
        select(&self.conn, table, &sql, &[])
    }

    /// The ids of the next `limit` instances after `after`, in creation
    /// order.
    pub fn portable_ids(&self, after: Option<&str>, limit: usize) -> Result<Vec<String>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id FROM instances WHERE ?1 IS NULL OR (created_at, rowid) > \
             (SELECT created_at, rowid FROM instances WHERE id = ?1) \
             ORDER BY created_at, rowid LIMIT ?2",
        )?;
        let ids = stmt
            .query_map(rusqlite::params![after, limit as i64], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(ids)
    }

    /// The next `limit` instances after `after` (creation order), with
    /// every row of each.
    pub fn portable_batch(&self, after: Option<&str>, limit: usize) -> Result<Batch> {
        rows_of(&self.conn, self.portable_ids(after, limit)?)
    }

    /// Which of `ids` this database holds.
    pub fn portable_present(&self, ids: &[String]) -> Result<Vec<String>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let marks = vec!["?"; ids.len()].join(", ");
        let mut stmt = self
            .conn
            .prepare(&format!("SELECT id FROM instances WHERE id IN ({marks})"))?;
        let out = stmt
            .query_map(params_from_iter(ids), |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(out)
    }

    /// Writes `global` rows and `batch` in one transaction (rows already
    /// here are left as they are).
    pub fn portable_write(&mut self, global: &[Rows], batch: &Batch) -> Result<()> {
        let tx = self.write()?;
        for rows in global.iter().chain(&batch.tables) {
            insert(&tx, rows.table, &rows.rows)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// How many rows of the history this database holds, by table: what a
    /// copy's target must not have before it starts (`wf db copy`).
    pub fn portable_counts(&self) -> Result<Vec<(&'static str, i64)>> {
        let mut out = Vec::new();
        for table in TABLES {
            let n: i64 =
                self.conn
                    .query_row(&format!("SELECT count(*) FROM {}", table.name), [], |r| {
                        r.get(0)
                    })?;
            out.push((table.name, n));
        }
        Ok(out)
    }
}

impl SqliteStore {
    /// Writes a copy of the whole database to `dest` (a new file), its
    /// leases cleared: SQLite's online backup, its pages copied in one step,
    /// so in one read transaction: consistent however many processes write
    /// meanwhile, whom it never blocks (the WAL keeps their commits apart),
    /// at the speed of copying pages (`VACUUM INTO`, which rebuilds every
    /// table and index, took 7 times as long as `cp`: bench/RESULTS.md).
    ///
    /// The copy is written without a journal and without syncs of its own
    /// (`journal_mode=OFF`, `synchronous=OFF`): it is a temporary file that
    /// nothing opens until the caller has synced it whole and linked it into
    /// place, and that a failure removes (`engine::db::backup`), so a crash
    /// halfway leaves only a temporary file, as before; with the journal and
    /// the syncs a backup of 311 MB took 0.61 s, without them 0.51 s
    /// (bench/RESULTS.md). (Reading the source through a memory map saved 4% more,
    /// and made the backup's resident size the database's: not done.) Not
    /// synced here. Returns how many instances it holds.
    pub fn backup_into(&self, dest: &std::path::Path) -> Result<u64> {
        let mut copy = Connection::open(dest)?;
        copy.execute_batch("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF")?;
        backup_pages(&self.conn, &mut copy)?;
        // The copied header names the WAL, which this file, handed over
        // whole, must not need: one file, in the rollback journal's mode
        // (then none again, for the rest of this work on it).
        copy.execute_batch("PRAGMA journal_mode=DELETE; PRAGMA journal_mode=OFF")?;
        copy.execute(
            "UPDATE instances SET lease_owner = NULL, lease_expires_ms = NULL \
             WHERE lease_owner IS NOT NULL",
            [],
        )?;
        let n: i64 = copy.query_row("SELECT count(*) FROM instances", [], |r| r.get(0))?;
        Ok(n as u64)
    }
}

/// Copies every page of `from` into `to` in one step of the online backup.
fn backup_pages(from: &Connection, to: &mut Connection) -> Result<()> {
    use rusqlite::backup::{Backup, StepResult};
    let backup = Backup::new(from, to)?;
    loop {
        match backup.step(-1)? {
            StepResult::Done => return Ok(()),
            // Only a write of this connection's own blocks it, and none is
            // under way: wait and go on.
            _ => std::thread::sleep(std::time::Duration::from_millis(5)),
        }
    }
}

impl SqliteStore {
    /// SQLite's own checks: `integrity_check`, and `foreign_key_check`
    /// (the references the schema declares): (check, what is wrong).
    pub fn integrity(&self) -> Result<Vec<(&'static str, String)>> {
        let mut out = Vec::new();
        let mut stmt = self.conn.prepare("PRAGMA integrity_check")?;
        for said in stmt.query_map([], |r| r.get::<_, String>(0))? {
            let said = said?;
            if said != "ok" {
                out.push(("integrity", said));
            }
        }
        let mut stmt = self.conn.prepare("PRAGMA foreign_key_check")?;
        let broken = stmt.query_map([], |r| {
            Ok(format!(
                "a row of {} (rowid {}) names a {} row that is not there",
                r.get::<_, String>(0)?,
                r.get::<_, Option<i64>>(1)?
                    .map_or("-".into(), |n| n.to_string()),
                r.get::<_, String>(2)?
            ))
        })?;
        for b in broken {
            out.push(("foreign key", b?));
        }
        Ok(out)
    }

    /// The rows of a statement of two text columns.
    pub fn pairs(&self, sql: &str) -> Result<Vec<(Option<String>, Option<String>)>> {
        let mut stmt = self.conn.prepare(sql)?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    /// The instances held under a lease: (id, holder, expiry).
    pub fn leases(&self) -> Result<Vec<crate::store::Lease>> {
        let mut stmt = self.conn.prepare(
            "SELECT id, lease_owner, lease_expires_ms FROM instances WHERE lease_owner IS NOT NULL",
        )?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }
}

/// Makes the SQLite database at `path` one file: its WAL checkpointed into
/// it and gone (`journal_mode=DELETE`), as a backup is handed over.
pub(in crate::store) fn single_file(path: &std::path::Path) -> Result<()> {
    let c = Connection::open(path)?;
    c.query_row("PRAGMA journal_mode=DELETE", [], |_| Ok(()))?;
    Ok(())
}
