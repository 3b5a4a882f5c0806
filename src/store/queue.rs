//! Queue admission (`queue:`, docs/flow-control.md): which instances of a
//! key may run now. The decision is pure and lives here, written once: each
//! backend reads a key's rows in a transaction that serializes the key
//! (SQLite's write lock; a PostgreSQL advisory lock on the key), asks
//! [`admit_one`] or [`admit_line`], and applies the verdict in the same
//! transaction, so no two processes can both take the last slot.
//!
//! A slot is held by an instance whose `admitted` flag is set, for as long
//! as its lease is live, or, with `hold_while_suspended`, while it sleeps or
//! waits. An admitted instance whose lease died is not counted: the
//! admission that gives its slot away revokes it (clears the flag, raises
//! its epoch so that a stalled holder can write nothing more, and queues it
//! again). So the flags set never exceed the limit, and a dead holder's slot
//! frees with its lease.

use serde::{Deserialize, Serialize};

/// An instance's priority when its `queue:` gives none (0 is first, 9 last).
pub const DEFAULT_PRIORITY: i64 = 5;

/// The limits an instance was made under (its definition's `queue:`),
/// stored with it as JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueLimits {
    /// Admitted instances of the key at once; `None`: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// Admissions of the key within any window of `period_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateLimit>,
    /// A sleeping or waiting instance keeps its slot.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hold: bool,
    /// What a new instance does while the key cannot admit it.
    #[serde(default)]
    pub on_full: OnFull,
    /// Debounce: a new instance skips the key's instances queued within
    /// this period before it, and is not admitted before it has passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debounce_ms: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimit {
    pub count: u32,
    pub period_ms: i64,
}

impl RateLimit {
    /// As a file writes it: `10/1m`.
    pub fn text(&self) -> String {
        format!("{}/{}", self.count, period_text(self.period_ms))
    }
}

/// A period in the largest unit that divides it: `1m`, `90s`, `250ms`.
fn period_text(ms: i64) -> String {
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms > 0 && ms % size == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// `on_full`, as the store applies it when an instance is made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFull {
    #[default]
    Queue,
    Skip,
    CancelPrevious,
}

/// An instance's place under its queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuePlace {
    pub key: String,
    /// 0 (first) .. 9.
    pub priority: i64,
    pub limits: QueueLimits,
    /// It holds a slot (see the module's doc).
    pub admitted: bool,
}

impl QueueLimits {
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// As stored; unreadable text (a newer wf's) limits nothing more than
    /// concurrency 1 would: the safe reading.
    pub fn of_text(text: &str) -> QueueLimits {
        serde_json::from_str(text).unwrap_or(QueueLimits {
            concurrency: Some(1),
            ..QueueLimits::default()
        })
    }
}

/// An admitted instance of the key, as admission reads it.
#[derive(Debug, Clone)]
pub struct Occupant {
    pub id: String,
    /// Its lease is held by a process that is alive (not expired; on this
    /// host, a process that exists).
    pub live: bool,
    /// It sleeps or waits with `hold_while_suspended`.
    pub held: bool,
}

impl Occupant {
    /// Whether its slot is taken: by a live holder, or held while it
    /// sleeps or waits. One that is not is a dead holder's, revoked by the
    /// next admission that counts it free.
    pub fn occupies(&self) -> bool {
        self.live || self.held
    }
}

/// A queued instance of the key, in admission order (priority, then age).
#[derive(Debug, Clone)]
pub struct InLine {
    pub id: String,
    pub limits: QueueLimits,
    /// A live process holds it (a `wf run` waiting inline): it admits itself.
    pub leased: bool,
    /// Its debounce period is over (or it has none): `None`; else when it is.
    pub not_before_ms: Option<i64>,
}

/// A key's rows, read under the key's lock.
#[derive(Debug, Clone, Default)]
pub struct KeyRows {
    /// Admitted instances, oldest first.
    pub occupants: Vec<Occupant>,
    /// Queued instances, in admission order.
    pub line: Vec<InLine>,
    /// The key's admission times (ms) within the longest rate period of
    /// the limits involved, oldest first.
    pub window: Vec<i64>,
}

