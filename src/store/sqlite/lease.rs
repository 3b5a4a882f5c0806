//! Who holds an instance: the lease a runner takes, checks in every
//! transaction (the fence), renews and gives up, and the due instances a
//! worker claims in one statement. Kept apart from the rows it guards
//! because every runner and worker goes through it.

use super::history::cached;
use crate::store::rows::*;
use crate::store::{Result, StoreError};
use crate::vocab::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};

/// Takes the lease if it is free, expired, ours, or held by a process on this
/// host that no longer exists, raising the instance's epoch. Returns the
/// current holder when refused.
pub(super) fn acquire_lease(
    c: &Connection,
    id: &str,
    owner: &str,
    ttl_ms: i64,
    holder_alive: impl Fn(&str) -> bool,
) -> Result<Result<Fence, String>> {
    let now_ms = chrono::Utc::now().timestamp_millis();
    let (holder, expires, epoch): (Option<String>, Option<i64>, i64) = c
        .query_row(
            "SELECT lease_owner, lease_expires_ms, lease_epoch FROM instances WHERE id=?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?
        .ok_or_else(|| StoreError::NotFound(id.into()))?;
    if let Some(h) = holder
        && h != owner
        && expires.unwrap_or(0) > now_ms
        && holder_alive(&h)
    {
        return Ok(Err(h));
    }
    let epoch = epoch + 1;
    cached(
        c,
        "UPDATE instances SET lease_owner=?2, lease_expires_ms=?3, lease_epoch=?4 WHERE id=?1",
        params![id, owner, now_ms + ttl_ms, epoch],
    )?;
    Ok(Ok(Fence {
        instance: id.into(),
        owner: owner.into(),
        epoch,
    }))
}

/// Refuses (with [`StoreError::Fenced`]) unless `fence` still holds the
/// instance's lease. Called first in every transaction of a runner: the
/// transaction holds the write lock, so nobody can take over before it ends.
///
/// An instance that holds a queue slot or a step lock also needs its lease
/// unexpired: past its expiry, an admission may give the slot away (raising the epoch)
/// right after this transaction, and what it started would then run beside
/// the instance admitted in its place. A runner whose heartbeat renewed the
/// lease in time never meets this.
pub(super) fn check_fence(c: &Connection, fence: &Fence) -> Result<()> {
    let (epoch, holder, admitted, expires): (i64, Option<String>, bool, Option<i64>) = c
        .prepare_cached(
            "SELECT lease_epoch, lease_owner, \
             admitted OR EXISTS (SELECT 1 FROM locks l WHERE l.instance_id = ?1), lease_expires_ms \
             FROM instances WHERE id=?1",
        )?
        .query_row([&fence.instance], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })?;
    if epoch != fence.epoch {
        return Err(StoreError::Fenced {
            id: fence.instance.clone(),
            holder,
        });
    }
    if admitted && expires.is_some_and(|e| e <= chrono::Utc::now().timestamp_millis()) {
        return Err(StoreError::Fenced {
            id: fence.instance.clone(),
            holder: Some(EXPIRED_IN_SLOT.into()),
        });
    }
    Ok(())
}

/// The holder a refused fence names when the runner's own lease expired
/// while its instance held a queue slot.
pub(crate) const EXPIRED_IN_SLOT: &str =
    "nobody (its lease expired while it held a queue slot, which may be given away)";

/// Extends our lease; `Fenced` if somebody else took it over meanwhile.
pub(super) fn renew_lease(c: &Connection, fence: &Fence, ttl_ms: i64) -> Result<()> {
    let now_ms = chrono::Utc::now().timestamp_millis();
    let n = cached(
        c,
        "UPDATE instances SET lease_expires_ms=?3 WHERE id=?1 AND lease_epoch=?2",
        params![fence.instance, fence.epoch, now_ms + ttl_ms],
    )?;
    if n == 1 {
        Ok(())
    } else {
        check_fence(c, fence)
    }
}

