//! Self-fencing by time: a holder that cannot renew its lease stops its
//! steps before anyone else may take the lease (docs/execution.md, "Leases
//! and partitions").
//!
//! Fencing keeps a stale holder from *writing*; it cannot keep its steps
//! from *running* on a machine cut off from the database, where no write is
//! tried and no takeover can reach its processes. Only the holder itself
//! can stop them, and only by time: it assumes its lease is gone once
//! [`stop_after`] (two thirds of the TTL) has passed on its monotonic clock
//! since the last renewal that succeeded was *sent* (the server set the new
//! expiry after that, so the lease lasts at least a TTL from then by any
//! clock that runs at a sane rate), and stops its steps as an interrupt
//! would; at [`kill_after`] (five sixths) whatever is left of their process
//! groups is killed outright, from a thread of its own, whatever the run's
//! loop is waiting on (a call a stalled file system holds, say). Another
//! holder can take the instance only once the full TTL has passed by the
//! server's clock: the last sixth is the margin for the two clocks' rates
//! (NTP keeps them within 0.05%: 15 ms of a 30 s TTL), this thread's
//! scheduling and the kernel's delivery of SIGKILL.
//!
//! Each held lease is a [`Watch`]; one thread per process (started with the
//! first) watches them all. The holder's run learns what happened to its
//! lease from [`LeaseNews`]: taken over (a renewal was refused) or lapsed.

use crate::vocab::InstanceId;
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How long after the last confirmed renewal was sent its holder stops its
/// steps: two thirds of the TTL, so that a renewal every sixth may fail
/// twice (a slow statement, a server restarting) before it does.
pub fn stop_after(ttl: Duration) -> Duration {
    ttl * 2 / 3
}

/// How long after the last confirmed renewal was sent what is left of its
/// steps' processes is killed outright: five sixths of the TTL.
pub fn kill_after(ttl: Duration) -> Duration {
    ttl * 5 / 6
}

/// What became of a lease its holder could not keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lapse {
    /// A renewal was refused: this process (by its name) took it over.
    TakenBy(String),
    /// No renewal succeeded for [`stop_after`] the TTL: another process
    /// may take it over once the TTL has passed. How long it went unrenewed.
    Unrenewed(Duration),
}

/// One lease this process holds, watched. Cheap to clone: every clone is
/// the same lease, watched until the last is dropped.
#[derive(Clone)]
pub struct Watch {
    entry: Arc<Entry>,
}

struct Entry {
    instance: InstanceId,
    ttl: Duration,
    state: Mutex<State>,
    news: watch::Sender<Option<Lapse>>,
}

struct State {
    /// When the newest renewal that succeeded (or the takeover) was sent.
    confirmed: Instant,
    /// How long it had gone unrenewed when it was found lapsed, if it was.
    lapsed: Option<Duration>,
    /// Whether what was left of its groups was killed.
    killed: bool,
    /// The process groups of its running attempts.
    groups: Vec<i32>,
}

impl Watch {
    /// Watches the lease on `instance`, granted by a takeover (or a commit
    /// that made it) sent at `granted`.
    pub fn hold(instance: &InstanceId, ttl: Duration, granted: Instant) -> Watch {
        let entry = Arc::new(Entry {
            instance: instance.clone(),
            ttl,
            state: Mutex::new(State {
                confirmed: granted,
                lapsed: None,
                killed: false,
                groups: Vec::new(),
            }),
            news: watch::channel(None).0,
        });
        dog().watch(&entry);
        Watch { entry }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.entry.state)
    }

    /// A renewal sent at `sent` succeeded (an older one's success, or any
    /// after the lease lapsed, changes nothing: its steps are stopping).
    pub fn confirmed(&self, sent: Instant) {
        let mut state = self.state();
        if state.lapsed.is_none() && sent > state.confirmed {
            state.confirmed = sent;
        }
    }

    /// A renewal was refused: `holder` took the instance over.
    pub fn taken(&self, holder: String) {
        self.entry.news.send_replace(Some(Lapse::TakenBy(holder)));
    }

    /// When the holder stops its steps unless a renewal succeeds first: no
    /// renewal may wait longer.
    pub fn stop_at(&self) -> Instant {
        self.state().confirmed + stop_after(self.entry.ttl)
    }

    /// How long the lease had gone unrenewed when it lapsed, if it did
    /// (whatever news came after).
    pub fn lapsed_after(&self) -> Option<Duration> {
        self.state().lapsed
    }

    /// What the holder's run hears of this lease.
    pub fn news(&self) -> LeaseNews {
        LeaseNews {
            rx: self.entry.news.subscribe(),
            lapse_heard: false,
            watch: self.clone(),
        }
    }

    /// The lease's news as it comes, for an attempt to stop on by itself
    /// (`stop::StopSignal::with_lease`).
    pub fn subscribe(&self) -> watch::Receiver<Option<Lapse>> {
        self.entry.news.subscribe()
    }

    /// An attempt's process group started (`pgid`): killed if the lease
    /// lapses and it is still there at [`kill_after`].
    pub fn group_started(&self, pgid: i32) {
        self.state().groups.push(pgid);
    }

    /// An attempt's process group ended.
    pub fn group_ended(&self, pgid: i32) {
        self.state().groups.retain(|g| *g != pgid);
    }
}

/// What a run hears of its lease ([`Watch::news`]).
pub struct LeaseNews {
    rx: watch::Receiver<Option<Lapse>>,
    /// The lapse was said once: only a takeover is news after it.
    lapse_heard: bool,
    watch: Watch,
}

