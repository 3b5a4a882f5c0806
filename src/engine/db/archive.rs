//! `wf prune --archive FILE` and `wf db import FILE`. An archive is JSON
//! lines, one self-contained record per instance (`store::portable::record`:
//! its rows, logs and spans, and the definitions it pins), zstd-compressed
//! when FILE ends in `.zst` (a frame per batch: frames concatenate). A
//! prune appends each batch and syncs the file before the transaction that
//! deletes the batch commits, so a crash between the two leaves both, or
//! the archive only, never neither. Importing writes each record's
//! instance whole in one transaction, skipping those the database holds,
//! so an archive imported twice, or one that holds an instance twice (a
//! crash between archive and delete, then a prune again), imports each
//! once.

use super::super::EngineError;
use crate::store::portable::{self, Archive, Batch, Row};
use crate::store::{Store, StoreError};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

/// An archive file open for appending.
pub struct FileArchive {
    path: PathBuf,
    file: File,
    zstd: bool,
    /// Records appended.
    pub records: u64,
}

impl FileArchive {
    /// Opens (creating) `path` for appending.
    pub fn open(path: &Path) -> Result<FileArchive, EngineError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| {
                EngineError::Input(format!(
                    "archive {}: {}",
                    path.display(),
                    crate::workflow::io_reason(&e)
                ))
            })?;
        // A new file's name must survive a crash too.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = File::open(dir).and_then(|d| d.sync_all());
        }
        Ok(FileArchive {
            path: path.to_path_buf(),
            file,
            zstd: is_zstd(path),
            records: 0,
        })
    }
}

fn is_zstd(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "zst")
}

impl Archive for FileArchive {
    fn keep(&mut self, batch: &Batch, definitions: &[Row]) -> crate::store::Result<()> {
        let mut text = Vec::new();
        for id in &batch.ids {
            let line = serde_json::to_string(&portable::record(batch, id, definitions))
                .map_err(|e| StoreError::Sql(format!("an archive record: {e}")))?;
            text.extend_from_slice(line.as_bytes());
            text.push(b'\n');
        }
        let bytes = if self.zstd {
            zstd::encode_all(text.as_slice(), 3)
                .map_err(|e| StoreError::Sql(format!("compressing the archive: {e}")))?
        } else {
            text
        };
        let io =
            |e: std::io::Error| StoreError::Sql(format!("archive {}: {e}", self.path.display()));
        self.file.write_all(&bytes).map_err(io)?;
        self.file.sync_all().map_err(io)?;
        self.records += batch.ids.len() as u64;
        Ok(())
    }
}

/// What an import did.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, utoipa::ToSchema)]
pub struct Imported {
    /// Records read.
    pub records: u64,
    /// Instances written.
    pub written: u64,
    /// Instances the database held already.
    pub skipped: u64,
}

/// Brings the instances archived in `path` back into `store`.
pub async fn import(store: &mut Store, path: &Path) -> Result<Imported, EngineError> {
    let file = File::open(path).map_err(|e| {
        EngineError::Input(format!(
            "archive {}: {}",
            path.display(),
            crate::workflow::io_reason(&e)
        ))
    })?;
    let reader: Box<dyn BufRead> = if is_zstd(path) {
        let decoder = zstd::Decoder::new(file)
            .map_err(|e| EngineError::Input(format!("archive {}: {e}", path.display())))?;
        Box::new(BufReader::new(decoder))
    } else {
        Box::new(BufReader::new(file))
    };
    let mut done = Imported::default();
    for (n, line) in reader.lines().enumerate() {
        let at = || format!("{}:{}", path.display(), n + 1);
        let line = line.map_err(|e| EngineError::Input(format!("{}: {e}", at())))?;
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(&line)
            .map_err(|e| EngineError::Input(format!("{}: not JSON: {e}", at())))?;
        let (batch, definitions) = portable::of_record(&value)
            .map_err(|e| EngineError::Input(format!("{}: {e}", at())))?;
        done.records += 1;
        if !store.portable_present(&batch.ids).await?.is_empty() {
            done.skipped += 1;
            continue;
        }
        let defs = portable::Rows {
            table: portable::table("definitions").unwrap_or(&portable::TABLES[0]),
            rows: definitions,
        };
        store.portable_write(&[defs], &batch).await?;
        done.written += 1;
    }
    Ok(done)
}
