//! Queue admission on PostgreSQL (`store::queue` decides, as on SQLite):
//! a key's rows are read under a transaction-scoped advisory lock on the
//! key, which serializes every admission to it across workers and hosts,
//! and the verdict is applied in the same transaction. Two round trips: the
//! reads, then the writes and COMMIT.
//!
//! Only an admission that revokes a dead holder's slot locks the key's
//! admitted rows (`FOR UPDATE`, read again: a holder's renewal or commit
//! waits, then meets the raised epoch). One that revokes nothing needs no
//! row of theirs: only an admission, under the key's lock, makes a row
//! admitted, so what a holder does meanwhile (renew, end, leave its slot)
//! can only free room the verdict did not count on. Locking them every time
//! made each running holder's commits wait for every admission to its key.

use super::history::{NOTIFY, get, insert_definition, insert_instance, p};
use super::{Op, Out, Param, PgStore};
use crate::store::queue::{self, Admission, InLine, KeyRows, Occupant, QueueLimits, Verdict};
use crate::store::rows::*;
use crate::store::{Result, StoreError};
use crate::vocab::{InstanceStatus, Timestamp};
use tokio_postgres::Row;

/// The key's lock, for the rest of the transaction (`$1` the key; the
/// schema is part of it, so that two schemas' keys never wait on each other).
const KEY_LOCK: &str =
    "SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || ':' || $1, 0))";

const OCCUPANTS: &str = concat!(
    "SELECT id, lease_owner, ",
    lease_left!(),
    ", status, queue_hold FROM instances WHERE queue_key = $1 AND admitted \
     ORDER BY created_at, seq FOR UPDATE"
);

const LINE: &str = concat!(
    "SELECT id, lease_owner, ",
    lease_left!(),
    ", status, wake_at, queue_limits FROM instances \
     WHERE queue_key = $1 AND NOT admitted AND (status = 'queued' OR id = $2) \
     ORDER BY queue_priority, created_at, seq"
);

/// The key's admissions still in its window (older ones are deleted as
/// admissions are made), and the server's clock.
const WINDOW: &str = concat!(
    "SELECT ",
    server_ms!(),
    ", COALESCE(array_agg(at_ms ORDER BY at_ms) FILTER (WHERE at_ms IS NOT NULL), '{}') \
     FROM (SELECT at_ms FROM admissions WHERE queue_key = $1) a"
);

/// Takes a dead holder's slot (`$1`): it queues again, its epoch rises, and
/// its lease names who revoked it (`$3`, a worker admitting; else the
/// holder of the instance admitted in its place, `$4`), which the stalled
/// holder's next write is refused naming.
const REVOKE: &str = "UPDATE instances SET admitted = false, lease_epoch = lease_epoch + 1, \
     lease_expires_ms = NULL, status = CASE WHEN status = 'running' THEN 'queued' ELSE status END, \
     lease_owner = COALESCE($3, (SELECT o.lease_owner FROM instances o WHERE o.id = $4), lease_owner), \
     updated_at = $2 WHERE id = $1";

const ADMIT: &str = "UPDATE instances SET admitted = true, status = 'running', wake_at = NULL, \
     updated_at = $2 WHERE id = $1";

const ADMIT_LEASED: &str = concat!(
    "UPDATE instances SET admitted = true, status = 'running', wake_at = NULL, updated_at = $2, \
     lease_owner = $3, lease_expires_ms = ",
    server_ms!(),
    " + $4, lease_epoch = lease_epoch + 1 WHERE id = $1"
);

const RECORD: &str = "INSERT INTO admissions (queue_key, at_ms) VALUES ($1, $2)";
const PRUNE: &str = "DELETE FROM admissions WHERE queue_key = $1 AND at_ms <= $2";

const SKIP_OLDER: &str = "UPDATE instances SET status = 'skipped', error = $4, wake_at = NULL, \
     lease_expires_ms = NULL, lease_epoch = lease_epoch + 1, updated_at = $5 \
     WHERE queue_key = $1 AND status = 'queued' AND NOT admitted AND id <> $2 \
     AND parent_id IS NULL AND created_at >= $3";