impl LeaseNews {
    /// Resolves with the next news of the lease: a lapse (once), or a
    /// takeover. Never, once the heartbeat is gone without news (the
    /// run's writes stay fenced whatever happens).
    pub async fn next(&mut self) -> Lapse {
        loop {
            let news = self.rx.borrow_and_update().clone();
            match news {
                Some(Lapse::TakenBy(holder)) => return Lapse::TakenBy(holder),
                Some(lapse @ Lapse::Unrenewed(_)) if !self.lapse_heard => {
                    self.lapse_heard = true;
                    return lapse;
                }
                _ => {}
            }
            if self.rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// The news now, without waiting: a takeover, or a lapse not heard yet.
    pub fn now(&mut self) -> Option<Lapse> {
        let news = self.rx.borrow().clone();
        match news {
            Some(Lapse::Unrenewed(_)) if self.lapse_heard => None,
            Some(Lapse::Unrenewed(d)) => {
                self.lapse_heard = true;
                Some(Lapse::Unrenewed(d))
            }
            other => other,
        }
    }

    /// The lease watched.
    pub fn watch(&self) -> &Watch {
        &self.watch
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The thread that watches every lease of this process.
struct Dog {
    leases: Mutex<Vec<Weak<Entry>>>,
    wake: Condvar,
}

fn dog() -> &'static Dog {
    static DOG: OnceLock<&'static Dog> = OnceLock::new();
    DOG.get_or_init(|| {
        let dog: &'static Dog = Box::leak(Box::new(Dog {
            leases: Mutex::new(Vec::new()),
            wake: Condvar::new(),
        }));
        if let Err(e) = std::thread::Builder::new()
            .name("wf-lease-watch".into())
            .spawn(move || dog.run())
        {
            eprintln!("wf: cannot start the thread that watches leases: {e}");
        }
        dog
    })
}

impl Dog {
    fn watch(&self, entry: &Arc<Entry>) {
        lock(&self.leases).push(Arc::downgrade(entry));
        self.wake.notify_one();
    }

    /// Wakes at the next lease's stop or kill time (or when one is added),
    /// and acts on every lease that is due.
    fn run(&self) {
        let mut leases = lock(&self.leases);
        loop {
            let now = Instant::now();
            let mut next: Option<Instant> = None;
            leases.retain(|weak| {
                let Some(entry) = weak.upgrade() else {
                    return false;
                };
                if let Some(at) = entry.act(now) {
                    next = Some(next.map_or(at, |n| n.min(at)));
                }
                true
            });
            leases = match next {
                Some(at) => {
                    let wait = at.saturating_duration_since(Instant::now());
                    self.wake
                        .wait_timeout(leases, wait)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0
                }
                None => self
                    .wake
                    .wait(leases)
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            };
        }
    }
}

impl Entry {
    /// Acts on this lease at `now`: lapses it, or kills what is left of
    /// its groups, when due. Returns when it next needs looking at.
    fn act(&self, now: Instant) -> Option<Instant> {
        let mut state = lock(&self.state);
        let stop = state.confirmed + stop_after(self.ttl);
        let kill = state.confirmed + kill_after(self.ttl);
        if state.lapsed.is_none() {
            if now < stop {
                return Some(stop);
            }
            let unrenewed = now.saturating_duration_since(state.confirmed);
            state.lapsed = Some(unrenewed);
            // Taken over already: that is the news.
            self.news.send_if_modified(|news| {
                if news.is_some() {
                    return false;
                }
                *news = Some(Lapse::Unrenewed(unrenewed));
                true
            });
        }
        if state.killed {
            return None;
        }
        if now < kill {
            return Some(kill);
        }
        state.killed = true;
        for pgid in &state.groups {
            // Its run stopped them at `stop` (TERM, then KILL after a
            // grace); any still there go now.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(*pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        if !state.groups.is_empty() {
            tracing::debug!(instance = %self.instance, "killed the groups of a lapsed lease");
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn margins_leave_a_sixth_of_the_ttl() {
        let ttl = Duration::from_secs(30);
        assert_eq!(stop_after(ttl), Duration::from_secs(20));
        assert_eq!(kill_after(ttl), Duration::from_secs(25));
        assert!(kill_after(Duration::from_millis(300)) < Duration::from_millis(300));
    }

    #[test]
    fn a_lease_not_renewed_lapses_once_and_a_renewal_keeps_it() {
        let ttl = Duration::from_millis(300);
        let id = InstanceId::from("01TESTLAPSE".to_string());
        let kept = Watch::hold(&id, ttl, Instant::now());
        let lost = Watch::hold(&id, ttl, Instant::now());
        let mut news = lost.news();
        // Renewed every 50 ms for 400 ms: never lapses.
        for _ in 0..8 {
            std::thread::sleep(Duration::from_millis(50));
            kept.confirmed(Instant::now());
        }
        assert!(kept.lapsed_after().is_none());
        assert!(lost.lapsed_after().is_some());
        match news.now() {
            Some(Lapse::Unrenewed(d)) => assert!(d >= stop_after(ttl)),
            other => panic!("expected a lapse, got {other:?}"),
        }
        assert_eq!(news.now(), None, "a lapse is news once");
        lost.taken("host-b".into());
        assert_eq!(news.now(), Some(Lapse::TakenBy("host-b".into())));
    }
}
