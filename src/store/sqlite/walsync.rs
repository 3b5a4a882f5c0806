//! A durable commit whose flush to disk is waited for later: the
//! transaction is committed without a sync (as `commit_unsynced`), and
//! the WAL file is then flushed (`fdatasync`) on a thread of wf's own while
//! wf's thread goes on. What `synchronous=FULL` does in WAL mode at each
//! commit is exactly that flush of the WAL, so once it returned the commit
//! is as durable as a FULL one.
//!
//! Why: the engine starts a step's process while the commit that records
//! its attempt reaches the disk, holding the process at its exec until the
//! flush returned (`engine::spawn::hold`), so a step pays for the longer of
//! the two rather than for both. The flush must be on another thread for
//! that: a commit on wf's thread would keep it from starting the process.
//!
//! Until the flush returned, another reader may see the commit (it is in
//! the WAL) though a power loss could still take it away; nothing of the
//! step it records has run by then.

use super::SqliteStore;
use crate::store::{Fence, Result, StoreError, Write};
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};

/// A commit in the WAL whose flush to disk is under way.
pub struct Flushing(tokio::sync::oneshot::Receiver<std::io::Result<()>>);

impl Flushing {
    /// Waits until the commit is on disk.
    pub async fn durable(self) -> Result<()> {
        match self.0.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(StoreError::Sql(format!(
                "cannot flush the database's WAL to disk: {}",
                crate::workflow::io_reason(&e)
            ))),
            Err(_) => Err(StoreError::Sql("the WAL flush thread is gone".into())),
        }
    }
}

type Request = (Arc<File>, tokio::sync::oneshot::Sender<std::io::Result<()>>);

/// The flushing thread, started at the first request (`None` if it could
/// not be: commits then sync on wf's thread, as FULL does).
fn flusher() -> Option<&'static Mutex<mpsc::Sender<Request>>> {
    static FLUSHER: OnceLock<Option<Mutex<mpsc::Sender<Request>>>> = OnceLock::new();
    FLUSHER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Request>();
            std::thread::Builder::new()
                .name("wf-wal-flush".into())
                .spawn(move || {
                    for (file, done) in rx {
                        let _ = done.send(file.sync_data());
                    }
                })
                .ok()
                .map(|_| Mutex::new(tx))
        })
        .as_ref()
}

/// The WAL file, opened once and again when it is not the same file.
pub(super) struct Wal {
    file: Arc<File>,
    id: (u64, u64),
}

impl SqliteStore {
    /// Commits `writes` (fenced, as `commit`) and starts flushing the WAL:
    /// the commit is durable once the returned `Flushing` says so. `None`:
    /// durable already, or as durable as the database is set to be
    /// (`WF_DURABILITY=normal` syncs no commit).
    pub fn commit_flushing_later(
        &mut self,
        fence: &Fence,
        writes: &[Write],
    ) -> Result<Option<Flushing>> {
        if self.durability != super::Durability::Full {
            self.commit(fence, writes)?;
            return Ok(None);
        }
        // No WAL to open (a journal mode other than WAL), or no thread: a
        // plain commit.
        let (Ok(wal), Some(flusher)) = (self.wal_file(), flusher()) else {
            self.commit(fence, writes)?;
            return Ok(None);
        };
        self.commit_unsynced(fence, writes)?;
        let (done, flushed) = tokio::sync::oneshot::channel();
        let sent = flusher
            .lock()
            .map_err(|_| StoreError::Sql("the WAL flush thread is gone".into()))?
            .send((wal, done));
        if sent.is_err() {
            return Err(StoreError::Sql("the WAL flush thread is gone".into()));
        }
        Ok(Some(Flushing(flushed)))
    }

    /// The WAL file as it is now: the one opened before if the path still
    /// names it (its device and inode), else opened anew.
    fn wal_file(&mut self) -> std::io::Result<Arc<File>> {
        let mut path = self.path.clone().into_os_string();
        path.push("-wal");
        let meta = std::fs::metadata(&path)?;
        let id = (meta.dev(), meta.ino());
        if let Some(wal) = &self.wal
            && wal.id == id
        {
            return Ok(wal.file.clone());
        }
        let file = Arc::new(File::open(&path)?);
        let meta = file.metadata()?;
        self.wal = Some(Wal {
            file: file.clone(),
            id: (meta.dev(), meta.ino()),
        });
        Ok(file)
    }
}
