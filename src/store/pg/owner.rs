//! What a runner does under its lease on PostgreSQL: claim due instances,
//! take one over (raising its epoch) with its history, renew and release
//! the lease, and commit batches of writes behind the fence.

use super::records::*;
use super::text::unescape_opt;
use super::write::write_op;
use super::{Op, Out, PgStore};
use crate::store::rows::*;
use crate::store::{PendingCommit, Result, StoreError, Write};

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
       WHERE status IN ('sleeping', 'waiting', 'running') AND ",
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
                &[&now(), &owner, &ttl_ms, &(limit as i64), &skip],
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
        let outs = match self.pipeline(ops).await {
            Err(e) if lock_timed_out(&e) => return self.locked_by(id).await,
            other => other?,
        };
        let mut outs = outs.into_iter().skip(2).map(Out::rows);
        if let Some(r) = outs.next().unwrap_or_default().first() {
            let epoch: i64 = get(r, 0)?;
            return Ok(Ok((fence(id, owner, epoch), history(id, outs)?)));
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
            let _ = self.client().batch_execute("ROLLBACK").await;
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
            let _ = self.client().batch_execute("ROLLBACK").await;
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
        let outs = match self.pipeline(ops).await {
            Ok(o) => o,
            Err(e) => {
                let _ = self.client().batch_execute("ROLLBACK").await;
                return Err(e);
            }
        };
        let outs = outs.into_iter().skip(1).map(Out::rows);
        Ok(Ok((fence(id, owner, epoch), history(id, outs)?)))
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
        let holder = match rows.first() {
            Some(r) => get(r, 0)?,
            None => None,
        };
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

    pub async fn mark_exported(&self, fence: &Fence, spans: &[SpanRow]) -> Result<()> {
        let ops = spans
            .iter()
            .map(|s| {
                Ok(Op::Exec(
                    "UPDATE spans SET exported=true \
                     WHERE instance_seq=(SELECT seq FROM instances WHERE id=$1) \
                     AND run=$2 AND start_ns=$3 AND span_id=$4",
                    vec![
                        p(s.instance_id.clone()),
                        p(s.run),
                        p(s.start_ns),
                        p(super::records::span_id_bits(&s.span_id)?),
                    ],
                ))
            })
            .collect::<Result<_>>()?;
        self.fenced(fence, ops).await
    }

    /// Applies `writes` under the fence. The commit carries an id of its
    /// own (kept in `last_commit`): sent again after the connection was
    /// lost (`PgStore::pipeline`), a commit the server applied already
    /// writes nothing and succeeds, so a lost reply is never taken for a
    /// failure nor applied twice.
    pub async fn commit(&self, fence: &Fence, writes: &[Write]) -> Result<()> {
        use super::batch::Commit;
        let id = commit_id();
        let result = match super::batch::commit(&fence.instance, fence.epoch, id, writes) {
            Commit::One(op) => self.pipeline(vec![op]).await.and_then(fence_held),
            Commit::Pipeline(ops) => {
                let mut all = Vec::with_capacity(ops.len() + 3);
                all.push(Op::Simple("BEGIN"));
                all.push(Op::Query(
                    CHECK_COMMIT,
                    vec![p(fence.instance.clone()), p(fence.epoch), p(id)],
                ));
                all.extend(ops);
                all.push(Op::Simple("COMMIT"));
                match self.pipeline(all).await {
                    Err(StoreError::Committed) => Ok(()),
                    other => other.map(|_| ()),
                }
            }
        };
        result.map_err(|e| named(e, fence))
    }

    /// [`PgStore::commit`], sent before this returns: the first poll
    /// queues its requests on the connection, and the yield lets the
    /// connection's task write them, so that the server works on the commit
    /// while the caller goes on. Its reply is awaited by
    /// [`PendingCommit::done`].
    pub async fn begin_commit(&self, fence: &Fence, writes: Vec<Write>) -> PendingCommit<'_> {
        let fence = fence.clone();
        let mut commit = Box::pin(async move { self.commit(&fence, &writes).await });
        let early = match futures_util::poll!(commit.as_mut()) {
            std::task::Poll::Ready(r) => Some(r),
            std::task::Poll::Pending => None,
        };
        tokio::task::yield_now().await;
        match early {
            Some(r) => PendingCommit::made(r, false),
            None => PendingCommit::sent(commit),
        }
    }

    /// Not waited for: queued on the connection (so it lands before the
    /// next commit), committed without a flush to disk.
    pub async fn commit_unsynced(&self, fence: &Fence, writes: &[Write]) -> Result<()> {
        if let Some(op) = super::batch::group_statement(&fence.instance, fence.epoch, writes) {
            return self.pipeline_in_background(vec![op]).await;
        }
        let mut ops = vec![
            Op::Simple("BEGIN"),
            Op::Simple("SET LOCAL synchronous_commit = off"),
            Op::Query(FENCE, vec![p(fence.instance.clone()), p(fence.epoch)]),
        ];
        ops.extend(writes.iter().map(|w| write_op(&fence.instance, w)));
        ops.push(Op::Simple("COMMIT"));
        self.pipeline_in_background(ops).await
    }

    /// One transaction, one round trip: BEGIN, the fence, `ops`, COMMIT.
    async fn fenced(&self, fence: &Fence, ops: Vec<Op>) -> Result<()> {
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

/// A commit's id: random, so that no two commits of any runner share one.
fn commit_id() -> i64 {
    uuid::Uuid::new_v4().as_u64_pair().0 as i64
}

/// The fence of a commit sent as a pipeline (`$1` the instance, `$2` the
/// epoch, `$3` the commit's id): raises WF002 if the commit is in already.
const CHECK_COMMIT: &str = "SELECT check_commit($1, $2, $3)";

/// What a statement with the fence inlined returned (`held`, the holder,
/// `done`): refused unless its epoch was the runner's, or the commit was
/// in already (`done`: its reply was lost, and it was sent again). A
/// missing row (the instance is gone) is refused too.
fn fence_held(outs: Vec<Out>) -> Result<()> {
    let row = outs.into_iter().next().map(Out::rows).unwrap_or_default();
    let flag = |i: usize| {
        row.first()
            .and_then(|r| r.try_get::<_, Option<bool>>(i).ok().flatten())
    };
    if flag(0) == Some(true) || flag(2) == Some(true) {
        return Ok(());
    }
    let holder = row
        .first()
        .and_then(|r| r.try_get::<_, Option<String>>(1).ok().flatten())
        .filter(|h| !h.is_empty());
    Err(StoreError::Fenced {
        id: InstanceId::default(),
        holder,
    })
}

/// A refused fence, naming the instance.
fn named(e: StoreError, fence: &Fence) -> StoreError {
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

/// The reads of an instance's history a takeover makes, in its transaction.
fn history_reads(id: &str) -> Vec<Op> {
    let key = || p(id.to_string());
    vec![
        Op::Query(INSTANCE, vec![key()]),
        Op::Query(
            "SELECT COALESCE(MAX(number), 0), \
             array_remove(array_agg(CASE WHEN outcome IS NULL THEN number END ORDER BY number), NULL) \
             FROM runs WHERE instance_id=$1",
            vec![key()],
        ),
        Op::Query(STEPS, vec![key()]),
        Op::Query(
            "SELECT step_key, attempt, run, span_id, COALESCE(started_ns, 0), proc_host, proc_pgid, \
             proc_start FROM attempts WHERE instance_id=$1 AND outcome IS NULL ORDER BY step_key, attempt",
            vec![key()],
        ),
        Op::Query(
            "SELECT number, trace_id, span_id, parent_span_id, COALESCE(started_ns, 0) FROM runs \
             WHERE instance_id=$1 AND trace_id IS NOT NULL",
            vec![key()],
        ),
        Op::Query(
            "SELECT step_key, attempt FROM attempts WHERE instance_id=$1 \
             AND outcome IN ('interrupted', 'canceled')",
            vec![key()],
        ),
        Op::Query(EVENTS_AFTER, vec![key(), p(0i64)]),
        Op::Query(CANCEL_REQUESTED, vec![key()]),
        // Finished attempts of runs without an outcome whose span was
        // never stored (`UnspannedAttempt`).
        Op::Query(
            "SELECT a.step_key, a.attempt, a.run, a.span_id, COALESCE(a.started_ns, 0), a.finished_at, \
             a.outcome, a.error_type, a.error_message FROM attempts a WHERE a.instance_id=$1 \
             AND a.outcome IS NOT NULL AND a.span_id IS NOT NULL \
             AND a.run IN (SELECT number FROM runs WHERE instance_id=$1 AND outcome IS NULL) \
             AND NOT EXISTS (SELECT 1 FROM spans s WHERE \
               s.instance_seq=(SELECT seq FROM instances WHERE id=$1) AND s.run=a.run \
               AND s.span_id=('x' || a.span_id)::bit(64)::int8)",
            vec![key()],
        ),
    ]
}

/// The history read by [`history_reads`], from their results in order.
fn history(id: &str, mut outs: impl Iterator<Item = Vec<tokio_postgres::Row>>) -> Result<History> {
    let instance = match outs.next().unwrap_or_default().first() {
        Some(r) => instance_row(r)?,
        None => return Err(StoreError::NotFound(id.into())),
    };
    let (last_run, abandoned_runs) = match outs.next().unwrap_or_default().first() {
        Some(r) => (
            get::<i64>(r, 0)?,
            get::<Option<Vec<i64>>>(r, 1)?.unwrap_or_default(),
        ),
        None => (0, Vec::new()),
    };
    let steps = outs
        .next()
        .unwrap_or_default()
        .iter()
        .map(step_row)
        .collect::<Result<_>>()?;
    let open = outs
        .next()
        .unwrap_or_default()
        .iter()
        .map(open_attempt)
        .collect::<Result<_>>()?;
    let traces = outs
        .next()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            Ok((
                get::<i64>(r, 0)?,
                (get(r, 1)?, get(r, 2)?, get(r, 3)?, get(r, 4)?),
            ))
        })
        .collect::<Result<_>>()?;
    let uncounted = outs
        .next()
        .unwrap_or_default()
        .iter()
        .map(|r| Ok((get(r, 0)?, get(r, 1)?)))
        .collect::<Result<_>>()?;
    let events = outs
        .next()
        .unwrap_or_default()
        .iter()
        .map(event_row)
        .collect::<Result<_>>()?;
    let cancel_requested = match outs.next().unwrap_or_default().first() {
        Some(r) => CancelRequest::from_i64(get(r, 0)?),
        None => CancelRequest::None,
    };
    let unspanned = outs
        .next()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            Ok(UnspannedAttempt {
                key: get(r, 0)?,
                attempt: get(r, 1)?,
                run: get(r, 2)?,
                span_id: get(r, 3)?,
                started_ns: get(r, 4)?,
                finished_at: get(r, 5)?,
                outcome: get(r, 6)?,
                error_type: get(r, 7)?,
                error_message: unescape_opt(get(r, 8)?),
            })
        })
        .collect::<Result<_>>()?;
    Ok(History {
        instance,
        steps,
        open,
        abandoned_runs,
        last_run,
        traces,
        uncounted,
        unspanned,
        events,
        cancel_requested,
    })
}