impl KeyRows {
    /// The longest rate period of the limits involved (`extra` and the
    /// line's): how far back [`KeyRows::window`] must reach.
    pub fn window_ms(line: &[QueueLimits], extra: Option<&QueueLimits>) -> i64 {
        line.iter()
            .chain(extra)
            .filter_map(|l| l.rate.map(|r| r.period_ms))
            .max()
            .unwrap_or(0)
    }
}

/// Why an instance is not admitted now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocked {
    /// `concurrency` instances of the key are admitted.
    Full { admitted: usize, limit: u32 },
    /// The key's `rate` is spent until `until_ms`.
    Rate {
        count: u32,
        period_ms: i64,
        until_ms: i64,
    },
    /// Its debounce period ends at `until_ms`.
    Debounce { until_ms: i64 },
    /// Others are before it in the line (by priority, then age).
    Behind,
    /// Nothing: it has room, and is admitted as soon as a process asks
    /// (`wf worker`, `wf resume`); only a standing (`wf inspect`) says this.
    Nothing,
}

/// What admission decided for one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Admit it; revoke these first (admitted, their holders gone).
    Admit { revoke: Vec<String> },
    /// Leave it queued: `position` (1-based) among the due queued ones,
    /// `ahead` of them before it, and why.
    Wait {
        position: usize,
        ahead: usize,
        blocked: Blocked,
    },
}

impl Blocked {
    /// Why, in words (`wf run`, `wf inspect`): "2 of 2 admitted", …
    pub fn describe(&self) -> String {
        let at = |ms: i64| crate::vocab::Timestamp::from_ms(ms).to_string();
        match self {
            Blocked::Full { admitted, limit } => {
                format!("{admitted} of {limit} admitted (concurrency)")
            }
            Blocked::Rate {
                count,
                period_ms,
                until_ms,
            } => format!(
                "rate {count}/{} spent until {}",
                period_text(*period_ms),
                at(*until_ms)
            ),
            Blocked::Debounce { until_ms } => format!("debounce until {}", at(*until_ms)),
            Blocked::Behind => "others are before it (priority, then age)".into(),
            Blocked::Nothing => {
                "nothing (there is room: `wf worker` or `wf resume` admits it)".into()
            }
        }
    }
}

/// The error of an instance `on_full: skip` ended at once.
pub fn skipped_why(key: &str, blocked: &Blocked) -> String {
    format!("skipped: queue `{key}` is full: {}", blocked.describe())
}

/// A key as `wf queue list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSummary {
    pub key: String,
    /// Instances holding a slot (a dead holder's counts until revoked).
    pub admitted: i64,
    /// Instances waiting for one.
    pub queued: i64,
    /// The limits of the key's newest instance.
    pub limits: QueueLimits,
    /// Admissions within the rate's window (0 without a rate).
    pub rate_used: i64,
    /// When the oldest queued instance was made.
    pub oldest_queued: Option<crate::vocab::Timestamp>,
}

/// An attempt holding a step lock, as taking the lock reads it.
#[derive(Debug, Clone)]
pub struct LockHolder {
    pub instance: String,
    pub unit: String,
    /// Its instance's lease is live (the asker's own always is).
    pub live: bool,
}

/// What asking for a step lock comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockVerdict {
    /// The unit holds it already.
    Held,
    /// Take it, after revoking these instances (holders whose leases are
    /// dead: they were not counted).
    Take { revoke: Vec<String> },
    /// `limit` live attempts hold it.
    Busy,
}

/// Whether unit `unit` of instance `me` may take a lock held by `holders`
/// with `limit` places.
pub fn lock_verdict(holders: &[LockHolder], me: &str, unit: &str, limit: u32) -> LockVerdict {
    if holders.iter().any(|h| h.instance == me && h.unit == unit) {
        return LockVerdict::Held;
    }
    let live = holders.iter().filter(|h| h.live).count();
    if live >= limit as usize {
        return LockVerdict::Busy;
    }
    let mut revoke: Vec<String> = holders
        .iter()
        .filter(|h| !h.live)
        .map(|h| h.instance.clone())
        .collect();
    revoke.dedup();
    LockVerdict::Take { revoke }
}

