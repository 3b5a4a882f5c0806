//! A write lease (`F_SETLEASE`), taken to learn whether anyone else can
//! write to a file (`output_files` asks it of a step's `$WF_OUTPUT` file before
//! giving it to another attempt: a process a step left behind may hold it
//! open). nix has no wrapper for `F_SETLEASE`, so the raw call is here, with
//! the rest of wf's unsafe code.

use nix::libc;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Whether `fd` is the only open file description that can write to its
/// file: the kernel grants a write lease only then (`Ok(false)`: `EAGAIN`,
/// someone else can). The lease is let go at once; its only use is that
/// test. An error: leases are not to be had here (a file system or a policy
/// that refuses them).
pub fn sole_writer(fd: BorrowedFd<'_>) -> io::Result<bool> {
    let fd = fd.as_raw_fd();
    // SAFETY: fcntl on a descriptor the caller lends for the call; no
    // memory is passed.
    if unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_WRLCK) } != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EAGAIN) {
            return Ok(false);
        }
        return Err(e);
    }
    // SAFETY: as above.
    unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK) };
    Ok(true)
}
