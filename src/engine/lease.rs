//! Leases: the process driving an instance holds a lease on it, renewed by a
//! heartbeat. Another process may take the lease over once it has expired, or
//! at once when the holder is a process on this host that no longer exists
//! (killed with SIGKILL, say), so a crash never blocks an instance for long.
//!
//! Every takeover raises the instance's epoch (the fencing token of
//! [`store::Fence`]); every write of a runner is checked against it, so a
//! runner that was paused past its lease can never write again. The
//! heartbeat is how such a runner finds out while it waits: it reports the
//! loss within one renewal interval. A holder that cannot renew at all (a
//! partition) stops its steps by time before another may take over
//! (`lapse`).

use super::lapse::{LeaseNews, Watch};
use crate::store::{Fence, Location, Store, StoreError};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

/// The lease's time to live when `WF_LEASE_TTL` is not set.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);

/// The lease TTL: `WF_LEASE_TTL` (a duration such as `30s`), else 30 s
/// (an empty variable counts as unset, docs/commands.md).
pub fn ttl() -> Result<Duration, String> {
    match std::env::var("WF_LEASE_TTL") {
        Err(_) => Ok(DEFAULT_TTL),
        Ok(text) if text.trim().is_empty() => Ok(DEFAULT_TTL),
        Ok(text) => match crate::workflow::duration::parse(text.trim()) {
            Ok(d) if d >= Duration::from_millis(300) => Ok(d),
            Ok(_) => Err(format!(
                "WF_LEASE_TTL `{text}` is too short: the lease needs at least 300ms"
            )),
            Err(e) => Err(format!("WF_LEASE_TTL `{text}`: {e}")),
        },
    }
}

/// This machine's host name.
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into())
}

/// This process's lease owner name: `host:pid:nonce:boot:pidns`, where
/// `boot` is the first 8 digits of the kernel's boot id and `pidns` the
/// inode of this process's pid namespace. A pid means something only to
/// processes of the same boot and pid namespace: two containers that share
/// a host name (host networking) are told apart by the namespace.
pub fn owner_name() -> String {
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let (boot, pidns) = machine();
    format!(
        "{}:{}:{}:{boot}:{pidns}",
        hostname(),
        std::process::id(),
        &nonce[..8]
    )
}

/// The host of a lease owner's name ([`owner_name`]; a worker's heartbeat
/// is kept under it): `/metrics` reports workers by host, so that a
/// restart adds no series.
pub fn owner_host(owner: &str) -> &str {
    owner.split(':').next().unwrap_or(owner)
}

/// This process's boot id (its first 8 hex digits) and pid namespace (the
/// inode of `/proc/self/ns/pid`); `?` where the kernel does not say.
fn machine() -> &'static (String, String) {
    static MACHINE: OnceLock<(String, String)> = OnceLock::new();
    MACHINE.get_or_init(|| {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .map(|b| {
                b.trim()
                    .chars()
                    .filter(char::is_ascii_hexdigit)
                    .take(8)
                    .collect()
            })
            .filter(|b: &String| b.len() == 8)
            .unwrap_or_else(|| "?".into());
        let pidns = std::fs::read_link("/proc/self/ns/pid")
            .ok()
            .and_then(|l| {
                let l = l.to_string_lossy().into_owned();
                let inode = l.strip_prefix("pid:[")?.strip_suffix(']')?;
                inode.parse::<u64>().ok().map(|n| n.to_string())
            })
            .unwrap_or_else(|| "?".into());
        (boot, pidns)
    })
}

/// `host/boot/pidns`: where a pid (of a process group, say) means the
/// process it names.
pub fn pid_scope() -> String {
    let (boot, pidns) = machine();
    format!("{}/{boot}/{pidns}", hostname())
}

/// Whether `inst` is `running` in the store while no live process runs it:
/// its lease expired by `now_ms` (unix ms), or its holder is gone (what
/// `wf list` and `wf inspect` show as `interrupted`).
pub fn interrupted(inst: &crate::store::InstanceRow, now_ms: i64) -> bool {
    if inst.status != crate::vocab::InstanceStatus::Running {
        return false;
    }
    match (&inst.lease_owner, inst.lease_expires_ms) {
        (Some(owner), Some(exp)) => !(exp > now_ms && holder_alive(owner)),
        _ => true,
    }
}