/// What asking to admit an instance came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// It holds a slot of its key now (or did already).
    Admitted,
    /// It stays queued under `key`.
    Waiting {
        key: String,
        position: usize,
        ahead: usize,
        blocked: Blocked,
    },
}

/// Room for admissions under `limits`: free slots (after revoking the dead
/// holders', listed), and admissions the rate allows now (with when the
/// next one does if none).
struct Room {
    free: usize,
    admitted: usize,
    revoke: Vec<String>,
    rate_left: usize,
    rate_again_ms: Option<i64>,
}

fn room(limits: &QueueLimits, rows: &KeyRows, now_ms: i64) -> Room {
    let occupying = rows.occupants.iter().filter(|o| o.occupies()).count();
    let revoke = rows
        .occupants
        .iter()
        .filter(|o| !o.occupies())
        .map(|o| o.id.clone())
        .collect();
    let free = match limits.concurrency {
        None => usize::MAX,
        Some(n) => (n as usize).saturating_sub(occupying),
    };
    let (rate_left, rate_again_ms) = match limits.rate {
        None => (usize::MAX, None),
        Some(r) => {
            let since = now_ms - r.period_ms;
            let recent: Vec<i64> = rows.window.iter().copied().filter(|&t| t > since).collect();
            let left = (r.count as usize).saturating_sub(recent.len());
            // Spent: the next admission fits when the oldest that spends it
            // leaves the window.
            let again = (left == 0)
                .then(|| recent.len() - r.count as usize)
                .and_then(|i| recent.get(i))
                .map(|t| t + r.period_ms);
            (left, again)
        }
    };
    Room {
        free,
        admitted: occupying,
        revoke,
        rate_left,
        rate_again_ms,
    }
}

/// The verdict for `id` (in `rows.line`, where it sorts) under `limits`.
/// It is admitted when it is due and fewer due instances are before it than
/// the free slots and the rate allow.
pub fn admit_one(
    limits: &QueueLimits,
    rows: &KeyRows,
    id: &str,
    not_before_ms: Option<i64>,
    now_ms: i64,
) -> Verdict {
    let room = room(limits, rows, now_ms);
    let due = |e: &InLine| e.not_before_ms.is_none_or(|t| t <= now_ms);
    let ahead = rows
        .line
        .iter()
        .take_while(|e| e.id != id)
        .filter(|e| due(e))
        .count();
    let position = ahead + 1;
    if let Some(t) = not_before_ms.filter(|&t| t > now_ms) {
        return Verdict::Wait {
            position,
            ahead,
            blocked: Blocked::Debounce { until_ms: t },
        };
    }
    if ahead < room.free && ahead < room.rate_left {
        return Verdict::Admit {
            revoke: room.revoke,
        };
    }
    let blocked = if room.free == 0 {
        Blocked::Full {
            admitted: room.admitted,
            limit: limits.concurrency.unwrap_or(0),
        }
    } else if room.rate_left == 0 {
        let r = limits.rate.unwrap_or(RateLimit {
            count: 0,
            period_ms: 0,
        });
        Blocked::Rate {
            count: r.count,
            period_ms: r.period_ms,
            until_ms: room.rate_again_ms.unwrap_or(now_ms),
        }
    } else {
        Blocked::Behind
    };
    Verdict::Wait {
        position,
        ahead,
        blocked,
    }
}

/// When a queued instance may be admitted (its debounce over): its wake
/// time, which only a `queued` instance's means that.
pub fn not_before(
    status: crate::vocab::InstanceStatus,
    wake_at: Option<crate::vocab::Timestamp>,
) -> Option<i64> {
    wake_at
        .filter(|_| status == crate::vocab::InstanceStatus::Queued)
        .map(crate::vocab::Timestamp::ms)
}

