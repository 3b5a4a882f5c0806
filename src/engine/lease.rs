//! Leases: the process driving an instance holds a lease on it, renewed by a
//! heartbeat. Another process may take the lease over once it has expired, or
//! at once when the holder is a process on this host that no longer exists
//! (killed with SIGKILL, say), so a crash never blocks an instance for long.

use crate::store::{self, Store};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long a lease lasts without renewal.
pub const TTL_MS: i64 = 30_000;
/// How often the heartbeat renews it.
const RENEW_EVERY: Duration = Duration::from_secs(5);

fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into())
}

/// This process's lease owner name: `host:pid:nonce`.
pub fn owner_name() -> String {
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    format!("{}:{}:{}", hostname(), std::process::id(), &nonce[..8])
}

/// Whether the process named by a lease owner may still be alive. Holders on
/// other hosts are assumed alive until their lease expires.
pub fn holder_alive(owner: &str) -> bool {
    let mut parts = owner.split(':');
    let (Some(host), Some(pid)) = (parts.next(), parts.next()) else {
        return true;
    };
    if host != hostname() {
        return true;
    }
    let Ok(pid) = pid.parse::<i32>() else {
        return true;
    };
    if pid == std::process::id() as i32 {
        return true;
    }
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => !is_zombie(pid),
        Err(nix::errno::Errno::ESRCH) => false,
        Err(_) => true,
    }
}

/// A killed process that its parent has not reaped yet still answers kill(0).
fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Renews a lease in the background until dropped.
pub struct Heartbeat {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    pub fn start(db: PathBuf, instance: String, owner: String) -> Heartbeat {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let Ok(store) = Store::open(&db) else { return };
            let step = Duration::from_millis(100);
            let mut waited = Duration::ZERO;
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(step);
                waited += step;
                if waited >= RENEW_EVERY {
                    waited = Duration::ZERO;
                    let _ = store::renew_lease(store.conn(), &instance, &owner, TTL_MS);
                }
            }
        });
        Heartbeat {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
