//! Who holds an instance on PostgreSQL (as `sqlite/lease.rs` on SQLite):
//! take it over (raising its epoch) with its history, renew and release the
//! lease, the fence every runner's transaction begins with, and the due
//! instances a worker finds and claims.

use super::history::*;
use super::{Op, Out, PgStore};
use crate::store::rows::*;
use crate::store::{Result, StoreError};
use crate::vocab::Timestamp;

/// What makes an instance due (`$1`: now as text): its timer elapsed, its
/// event arrived or timed out, a cancel was asked of it while it slept or
/// waited, or it is running (its holder may be gone).
/// The same for `claim_due` and `due_instances`.
///
/// `waiting_event` is the comma-separated list of the names awaited (a
/// `wait_for_event.name` holds no comma): an event matches when its name
/// equals one of them, case included, as the engine matches it; no pattern
/// operator touches a name, and a name holding a comma equals none of them.
macro_rules! due_sql {
    () => {
        "((status IN ('pending', 'sleeping') AND (wake_at IS NULL OR wake_at <= $1 OR cancel_requested > 0)) \
          OR (status = 'waiting' AND (cancel_requested > 0 OR (wake_at IS NOT NULL AND wake_at <= $1) OR EXISTS ( \
              SELECT 1 FROM events e WHERE e.instance_id = instances.id AND e.consumed_by IS NULL \
              AND e.name = ANY (string_to_array(instances.waiting_event, ','))))) \
          OR status = 'running')"
    };
}

/// Claims due instances for `$2` for `$3` ms, `$4` at most, oldest first,
/// none of `$5`, skipping rows another worker is claiming (`$1`: now as
/// text, for timers; leases are judged and set by the server's clock,
/// `server_ms!`).
///
/// The candidates are found first, by status (`live`, read off the status
/// index whatever the planner expects), then locked one by one in creation
/// order until `$5` are held; each is checked again once locked (another
/// worker may have claimed or ended it since). With `ORDER BY … LIMIT` on
/// the table itself, the planner walked `instances_by_created` whenever it
/// expected due rows to be common, which it does when many instances sleep
/// (it multiplies the share asleep by the share of null `wake_at`, which are
/// the ended ones'): with 14% of 100,000 instances asleep and none due, that
/// read every instance, 36 ms a poll; this reads the sleeping ones, 11 ms.
pub(super) const CLAIM_DUE: &str = concat!(
    "WITH live AS MATERIALIZED (SELECT id, created_at, seq FROM instances \
       WHERE status IN ('pending', 'sleeping', 'waiting', 'running') AND ",
    due_sql!(),
    " AND (lease_expires_ms IS NULL OR lease_expires_ms <= ",
    server_ms!(),
    ") AND NOT (id = ANY($5))), \
     due AS (SELECT x.id FROM (SELECT * FROM live ORDER BY created_at, seq) l \
       CROSS JOIN LATERAL (SELECT instances.id FROM instances WHERE instances.id = l.id AND ",
    due_sql!(),
    " AND (lease_expires_ms IS NULL OR lease_expires_ms <= ",
    server_ms!(),
    ") FOR UPDATE SKIP LOCKED) x \
       LIMIT $4) \
     UPDATE instances i SET lease_owner = $2, lease_expires_ms = ",
    server_ms!(),
    " + $3, \
     lease_epoch = i.lease_epoch + 1 FROM due WHERE i.id = due.id RETURNING i.id"
);

/// Every due instance, oldest first (`$1`: now as text).
pub(super) const DUE_INSTANCES: &str = concat!(
    "SELECT id, status, lease_owner, ",
    lease_left!(),
    " FROM instances WHERE ",
    due_sql!(),
    " ORDER BY created_at, seq"
);

/// The check every runner's transaction begins with (`$1` the instance,
/// `$2` the runner's epoch): `check_fence` (see `schema`) locks the
/// instance's row and raises WF001 unless the epoch is current.
pub(super) const FENCE: &str = "SELECT check_fence($1, $2)";

impl PgStore {
    pub async fn claim_due(
        &self,
        owner: &str,
        ttl_ms: i64,
        limit: usize,
        skip: &[InstanceId],
    ) -> Result<Vec<InstanceId>> {
        let rows = self
            .query(
                CLAIM_DUE,
                &[&Timestamp::now(), &owner, &ttl_ms, &(limit as i64), &skip],
            )
            .await?;
        rows.iter().map(|r| get(r, 0)).collect()
    }