/// What a new instance's arrival comes to, `on_full` applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arrival {
    /// Admit it (its creator holds its lease), revoking these first.
    Admit { revoke: Vec<String> },
    /// It waits in the line, `queued`.
    Wait,
    /// `on_full: skip`: it ends skipped, for this reason.
    Skip(String),
    /// `on_full: cancel_previous`: ask this admitted instance to cancel,
    /// and wait for its slot.
    CancelPrevious(String),
}

/// Why an instance a newer one of its key replaced (`debounce`) ended
/// `skipped`: the same words on both backends.
pub fn debounced(by: &crate::vocab::InstanceId, key: &str) -> String {
    format!("skipped: instance {by} of queue `{key}` replaced it (debounce)")
}

/// The arrival of new instance `id` of `place`'s key (in `rows.line`),
/// whose creator holds its lease when `held` (a detached one is admitted by
/// a worker). A debounced one waits out its period whatever `on_full` says.
pub fn arrive(
    place: &QueuePlace,
    rows: &KeyRows,
    id: &str,
    not_before_ms: Option<i64>,
    held: bool,
    now_ms: i64,
) -> Arrival {
    match admit_one(&place.limits, rows, id, not_before_ms, now_ms) {
        Verdict::Admit { revoke } if held => Arrival::Admit { revoke },
        Verdict::Admit { .. } => Arrival::Wait,
        Verdict::Wait { blocked, .. } => match place.limits.on_full {
            OnFull::Queue => Arrival::Wait,
            _ if matches!(blocked, Blocked::Debounce { .. }) => Arrival::Wait,
            OnFull::Skip => Arrival::Skip(skipped_why(&place.key, &blocked)),
            OnFull::CancelPrevious => rows
                .occupants
                .iter()
                .find(|o| o.occupies())
                .map_or(Arrival::Wait, |o| Arrival::CancelPrevious(o.id.clone())),
        },
    }
}

/// Where queued instance `id` of `key` stands under `limits`, for `wf
/// inspect` (nothing is admitted): `Blocked::Nothing` when it has room.
pub fn standing(
    key: String,
    limits: &QueueLimits,
    rows: &KeyRows,
    id: &str,
    not_before_ms: Option<i64>,
    now_ms: i64,
) -> Admission {
    match admit_one(limits, rows, id, not_before_ms, now_ms) {
        Verdict::Admit { .. } => Admission::Waiting {
            key,
            position: 1,
            ahead: 0,
            blocked: Blocked::Nothing,
        },
        Verdict::Wait {
            position,
            ahead,
            blocked,
        } => Admission::Waiting {
            key,
            position,
            ahead,
            blocked,
        },
    }
}

/// What a worker admits of a key's line: the due, unleased instances the
/// free slots and the rate allow, in order (at most `max`), and the dead
/// holders to revoke first. A due instance a live process holds keeps its
/// place (it admits itself): the ones behind it are not admitted past it.
pub fn admit_line(rows: &KeyRows, max: usize, now_ms: i64) -> (Vec<String>, Vec<String>) {
    let mut admit = Vec::new();
    let mut revoke = Vec::new();
    let mut rank = 0;
    for e in &rows.line {
        if admit.len() >= max {
            break;
        }
        if e.not_before_ms.is_some_and(|t| t > now_ms) {
            continue;
        }
        let room = room(&e.limits, rows, now_ms);
        if rank >= room.free || rank >= room.rate_left {
            break;
        }
        if !e.leased {
            admit.push(e.id.clone());
            if revoke.is_empty() {
                revoke = room.revoke;
            }
        }
        rank += 1;
    }
    if admit.is_empty() {
        revoke.clear();
    }
    (admit, revoke)
}