/// [`Write::Release`]: in a fenced transaction, so the instance is ours.
pub(super) fn release_instance(c: &Connection, id: &str) -> Result<()> {
    cached(
        c,
        "UPDATE instances SET lease_expires_ms=NULL WHERE id=?1",
        params![id],
    )?;
    Ok(())
}

/// Gives the lease up (only if it is still ours). The owner stays recorded
/// as the last holder, so a runner that lost the instance can name it.
pub(super) fn release_lease(c: &Connection, fence: &Fence) -> Result<()> {
    cached(
        c,
        "UPDATE instances SET lease_expires_ms=NULL WHERE id=?1 AND lease_epoch=?2",
        params![fence.instance, fence.epoch],
    )?;
    Ok(())
}

/// What makes an instance due (parameter 1: now as text): its timer
/// elapsed, its event arrived or timed out, a cancel was asked of it while
/// it slept or waited (`overlap: cancel_previous`, an interrupted `wf
/// cancel`), or it is running (its holder may be gone). The same for
/// `claim_due` and `due_instances`.
///
/// `waiting_event` is the comma-separated list of the names awaited (a
/// `wait_for_event.name` holds no comma): an event matches when its name is
/// one of them exactly, case included, as the engine matches it. No pattern
/// operator (`LIKE`, `GLOB`) touches a name: `approve_`, `%` or `APPROVED`
/// never wakes an instance waiting for `approved`, and a name holding a
/// comma (which no step can wait for) never matches two listed names.
macro_rules! due_sql {
    () => {
        "((status IN ('pending', 'sleeping') AND (wake_at IS NULL OR wake_at <= ?1 OR cancel_requested > 0)) \
          OR (status = 'waiting' AND (cancel_requested > 0 OR (wake_at IS NOT NULL AND wake_at <= ?1) OR EXISTS ( \
              SELECT 1 FROM events e WHERE e.instance_id = instances.id AND e.consumed_by IS NULL \
              AND instr(e.name, ',') = 0 \
              AND instr(',' || instances.waiting_event || ',', ',' || e.name || ',') > 0))) \
          OR status = 'running')"
    };
}

/// A worker's claim (?1 now as text, ?2 now in ms, ?3 owner, ?4 TTL in ms,
/// ?5 limit, ?6 JSON list of ids to skip): due instances without a live
/// lease, oldest first, leased to `owner` in the same statement.
pub(super) const CLAIM_DUE_SQL: &str = concat!(
    "UPDATE instances SET lease_owner = ?3, lease_expires_ms = ?2 + ?4, lease_epoch = lease_epoch + 1 \
     WHERE id IN (SELECT id FROM instances WHERE ",
    due_sql!(),
    " AND (lease_expires_ms IS NULL OR lease_expires_ms <= ?2) \
     AND id NOT IN (SELECT value FROM json_each(?6)) ORDER BY created_at, rowid LIMIT ?5) RETURNING id"
);

pub(super) fn claim_due(
    c: &Connection,
    owner: &str,
    ttl_ms: i64,
    limit: usize,
    skip: &[InstanceId],
) -> Result<Vec<InstanceId>> {
    let now_ms = chrono::Utc::now().timestamp_millis();
    let skip = serde_json::to_string(skip).unwrap_or_else(|_| "[]".into());
    let mut stmt = c.prepare_cached(CLAIM_DUE_SQL)?;
    let rows = stmt.query_map(
        params![Timestamp::now(), now_ms, owner, ttl_ms, limit as i64, skip],
        |r| r.get(0),
    )?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Every due instance, oldest first (?1 now as text).
pub(super) const DUE_INSTANCES_SQL: &str = concat!(
    "SELECT id, status, lease_owner, lease_expires_ms FROM instances WHERE ",
    due_sql!(),
    " ORDER BY created_at"
);

pub(super) fn due_instances(c: &Connection) -> Result<Vec<DueInstance>> {
    let mut stmt = c.prepare_cached(DUE_INSTANCES_SQL)?;
    let rows = stmt.query_map([Timestamp::now()], |r| {
        Ok(DueInstance {
            id: r.get(0)?,
            status: r.get(1)?,
            lease_owner: r.get(2)?,
            lease_expires_ms: r.get(3)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}
