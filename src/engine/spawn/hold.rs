//! Holding a step's process at its `execve` while its attempt commits.
//!
//! docs/execution.md asks that an attempt be durable before its command can have any
//! effect. Started only after the commit returns, a step pays for the commit
//! (on SQLite its transaction and WAL sync; on PostgreSQL a round trip) and
//! then for its process's clone and exec, one after the other. Held, it pays
//! for the longer of the two: the process is cloned and its program loaded
//! while the commit is under way, and the kernel stops it before its first
//! instruction, until wf lets it go on.
//!
//! The stop is ptrace's exec stop: the child asks to be traced by wf
//! (`PTRACE_TRACEME`) just before its `execve`, so that the kernel stops it
//! with a `SIGTRAP` once the new program is loaded and before it runs.
//! [`release`] detaches it, which lets it run untraced from there, exactly as
//! an untraced exec would have. Should wf die before that, the trap's default
//! action (and the parent-death signal) kills the process: it never runs.
//!
//! A traced exec does not grant privileges, so a program that gains them at
//! exec (set-user-ID or set-group-ID, or file capabilities) is not held: it
//! is started after the commit, as before. Nor is any step where ptrace is
//! refused (a seccomp filter, Yama's `ptrace_scope` 3, wf itself being traced
//! by a debugger): the first refusal is remembered for the rest of the run.
//! `WF_NO_SPAWN_HOLD=1` takes that path from the start (`crate::switches`).
//!
//! The tracer is the thread that cloned the child, and only it may detach
//! it: wf's runtime is one thread, which starts every step and releases it.

use nix::libc::{self, c_int};
use std::cell::Cell;
use std::ffi::CStr;
use std::io;

thread_local! {
    /// Set once a child's `PTRACE_TRACEME` failed or killed it. Per thread,
    /// as a seccomp filter can be (wf's runtime is one thread).
    static REFUSED: Cell<bool> = const { Cell::new(false) };
}

/// Whether ptrace was refused to a child of this thread, or is not to be
/// used (`WF_NO_SPAWN_HOLD`).
pub(super) fn refused() -> bool {
    REFUSED.get() || crate::switches::get().no_spawn_hold
}

/// Remembers that ptrace is refused here.
pub(super) fn refuse() {
    REFUSED.set(true);
}

/// Whether `path` gains privileges when exec'd: set-user-ID, set-group-ID
/// (with group execute), or file capabilities. Unknown counts as yes.
pub(super) fn privileged(path: &CStr) -> bool {
    let Ok(st) = nix::sys::stat::stat(path) else {
        // execve will fail, or the path changes under us: not held.
        return true;
    };
    if st.st_mode & libc::S_ISUID != 0
        || st.st_mode & (libc::S_ISGID | libc::S_IXGRP) == (libc::S_ISGID | libc::S_IXGRP)
    {
        return true;
    }
    // SAFETY: getxattr reads two C strings; no buffer is passed (its size
    // is asked).
    let r = unsafe {
        libc::getxattr(
            path.as_ptr(),
            c"security.capability".as_ptr(),
            std::ptr::null_mut(),
            0,
        )
    };
    r >= 0 || nix::errno::Errno::last_raw() != libc::ENODATA
}

