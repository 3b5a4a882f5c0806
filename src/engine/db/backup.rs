//! `wf db backup DEST`: a consistent copy of a live history in a new
//! SQLite file, which any wf opens as `--db DEST` (`Store::backup_to`: one
//! read transaction on SQLite, one REPEATABLE READ snapshot on
//! PostgreSQL). Runs, workers and `wf serve` go on writing meanwhile. The
//! copy is made under a temporary name beside DEST, synced, and renamed
//! into place (the folder synced too), so DEST, once there, is a whole
//! backup: a crash or a kill leaves the temporary file, never half a DEST.

use super::super::EngineError;
use crate::store::Store;
use std::path::{Path, PathBuf};

/// What a backup made.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BackedUp {
    pub path: PathBuf,
    pub instances: u64,
    pub bytes: u64,
}

/// Backs `source`'s history up to `dest`, which must not exist.
pub async fn backup(
    source: &Store,
    dest: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<BackedUp, EngineError> {
    if dest.exists() {
        return Err(EngineError::Input(format!(
            "{} exists: a backup never replaces a file; name a new one",
            dest.display()
        )));
    }
    let name = dest
        .file_name()
        .ok_or_else(|| EngineError::Input(format!("{} names no file", dest.display())))?;
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(EngineError::Input(format!(
            "{}: no such folder",
            dir.display()
        )));
    }
    let partial = dir.join(format!(
        ".{}.partial-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let made = source.backup_to(&partial, progress).await;
    let instances = match made {
        Ok(n) => n,
        Err(e) => {
            remove_partial(&partial);
            return Err(e.into());
        }
    };
    let io = |what: &str, e: std::io::Error| {
        EngineError::Internal(format!("{what} {}: {e}", dest.display()))
    };
    let synced = std::fs::File::open(&partial).and_then(|f| f.sync_all());
    if let Err(e) = synced {
        remove_partial(&partial);
        return Err(io("cannot sync", e));
    }
    // Never over a DEST made meanwhile: hard-link it into place (which
    // fails if DEST exists), then drop the temporary name.
    if let Err(e) = std::fs::hard_link(&partial, dest) {
        remove_partial(&partial);
        return Err(io("cannot write", e));
    }
    remove_partial(&partial);
    std::fs::File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io("cannot sync the folder of", e))?;
    let bytes = std::fs::metadata(dest).map(|m| m.len()).unwrap_or(0);
    Ok(BackedUp {
        path: dest.to_path_buf(),
        instances,
        bytes,
    })
}

/// Removes a backup's temporary file and what SQLite made beside it.
fn remove_partial(partial: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = partial.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
}