    pub async fn take_over(
        &self,
        id: &str,
        owner: &str,
        ttl_ms: i64,
        holder_alive: impl Fn(&str) -> bool,
    ) -> Result<std::result::Result<(Fence, History), String>> {
        // The usual case in one round trip: a lease that is free, expired or
        // this owner's own (`wf run` creates the instance leased to itself, a
        // worker has just claimed it) is taken, and the history read, in one
        // transaction. A lease another process holds (which may have died
        // on this host) takes the way below.
        let mut ops = vec![
            Op::Simple("BEGIN"),
            Op::Simple(LOCK_TIMEOUT),
            Op::Query(
                TAKE_FREE,
                vec![p(id.to_string()), p(owner.to_string()), p(ttl_ms)],
            ),
        ];
        ops.extend(history_reads(id));
        ops.push(Op::Simple("COMMIT"));
        // The expiry is set by the server after this.
        let granted = std::time::Instant::now();
        let outs = match self.pipeline(ops).await {
            Err(e) if lock_timed_out(&e) => return self.locked_by(id).await,
            other => other?,
        };
        let mut outs = outs.into_iter().skip(2).map(Out::rows);
        if let Some(r) = outs.next().unwrap_or_default().first() {
            let epoch: i64 = get(r, 0)?;
            let mut history = history(id, outs)?;
            history.granted = Some(granted);
            return Ok(Ok((fence(id, owner, epoch), history)));
        }
        let outs = self
            .pipeline(vec![
                Op::Simple("BEGIN"),
                Op::Simple(LOCK_TIMEOUT),
                Op::Query(
                    concat!(
                        "SELECT lease_owner, lease_expires_ms, lease_epoch, ",
                        server_ms!(),
                        " FROM instances WHERE id=$1 FOR UPDATE"
                    ),
                    vec![p(id.to_string())],
                ),
            ])
            .await;
        let outs = match outs {
            // (The pipeline rolled its transaction back.)
            Err(e) if lock_timed_out(&e) => return self.locked_by(id).await,
            other => other?,
        };
        let rows = outs.into_iter().nth(2).map(Out::rows).unwrap_or_default();
        let Some(r) = rows.first() else {
            self.rollback().await;
            return Err(StoreError::NotFound(id.into()));
        };
        let holder: Option<String> = get(r, 0)?;
        let expires: Option<i64> = get(r, 1)?;
        let epoch: i64 = get::<i64>(r, 2)? + 1;
        let now_ms: i64 = get(r, 3)?;
        if let Some(h) = holder
            && h != owner
            && expires.unwrap_or(0) > now_ms
            && holder_alive(&h)
        {
            self.rollback().await;
            return Ok(Err(h));
        }
        let mut ops = vec![Op::Exec(
            concat!(
                "UPDATE instances SET lease_owner=$2, lease_expires_ms=",
                server_ms!(),
                " + $3, lease_epoch=$4 WHERE id=$1"
            ),
            vec![p(id.to_string()), p(owner.to_string()), p(ttl_ms), p(epoch)],
        )];
        ops.extend(history_reads(id));
        ops.push(Op::Simple("COMMIT"));
        let granted = std::time::Instant::now();
        let outs = match self.pipeline(ops).await {
            Ok(o) => o,
            Err(e) => {
                self.rollback().await;
                return Err(e);
            }
        };
        let outs = outs.into_iter().skip(1).map(Out::rows);
        let mut history = history(id, outs)?;
        history.granted = Some(granted);
        Ok(Ok((fence(id, owner, epoch), history)))
    }

    /// The holder of a row lock a takeover gave up waiting for.
    async fn locked_by(&self, id: &str) -> Result<std::result::Result<(Fence, History), String>> {
        let rows = self
            .query("SELECT lease_owner FROM instances WHERE id=$1", &[&id])
            .await?;
        match rows.first() {
            None => Err(StoreError::NotFound(id.into())),
            Some(r) => Ok(Err(
                get::<Option<String>>(r, 0)?.unwrap_or_else(|| "another process".into())
            )),
        }
    }