const SKIP: &str =
    "UPDATE instances SET status = 'skipped', error = $2, lease_expires_ms = NULL WHERE id = $1";

const CANCEL: &str = "UPDATE instances SET cancel_requested = GREATEST(cancel_requested, 1), \
     updated_at = $2 WHERE id = $1";

const QUEUED: &str = "UPDATE instances SET status = 'queued', wake_at = NULL, waiting_event = NULL, \
     updated_at = $2 WHERE id = $1";

/// The keys with due queued instances that no live process holds: a skip
/// from key to key over `instances_queued_keys` (one index entry a key),
/// each kept if one of its queued instances is unleased.
const WAITING_KEYS: &str = concat!(
    "WITH RECURSIVE k(key) AS ( \
       (SELECT queue_key FROM instances WHERE status = 'queued' AND NOT admitted \
          AND queue_key IS NOT NULL ORDER BY queue_key LIMIT 1) \
       UNION ALL \
       SELECT (SELECT queue_key FROM instances WHERE status = 'queued' AND NOT admitted \
          AND queue_key > k.key ORDER BY queue_key LIMIT 1) FROM k WHERE k.key IS NOT NULL) \
     SELECT key FROM k WHERE key IS NOT NULL AND EXISTS (SELECT 1 FROM instances i \
       WHERE i.queue_key = k.key AND NOT i.admitted AND i.status = 'queued' \
       AND (i.lease_expires_ms IS NULL OR i.lease_expires_ms <= ",
    server_ms!(),
    "))"
);

/// `OCCUPANTS` without the lock, for a standing that writes nothing.
const OCCUPANTS_READ: &str = concat!(
    "SELECT id, lease_owner, ",
    lease_left!(),
    ", status, queue_hold FROM instances WHERE queue_key = $1 AND admitted \
     ORDER BY created_at, seq"
);

const SUMMARIES: &str = "SELECT k, \
       (SELECT count(*) FROM instances i WHERE i.queue_key = k AND i.admitted), \
       (SELECT count(*) FROM instances i WHERE i.queue_key = k AND NOT i.admitted AND i.status = 'queued'), \
       (SELECT min(created_at) FROM instances i WHERE i.queue_key = k AND NOT i.admitted AND i.status = 'queued'), \
       (SELECT queue_limits FROM instances i WHERE i.queue_key = k ORDER BY created_at DESC, seq DESC LIMIT 1), \
       (SELECT array_agg(at_ms) FROM admissions a WHERE a.queue_key = k) \
     FROM (SELECT DISTINCT queue_key AS k FROM instances WHERE queue_key IS NOT NULL \
             AND (admitted OR status = 'queued') \
           UNION SELECT DISTINCT queue_key FROM admissions) keys ORDER BY k";

/// The head of a key's line (`$2` rows), for a worker's look.
const LINE_HEAD: &str = concat!(
    "SELECT id, lease_owner, ",
    lease_left!(),
    ", status, wake_at, queue_limits FROM instances \
     WHERE queue_key = $1 AND NOT admitted AND status = 'queued' \
     ORDER BY queue_priority, created_at, seq LIMIT $2"
);

/// How many queued instances past the ones it may admit a worker reads of
/// a line (as on SQLite: those it passes over keep their places).
const LOOK_PAST: usize = 64;

/// How a worker reads a key's rows.
#[derive(Clone, Copy, PartialEq)]
enum Look {
    /// Without locks, only to look.
    Unlocked,
    /// Under the key's lock, to admit.
    Locked,
    /// Under the key's lock with its admitted rows locked, to admit and
    /// revoke.
    Revoking,
}

/// A worker's reads of a key's rows: the head of its line, read as `look`
/// says.
fn head_reads(key: &str, n: usize, look: Look) -> [Op; 4] {
    [
        Op::Query(
            if look == Look::Unlocked {
                "SELECT $1::text"
            } else {
                KEY_LOCK
            },
            vec![p(key.to_string())],
        ),
        Op::Query(
            if look == Look::Revoking {
                OCCUPANTS
            } else {
                OCCUPANTS_READ
            },
            vec![p(key.to_string())],
        ),
        Op::Query(LINE_HEAD, vec![p(key.to_string()), p(n as i64)]),
        Op::Query(WINDOW, vec![p(key.to_string())]),
    ]
}

