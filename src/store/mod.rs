//! The SQLite store: every instance, run, step, attempt and event `wf` knows
//! about. The engine writes through short IMMEDIATE transactions so that a
//! step's output, its state patch and its outcome land together or not at all;
//! commands read through the query helpers here.
//!
//! PRAGMAs, set on every connection:
//! - `journal_mode=WAL`: readers (`wf inspect`, `wf list`) never block the
//!   writer, and a commit is one append to the WAL.
//! - `synchronous=FULL` (default) fsyncs the WAL on every commit, so a
//!   completed step survives a power loss; `WF_DURABILITY=normal` selects
//!   `synchronous=NORMAL` (survives a process crash, not a power loss).
//! - `busy_timeout=10000`: a second process waits for the write lock instead
//!   of failing at once (leases, not locks, keep two runners apart).
//!   `WF_BUSY_TIMEOUT_MS` overrides the 10 s (the tests use it so that a
//!   locked database fails fast).
//! - `foreign_keys=ON`: rows always belong to an instance.

pub mod records;
mod schema;
mod write;

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior};
use std::path::{Path, PathBuf};

pub use records::*;
pub use write::Write;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database {path}: {reason}")]
    Open { path: String, reason: String },
    #[error(
        "database {path} has schema version {found}, newer than this wf understands ({known}); upgrade wf"
    )]
    TooNew {
        path: String,
        found: i64,
        known: i64,
    },
    #[error("no instance matches `{0}`")]
    NotFound(String),
    #[error("instance id `{prefix}` is ambiguous: it matches {}", .matches.join(", "))]
    Ambiguous {
        prefix: String,
        matches: Vec<String>,
    },
    // Not `#[from]`, which would make the SQLite error the source: the
    // one-line message would repeat it (`…: database is locked: Error code 5: …`).
    #[error("database error: {}", sqlite_reason(.0))]
    Sql(rusqlite::Error),
    #[error("corrupt record in database: {0}")]
    Corrupt(String),
    /// A runner's write was refused: another process took the instance over.
    #[error("lost instance {id} to {}", .holder.as_deref().unwrap_or("another process"))]
    Fenced { id: String, holder: Option<String> },
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Sql(e)
    }
}

fn sqlite_reason(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(f, Some(msg)) => format!("{msg} ({:?})", f.code),
        other => other.to_string(),
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// How hard commits try to reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    Full,
    Normal,
}

impl Durability {
    fn pragma(self) -> &'static str {
        match self {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        }
    }

    pub fn from_env() -> Durability {
        match std::env::var("WF_DURABILITY").ok().as_deref() {
            Some("normal") => Durability::Normal,
            _ => Durability::Full,
        }
    }
}

pub struct Store {
    conn: Connection,
    path: PathBuf,
    durability: Durability,
}