/// When anything of this key's line may next become admissible by time
/// alone (a debounce ending, the rate's window moving), if it is blocked
/// only by time: how long a worker may sleep before looking again.
pub fn next_chance_ms(rows: &KeyRows, now_ms: i64) -> Option<i64> {
    rows.line
        .iter()
        .filter_map(|e| {
            if let Some(t) = e.not_before_ms.filter(|&t| t > now_ms) {
                return Some(t);
            }
            room(&e.limits, rows, now_ms).rate_again_ms
        })
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(concurrency: Option<u32>, rate: Option<(u32, i64)>) -> QueueLimits {
        QueueLimits {
            concurrency,
            rate: rate.map(|(count, period_ms)| RateLimit { count, period_ms }),
            ..QueueLimits::default()
        }
    }

    fn occupant(id: &str, live: bool, held: bool) -> Occupant {
        Occupant {
            id: id.into(),
            live,
            held,
        }
    }

    fn queued(id: &str, l: &QueueLimits, leased: bool) -> InLine {
        InLine {
            id: id.into(),
            limits: l.clone(),
            leased,
            not_before_ms: None,
        }
    }

    #[test]
    fn a_full_key_admits_nobody_until_a_slot_frees() {
        let l = limits(Some(2), None);
        let mut rows = KeyRows {
            occupants: vec![occupant("a", true, false), occupant("b", false, true)],
            line: vec![queued("c", &l, true)],
            window: vec![],
        };
        assert_eq!(
            admit_one(&l, &rows, "c", None, 0),
            Verdict::Wait {
                position: 1,
                ahead: 0,
                blocked: Blocked::Full {
                    admitted: 2,
                    limit: 2
                }
            }
        );
        // The held one wakes without hold: its lease is gone, so is its slot.
        rows.occupants[1].held = false;
        assert_eq!(
            admit_one(&l, &rows, "c", None, 0),
            Verdict::Admit {
                revoke: vec!["b".into()]
            }
        );
    }

    #[test]
    fn the_line_goes_in_order_and_a_waiting_holder_keeps_its_place() {
        let l = limits(Some(3), None);
        let rows = KeyRows {
            occupants: vec![occupant("a", true, false)],
            line: vec![
                queued("b", &l, true),
                queued("c", &l, false),
                queued("d", &l, false),
            ],
            window: vec![],
        };
        // Two free slots: b (held by its own `wf run`) and c.
        assert_eq!(admit_line(&rows, 10, 0).0, vec!["c".to_string()]);
        assert_eq!(admit_line(&rows, 0, 0).0, Vec::<String>::new());
        assert!(matches!(
            admit_one(&l, &rows, "d", None, 0),
            Verdict::Wait {
                position: 3,
                blocked: Blocked::Behind,
                ..
            }
        ));
        assert!(matches!(
            admit_one(&l, &rows, "b", None, 0),
            Verdict::Admit { .. }
        ));
    }

    #[test]
    fn a_rate_counts_admissions_in_a_sliding_window() {
        let l = limits(None, Some((2, 1000)));
        let rows = KeyRows {
            occupants: vec![],
            line: vec![queued("x", &l, false), queued("y", &l, false)],
            window: vec![100, 900],
        };
        assert_eq!(
            admit_one(&l, &rows, "x", None, 1000),
            Verdict::Wait {
                position: 1,
                ahead: 0,
                blocked: Blocked::Rate {
                    count: 2,
                    period_ms: 1000,
                    until_ms: 1100
                }
            }
        );
        // At 1100 the admission at 100 has left the window: one more fits.
        assert_eq!(admit_line(&rows, 10, 1100).0, vec!["x".to_string()]);
        assert_eq!(next_chance_ms(&rows, 1000), Some(1100));
    }

    #[test]
    fn a_debounced_instance_waits_out_its_period_and_blocks_nobody() {
        let l = limits(Some(1), None);
        let mut first = queued("x", &l, false);
        first.not_before_ms = Some(500);
        let rows = KeyRows {
            occupants: vec![],
            line: vec![first, queued("y", &l, false)],
            window: vec![],
        };
        assert_eq!(admit_line(&rows, 10, 0).0, vec!["y".to_string()]);
        assert!(matches!(
            admit_one(&l, &rows, "x", Some(500), 0),
            Verdict::Wait {
                blocked: Blocked::Debounce { until_ms: 500 },
                ..
            }
        ));
        assert_eq!(next_chance_ms(&rows, 0), Some(500));
    }

    #[test]
    fn a_new_instance_joins_the_line_where_it_sorts() {
        let l = limits(Some(2), None);
        let behind = KeyRows {
            occupants: vec![occupant("a", true, false)],
            line: vec![queued("b", &l, false), queued("n", &l, true)],
            window: vec![],
        };
        // Behind b, one free slot: it waits; before b, it is admitted.
        assert!(matches!(
            admit_one(&l, &behind, "n", None, 0),
            Verdict::Wait { position: 2, .. }
        ));
        let mut before = behind.clone();
        before.line.reverse();
        assert!(matches!(
            admit_one(&l, &before, "n", None, 0),
            Verdict::Admit { .. }
        ));
    }

    #[test]
    fn a_lock_has_limit_live_holders_and_takes_a_dead_ones_place() {
        let h = |instance: &str, unit: &str, live| LockHolder {
            instance: instance.into(),
            unit: unit.into(),
            live,
        };
        let holders = [h("a", "migrate", true), h("b", "migrate", false)];
        assert_eq!(lock_verdict(&holders, "c", "migrate", 1), LockVerdict::Busy);
        assert_eq!(
            lock_verdict(&holders, "c", "migrate", 2),
            LockVerdict::Take {
                revoke: vec!["b".into()]
            }
        );
        assert_eq!(lock_verdict(&holders, "a", "migrate", 1), LockVerdict::Held);
        // Another unit of the holder's own instance waits like anyone.
        assert_eq!(lock_verdict(&holders, "a", "other", 1), LockVerdict::Busy);
    }

    #[test]
    fn on_full_decides_a_newcomers_arrival_but_never_cuts_a_debounce_short() {
        let place = |on_full| QueuePlace {
            key: "k".into(),
            priority: 5,
            limits: QueueLimits {
                on_full,
                ..limits(Some(1), None)
            },
            admitted: false,
        };
        let full = KeyRows {
            occupants: vec![occupant("a", true, false)],
            line: vec![queued("n", &limits(Some(1), None), true)],
            window: vec![],
        };
        assert_eq!(
            arrive(&place(OnFull::Queue), &full, "n", None, true, 0),
            Arrival::Wait
        );
        assert!(matches!(
            arrive(&place(OnFull::Skip), &full, "n", None, true, 0),
            Arrival::Skip(why) if why.contains("queue `k` is full")
        ));
        assert_eq!(
            arrive(&place(OnFull::CancelPrevious), &full, "n", None, true, 0),
            Arrival::CancelPrevious("a".into())
        );
        assert_eq!(
            arrive(&place(OnFull::Skip), &full, "n", Some(10), true, 0),
            Arrival::Wait
        );
        // Room: admitted when its creator holds it, else left for a worker.
        let room = KeyRows {
            occupants: vec![],
            ..full
        };
        assert_eq!(
            arrive(&place(OnFull::Skip), &room, "n", None, true, 0),
            Arrival::Admit { revoke: vec![] }
        );
        assert_eq!(
            arrive(&place(OnFull::Skip), &room, "n", None, false, 0),
            Arrival::Wait
        );
        assert!(matches!(
            standing("k".into(), &limits(Some(1), None), &room, "n", None, 0),
            Admission::Waiting {
                blocked: Blocked::Nothing,
                ..
            }
        ));
    }

    #[test]
    fn a_rate_reads_as_written() {
        let r = |period_ms| {
            RateLimit {
                count: 10,
                period_ms,
            }
            .text()
        };
        assert_eq!(r(60_000), "10/1m");
        assert_eq!(r(90_000), "10/90s");
        assert_eq!(r(250), "10/250ms");
        assert_eq!(r(86_400_000), "10/1d");
    }

    #[test]
    fn unreadable_limits_admit_one_at_a_time() {
        assert_eq!(QueueLimits::of_text("{bad").concurrency, Some(1));
        let l = limits(Some(3), Some((5, 60_000)));
        assert_eq!(QueueLimits::of_text(&l.to_text()), l);
    }
}