/// `inst`'s status as shown at `now_ms` (unix ms): `interrupted` for a
/// `running` one whose runner is gone, else the stored one.
pub fn shown(inst: &crate::store::InstanceRow, now_ms: i64) -> crate::vocab::ShownStatus {
    if interrupted(inst, now_ms) {
        return crate::vocab::ShownStatus::Interrupted;
    }
    crate::vocab::ShownStatus::Stored(inst.status)
}

/// Whether the process named by a lease owner may still be alive. Only a
/// holder of this host, boot and pid namespace can be found dead at once;
/// any other (another machine, another container sharing this host name)
/// is taken as alive until its lease expires. A name an older wf wrote
/// (`host:pid:nonce`, before holders named their boot and pid namespace)
/// is judged as that wf judged it, by its pid on this host: after an
/// upgrade, a crash the older wf left is taken over at once, as it would
/// have been.
pub fn holder_alive(owner: &str) -> bool {
    let parts: Vec<&str> = owner.split(':').collect();
    if let [host, pid, _nonce] = parts.as_slice() {
        return *host != hostname() || pid_alive_here(pid);
    }
    let [host, pid, _nonce, boot, pidns] = parts.as_slice() else {
        return true;
    };
    let (my_boot, my_pidns) = machine();
    if *host != hostname() || boot != my_boot || pidns != my_pidns || *boot == "?" || *pidns == "?"
    {
        return true;
    }
    pid_alive_here(pid)
}

/// Whether pid `pid` (as a holder name writes it) is a live process of
/// this pid namespace (this process is).
fn pid_alive_here(pid: &str) -> bool {
    let Ok(pid) = pid.parse::<i32>() else {
        return true;
    };
    pid == std::process::id() as i32 || super::procs::pid_alive(pid)
}

/// The lease TTL in milliseconds, as the store keeps it.
pub fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)
}

/// Renews a lease in the background until dropped, and tells the lease's
/// [`Watch`](super::lapse::Watch) how it goes: each renewal that succeeds
/// (by when it was sent), or the new holder's name when one is refused
/// because another process took the instance over. A renewal waits no
/// longer than until the holder would stop its steps (`lapse::stop_after`
/// since the last one that succeeded), nor than a database call's deadline;
/// one that does not answer in time is given up with its connection, and
/// the next renewal makes a new one. Its thread starts when the first
/// renewal is due (a timer on the caller's runtime): most runs, a child's
/// of one step say, end before that and never pay for a thread
/// (bench/RESULTS.md). Once started, it sleeps between renewals and wakes at
/// once when dropped, so a short run never waits for it; its connection is
/// opened at the first renewal, so a short run never pays for one either.
pub struct Heartbeat {
    stop: Option<mpsc::Sender<()>>,
    thread: Arc<Mutex<Lazy>>,
    starter: Option<tokio::task::JoinHandle<()>>,
}

/// The heartbeat's thread, once started; `stopped`: it never will be.
#[derive(Default)]
struct Lazy {
    stopped: bool,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn lazy(m: &Mutex<Lazy>) -> std::sync::MutexGuard<'_, Lazy> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Heartbeat {
    /// Renews the lease `fence` holds (watched by `watch`), and returns
    /// what the run hears of it.
    pub fn start(
        db: Location,
        fence: Fence,
        ttl: Duration,
        watch: &Watch,
    ) -> (Heartbeat, LeaseNews) {
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let news = watch.news();
        let watch = watch.clone();
        let every = ttl / 6;
        // `at_once`: started when the first renewal is due (by the timer),
        // rather than with the run.
        let body = move |at_once: bool| {
            let beat = Beat {
                db,
                fence,
                ttl,
                every,
                watch,
            };
            beat.renew_until_stopped(at_once, stop_rx);
        };
        let thread = Arc::new(Mutex::new(Lazy::default()));
        let starter = match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                let slot = thread.clone();
                Some(rt.spawn(async move {
                    tokio::time::sleep(every).await;
                    let mut slot = lazy(&slot);
                    if !slot.stopped {
                        slot.thread = Some(std::thread::spawn(move || body(true)));
                    }
                }))
            }
            Err(_) => {
                lazy(&thread).thread = Some(std::thread::spawn(move || body(false)));
                None
            }
        };
        (
            Heartbeat {
                stop: Some(stop_tx),
                thread,
                starter,
            },
            news,
        )
    }
}

/// What the heartbeat's thread renews, how often, and whom it tells.
struct Beat {
    db: Location,
    fence: Fence,
    ttl: Duration,
    every: Duration,
    watch: Watch,
}

