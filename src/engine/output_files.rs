//! The `$WF_OUTPUT` files of a run's attempts: each attempt gets a file of
//! its own, under a name no earlier attempt was given, and wf reads it when
//! the attempt succeeds. A run's files are in a folder of its own in
//! `$TMPDIR` (mode 0700, removed with the run; the children a run runs in
//! its process share one, [`SharedOutputFiles`]): a few entries to look
//! names up in rather than the shared temp folder's, and names that need no
//! randomness (a count), since nobody else can create one there.
//!
//! Making and removing a file per step is costly on ext4: a new inode is
//! searched for in the inode bitmap, and without a journal every inode freed
//! in the last few seconds is skipped after a read of its on-disk record
//! (`find_inode_bit`, `recently_deleted`), so the search grows with the rate
//! at which steps end (a profile of 1000 `/bin/true` steps: 12% of wf's own
//! CPU in `ext4_create` and `unlink`). So an ended attempt's file is
//! recycled: renamed to a fresh random name (its old name, known to the
//! attempt's processes, is gone at once), emptied, and given to a later
//! attempt, only when the kernel grants a write lease on it, which it does
//! only when no other open file description can write to it. A process a
//! step left behind that still holds its `$WF_OUTPUT` open keeps that file:
//! it is removed and a new one made, so no step can write into another's
//! outputs. Files are made and recycled while steps run (`tidy`), not
//! between one step's end and the next one's start.

use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use tempfile::{NamedTempFile, TempDir, TempPath};

const PREFIX: &str = "wf-output-";

/// Cleared when the file system refuses leases (`EINVAL`, `EACCES`, ...):
/// then every attempt gets a new file.
static RECYCLE: AtomicBool = AtomicBool::new(true);

/// An attempt's `$WF_OUTPUT` file: wf's descriptor, the name, and the file's
/// identity (device and inode), known from when it was made.
pub struct OutputFile {
    file: NamedTempFile,
    id: (u64, u64),
}

impl OutputFile {
    pub fn path(&self) -> &Path {
        self.file.path()
    }
}

/// One spare file made (or recycled) ahead, and the files of ended attempts
/// waiting for `tidy`, in the run's folder.
#[derive(Default)]
pub struct OutputFiles {
    spare: Option<OutputFile>,
    spent: Vec<OutputFile>,
    /// A step of this run used one: worth keeping a spare.
    used: bool,
    /// Names given so far in `dir`.
    named: u64,
    /// Dropped last: the files' own drops remove them first.
    dir: Option<TempDir>,
}

/// One [`OutputFiles`] for several runs of this process: a parent's
/// children run here share one folder and one spare, rather than a folder
/// made and removed for each child (its mkdir, its inode, its removal: a
/// tenth of a sequential child's cost, bench/RESULTS.md).
#[derive(Clone, Default)]
pub struct SharedOutputFiles(std::sync::Arc<std::sync::Mutex<OutputFiles>>);

impl SharedOutputFiles {
    /// The files, for a call that does not wait (never held across one).
    pub fn lock(&self) -> std::sync::MutexGuard<'_, OutputFiles> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl std::fmt::Debug for SharedOutputFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedOutputFiles")
    }
}

impl OutputFiles {
    /// A file for an attempt about to start.
    pub fn take(&mut self) -> std::io::Result<OutputFile> {
        self.used = true;
        match self.spare.take() {
            Some(f) => Ok(f),
            None => self.new_file(),
        }
    }

    /// A file taken for an attempt that did not start after all: still
    /// empty and unseen, so it is the next spare as it is.
    pub fn unused(&mut self, file: OutputFile) {
        match self.spare {
            None => self.spare = Some(file),
            Some(_) => self.spent.push(file),
        }
    }

    /// An ended attempt's file, recycled or removed at the next `tidy` (or
    /// removed on drop).
    pub fn spent(&mut self, file: OutputFile) {
        self.spent.push(file);
    }

    /// Recycles or removes the files of ended attempts and makes sure of a
    /// spare: called once the loop has started what it could, while those
    /// steps run.
    pub fn tidy(&mut self) {
        for file in std::mem::take(&mut self.spent) {
            if self.spare.is_none() {
                let name = self.next_name();
                self.spare = name.and_then(|name| recycle(file, name));
            }
        }
        if self.used && self.spare.is_none() {
            self.spare = self.new_file().ok();
        }
    }