/// The reads of a key's rows, after its lock; its admitted rows locked
/// too when the verdict revokes one (`revoking`).
fn reads(key: &str, candidate: &str, revoking: bool) -> [Op; 4] {
    [
        Op::Query(KEY_LOCK, vec![p(key.to_string())]),
        Op::Query(
            if revoking { OCCUPANTS } else { OCCUPANTS_READ },
            vec![p(key.to_string())],
        ),
        Op::Query(LINE, vec![p(key.to_string()), p(candidate.to_string())]),
        Op::Query(WINDOW, vec![p(key.to_string())]),
    ]
}

/// [`reads`]' replies as [`KeyRows`], with the server's clock (ms).
fn key_rows(
    outs: impl Iterator<Item = Out>,
    holder_alive: &dyn Fn(&str) -> bool,
) -> Result<(KeyRows, i64)> {
    let mut outs = outs.map(Out::rows);
    let _lock = outs.next();
    let occupants = outs.next().unwrap_or_default();
    let line = outs.next().unwrap_or_default();
    let window = outs.next().unwrap_or_default();
    let w = window
        .first()
        .ok_or_else(|| StoreError::Corrupt("no reply to the admission window".into()))?;
    let now_ms: i64 = get(w, 0)?;
    let window: Vec<i64> = get(w, 1)?;
    let live = |r: &Row| -> Result<bool> { Ok(live_holder(get(r, 1)?, get(r, 2)?, holder_alive)) };
    let occupants = occupants
        .iter()
        .map(|r| {
            let status: InstanceStatus = get(r, 3)?;
            let hold: bool = get(r, 4)?;
            Ok(Occupant {
                id: get(r, 0)?,
                live: live(r)?,
                held: hold && matches!(status, InstanceStatus::Sleeping | InstanceStatus::Waiting),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let line = line
        .iter()
        .map(|r| {
            Ok(InLine {
                id: get(r, 0)?,
                leased: live(r)?,
                not_before_ms: queue::not_before(get(r, 3)?, get(r, 4)?),
                limits: QueueLimits::of_text(&get::<Option<String>>(r, 5)?.unwrap_or_default()),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((
        KeyRows {
            occupants,
            line,
            window,
        },
        now_ms,
    ))
}

/// The writes that revoke `gone` and admit `id` (leased to `lease`'s owner
/// for its TTL, when given), recording the admission for a rate.
fn admit_ops(
    ops: &mut Vec<Op>,
    gone: &[String],
    id: &str,
    key: &str,
    limits: &QueueLimits,
    lease: Option<(&str, i64)>,
    now_ms: i64,
) {
    let now = Timestamp::now();
    for g in gone {
        ops.push(Op::Exec(
            REVOKE,
            vec![
                p(g.clone()),
                p(now),
                p(lease.map(|(owner, _)| owner.to_string())),
                p(id.to_string()),
            ],
        ));
    }
    let mut params: Vec<Param> = vec![p(id.to_string()), p(now)];
    match lease {
        None => ops.push(Op::Exec(ADMIT, params)),
        Some((owner, ttl_ms)) => {
            params.extend([p(owner.to_string()), p(ttl_ms)]);
            ops.push(Op::Exec(ADMIT_LEASED, params));
        }
    }
    if let Some(rate) = limits.rate {
        ops.push(Op::Exec(RECORD, vec![p(key.to_string()), p(now_ms)]));
        ops.push(Op::Exec(
            PRUNE,
            vec![p(key.to_string()), p(now_ms - rate.period_ms)],
        ));
    }
}

impl PgStore {
    /// Reads the key's rows again in the open transaction, its admitted
    /// rows locked (for a verdict that revokes); rolled back on an error.
    async fn read_revoking(
        &self,
        ops: Vec<Op>,
        holder_alive: &dyn Fn(&str) -> bool,
    ) -> Result<(KeyRows, i64)> {
        let rows = match self.pipeline(ops).await {
            Ok(outs) => key_rows(outs.into_iter(), holder_alive),
            Err(e) => Err(e),
        };
        if rows.is_err() {
            self.rollback().await;
        }
        rows
    }

    /// Sends `ops` then COMMIT, continuing the open transaction; rolled
    /// back on an error.
    async fn finish(&self, mut ops: Vec<Op>) -> Result<()> {
        ops.push(Op::Simple("COMMIT"));
        if let Err(e) = self.pipeline(ops).await {
            self.rollback().await;
            return Err(e);
        }
        Ok(())
    }

    /// [`PgStore::create_instance`] of an instance with a queue: inserted,
    /// then met by its queue (see `sqlite/queue.rs`, `arrive`) in the same
    /// transaction.
    pub(super) async fn create_queued(
        &self,
        row: &InstanceRow,
        defs: &[DefinitionRow],
        detail: &str,
        holder_alive: &dyn Fn(&str) -> bool,
    ) -> Result<bool> {
        let Some(place) = &row.queue else {
            return Err(StoreError::Corrupt("create_queued without a queue".into()));
        };
        let mut ops = vec![Op::Simple("BEGIN")];
        ops.extend(defs.iter().map(insert_definition));
        let inserted = ops.len();
        ops.push(insert_instance(row, detail));
        ops.push(Op::Query(KEY_LOCK, vec![p(place.key.clone())]));
        if let Some(d) = place.limits.debounce_ms {
            let now = Timestamp::now();
            ops.push(Op::Exec(
                SKIP_OLDER,
                vec![
                    p(place.key.clone()),
                    p(row.id.to_string()),
                    p(Timestamp::from_ms(now.ms() - d)),
                    p(queue::debounced(&row.id, &place.key)),
                    p(now),
                ],
            ));
        }
        let read_from = ops.len();
        ops.extend(reads(&place.key, &row.id, false));
        let outs = self.pipeline(ops).await?;
        if outs[inserted].counted() == 0 {
            self.rollback().await;
            return Ok(false);
        }
        let (rows, now_ms) = match key_rows(outs.into_iter().skip(read_from), holder_alive) {
            Ok(r) => r,
            Err(e) => {
                self.rollback().await;
                return Err(e);
            }
        };
        let mut ops = Vec::new();
        let not_before = row.wake_at.map(Timestamp::ms);
        let held = row.lease_owner.is_some();
        let mut arrival = queue::arrive(place, &rows, &row.id, not_before, held, now_ms);
        if matches!(&arrival, queue::Arrival::Admit { revoke } if !revoke.is_empty()) {
            let ops = reads(&place.key, &row.id, true).into();
            let (rows, now_ms) = self.read_revoking(ops, holder_alive).await?;
            arrival = queue::arrive(place, &rows, &row.id, not_before, held, now_ms);
        }
        match arrival {
            queue::Arrival::Admit { revoke } => admit_ops(
                &mut ops,
                &revoke,
                &row.id,
                &place.key,
                &place.limits,
                None,
                now_ms,
            ),
            queue::Arrival::Wait => {}
            queue::Arrival::Skip(why) => {
                ops.push(Op::Exec(SKIP, vec![p(row.id.to_string()), p(why)]));
            }
            queue::Arrival::CancelPrevious(oldest) => {
                ops.push(Op::Exec(CANCEL, vec![p(oldest), p(Timestamp::now())]));
            }
        }
        ops.push(Op::Query(NOTIFY, vec![]));
        self.finish(ops).await?;
        Ok(true)
    }

    pub async fn admit(
        &self,
        fence: &Fence,
        holder_alive: &dyn Fn(&str) -> bool,
    ) -> Result<Admission> {
        let inst = self.instance(&fence.instance).await?;
        let Some(place) = inst.queue else {
            return Ok(Admission::Admitted);
        };
        if place.admitted {
            return Ok(Admission::Admitted);
        }
        let mut ops = vec![
            Op::Simple("BEGIN"),
            Op::Query(
                super::lease::FENCE,
                vec![p(fence.instance.to_string()), p(fence.epoch)],
            ),
        ];
        ops.extend(reads(&place.key, &fence.instance, false));
        let outs = self
            .pipeline(ops)
            .await
            .map_err(|e| super::lease::named(e, fence))?;
        let (mut rows, mut now_ms) = match key_rows(outs.into_iter().skip(2), holder_alive) {
            Ok(r) => r,
            Err(e) => {
                self.rollback().await;
                return Err(e);
            }
        };
        if rows.occupants.iter().any(|o| !o.occupies()) {
            let ops = reads(&place.key, &fence.instance, true).into();
            (rows, now_ms) = self.read_revoking(ops, holder_alive).await?;
        }
        // As read under the fence: the row above was read before it.
        let Some(me) = rows.line.iter().find(|e| e.id == *fence.instance) else {
            // Admitted meanwhile (it is not in the line of the unadmitted).
            self.finish(Vec::new()).await?;
            return Ok(Admission::Admitted);
        };
        let not_before = me.not_before_ms;
        let mut ops = Vec::new();
        let admission =
            match queue::admit_one(&place.limits, &rows, &fence.instance, not_before, now_ms) {
                Verdict::Admit { revoke } => {
                    admit_ops(
                        &mut ops,
                        &revoke,
                        &fence.instance,
                        &place.key,
                        &place.limits,
                        None,
                        now_ms,
                    );
                    Admission::Admitted
                }
                Verdict::Wait {
                    position,
                    ahead,
                    blocked,
                } => {
                    // (An ended one asked to run again stays as it ended
                    // until admitted, as on SQLite.)
                    if inst.status != InstanceStatus::Queued && !inst.status.is_ended() {
                        ops.push(Op::Exec(
                            QUEUED,
                            vec![p(fence.instance.to_string()), p(Timestamp::now())],
                        ));
                    }
                    Admission::Waiting {
                        key: place.key.clone(),
                        position,
                        ahead,
                        blocked,
                    }
                }
            };
        self.finish(ops).await?;
        Ok(admission)
    }

    pub async fn admit_queued(
        &self,
        owner: &str,
        ttl_ms: i64,
        max: usize,
        holder_alive: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<InstanceId>> {
        let keys: Vec<String> = self
            .query(WAITING_KEYS, &[])
            .await?
            .iter()
            .map(|r| get(r, 0))
            .collect::<Result<_>>()?;
        let mut out = Vec::new();
        for key in keys {
            if out.len() >= max {
                break;
            }
            let head = max - out.len() + LOOK_PAST;
            // A look first, without locks: a worker that finds nothing to
            // admit (the usual case while a key is full) holds up nobody.
            let outs = self
                .pipeline(head_reads(&key, head, Look::Unlocked).into())
                .await?;
            let (rows, now_ms) = key_rows(outs.into_iter(), holder_alive)?;
            if queue::admit_line(&rows, max - out.len(), now_ms)
                .0
                .is_empty()
            {
                continue;
            }
            let mut ops = vec![Op::Simple("BEGIN")];
            ops.extend(head_reads(&key, head, Look::Locked));
            let outs = self.pipeline(ops).await?;
            let (mut rows, mut now_ms) = match key_rows(outs.into_iter().skip(1), holder_alive) {
                Ok(r) => r,
                Err(e) => {
                    self.rollback().await;
                    return Err(e);
                }
            };
            let (mut admit, mut gone) = queue::admit_line(&rows, max - out.len(), now_ms);
            if !gone.is_empty() {
                let ops = head_reads(&key, head, Look::Revoking).into();
                (rows, now_ms) = self.read_revoking(ops, holder_alive).await?;
                (admit, gone) = queue::admit_line(&rows, max - out.len(), now_ms);
            }
            let mut ops = Vec::new();
            let mut revoke = gone;
            for id in &admit {
                let limits = rows
                    .line
                    .iter()
                    .find(|e| e.id == *id)
                    .map(|e| e.limits.clone())
                    .unwrap_or_default();
                admit_ops(
                    &mut ops,
                    &std::mem::take(&mut revoke),
                    id,
                    &key,
                    &limits,
                    Some((owner, ttl_ms)),
                    now_ms,
                );
            }
            self.finish(ops).await?;
            out.extend(admit.into_iter().map(InstanceId::from));
        }
        Ok(out)
    }
}

impl PgStore {
    pub async fn queues(&self) -> Result<Vec<queue::QueueSummary>> {
        let now_ms = chrono::Utc::now().timestamp_millis();
        self.query(SUMMARIES, &[])
            .await?
            .iter()
            .map(|r| {
                let limits =
                    QueueLimits::of_text(&get::<Option<String>>(r, 4)?.unwrap_or_default());
                let window: Vec<i64> = get::<Option<Vec<i64>>>(r, 5)?.unwrap_or_default();
                let rate_used = limits.rate.map_or(0, |rate| {
                    window
                        .iter()
                        .filter(|&&t| t > now_ms - rate.period_ms)
                        .count() as i64
                });
                Ok(queue::QueueSummary {
                    key: get(r, 0)?,
                    admitted: get(r, 1)?,
                    queued: get(r, 2)?,
                    oldest_queued: get(r, 3)?,
                    limits,
                    rate_used,
                })
            })
            .collect()
    }

    pub async fn queue_standing(
        &self,
        id: &str,
        holder_alive: &dyn Fn(&str) -> bool,
    ) -> Result<Option<Admission>> {
        let inst = self.instance(id).await?;
        let Some(place) = inst.queue else {
            return Ok(None);
        };
        if place.admitted {
            return Ok(Some(Admission::Admitted));
        }
        let outs = self
            .pipeline(vec![
                Op::Simple("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"),
                Op::Query("SELECT 1", vec![]),
                Op::Query(OCCUPANTS_READ, vec![p(place.key.clone())]),
                Op::Query(LINE, vec![p(place.key.clone()), p(id.to_string())]),
                Op::Query(WINDOW, vec![p(place.key.clone())]),
                Op::Simple("COMMIT"),
            ])
            .await?;
        let (rows, now_ms) = key_rows(outs.into_iter().skip(1), holder_alive)?;
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
}

/// The holders of a step lock (`$1`), with their instances' leases. Read
/// without locking their rows: a holder's own `take_lock` holds its row
/// while it waits for the key's lock, so waiting here for that row (with
/// the key's lock held) closed a circle, and PostgreSQL ended one of the
/// two with a deadlock (40P01). Only the rows of holders about to be
/// revoked are locked, without waiting ([`RECHECK`]).
const LOCK_HOLDERS: &str = concat!(
    "SELECT l.instance_id, l.unit_key, i.lease_owner, i.",
    lease_left!(),
    " FROM locks l JOIN instances i ON i.id = l.instance_id WHERE l.lock_key = $1"
);

/// The holders to revoke (`$1`), read again with their rows locked: those
/// another transaction holds (a commit, a renewal, their own `take_lock`)
/// are skipped rather than waited for, and count as live.
const RECHECK: &str = concat!(
    "SELECT id, lease_owner, ",
    lease_left!(),
    " FROM instances WHERE id = ANY($1) FOR UPDATE SKIP LOCKED"
);

/// The caller's lease's time left.
const MY_LEASE: &str = concat!("SELECT ", lease_left!(), " FROM instances WHERE id = $1");

/// Whether a holder (owner, lease time left) is alive.
fn live_holder(
    owner: Option<String>,
    left: Option<i64>,
    holder_alive: &dyn Fn(&str) -> bool,
) -> bool {
    owner.is_some_and(|o| left.is_some_and(|l| l > 0) && holder_alive(&o))
}

impl PgStore {
    /// Takes step lock `key` for `unit` (see `Store::take_lock`). One lock
    /// order, so that takers never wait on each other in a circle: the
    /// caller's own row (the fence), then the key's advisory lock, after
    /// which nothing is waited for: holders are read unlocked, and those
    /// to revoke are locked with `SKIP LOCKED`.
    pub async fn take_lock(
        &self,
        fence: &Fence,
        key: &str,
        limit: u32,
        unit: &str,
        holder_alive: &dyn Fn(&str) -> bool,
    ) -> Result<bool> {
        let outs = self
            .pipeline(vec![
                Op::Simple("BEGIN"),
                Op::Query(
                    super::lease::FENCE,
                    vec![p(fence.instance.to_string()), p(fence.epoch)],
                ),
                Op::Query(
                    "SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || ':lock:' || $1, 0))",
                    vec![p(key.to_string())],
                ),
                Op::Query(MY_LEASE, vec![p(fence.instance.to_string())]),
                Op::Query(LOCK_HOLDERS, vec![p(key.to_string())]),
            ])
            .await
            .map_err(|e| super::lease::named(e, fence))?;
        let mut outs = outs.into_iter().skip(3).map(Out::rows);
        let mine = outs.next().unwrap_or_default();
        let left: Option<i64> = match mine.first() {
            Some(r) => get(r, 0)?,
            None => None,
        };
        if left.is_none_or(|l| l <= 0) {
            self.rollback().await;
            return Err(StoreError::Fenced {
                id: fence.instance.clone(),
                holder: Some(EXPIRED.into()),
            });
        }
        let holders = outs
            .next()
            .unwrap_or_default()
            .iter()
            .map(|r| {
                let instance: String = get(r, 0)?;
                let live = instance == *fence.instance
                    || live_holder(get(r, 2)?, get(r, 3)?, holder_alive);
                Ok(queue::LockHolder {
                    instance,
                    unit: get(r, 1)?,
                    live,
                })
            })
            .collect::<Result<Vec<_>>>();
        let mut holders = match holders {
            Ok(h) => h,
            Err(e) => {
                self.rollback().await;
                return Err(e);
            }
        };
        let mut verdict = queue::lock_verdict(&holders, &fence.instance, unit, limit);
        if let queue::LockVerdict::Take { revoke } = &verdict
            && !revoke.is_empty()
        {
            // Dead as read; dead still, with its row ours until COMMIT?
            let dead = match self.recheck(revoke, holder_alive).await {
                Ok(d) => d,
                Err(e) => {
                    self.rollback().await;
                    return Err(e);
                }
            };
            for h in &mut holders {
                if revoke.contains(&h.instance) && !dead.contains(&h.instance) {
                    h.live = true;
                }
            }
            verdict = queue::lock_verdict(&holders, &fence.instance, unit, limit);
        }
        match verdict {
            queue::LockVerdict::Held => {
                self.finish(Vec::new()).await?;
                Ok(true)
            }
            queue::LockVerdict::Busy => {
                self.finish(Vec::new()).await?;
                Ok(false)
            }
            queue::LockVerdict::Take { revoke } => {
                let mut ops = Vec::new();
                for gone in revoke {
                    ops.push(Op::Exec(
                        "DELETE FROM locks WHERE lock_key = $1 AND instance_id = $2",
                        vec![p(key.to_string()), p(gone.clone())],
                    ));
                    // Its lease names who took its place (the next write
                    // of a stalled holder is refused naming it).
                    ops.push(Op::Exec(
                        "UPDATE instances SET lease_epoch = lease_epoch + 1, lease_expires_ms = NULL, \
                         lease_owner = COALESCE((SELECT o.lease_owner FROM instances o WHERE o.id = $2), lease_owner) \
                         WHERE id = $1",
                        vec![p(gone), p(fence.instance.to_string())],
                    ));
                }
                ops.push(Op::Exec(
                    "INSERT INTO locks (lock_key, instance_id, unit_key) VALUES ($1, $2, $3)",
                    vec![
                        p(key.to_string()),
                        p(fence.instance.to_string()),
                        p(unit.to_string()),
                    ],
                ));
                self.finish(ops).await?;
                Ok(true)
            }
        }
    }

    /// Of the holders `revoke`, those whose rows this transaction now
    /// holds and whose lease is still dead.
    async fn recheck(
        &self,
        revoke: &[String],
        holder_alive: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<String>> {
        let rows = self
            .pipeline(vec![Op::Query(RECHECK, vec![p(revoke.to_vec())])])
            .await?
            .into_iter()
            .next()
            .map(Out::rows)
            .unwrap_or_default();
        let mut dead = Vec::new();
        for r in &rows {
            if !live_holder(get(r, 1)?, get(r, 2)?, holder_alive) {
                dead.push(get(r, 0)?);
            }
        }
        Ok(dead)
    }
}

/// The holder a refused lock names when the caller's own lease expired.
const EXPIRED: &str = "nobody (its lease expired before it took a step lock)";
