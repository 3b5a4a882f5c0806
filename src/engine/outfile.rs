//! The `$WF_OUTPUT` files of a run's attempts: each attempt gets a file of
//! its own, under a name no earlier attempt was given, and wf reads it when
//! the attempt succeeds.
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
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::atomic::{AtomicBool, Ordering};
use tempfile::{NamedTempFile, TempPath};

const PREFIX: &str = "wf-output-";

/// Cleared when the file system refuses leases (`EINVAL`, `EACCES`, ...):
/// then every attempt gets a new file.
static RECYCLE: AtomicBool = AtomicBool::new(true);

/// One spare file made (or recycled) ahead, and the files of ended attempts
/// waiting for `tidy`.
#[derive(Default)]
pub struct OutputFiles {
    spare: Option<NamedTempFile>,
    spent: Vec<NamedTempFile>,
    /// A step of this run used one: worth keeping a spare.
    used: bool,
}

impl OutputFiles {
    /// A file for an attempt about to start.
    pub fn take(&mut self) -> std::io::Result<NamedTempFile> {
        self.used = true;
        match self.spare.take() {
            Some(f) => Ok(f),
            None => new_file(),
        }
    }

    /// An ended attempt's file, recycled or removed at the next `tidy` (or
    /// removed on drop).
    pub fn spent(&mut self, file: NamedTempFile) {
        self.spent.push(file);
    }

    /// Recycles or removes the files of ended attempts and makes sure of a
    /// spare: called once the loop has started what it could, while those
    /// steps run.
    pub fn tidy(&mut self) {
        for file in std::mem::take(&mut self.spent) {
            if self.spare.is_none() {
                self.spare = recycle(file);
            }
        }
        if self.used && self.spare.is_none() {
            self.spare = new_file().ok();
        }
    }
}

fn new_file() -> std::io::Result<NamedTempFile> {
    tempfile::Builder::new().prefix(PREFIX).tempfile()
}

/// `file` under a new name, empty, if no one else can write to it; `None`
/// (and the file removed) otherwise.
fn recycle(file: NamedTempFile) -> Option<NamedTempFile> {
    if !RECYCLE.load(Ordering::Relaxed) {
        return None;
    }
    let (file, path) = file.into_parts();
    let dir = path.parent()?.to_path_buf();
    // The old name must be ours: a step may have moved another file onto it.
    if !same_file(
        &file.metadata().ok()?,
        &std::fs::symlink_metadata(&path).ok()?,
    ) {
        return None;
    }
    let old = path.keep().ok()?;
    let new = dir.join(format!(
        "{PREFIX}{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    ));
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
    // From here on, dropping `new` removes the file.
    let new = match TempPath::try_from_path(&new) {
        Ok(path) => path,
        Err(_) => {
            let _ = std::fs::remove_file(&new);
            return None;
        }
    };
    if !sole_writer(&file) {
        return None;
    }
    if file.metadata().ok()?.len() > 0 {
        file.set_len(0).ok()?;
    }
    Some(NamedTempFile::from_parts(file, new))
}

/// Whether wf's descriptor is the only open file description that can write
/// to `file`: the kernel grants a write lease only then. The lease is let go
/// at once; its only use is that test.
fn sole_writer(file: &File) -> bool {
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor this function borrows; no memory is passed.
    if unsafe { nix::libc::fcntl(fd, nix::libc::F_SETLEASE, nix::libc::F_WRLCK) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(nix::libc::EAGAIN) {
            // Leases are not to be had here (a file system or a policy that
            // refuses them): new files from now on.
            RECYCLE.store(false, Ordering::Relaxed);
        }
        return false;
    }
    // SAFETY: as above.
    unsafe { nix::libc::fcntl(fd, nix::libc::F_SETLEASE, nix::libc::F_UNLCK) };
    true
}

/// What an attempt wrote to its file, `None` when it wrote nothing: known
/// from wf's own descriptor, without opening the file again. When the name
/// now holds another file (a step that wrote one aside and moved it onto
/// `$WF_OUTPUT`), that file is read, as the step meant; it must be a regular
/// file (a FIFO would block).
pub fn contents(file: &NamedTempFile) -> std::io::Result<Option<Box<dyn std::io::Read + '_>>> {
    use std::os::unix::fs::OpenOptionsExt;
    let held = file.as_file().metadata()?;
    if same_file(&held, &std::fs::metadata(file.path())?) {
        if held.len() == 0 {
            return Ok(None);
        }
        return Ok(Some(Box::new(At {
            file: file.as_file(),
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

fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    a.dev() == b.dev() && a.ino() == b.ino()
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