    /// A name in the run's folder that no file was given yet (`None` when
    /// the folder cannot be made).
    fn next_name(&mut self) -> Option<PathBuf> {
        if self.dir.is_none() {
            use std::os::unix::fs::PermissionsExt;
            let dir = tempfile::Builder::new()
                .prefix(PREFIX)
                .permissions(std::fs::Permissions::from_mode(0o700))
                .tempdir()
                .ok()?;
            self.dir = Some(dir);
        }
        self.named += 1;
        Some(self.dir.as_ref()?.path().join(self.named.to_string()))
    }

    /// A new, empty file. A step may have removed the run's folder: then a
    /// new folder is made.
    fn new_file(&mut self) -> std::io::Result<OutputFile> {
        let mut retried = false;
        loop {
            let path = self
                .next_name()
                .ok_or_else(|| std::io::Error::other("cannot make a private folder in $TMPDIR"))?;
            match create(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && !retried => {
                    retried = true;
                    self.dir = None;
                }
                // (A step made a file by this name: the next one.)
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                made => return made,
            }
        }
    }
}

/// A new file at `path` (which must not exist), mode 0600.
fn create(path: &Path) -> std::io::Result<OutputFile> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    // From here on, dropping the path removes the file.
    let path = TempPath::try_from_path(path).inspect_err(|_| {
        let _ = std::fs::remove_file(path);
    })?;
    let meta = file.metadata()?;
    Ok(OutputFile {
        file: NamedTempFile::from_parts(file, path),
        id: (meta.dev(), meta.ino()),
    })
}

/// `file` under the name `new` (in the same folder), empty, if no one else
/// can write to it; `None` (and the file removed) otherwise.
fn recycle(file: OutputFile, new: PathBuf) -> Option<OutputFile> {
    if !RECYCLE.load(Ordering::Relaxed) {
        return None;
    }
    let OutputFile { file, id } = file;
    let (file, path) = file.into_parts();
    let old = path.keep().ok()?;
    let renamed = nix::fcntl::renameat2(
        nix::fcntl::AT_FDCWD,
        &old,
        nix::fcntl::AT_FDCWD,
        &new,
        nix::fcntl::RenameFlags::RENAME_NOREPLACE,
    );
    if renamed.is_err() {
        let _ = std::fs::remove_file(&old);
        return None;
    }
    // From here on, dropping `new` removes what it names.
    let Ok(new) = TempPath::try_from_path(&new) else {
        let _ = std::fs::remove_file(&new);
        return None;
    };
    // The old name must have held our file: a step may have moved another
    // one (or a link) onto it, which is removed here.
    let named = std::fs::symlink_metadata(&new).ok()?;
    if (named.dev(), named.ino()) != id {
        return None;
    }
    if !sole_writer(&file) {
        return None;
    }
    if named.len() > 0 {
        file.set_len(0).ok()?;
    }
    Some(OutputFile {
        file: NamedTempFile::from_parts(file, new),
        id,
    })
}

/// Whether wf's descriptor is the only open file description that can write
/// to `file` (`spawn::sole_writer`: a write lease, let go at once).
fn sole_writer(file: &File) -> bool {
    super::spawn::sole_writer(file.as_fd()).unwrap_or_else(|_| {
        // Leases are not to be had here (a file system or a policy that
        // refuses them): new files from now on.
        RECYCLE.store(false, Ordering::Relaxed);
        false
    })
}

/// What an attempt wrote to its file, `None` when it wrote nothing: known
/// from one look at its name, and read through wf's own descriptor. When
/// the name now holds another file (a step that wrote one aside and moved it
/// onto `$WF_OUTPUT`), that file is read, as the step meant; it must be a
/// regular file (a FIFO would block).
pub fn contents(file: &OutputFile) -> std::io::Result<Option<Box<dyn std::io::Read + '_>>> {
    use std::os::unix::fs::OpenOptionsExt;
    let named = std::fs::metadata(file.path())?;
    if (named.dev(), named.ino()) == file.id {
        if named.len() == 0 {
            return Ok(None);
        }
        return Ok(Some(Box::new(At {
            file: file.file.as_file(),
            pos: 0,
        })));
    }
    let moved = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(file.path())?;
    if !moved.metadata()?.is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    Ok(Some(Box::new(moved)))
}

/// Reads a file from the start without moving its descriptor's offset.
struct At<'a> {
    file: &'a File,
    pos: u64,
}

impl std::io::Read for At<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}
