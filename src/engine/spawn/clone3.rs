//! Cloning with `clone3`, which can do two things `clone` cannot: reset
//! every signal handler of the parent in the child (`CLONE_CLEAR_SIGHAND`,
//! Linux 5.5), so the child need not ask about each of 64 signals before it
//! execs (its parent waits meanwhile), and return the child's pidfd
//! (`CLONE_PIDFD`) without a `pidfd_open`. glibc has no wrapper for it: the
//! child must start on its own stack inside the system call, so it is a few
//! lines of assembly, as glibc's own `clone` is. Elsewhere than x86-64, and
//! where `clone3` is refused (ENOSYS: an old kernel, or a seccomp filter, as
//! container runtimes install), `clone` is used, as it is with
//! `WF_NO_CLONE3=1` (`crate::switches`). The signal resets the
//! child makes before `execve`, on either path, are here too: they are
//! `rt_sigaction` itself, which glibc's `sigaction` does not fully give.

use super::{ChildArgs, child_main};
use nix::libc::{self, c_int, c_void};

const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;

/// Set once `clone3` was refused: `clone` from then on.
pub(super) static REFUSED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Signals 1 to 64, as the kernel numbers them.
pub(super) const SIGNALS: c_int = 64;

/// A signal's action as the kernel takes it (`rt_sigaction`): glibc's
/// `sigaction` refuses signals 32 and 33, which it keeps for itself.
#[repr(C)]
struct KernelAction {
    handler: usize,
    flags: u64,
    restorer: usize,
    mask: u64,
}

/// Sets `sig` back to its default action. Async-signal-safe.
pub(super) fn default_action(sig: c_int) {
    let dfl = KernelAction {
        handler: libc::SIG_DFL,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    // SAFETY: rt_sigaction reads the action we pass; no old one asked.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            &dfl,
            std::ptr::null_mut::<KernelAction>(),
            8,
        )
    };
}

/// What `sig` is set to (a handler, `SIG_DFL` or `SIG_IGN`), if the
/// kernel says. Async-signal-safe.
pub(super) fn handler(sig: c_int) -> Option<usize> {
    let mut old = KernelAction {
        handler: 0,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    // SAFETY: rt_sigaction writes the current action into `old`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            std::ptr::null::<KernelAction>(),
            &mut old,
            8,
        )
    };
    (r == 0).then_some(old.handler)
}

/// The signals set to be ignored in this process (bit `n - 1` for
/// signal `n`), read once: only Rust's own start-up and whoever started
/// wf set any (wf never does later).
fn ignored() -> u64 {
    static IGNORED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *IGNORED.get_or_init(|| {
        (1..=SIGNALS)
            .filter(|&sig| handler(sig) == Some(libc::SIG_IGN))
            .fold(0, |set, sig| set | 1 << (sig - 1))
    })
}

/// Clones a child that runs `child_main(args)` on the stack `[base,
/// base + len)` and shares this process's memory, this thread suspended
/// until it exec'd or exited; stores its pidfd in `pidfd`. The child's
/// pid, or a negated errno (`-ENOSYS`: use `clone`).
///
/// # Safety
/// As `clone(CLONE_VM | CLONE_VFORK)`: `args` and the stack stay alive
/// and unused by anyone else until this returns; all signals blocked.
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn spawn(
    args: &mut ChildArgs,
    base: *mut c_void,
    len: usize,
    pidfd: &mut c_int,
) -> libc::pid_t {
    use std::sync::atomic::Ordering;
    if REFUSED.load(Ordering::Relaxed) || crate::switches::get().no_clone3 {
        return -libc::ENOSYS;
    }
    args.ignored = Some(ignored());
    // SAFETY: an all-zero clone_args is valid; the fields set below.
    let mut cl: libc::clone_args = unsafe { std::mem::zeroed() };
    cl.flags =
        (libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD) as u64 | CLONE_CLEAR_SIGHAND;
    cl.pidfd = std::ptr::from_mut(pidfd) as u64;
    cl.exit_signal = libc::SIGCHLD as u64;
    cl.stack = base as u64;
    cl.stack_size = len as u64;
    let entry: extern "C" fn(*mut c_void) -> c_int = child_main;
    let ret: i64;
    // SAFETY: the system call's contract as documented above. In the
    // child, which starts after `syscall` on the new stack (its top
    // 16-byte aligned, as a call requires), the frame pointer is
    // cleared, `child_main` called with `args` (r12 and r13 are the
    // parent's, copied), and whatever it returns is its exit status.
    // The parent continues at `2:` with the result in rax.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r12",
            "call r13",
            "mov edi, eax",
            "mov eax, {exit}",
            "syscall",
            "ud2",
            "2:",
            exit = const libc::SYS_exit,
            inlateout("rax") libc::SYS_clone3 => ret,
            in("rdi") &raw mut cl,
            in("rsi") std::mem::size_of::<libc::clone_args>(),
            in("r12") std::ptr::from_mut(args).cast::<c_void>(),
            in("r13") entry,
            lateout("rcx") _,
            lateout("r11") _,
        );
    }
    let ret = ret as libc::pid_t;
    // EINVAL: a kernel without CLONE_CLEAR_SIGHAND; EPERM: a filter.
    if ret == -libc::ENOSYS || ret == -libc::EINVAL || ret == -libc::EPERM {
        REFUSED.store(true, Ordering::Relaxed);
        return -libc::ENOSYS;
    }
    ret
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn spawn(
    _args: &mut ChildArgs,
    _base: *mut c_void,
    _len: usize,
    _pidfd: &mut c_int,
) -> libc::pid_t {
    -libc::ENOSYS
}
