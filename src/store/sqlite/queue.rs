//! Queue admission on SQLite (`store::queue` decides): a key's rows read
//! and the verdict applied in one write transaction, which SQLite's write
//! lock serializes with every other writer of the file.

use super::history::cached;
use crate::store::queue::{self, Admission, InLine, KeyRows, Occupant, QueueLimits, Verdict};
use crate::store::rows::*;
use crate::store::{Result, StoreError};
use crate::vocab::{InstanceStatus, Timestamp};
use rusqlite::{Connection, params};

/// The rows admission reads for `key`: its admitted instances, its line
/// (queued ones, and `candidate` whatever its status), the admissions in
/// the window the limits need.
/// `head`: read only the first this many of the line (a worker's look,
/// which admits at most that many less the ones it must pass over), instead
/// of all of it with `candidate`.
pub(super) fn key_rows(
    c: &Connection,
    key: &str,
    candidate: &str,
    extra: Option<&QueueLimits>,
    now_ms: i64,
    holder_alive: &dyn Fn(&str) -> bool,
) -> Result<KeyRows> {
    key_rows_of(c, key, Line::All(candidate), extra, now_ms, holder_alive)
}

/// Which of a key's queued instances admission reads.
#[derive(Clone, Copy)]
enum Line<'a> {
    /// All of them, and this instance whatever its status.
    All(&'a str),
    /// The first this many.
    Head(usize),
}

