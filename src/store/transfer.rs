//! `wf db copy` and a PostgreSQL history's backup: every row of one store's
//! history written into another, a batch of instances at a time, each batch
//! in one transaction of the target ([`copy`]).
//!
//! Reading and writing overlap when the source is a SQLite file: a thread of
//! its own (`wf-copy-read`) reads the batches on a second connection, in one
//! read transaction (the same one snapshot as reading on the store's own
//! connection), a batch or two ahead of the writes, while wf's thread hands
//! them to the target. Read one after the other, 100,000 instances took
//! 12.3 s to copy to PostgreSQL; read ahead, 11.6 s, the writer waiting
//! 0.19 s in all for a batch (bench/RESULTS.md, seventeenth session). A
//! PostgreSQL source is read on its own connection between the writes, in
//! one REPEATABLE READ snapshot.

use super::portable::{Batch, Rows, Scope, TABLES};
use super::sqlite::SqliteStore;
use super::{Result, Store, StoreError};
use std::path::{Path, PathBuf};

/// How many instances go in one transaction of a copy's target.
const BATCH: usize = 500;

/// What a copy did.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, utoipa::ToSchema)]
pub struct Copied {
    /// Instances the source holds.
    pub instances: u64,
    /// Of them, written by this copy.
    pub written: u64,
    /// Of them, found in the target already (a copy continued).
    pub skipped: u64,
}

/// What a copy reads from its source, in order: the start, then batches
/// until one is empty.
enum Read {
    Start { instances: u64, global: Vec<Rows> },
    Batch(Batch),
}

/// Copies every row of `source`'s history into `target`, read in one
/// snapshot of the source and written a batch of instances at a time, each
/// batch in one transaction of the target with every row of its
/// instances. `resume`: the target may hold some already (a copy
/// interrupted), which are skipped, each having been written whole; else
/// it holds none, and is not asked. `clear_leases`: no instance is held by
/// anyone in the target (its holders were the source's). `progress` hears
/// how many instances are done of how many.
pub async fn copy(
    source: &Store,
    target: &mut Store,
    resume: bool,
    clear_leases: bool,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Copied> {
    let system = source.system();
    let mut write = Writer {
        target,
        resume,
        clear_leases,
        system,
        progress,
        copied: Copied::default(),
    };
    if let Store::Sqlite(s) = source {
        return read_beside(s.path().to_path_buf(), &mut write).await;
    }
    source
        .snapshot(async |s: &Store| -> Result<Copied> {
            let mut global = Vec::new();
            for table in TABLES.iter().filter(|t| t.scope == Scope::Global) {
                global.push(Rows {
                    table,
                    rows: s.portable_global(table).await?,
                });
            }
            let instances = s.portable_instance_count().await?;
            write.take(Read::Start { instances, global }).await?;
            let mut after: Option<String> = None;
            loop {
                let batch = s.portable_batch(after.as_deref(), BATCH).await?;
                let Some(last) = batch.ids.last().cloned() else {
                    return Ok(write.copied);
                };
                after = Some(last);
                write.take(Read::Batch(batch)).await?;
            }
        })
        .await
}

/// The writing side of a copy.
struct Writer<'a> {
    target: &'a mut Store,
    resume: bool,
    clear_leases: bool,
    system: &'static str,
    progress: &'a mut dyn FnMut(u64, u64),
    copied: Copied,
}

impl Writer<'_> {
    async fn take(&mut self, read: Read) -> Result<()> {
        let batch = match read {
            Read::Start { instances, global } => {
                self.copied.instances = instances;
                return self.target.portable_write(&global, &Batch::default()).await;
            }
            Read::Batch(batch) => batch,
        };
        let n = batch.ids.len() as u64;
        let present = if self.resume {
            self.target.portable_present(&batch.ids).await?
        } else {
            Vec::new()
        };
        let mut batch = if present.is_empty() {
            batch
        } else {
            batch.only(|id| !present.iter().any(|p| p == id))
        };
        if self.clear_leases {
            batch.clear_leases();
        }
        batch.explicit_commit_spans(self.system);
        if !batch.ids.is_empty() {
            self.target.portable_load(&batch).await?;
        }
        self.copied.written += batch.ids.len() as u64;
        self.copied.skipped += n - batch.ids.len() as u64;
        (self.progress)(
            self.copied.written + self.copied.skipped,
            self.copied.instances,
        );
        Ok(())
    }
}

/// How many batches the reading thread may be ahead of the writes.
const AHEAD: usize = 2;

/// A copy from the SQLite file at `path`, read on a thread of its own.
async fn read_beside(path: PathBuf, write: &mut Writer<'_>) -> Result<Copied> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Read>>(AHEAD);
    let reader = std::thread::Builder::new()
        .name("wf-copy-read".into())
        .spawn(move || read_all(&path, &tx))
        .map_err(|e| StoreError::Sql(format!("cannot start the copy's reader: {e}")))?;
    let mut out = Ok(());
    while let Some(read) = rx.recv().await {
        out = match read {
            Ok(read) => write.take(read).await,
            Err(e) => Err(e),
        };
        if out.is_err() {
            break;
        }
    }
    // The reader stops at its next batch once no one takes it.
    drop(rx);
    let _ = reader.join();
    out.map(|()| write.copied)
}

/// The reading thread: every batch of the file at `path` in one read
/// transaction, sent to `tx` until it is done or no one takes them.
fn read_all(path: &Path, tx: &tokio::sync::mpsc::Sender<Result<Read>>) {
    let store = match SqliteStore::open(path) {
        Ok(s) => s,
        Err(e) => {
            let _ = tx.blocking_send(Err(e));
            return;
        }
    };
    let read = |store: &SqliteStore| -> Result<()> {
        let mut global = Vec::new();
        for table in TABLES.iter().filter(|t| t.scope == Scope::Global) {
            global.push(Rows {
                table,
                rows: store.portable_global(table)?,
            });
        }
        let instances = store
            .portable_counts()?
            .iter()
            .find(|(t, _)| *t == "instances")
            .map_or(0, |(_, n)| *n as u64);
        if tx
            .blocking_send(Ok(Read::Start { instances, global }))
            .is_err()
        {
            return Ok(());
        }
        let mut after: Option<String> = None;
        loop {
            let batch = store.portable_batch(after.as_deref(), BATCH)?;
            let Some(last) = batch.ids.last().cloned() else {
                return Ok(());
            };
            after = Some(last);
            if tx.blocking_send(Ok(Read::Batch(batch))).is_err() {
                return Ok(());
            }
        }
    };
    let out = match store.begin_snapshot() {
        Ok(began) => {
            let out = read(&store);
            if began {
                store.end_snapshot();
            }
            out
        }
        Err(e) => Err(e),
    };
    if let Err(e) = out {
        let _ = tx.blocking_send(Err(e));
    }
}
