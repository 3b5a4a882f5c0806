//! Where the history lives ([`Location`]: a SQLite file or a PostgreSQL
//! database, parsed from `--db`), and what a long-lived process checks of
//! it: that its SQLite file is still the one it opened ([`FileId`]).

use super::{PgTarget, Result};
use std::path::PathBuf;

/// Where the history lives: a SQLite file, or a PostgreSQL database.
#[derive(Debug, Clone)]
pub enum Location {
    Sqlite(PathBuf),
    Postgres(Box<PgTarget>),
}

/// A SQLite file's identity (device, inode): the same path naming
/// another file, or none, is a database deleted, moved or replaced under
/// a long-lived process, whose writes would go to a file nobody reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId(u64, u64);

impl Location {
    /// Whether its calls wait on a server (PostgreSQL), so that a thread
    /// that makes them in the background (the lease's heartbeat) needs a
    /// runtime of its own; SQLite's complete without waiting.
    pub fn waits_on_a_server(&self) -> bool {
        matches!(self, Location::Postgres(_))
    }

    /// The identity of the SQLite file now (`None` on PostgreSQL).
    pub fn file_id(&self) -> Option<std::io::Result<FileId>> {
        use std::os::unix::fs::MetadataExt as _;
        match self {
            Location::Sqlite(path) => {
                Some(std::fs::metadata(path).map(|m| FileId(m.dev(), m.ino())))
            }
            Location::Postgres(_) => None,
        }
    }

    /// Whether the SQLite file is still the one that had identity `was`:
    /// `Err` says what became of it.
    pub fn still(&self, was: Option<FileId>) -> std::result::Result<(), String> {
        let (Some(was), Some(now), Location::Sqlite(path)) = (was, self.file_id(), self) else {
            return Ok(());
        };
        match now {
            Ok(now) if now == was => Ok(()),
            Ok(_) => Err(format!(
                "the database file {} was replaced by another file",
                path.display()
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
                "the database file {} is gone (deleted or moved)",
                path.display()
            )),
            Err(e) => Err(format!("the database file {}: {e}", path.display())),
        }
    }

    /// Whether a new connection could open the history now: the SQLite
    /// file readable (one whose mode was changed leaves the open
    /// connections working); a server's is asked by connecting.
    pub fn openable(&self) -> std::result::Result<(), String> {
        match self {
            Location::Sqlite(path) => std::fs::File::open(path)
                .map(drop)
                .map_err(|e| format!("the database file {}: {e}", path.display())),
            Location::Postgres(_) => Ok(()),
        }
    }

    /// `--db`/`WF_DB`: a `postgres://` or `postgresql://` URL, else a path.
    pub fn parse(text: &std::ffi::OsStr) -> Result<Location> {
        match text.to_str() {
            Some(t) if PgTarget::is_url(t) => Ok(Location::Postgres(Box::new(PgTarget::parse(t)?))),
            _ => Ok(Location::Sqlite(PathBuf::from(text))),
        }
    }

    /// How messages name the database: the path, or the URL without its
    /// password.
    pub fn describe(&self) -> String {
        match self {
            Location::Sqlite(p) => p.display().to_string(),
            Location::Postgres(t) => t.describe(),
        }
    }
}

/// How long one database call waits for the server (`WF_DB_TIMEOUT`;
/// PostgreSQL's calls: SQLite's do not wait on a server).
pub fn call_deadline() -> std::time::Duration {
    super::pg::call_deadline()
}

impl Location {
    /// The database here left a call sent at `sent` unanswered (a
    /// heartbeat's renewal given up): `WF_DB_RETRY` counts from then for
    /// this process's other calls to it too.
    pub fn unanswered(&self, sent: std::time::Instant) {
        if let Location::Postgres(target) = self {
            super::pg::unanswered(&target.describe(), sent);
        }
    }
}