impl Store {
    /// Opens (creating if needed, mode 0600) the database at `path` and brings
    /// its schema up to date.
    pub fn open(path: &Path) -> Result<Store> {
        let err = |reason: String| StoreError::Open {
            path: path.display().to_string(),
            reason,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                // EEXIST/ENOTDIR here: a file stands where a folder should be.
                let reason = match e.kind() {
                    std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::NotADirectory => {
                        "a file (not a folder) is in the way".to_string()
                    }
                    _ => crate::workflow::io_reason(&e),
                };
                err(format!("cannot create folder {}: {reason}", dir.display()))
            })?;
        }
        if path.is_dir() {
            return Err(err("is a directory, not a database file".into()));
        }
        if !path.exists() {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                // Another process may have created it a moment ago: fine.
                .or_else(|e| {
                    if e.kind() == std::io::ErrorKind::AlreadyExists {
                        std::fs::File::open(path)
                    } else {
                        Err(e)
                    }
                })
                .map_err(|e| err(format!("cannot create: {}", crate::workflow::io_reason(&e))))?;
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| err(sqlite_reason(&e)))?;
        let mut store = Store {
            conn,
            path: path.to_path_buf(),
            durability: Durability::from_env(),
        };
        store.configure(store.durability).map_err(|e| {
            err(match e {
                StoreError::Sql(s) => sqlite_reason(&s),
                other => other.to_string(),
            })
        })?;
        store.migrate()?;
        Ok(store)
    }

    fn configure(&mut self, durability: Durability) -> Result<()> {
        let busy_ms = std::env::var("WF_BUSY_TIMEOUT_MS")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(10_000)
            .min(i32::MAX as u64); // rusqlite panics above i32::MAX ms
        self.conn
            .busy_timeout(std::time::Duration::from_millis(busy_ms))?;
        // The engine cycles through a few dozen statements per step.
        self.conn.set_prepared_statement_cache_capacity(64);
        let mode: String = self
            .conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Corrupt(format!(
                "could not enable WAL (journal_mode={mode})"
            )));
        }
        self.conn.execute_batch(&format!(
            "PRAGMA synchronous={}; PRAGMA foreign_keys=ON;",
            durability.pragma()
        ))?;
        Ok(())
    }

    fn migrate(&mut self) -> Result<()> {
        let known = schema::MIGRATIONS.len() as i64;
        let version: i64 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version > known {
            return Err(StoreError::TooNew {
                path: self.path.display().to_string(),
                found: version,
                known,
            });
        }
        for (i, sql) in schema::MIGRATIONS.iter().enumerate().skip(version as usize) {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Exclusive)?;
            // Another process may have migrated while we waited for the lock.
            let now: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            if now > i as i64 {
                continue;
            }
            tx.execute_batch(sql)?;
            tx.execute_batch(&format!("PRAGMA user_version={}", i + 1))?;
            tx.commit()?;
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    /// Starts an IMMEDIATE write transaction (takes the write lock up front, so
    /// it never fails half-way with SQLITE_BUSY on upgrade).
    pub fn write(&mut self) -> Result<rusqlite::Transaction<'_>> {
        Ok(self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?)
    }

    /// A runner's write transaction: IMMEDIATE, then the check that `fence`
    /// still holds the instance (refused with [`StoreError::Fenced`] if not).
    pub fn fenced(&mut self, fence: &Fence) -> Result<rusqlite::Transaction<'_>> {
        let tx = self.write()?;
        check_fence(&tx, fence)?;
        Ok(tx)
    }

    /// Runs `f` in a fenced transaction whose commit is not fsynced
    /// (`synchronous=OFF` for this one commit). For what must survive a crash
    /// of wf but not of the machine: the commit reaches the operating system
    /// before this returns, and the next durable commit flushes it with the
    /// rest of the WAL. (A process group, say, does not outlive a power loss.)
    pub fn fenced_unsynced<T>(
        &mut self,
        fence: &Fence,
        f: impl FnOnce(&Connection) -> Result<T>,
    ) -> Result<T> {
        self.conn.execute_batch("PRAGMA synchronous=OFF")?;
        let result = self.fenced(fence).and_then(|tx| {
            let out = f(&tx)?;
            tx.commit()?;
            Ok(out)
        });
        let restored = self
            .conn
            .execute_batch(&format!("PRAGMA synchronous={}", self.durability.pragma()));
        let out = result?;
        restored?;
        Ok(out)
    }

    /// Resolves a unique instance id prefix to the full id.
    pub fn resolve_id(&self, prefix: &str) -> Result<String> {
        if prefix.is_empty() {
            return Err(StoreError::NotFound(prefix.into()));
        }
        if let Some(id) = self
            .conn
            .query_row("SELECT id FROM instances WHERE id = ?1", [prefix], |r| {
                r.get::<_, String>(0)
            })
            .optional()?
        {
            return Ok(id);
        }
        // Escape LIKE metacharacters so a prefix is only ever a prefix.
        let escaped: String = prefix
            .chars()
            .flat_map(|c| match c {
                '%' | '_' | '\\' => vec!['\\', c],
                c => vec![c],
            })
            .collect();
        let mut stmt = self.conn.prepare(
            "SELECT id FROM instances WHERE id LIKE ?1 || '%' ESCAPE '\\' ORDER BY id LIMIT 6",
        )?;
        let matches: Vec<String> = stmt
            .query_map([escaped], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        match matches.len() {
            0 => Err(StoreError::NotFound(prefix.into())),
            1 => Ok(matches.into_iter().next().unwrap_or_default()),
            _ => Err(StoreError::Ambiguous {
                prefix: prefix.into(),
                matches,
            }),
        }
    }

    /// The most recently created instance, if any.
    pub fn latest_instance_id(&self) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row(
                "SELECT id FROM instances ORDER BY created_at DESC, rowid DESC LIMIT 1",
                [],
                |r| r.get(0),
            )
            .optional()?)
    }
}