fn key_rows_of(
    c: &Connection,
    key: &str,
    which: Line,
    extra: Option<&QueueLimits>,
    now_ms: i64,
    holder_alive: &dyn Fn(&str) -> bool,
) -> Result<KeyRows> {
    let live = |owner: Option<String>, expires: Option<i64>| {
        owner.is_some_and(|o| expires.is_some_and(|e| e > now_ms) && holder_alive(&o))
    };
    let mut stmt = c.prepare_cached(
        "SELECT id, lease_owner, lease_expires_ms, status, queue_hold FROM instances \
         WHERE queue_key = ?1 AND admitted = 1 ORDER BY created_at, rowid",
    )?;
    let occupants = stmt
        .query_map([key], |r| {
            let status: InstanceStatus = r.get(3)?;
            let hold: bool = r.get(4)?;
            Ok(Occupant {
                id: r.get(0)?,
                live: live(r.get(1)?, r.get(2)?),
                held: hold && matches!(status, InstanceStatus::Sleeping | InstanceStatus::Waiting),
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let (sql, arg): (&str, rusqlite::types::Value) = match which {
        Line::All(candidate) => (
            "SELECT id, lease_owner, lease_expires_ms, status, wake_at, queue_limits FROM instances \
             WHERE queue_key = ?1 AND admitted = 0 AND (status = 'queued' OR id = ?2) \
             ORDER BY queue_priority, created_at, rowid",
            candidate.to_string().into(),
        ),
        Line::Head(n) => (
            "SELECT id, lease_owner, lease_expires_ms, status, wake_at, queue_limits FROM instances \
             WHERE queue_key = ?1 AND admitted = 0 AND status = 'queued' \
             ORDER BY queue_priority, created_at, rowid LIMIT ?2",
            (n as i64).into(),
        ),
    };
    let mut stmt = c.prepare_cached(sql)?;
    let line = stmt
        .query_map(params![key, arg], |r| {
            Ok(InLine {
                id: r.get(0)?,
                leased: live(r.get(1)?, r.get(2)?),
                not_before_ms: queue::not_before(r.get(3)?, r.get(4)?),
                limits: QueueLimits::of_text(&r.get::<_, Option<String>>(5)?.unwrap_or_default()),
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let limits: Vec<QueueLimits> = line.iter().map(|e| e.limits.clone()).collect();
    let window_ms = KeyRows::window_ms(&limits, extra);
    let window = if window_ms > 0 {
        let mut stmt = c.prepare_cached(
            "SELECT at_ms FROM admissions WHERE queue_key = ?1 AND at_ms > ?2 ORDER BY at_ms",
        )?;
        stmt.query_map(params![key, now_ms - window_ms], |r| r.get(0))?
            .collect::<rusqlite::Result<Vec<i64>>>()?
    } else {
        Vec::new()
    };
    Ok(KeyRows {
        occupants,
        line,
        window,
    })
}

/// Takes the slots of admitted instances whose holders are gone: they
/// queue again, and their epoch rises, so a stalled holder writes nothing
/// more. Their lease names who revoked them (`by`, a worker admitting;
/// else the holder of `admitted`, the instance given the room), which the
/// stalled holder's next write is refused naming.
pub(super) fn revoke(
    c: &Connection,
    ids: &[String],
    admitted: &str,
    by: Option<&str>,
) -> Result<()> {
    for id in ids {
        cached(
            c,
            "UPDATE instances SET admitted = 0, lease_epoch = lease_epoch + 1, lease_expires_ms = NULL, \
             status = CASE WHEN status = 'running' THEN 'queued' ELSE status END, updated_at = ?2, \
             lease_owner = COALESCE(?3, (SELECT o.lease_owner FROM instances o WHERE o.id = ?4), lease_owner) \
             WHERE id = ?1",
            params![id, Timestamp::now(), by, admitted],
        )?;
    }
    Ok(())
}

/// Gives `id` a slot of `key` (and, for a worker, the lease), recording
/// the admission when a rate counts it.
pub(super) fn admit(
    c: &Connection,
    id: &str,
    key: &str,
    limits: &QueueLimits,
    lease: Option<(&str, i64)>,
    now_ms: i64,
) -> Result<()> {
    match lease {
        None => cached(
            c,
            "UPDATE instances SET admitted = 1, status = 'running', wake_at = NULL, updated_at = ?2 WHERE id = ?1",
            params![id, Timestamp::now()],
        )?,
        Some((owner, ttl_ms)) => cached(
            c,
            "UPDATE instances SET admitted = 1, status = 'running', wake_at = NULL, updated_at = ?2, \
             lease_owner = ?3, lease_expires_ms = ?4, lease_epoch = lease_epoch + 1 WHERE id = ?1",
            params![id, Timestamp::now(), owner, now_ms + ttl_ms],
        )?,
    };
    if let Some(rate) = limits.rate {
        cached(
            c,
            "INSERT INTO admissions (queue_key, at_ms) VALUES (?1, ?2)",
            params![key, now_ms],
        )?;
        cached(
            c,
            "DELETE FROM admissions WHERE queue_key = ?1 AND at_ms <= ?2",
            params![key, now_ms - rate.period_ms.max(3_600_000)],
        )?;
    }
    Ok(())
}

/// Admits `id` (leased to the caller, under the fence) if its key has room
/// for it now.
pub(super) fn admit_one(
    c: &Connection,
    id: &str,
    now_ms: i64,
    holder_alive: &dyn Fn(&str) -> bool,
) -> Result<Admission> {
    let inst = super::history::instance(c, id)?;
    let Some(place) = inst.queue else {
        return Ok(Admission::Admitted);
    };
    if place.admitted {
        return Ok(Admission::Admitted);
    }
    let rows = key_rows(c, &place.key, id, Some(&place.limits), now_ms, holder_alive)?;
    let not_before = queue::not_before(inst.status, inst.wake_at);
    match queue::admit_one(&place.limits, &rows, id, not_before, now_ms) {
        Verdict::Admit { revoke: gone } => {
            revoke(c, &gone, id, None)?;
            admit(c, id, &place.key, &place.limits, None, now_ms)?;
            Ok(Admission::Admitted)
        }
        Verdict::Wait {
            position,
            ahead,
            blocked,
        } => {
            // (An ended one asked to run again, by `wf restart` or
            // `--retry-failed`, stays as it ended until admitted.)
            if inst.status != InstanceStatus::Queued && !inst.status.is_ended() {
                cached(
                    c,
                    "UPDATE instances SET status = 'queued', wake_at = NULL, waiting_event = NULL, \
                     updated_at = ?2 WHERE id = ?1",
                    params![id, Timestamp::now()],
                )?;
            }
            Ok(Admission::Waiting {
                key: place.key,
                position,
                ahead,
                blocked,
            })
        }
    }
}

/// A new instance (inserted, `queued`) meets its queue: `debounce` skips
/// the key's older queued instances made within its period; it is admitted
/// at once when it has room and a holder (`wf run`), else `on_full` says
/// whether it waits, ends `skipped`, or asks the oldest admitted one to
/// cancel.
pub(super) fn arrive(
    c: &Connection,
    row: &InstanceRow,
    now_ms: i64,
    holder_alive: &dyn Fn(&str) -> bool,
) -> Result<()> {
    let Some(place) = &row.queue else {
        return Ok(());
    };
    if let Some(d) = place.limits.debounce_ms {
        let why = queue::debounced(&row.id, &place.key);
        cached(
            c,
            "UPDATE instances SET status = 'skipped', error = ?4, wake_at = NULL, lease_expires_ms = NULL, \
             lease_epoch = lease_epoch + 1, updated_at = ?5 \
             WHERE queue_key = ?1 AND status = 'queued' AND admitted = 0 AND id != ?2 \
             AND parent_id IS NULL AND created_at >= ?3",
            params![
                place.key,
                row.id,
                Timestamp::from_ms(now_ms - d),
                why,
                Timestamp::now()
            ],
        )?;
    }
    let rows = key_rows(
        c,
        &place.key,
        &row.id,
        Some(&place.limits),
        now_ms,
        holder_alive,
    )?;
    let not_before = row.wake_at.map(Timestamp::ms);
    let held = row.lease_owner.is_some();
    match queue::arrive(place, &rows, &row.id, not_before, held, now_ms) {
        queue::Arrival::Admit { revoke: gone } => {
            revoke(c, &gone, &row.id, None)?;
            admit(c, &row.id, &place.key, &place.limits, None, now_ms)?;
        }
        queue::Arrival::Wait => {}
        queue::Arrival::Skip(why) => {
            cached(
                c,
                "UPDATE instances SET status = 'skipped', error = ?2, lease_expires_ms = NULL WHERE id = ?1",
                params![row.id, why],
            )?;
        }
        queue::Arrival::CancelPrevious(oldest) => {
            cached(
                c,
                "UPDATE instances SET cancel_requested = MAX(cancel_requested, 1), updated_at = ?2 WHERE id = ?1",
                params![oldest, Timestamp::now()],
            )?;
        }
    }
    Ok(())
}

/// A worker's admissions: for each key with due queued instances no live
/// process holds, those its room allows, leased to `owner`; at most `max`.
pub(super) fn admit_queued(
    c: &Connection,
    keys: &[String],
    owner: &str,
    ttl_ms: i64,
    max: usize,
    holder_alive: &dyn Fn(&str) -> bool,
) -> Result<Vec<InstanceId>> {
    let now_ms = chrono::Utc::now().timestamp_millis();
    let mut out = Vec::new();
    for key in keys {
        if out.len() >= max {
            break;
        }
        let rows = key_rows_of(
            c,
            key,
            Line::Head(max + LOOK_PAST),
            None,
            now_ms,
            holder_alive,
        )?;
        let (admit_ids, gone) = queue::admit_line(&rows, max - out.len(), now_ms);
        revoke(c, &gone, "", Some(owner))?;
        for id in admit_ids {
            let limits = rows
                .line
                .iter()
                .find(|e| e.id == id)
                .map(|e| e.limits.clone())
                .unwrap_or_default();
            admit(c, &id, key, &limits, Some((owner, ttl_ms)), now_ms)?;
            out.push(InstanceId::from(id));
        }
    }
    Ok(out)
}

/// How many queued instances past the ones it may admit a worker reads of
/// a line: those held by a waiting `wf run`, or debounced, keep their places
/// and are passed over. More of them than this only delay an admission to
/// the next look (never admit past the limits).
const LOOK_PAST: usize = 64;

/// The keys a worker with room for `max` could admit something of now, read
/// without the write lock (the admission itself decides again under it):
/// a worker's look that finds nothing to do takes no lock from the runners'
/// commits.
pub(super) fn admissible_keys(
    c: &Connection,
    max: usize,
    holder_alive: &dyn Fn(&str) -> bool,
) -> Result<Vec<String>> {
    let now_ms = chrono::Utc::now().timestamp_millis();
    let mut stmt = c.prepare_cached(
        "SELECT DISTINCT queue_key FROM instances WHERE status = 'queued' AND admitted = 0 \
         AND queue_key IS NOT NULL AND (lease_expires_ms IS NULL OR lease_expires_ms <= ?1)",
    )?;
    let keys = stmt
        .query_map([now_ms], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    let mut out = Vec::new();
    for key in keys {
        let rows = key_rows_of(
            c,
            &key,
            Line::Head(max + LOOK_PAST),
            None,
            now_ms,
            holder_alive,
        )?;
        if !queue::admit_line(&rows, max, now_ms).0.is_empty() {
            out.push(key);
        }
    }
    Ok(out)
}

/// Every key with admitted or queued instances, or admissions in a rate's
/// window, by name.
pub(super) fn summaries(c: &Connection) -> Result<Vec<queue::QueueSummary>> {
    let now_ms = chrono::Utc::now().timestamp_millis();
    let mut stmt = c.prepare_cached(
        "SELECT k, \
           (SELECT count(*) FROM instances i WHERE i.queue_key = k AND i.admitted = 1), \
           (SELECT count(*) FROM instances i WHERE i.queue_key = k AND i.admitted = 0 AND i.status = 'queued'), \
           (SELECT min(created_at) FROM instances i WHERE i.queue_key = k AND i.admitted = 0 AND i.status = 'queued'), \
           (SELECT queue_limits FROM instances i WHERE i.queue_key = k ORDER BY created_at DESC LIMIT 1) \
         FROM (SELECT DISTINCT queue_key AS k FROM instances WHERE queue_key IS NOT NULL \
                 AND (admitted = 1 OR status = 'queued') \
               UNION SELECT DISTINCT queue_key FROM admissions) ORDER BY k",
    )?;
    let rows = stmt
        .query_map([], |r| {
            Ok(queue::QueueSummary {
                key: r.get(0)?,
                admitted: r.get(1)?,
                queued: r.get(2)?,
                oldest_queued: r.get(3)?,
                limits: QueueLimits::of_text(&r.get::<_, Option<String>>(4)?.unwrap_or_default()),
                rate_used: 0,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut out = Vec::with_capacity(rows.len());
    for mut q in rows {
        if let Some(rate) = q.limits.rate {
            q.rate_used = c
                .prepare_cached(
                    "SELECT count(*) FROM admissions WHERE queue_key = ?1 AND at_ms > ?2",
                )?
                .query_row(params![q.key, now_ms - rate.period_ms], |r| r.get(0))?;
        }
        out.push(q);
    }
    Ok(out)
}

/// Where instance `id` stands in its queue now (nothing written): `None`
/// without a queue.
pub(super) fn standing(
    c: &Connection,
    id: &str,
    holder_alive: &dyn Fn(&str) -> bool,
) -> Result<Option<Admission>> {
    let inst = super::history::instance(c, id)?;
    let Some(place) = inst.queue else {
        return Ok(None);
    };
    if place.admitted {
        return Ok(Some(Admission::Admitted));
    }
    let now_ms = chrono::Utc::now().timestamp_millis();
    let rows = key_rows(c, &place.key, id, Some(&place.limits), now_ms, holder_alive)?;
    let not_before = queue::not_before(inst.status, inst.wake_at);
    Ok(Some(queue::standing(
        place.key,
        &place.limits,
        &rows,
        id,
        not_before,
        now_ms,
    )))
}

/// Takes step lock `key` (at most `limit` holders) for unit `unit` of the
/// fenced instance if it has room; a holder whose instance's lease is dead
/// is not counted, and loses the lock (and its lease epoch) when its place
/// is taken.
pub(super) fn take_lock(
    c: &Connection,
    fence: &Fence,
    key: &str,
    limit: u32,
    unit: &str,
    holder_alive: &dyn Fn(&str) -> bool,
) -> Result<bool> {
    let now_ms = chrono::Utc::now().timestamp_millis();
    let mine: Option<i64> = c
        .prepare_cached("SELECT lease_expires_ms FROM instances WHERE id = ?1")?
        .query_row([&fence.instance], |r| r.get(0))?;
    if mine.is_none_or(|e| e <= now_ms) {
        return Err(StoreError::Fenced {
            id: fence.instance.clone(),
            holder: Some(super::lease::EXPIRED_IN_SLOT.into()),
        });
    }
    let mut stmt = c.prepare_cached(
        "SELECT l.instance_id, l.unit_key, i.lease_owner, i.lease_expires_ms \
         FROM locks l JOIN instances i ON i.id = l.instance_id WHERE l.lock_key = ?1",
    )?;
    let holders = stmt
        .query_map([key], |r| {
            let instance: String = r.get(0)?;
            let owner: Option<String> = r.get(2)?;
            let expires: Option<i64> = r.get(3)?;
            let live = instance == *fence.instance
                || owner.is_some_and(|o| expires.is_some_and(|e| e > now_ms) && holder_alive(&o));
            Ok(queue::LockHolder {
                instance,
                unit: r.get(1)?,
                live,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    match queue::lock_verdict(&holders, &fence.instance, unit, limit) {
        queue::LockVerdict::Held => Ok(true),
        queue::LockVerdict::Busy => Ok(false),
        queue::LockVerdict::Take { revoke } => {
            for gone in revoke {
                cached(
                    c,
                    "DELETE FROM locks WHERE lock_key = ?1 AND instance_id = ?2",
                    params![key, gone],
                )?;
                // Its lease names who took its place (the next write of
                // a stalled holder is refused naming it).
                cached(
                    c,
                    "UPDATE instances SET lease_epoch = lease_epoch + 1, lease_expires_ms = NULL, \
                     lease_owner = COALESCE((SELECT o.lease_owner FROM instances o WHERE o.id = ?2), lease_owner) \
                     WHERE id = ?1",
                    params![gone, fence.instance],
                )?;
            }
            cached(
                c,
                "INSERT INTO locks (lock_key, instance_id, unit_key) VALUES (?1, ?2, ?3)",
                params![key, fence.instance, unit],
            )?;
            Ok(true)
        }
    }
}

impl super::SqliteStore {
    /// Key `key`'s line (`store::queue_line`).
    pub fn queue_line(
        &self,
        key: &str,
        limit: usize,
    ) -> Result<crate::store::queue_line::QueueLine> {
        use crate::store::queue_line::{MEMBER_COLS, Member, QueueLine};
        let c = &self.conn;
        let members = |sql: &str| -> Result<Vec<Member>> {
            let mut stmt = c.prepare_cached(sql)?;
            let rows = stmt
                .query_map(params![key, limit as i64], |r| {
                    Ok(Member::of(
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                    ))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        };
        let admitted = members(&format!(
            "SELECT {MEMBER_COLS} FROM instances WHERE queue_key = ?1 AND admitted = 1 \
             ORDER BY created_at, rowid LIMIT ?2"
        ))?;
        let waiting = members(&format!(
            "SELECT {MEMBER_COLS} FROM instances WHERE queue_key = ?1 AND admitted = 0 \
             AND status = 'queued' ORDER BY queue_priority, created_at, rowid LIMIT ?2"
        ))?;
        let (admitted_total, waiting_total) = c.query_row(
            "SELECT count(*) FILTER (WHERE admitted = 1), \
             count(*) FILTER (WHERE admitted = 0 AND status = 'queued') \
             FROM instances WHERE queue_key = ?1",
            [key],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok(QueueLine {
            admitted,
            admitted_total,
            waiting,
            waiting_total,
        })
    }
}