    pub async fn renew(&self, fence: &Fence, ttl_ms: i64) -> Result<()> {
        let n = self
            .exec(
                concat!(
                    "UPDATE instances SET lease_expires_ms=",
                    server_ms!(),
                    " + $3 WHERE id=$1 AND lease_epoch=$2"
                ),
                &[&fence.instance, &fence.epoch, &ttl_ms],
            )
            .await?;
        if n == 1 {
            return Ok(());
        }
        let rows = self
            .query(
                "SELECT lease_owner FROM instances WHERE id=$1",
                &[&fence.instance],
            )
            .await?;
        // Not there (yet: a child whose parent's commit that makes it is
        // under way): not taken over, as SQLite's renewal says too.
        let Some(row) = rows.first() else {
            return Err(StoreError::NotFound(fence.instance.to_string()));
        };
        let holder = get(row, 0)?;
        Err(StoreError::Fenced {
            id: fence.instance.clone(),
            holder,
        })
    }

    pub async fn release(&self, fence: &Fence) -> Result<()> {
        self.pipeline(vec![
            Op::Simple("BEGIN"),
            Op::Exec(
                "UPDATE instances SET lease_expires_ms=NULL WHERE id=$1 AND lease_epoch=$2",
                vec![p(fence.instance.clone()), p(fence.epoch)],
            ),
            Op::Query(NOTIFY, vec![]),
            Op::Simple("COMMIT"),
        ])
        .await?;
        Ok(())
    }

    pub async fn due_instances(&self) -> Result<Vec<DueInstance>> {
        let rows = self.query(DUE_INSTANCES, &[&Timestamp::now()]).await?;
        rows.iter()
            .map(|r| {
                Ok(DueInstance {
                    id: get(r, 0)?,
                    status: get(r, 1)?,
                    lease_owner: get(r, 2)?,
                    lease_expires_ms: lease_expiry(get(r, 3)?),
                })
            })
            .collect()
    }

    /// One transaction, one round trip: BEGIN, the fence, `ops`, COMMIT.
    pub(super) async fn fenced(&self, fence: &Fence, ops: Vec<Op>) -> Result<()> {
        let mut all = Vec::with_capacity(ops.len() + 3);
        all.push(Op::Simple("BEGIN"));
        all.push(Op::Query(
            FENCE,
            vec![p(fence.instance.clone()), p(fence.epoch)],
        ));
        all.extend(ops);
        all.push(Op::Simple("COMMIT"));
        self.pipeline(all)
            .await
            .map(|_| ())
            .map_err(|e| named(e, fence))
    }
}

/// A refused fence, naming the instance.
pub(super) fn named(e: StoreError, fence: &Fence) -> StoreError {
    match e {
        StoreError::Fenced { holder, .. } => StoreError::Fenced {
            id: fence.instance.clone(),
            holder,
        },
        other => other,
    }
}

/// A lock on the instance's row is a commit or a claim in progress: a few
/// milliseconds. A runner stalled inside its transaction holds it longer,
/// until the server ends that session (after
/// `idle_in_transaction_session_timeout`, the lease TTL): a takeover gives up
/// after a while and reports the holder.
const LOCK_TIMEOUT: &str = "SET LOCAL lock_timeout = '5s'";

/// The lease taken (`$2` for `$3` ms, its epoch raised) when it is free,
/// expired (by the server's clock) or `$2`'s already; the new epoch, or no
/// row.
const TAKE_FREE: &str = concat!(
    "UPDATE instances SET lease_owner=$2, lease_expires_ms=",
    server_ms!(),
    " + $3, lease_epoch=lease_epoch+1 WHERE id=$1 AND (lease_owner IS NULL OR lease_owner=$2 \
     OR lease_expires_ms IS NULL OR lease_expires_ms <= ",
    server_ms!(),
    ") RETURNING lease_epoch"
);

fn lock_timed_out(e: &StoreError) -> bool {
    matches!(e, StoreError::Open { reason, .. } if reason.contains("(55P03)"))
}

fn fence(id: &str, owner: &str, epoch: i64) -> Fence {
    Fence {
        instance: id.into(),
        owner: owner.into(),
        epoch,
    }
}