/// Lets held child `pid` run on: waits until the kernel stopped it at its
/// exec (it is loading its program while wf commits, and most often
/// already stopped), then detaches from it. A signal that stopped it first
/// (someone's `kill` while it loaded) is delivered, as it would have been
/// untraced, and the exec's stop awaited after it. A child that died
/// meanwhile is left to be reaped as any other.
pub fn release(pid: libc::pid_t) -> io::Result<()> {
    loop {
        let (code, sig) = report(pid)?;
        if code != libc::CLD_TRAPPED {
            return Ok(());
        }
        let (request, deliver) = if sig == libc::SIGTRAP {
            (libc::PTRACE_DETACH, 0)
        } else {
            (libc::PTRACE_CONT, sig)
        };
        // SAFETY: ptrace on our own tracee, stopped (just reported).
        let r = unsafe {
            libc::ptrace(
                request,
                pid,
                std::ptr::null_mut::<libc::c_void>(),
                deliver as usize as *mut libc::c_void,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        if request == libc::PTRACE_DETACH {
            return Ok(());
        }
    }
}

/// How the kernel reports child `pid` (`si_code`, `si_status`), once it
/// stopped or exited: looked at, not consumed (`WNOWAIT`), so that an exit
/// stays for the reaper.
fn report(pid: libc::pid_t) -> io::Result<(c_int, c_int)> {
    loop {
        // SAFETY: an all-zero siginfo_t is valid (plain integers).
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid on our own child writes the siginfo we pass.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &raw mut info,
                libc::WSTOPPED | libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 {
            // SAFETY: si_status is the field a child's reports fill.
            let status = unsafe { info.si_status() };
            return Ok((info.si_code, status));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::rt;
    use super::super::{NOT_HELD, Spec, spawn};
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;
    use tokio::io::AsyncReadExt;

    fn spec<'a>(
        program: &'a std::ffi::OsStr,
        args: &'a [&'a std::ffi::OsStr],
        dir: &'a Path,
    ) -> Spec<'a> {
        Spec {
            program,
            args,
            env: &[],
            env_remove: &[],
            dir,
            hold: true,
        }
    }

    /// `sh -c script` in `dir`, held: checks it is stopped by its exec's
    /// trap (the program is loaded, and not one of its instructions has
    /// run). Within the runtime, which the child is registered with.
    fn held_sh(script: &str, dir: &Path) -> (super::super::Child, libc::pid_t) {
        let args = ["-c".as_ref(), script.as_ref()];
        let child = spawn(&spec("sh".as_ref(), &args, dir)).expect("spawn");
        assert!(child.held());
        let pid = child.id() as libc::pid_t;
        assert_eq!(
            report(pid).expect("waitid"),
            (libc::CLD_TRAPPED, libc::SIGTRAP)
        );
        (child, pid)
    }

    #[test]
    fn a_held_process_runs_nothing_until_released() {
        let dir = tempfile::tempdir().expect("tempdir");
        rt().block_on(async {
            let (mut child, pid) = held_sh("echo ran > marker; echo out", dir.path());
            assert!(!dir.path().join("marker").exists());
            release(pid).expect("release");
            let mut out = String::new();
            let mut stdout = child.stdout.take().expect("stdout");
            stdout.read_to_string(&mut out).await.expect("read");
            let status = child.wait().await.expect("wait");
            assert_eq!(status.code(), Some(0));
            assert_eq!(out, "out\n");
            assert!(dir.path().join("marker").exists());
            // Not traced any more: nothing stops it or reports it to wf.
        });
    }

    #[test]
    fn a_signal_to_a_held_process_is_delivered_after_its_release() {
        let dir = tempfile::tempdir().expect("tempdir");
        rt().block_on(async {
            let (mut child, pid) = held_sh("echo ran > marker", dir.path());
            // SAFETY: our own child.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            release(pid).expect("release");
            let status = child.wait().await.expect("wait");
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(status.signal(), Some(libc::SIGTERM));
            assert!(!dir.path().join("marker").exists());
        });
    }

    #[test]
    fn a_program_that_gains_privileges_at_exec_is_not_held() {
        let dir = tempfile::tempdir().expect("tempdir");
        let program = dir.path().join("prog");
        // Copied by `cp`, so that this process never holds the copy open
        // for writing: a child another test thread clones meanwhile would
        // inherit that descriptor until its own exec, and exec'ing the copy
        // then fails with ETXTBSY (seen in CI).
        let copied = std::process::Command::new("cp")
            .arg("/bin/true")
            .arg(&program)
            .status()
            .expect("cp");
        assert!(copied.success(), "cp /bin/true: {copied}");
        rt().block_on(async {
            for (mode, held) in [
                (0o755, true),
                (0o4755, false),
                (0o2755, false),
                (0o2745, true),
            ] {
                std::fs::set_permissions(&program, std::fs::Permissions::from_mode(mode))
                    .expect("chmod");
                let spawned = spawn(&spec(program.as_os_str(), &[], dir.path()));
                match spawned {
                    Ok(mut child) if held => {
                        assert!(child.held());
                        release(child.id() as libc::pid_t).expect("release");
                        assert_eq!(child.wait().await.expect("wait").code(), Some(0));
                    }
                    Err(e) if !held => assert_eq!(e.kind(), NOT_HELD, "mode {mode:o}"),
                    Ok(_) => panic!("mode {mode:o}: held"),
                    Err(e) => panic!("mode {mode:o}: {e}"),
                }
            }
        });
    }

    /// Installs, on this thread only, a seccomp filter that answers
    /// `ptrace` with `action`; its children inherit it.
    #[cfg(target_arch = "x86_64")]
    fn refuse_ptrace(action: u32) {
        const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
        let stmt = |code: u32, k: u32| libc::sock_filter {
            code: code as u16,
            jt: 0,
            jf: 0,
            k,
        };
        let jeq = |k: u32, jt: u8, jf: u8| libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt,
            jf,
            k,
        };
        let load = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
        let ret = libc::BPF_RET | libc::BPF_K;
        let mut filter = [
            stmt(load, 4), // seccomp_data.arch
            jeq(AUDIT_ARCH_X86_64, 1, 0),
            stmt(ret, libc::SECCOMP_RET_ALLOW),
            stmt(load, 0), // seccomp_data.nr
            jeq(libc::SYS_ptrace as u32, 0, 1),
            stmt(ret, action),
            stmt(ret, libc::SECCOMP_RET_ALLOW),
        ];
        let prog = libc::sock_fprog {
            len: filter.len() as u16,
            filter: filter.as_mut_ptr(),
        };
        // SAFETY: prctl with integer arguments only.
        let r = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
        assert_eq!(r, 0);
        // SAFETY: prctl reads the program we pass, for this thread.
        let r = unsafe {
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &raw const prog,
            )
        };
        assert_eq!(r, 0, "seccomp: {}", io::Error::last_os_error());
    }

    /// Where ptrace is refused (an error, or a filter that kills the
    /// process that asks), nothing is started when asked to hold, from the
    /// first refusal on; unheld processes start as ever.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn where_ptrace_is_refused_nothing_is_held() {
        for action in [
            libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
            libc::SECCOMP_RET_KILL_PROCESS,
        ] {
            // A thread of its own: the filter and the refusal stay on it.
            std::thread::spawn(move || {
                refuse_ptrace(action);
                let dir = tempfile::tempdir().expect("tempdir");
                let args = ["-c".as_ref(), "echo ran >> marker".as_ref()];
                rt().block_on(async {
                    assert!(!refused());
                    let first = spawn(&spec("sh".as_ref(), &args, dir.path()));
                    assert_eq!(first.err().map(|e| e.kind()), Some(NOT_HELD));
                    assert!(refused());
                    let again = spawn(&spec("sh".as_ref(), &args, dir.path()));
                    assert_eq!(again.err().map(|e| e.kind()), Some(NOT_HELD));
                    assert!(!dir.path().join("marker").exists());
                    let unheld = Spec {
                        hold: false,
                        ..spec("sh".as_ref(), &args, dir.path())
                    };
                    let mut child = spawn(&unheld).expect("spawn");
                    assert!(!child.held());
                    assert_eq!(child.wait().await.expect("wait").code(), Some(0));
                    assert_eq!(
                        std::fs::read_to_string(dir.path().join("marker")).unwrap(),
                        "ran\n"
                    );
                });
            })
            .join()
            .expect("test thread");
        }
    }
}
