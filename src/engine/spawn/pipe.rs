//! The pipes a step's stdout and stderr go through: made for each child,
//! the read end non-blocking and registered with the runtime by wf itself,
//! since tokio's own pipe type checks what it is given (an `fstat`, two
//! `fcntl`s) before it registers it, four system calls a pipe, two pipes a
//! step, for a descriptor made just before.

use nix::libc::{self, c_int};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use tokio::io::unix::AsyncFd;

/// The read end of a child's stdout or stderr pipe, non-blocking and
/// registered with the runtime.
pub struct PipeReader(AsyncFd<OwnedFd>);

impl PipeReader {
    /// `fd`: the read end of a pipe, already non-blocking.
    pub(super) fn new(fd: OwnedFd) -> io::Result<PipeReader> {
        // SAFETY: `fd` is a valid open descriptor that the AsyncFd owns from
        // here on, so it stays open and the same for the AsyncFd's lifetime.
        unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
            .map(PipeReader)
            .map_err(|e| e.into_parts().1)
    }
}

impl tokio::io::AsyncRead for PipeReader {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        loop {
            let mut guard = std::task::ready!(self.0.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let read = guard.try_io(|fd| {
                // SAFETY: reading into the buffer's initialized, unfilled part.
                let n = unsafe {
                    libc::read(fd.as_raw_fd(), unfilled.as_mut_ptr().cast(), unfilled.len())
                };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            });
            match read {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return std::task::Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return std::task::Poll::Ready(Err(e)),
                // Not ready after all: the readiness was cleared; wait again.
                Err(_would_block) => continue,
            }
        }
    }
}

/// A pipe whose read end (the first) is non-blocking, for wf, and whose
/// write end blocks, as a child's stdout does.
pub(super) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let on: c_int = 1;
    // SAFETY: FIONBIO reads the int we pass on a descriptor we own.
    if unsafe { libc::ioctl(r.as_raw_fd(), libc::FIONBIO, &raw const on) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((r, w))
}