impl Beat {
    /// Renews every `every` (the first time at once when `at_once`: it
    /// started when the first renewal was due), until `stop` is dropped or
    /// the lease was found taken over.
    fn renew_until_stopped(self, at_once: bool, stop: mpsc::Receiver<()>) {
        // PostgreSQL: a runtime of its own, so that a renewal never waits
        // for the runner's loop (nor the loop for a renewal's round trip).
        // SQLite's calls complete without waiting: no runtime is needed.
        let runtime = if self.db.waits_on_a_server() {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            Some(rt)
        } else {
            None
        };
        let mut store: Option<Store> = None;
        let mut first = at_once;
        // The next renewal is due `every` after the last one was sent.
        let mut due = Instant::now();
        loop {
            if !std::mem::take(&mut first) {
                let wait = due.saturating_duration_since(Instant::now());
                if !matches!(
                    stop.recv_timeout(wait),
                    Err(mpsc::RecvTimeoutError::Timeout)
                ) {
                    return;
                }
            } else if !matches!(stop.try_recv(), Err(mpsc::TryRecvError::Empty)) {
                return;
            }
            let sent = Instant::now();
            due = sent + self.every;
            match self.renew(&runtime, &mut store, sent) {
                Ok(()) => self.watch.confirmed(sent),
                Err(StoreError::Fenced { holder, .. }) => {
                    self.watch
                        .taken(holder.unwrap_or_else(|| "another process".to_string()));
                    return;
                }
                // Busy, the connection failed or did not answer (a server
                // restarting, a partition), or the instance is not there
                // yet (a child opened before the commit that makes it,
                // `drive::open_claimed`, when that commit is slow): the
                // next renewal tries again, on a new connection, and the
                // runner's own writes are fenced whatever happens.
                Err(_) => {
                    if store.as_ref().is_none_or(Store::reconnects_after_an_error) {
                        store = None;
                    }
                }
            }
        }
    }

    /// One renewal sent at `sent`, opening the store first if need be; on
    /// PostgreSQL within what is left until the holder would stop its
    /// steps, and a call's deadline.
    fn renew(
        &self,
        runtime: &Option<tokio::runtime::Runtime>,
        store: &mut Option<Store>,
        sent: Instant,
    ) -> Result<(), StoreError> {
        let ttl_ms = ttl_ms(self.ttl);
        let Some(rt) = runtime else {
            // SQLite: its calls return (a file system that stalls holds
            // this thread, not the lease's watch, `lapse`).
            let mut renewed = Err(StoreError::Sql("not renewed".into()));
            now_or_never(std::pin::pin!(async {
                if store.is_none() {
                    *store = Store::open(&self.db).await.ok();
                }
                if let Some(s) = store.as_ref() {
                    renewed = s.renew(&self.fence, ttl_ms).await;
                }
            }));
            return renewed;
        };
        let within = self
            .watch
            .stop_at()
            .saturating_duration_since(sent)
            .min(crate::store::call_deadline())
            .max(Duration::from_millis(50));
        let renewal = async {
            if store.is_none() {
                *store = Some(Store::open(&self.db).await?);
            }
            match store.as_ref() {
                Some(s) => s.renew(&self.fence, ttl_ms).await,
                None => Err(StoreError::Sql("not renewed".into())),
            }
        };
        let renewed = rt.block_on(async { tokio::time::timeout(within, renewal).await });
        renewed.unwrap_or_else(|_| {
            // Unanswered: `WF_DB_RETRY` counts from here for the run's
            // calls too, and its connection goes (dropped by the caller).
            self.db.unanswered(sent);
            Err(StoreError::Sql(
                "the renewal was not answered in time".into(),
            ))
        })
    }
}

/// Runs a future that never waits (a SQLite call behind the async store
/// interface) to its end on this thread.
fn now_or_never(f: std::pin::Pin<&mut dyn std::future::Future<Output = ()>>) {
    let waker = futures_util::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = f;
    while f.as_mut().poll(&mut cx).is_pending() {
        std::thread::yield_now();
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        drop(self.stop.take());
        // Under the slot's lock: the starter either started the thread
        // already (joined here) or never will. No renewal outlives this.
        let thread = {
            let mut slot = lazy(&self.thread);
            slot.stopped = true;
            slot.thread.take()
        };
        if let Some(starter) = self.starter.take() {
            starter.abort();
        }
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::owner_host;

    #[test]
    fn workers_are_told_by_host() {
        assert_eq!(
            owner_host("build-1:4242:0a1b2c3d:12345678:4026531836"),
            "build-1"
        );
        assert_eq!(owner_host("w1"), "w1");
    }
}
