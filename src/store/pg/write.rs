//! Applies a batch of [`Write`]s to PostgreSQL under the runner's fence
//! (as `sqlite/write.rs` on SQLite): the commit, begun and awaited later
//! ([`PgStore::begin_commit`]) or not awaited at all
//! ([`PgStore::commit_unsynced`]), and one `Write` as the statement that
//! applies it (`write_op`), for the writes `batch` does not group. `batch`
//! makes a batch into as few statements as it can; the result is the same
//! rows as `write_op`'s, one write after the other (`store/contract.rs`
//! proves it).

use super::batch::{self, Commit};
use super::history::{opt_json, p};
use super::lease::{FENCE, named};
use super::text::escape_opt;
use super::{Op, Out, PgStore};
use crate::store::rows::{Fence, InstanceId};
use crate::store::{PendingCommit, Result, StoreError, Write};
use crate::vocab::Timestamp;

/// [`Write::Release`]: the lease given up, and a notification to idle
/// workers (sent when the transaction commits).
const RELEASE_IN_COMMIT: &str = "WITH r AS (UPDATE instances SET lease_expires_ms=NULL WHERE id=$1) \
     SELECT pg_notify('wf_' || current_schema(), '')";

/// The requests that put `w` in the store: one, but for a child's writes
/// ([`Write::Child`]: its fence's check, then its own).
pub(super) fn write_op(id: &str, w: &Write) -> Vec<Op> {
    let id = id.to_string();
    let op = match w {
        Write::Child(child) => return super::batch::child_ops(child),
        Write::StartAttempt {
            key,
            attempt,
            run,
            started_at,
            span_id,
            started_ns,
        } => Op::Exec(
            "INSERT INTO attempts (instance_id, step_key, attempt, run, started_at, span_id, started_ns) \
             VALUES ($1,$2,$3,$4,$5,$6,$7)",
            vec![
                p(id),
                p(key.clone()),
                p(*attempt),
                p(*run),
                p(*started_at),
                p(span_id.clone()),
                p(*started_ns),
            ],
        ),
        Write::EndAttempt { key, attempt, end } => Op::Exec(
            "UPDATE attempts SET outcome=$4, error_type=$5, error_message=$6, exit_code=$7, finished_at=$8, \
             stdout=$9, stderr=$10, proc_host=NULL, proc_pgid=NULL, proc_start=NULL \
             WHERE instance_id=$1 AND step_key=$2 AND attempt=$3",
            vec![
                p(id),
                p(key.clone()),
                p(*attempt),
                p(end.outcome),
                p(end.error_type.clone()),
                p(escape_opt(&end.error_message)),
                p(end.exit_code),
                p(end.finished_at),
                p(end.stdout.clone()),
                p(end.stderr.clone()),
            ],
        ),
        Write::AttemptCachedFrom { key, attempt, from } => Op::Exec(
            "UPDATE attempts SET cached_from=$4 WHERE instance_id=$1 AND step_key=$2 AND attempt=$3",
            vec![p(id), p(key.clone()), p(*attempt), p(from.text())],
        ),
        Write::PutCache(e) => Op::Exec(
            "INSERT INTO step_cache (workflow, step_id, cache_key, part, instance_id, unit_key, attempt, \
             output, state_patch, created_at, expires_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
             ON CONFLICT (workflow, step_id, cache_key, part) DO UPDATE SET instance_id=excluded.instance_id, \
             unit_key=excluded.unit_key, attempt=excluded.attempt, output=excluded.output, \
             state_patch=excluded.state_patch, created_at=excluded.created_at, expires_ms=excluded.expires_ms",
            vec![
                p(e.workflow.clone()),
                p(e.step_id.clone()),
                p(e.key.clone()),
                p(e.part.clone()),
                p(e.from.instance.to_string()),
                p(e.unit_key.clone()),
                p(e.from.attempt),
                p(e.output.to_string()),
                p(opt_json(&e.state_patch)),
                p(e.created_at),
                p(e.expires_at.map(Timestamp::ms)),
            ],
        ),
        Write::AttemptProcess { key, attempt, tag } => Op::Exec(
            "UPDATE attempts SET proc_host=$4, proc_pgid=$5, proc_start=$6 \
             WHERE instance_id=$1 AND step_key=$2 AND attempt=$3",
            vec![
                p(id),
                p(key.clone()),
                p(*attempt),
                p(tag.host.clone()),
                p(tag.pgid),
                p(tag.start),
            ],
        ),
        Write::Step(s) => Op::Exec(
            "INSERT INTO steps (instance_id, key, step_id, status, attempts, outcome, error_type, error_message, \
             output, started_at, finished_at, retry_at, seq, budget_base, items, state_patch) \
             VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16) \
             ON CONFLICT (instance_id, key) DO UPDATE SET status=excluded.status, attempts=excluded.attempts, \
             budget_base=excluded.budget_base, \
             outcome=excluded.outcome, error_type=excluded.error_type, error_message=excluded.error_message, \
             output=excluded.output, started_at=excluded.started_at, finished_at=excluded.finished_at, \
             retry_at=excluded.retry_at, seq=excluded.seq, items=excluded.items, \
             state_patch=COALESCE(excluded.state_patch, steps.state_patch)",
            vec![
                p(id),
                p(s.key.clone()),
                p(s.step_id.clone()),
                p(s.status),
                p(s.attempts),
                p(s.outcome),
                p(s.error_type.clone()),
                p(escape_opt(&s.error_message)),
                p(opt_json(&s.output)),
                p(s.started_at),
                p(s.finished_at),
                p(s.retry_at),
                p(s.seq),
                p(s.budget_base),
                p(opt_json(&s.items)),
                p(opt_json(&s.state_patch)),
            ],
        ),
        Write::State(state) => Op::Exec(
            "UPDATE instances SET state=$2, updated_at=$3 WHERE id=$1",
            vec![p(id), p(state.to_string()), p(Timestamp::now())],
        ),
        // The layout `batch` writes spans in (by the instance's `seq`).
        Write::Span(s) => super::batch::insert_span(&id, s),
        Write::TakeEvent { event, key } => Op::Exec(
            "UPDATE events SET consumed_by=$2 WHERE id=$1",
            vec![p(*event), p(key.clone())],
        ),
        Write::TakeEventNamed { name, key } => Op::Exec(
            "UPDATE events SET consumed_by=$3 \
             WHERE instance_id=$1 AND name=$2 AND consumed_by IS NULL",
            vec![p(id), p(name.clone()), p(key.clone())],
        ),
        Write::Status {
            status,
            wake_at,
            waiting_event,
            error,
        } => Op::Exec(
            // One that stops running gives its queue slot back (unless it
            // only sleeps or waits with `hold_while_suspended`), and tells
            // idle workers, which may admit the next of its key.
            "WITH u AS (UPDATE instances SET status=$2, wake_at=$3, waiting_event=$4, error=$5, updated_at=$6, \
             admitted = admitted AND ($2 IN ('running', 'queued') OR ($2 IN ('sleeping', 'waiting') AND queue_hold)) \
             WHERE id=$1 RETURNING queue_key) \
             SELECT pg_notify('wf_' || current_schema(), '') FROM u \
             WHERE u.queue_key IS NOT NULL AND $2 NOT IN ('running', 'queued')",
            vec![
                p(id),
                p(*status),
                p(*wake_at),
                p(waiting_event.clone()),
                p(escape_opt(error)),
                p(Timestamp::now()),
            ],
        ),
        Write::CloseAbandonedRuns => Op::Exec(
            "UPDATE runs SET outcome='crashed', finished_at=$2 WHERE instance_id=$1 AND outcome IS NULL",
            vec![p(id), p(Timestamp::now())],
        ),
        Write::Reopen => Op::Exec(
            "UPDATE instances SET cancel_requested=0, outputs=NULL WHERE id=$1",
            vec![p(id)],
        ),
        Write::Outputs(v) => Op::Exec(
            "UPDATE instances SET outputs=$2 WHERE id=$1",
            vec![p(id), p(v.to_string())],
        ),
        Write::StartRun {
            run,
            trace,
            restart_from,
            definition_hash,
        } => Op::Exec(
            "INSERT INTO runs (instance_id, number, started_at, trace_id, span_id, parent_span_id, started_ns, \
             restart_from, definition_hash) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)",
            vec![
                p(id),
                p(*run),
                p(Timestamp::now()),
                p(trace.0.clone()),
                p(trace.1.clone()),
                p(trace.2.clone()),
                p(trace.3),
                p(restart_from.clone()),
                p(definition_hash.clone()),
            ],
        ),
        Write::FinishRun { run, outcome } => Op::Exec(
            "UPDATE runs SET outcome=$3, finished_at=$4 WHERE instance_id=$1 AND number=$2",
            vec![p(id), p(*run), p(*outcome), p(Timestamp::now())],
        ),
        // In a fenced transaction: the instance is ours. Idle workers are
        // woken, as by `release`, when it commits.
        Write::Release => Op::Exec(RELEASE_IN_COMMIT, vec![p(id)]),
        Write::ReleaseLock { key } => Op::Exec(
            "DELETE FROM locks WHERE instance_id = $1 AND unit_key = $2",
            vec![p(id), p(key.clone())],
        ),
        Write::ReleaseLocks => Op::Exec("DELETE FROM locks WHERE instance_id = $1", vec![p(id)]),
        Write::CreateChild(child) => super::history::insert_child(child),
        Write::Upgrade(to) => {
            let mut ops: Vec<Op> = to
                .definitions
                .iter()
                .map(super::history::insert_definition)
                .collect();
            ops.push(Op::Exec(
                "UPDATE instances SET definition_hash = $2, workflow_path = $3, base_dir = $4, \
                 inputs = $5, updated_at = $6 WHERE id = $1",
                vec![
                    p(id.clone()),
                    p(to.definition_hash.clone()),
                    p(to.workflow_path.clone()),
                    p(to.base_dir.clone()),
                    p(to.inputs.to_string()),
                    p(Timestamp::now()),
                ],
            ));
            if let Some(place) = &to.queue {
                let q = place.as_ref();
                ops.push(Op::Exec(
                    "UPDATE instances SET queue_key = $2, queue_priority = $3, queue_limits = $4, \
                     queue_hold = $5, admitted = false, \
                     wake_at = CASE WHEN status = 'queued' AND $2::text IS NULL THEN NULL ELSE wake_at END, \
                     status = CASE WHEN status = 'queued' AND $2::text IS NULL THEN 'pending' ELSE status END \
                     WHERE id = $1",
                    vec![
                        p(id.clone()),
                        p(q.map(|q| q.key.clone())),
                        p(q.map_or(crate::store::queue::DEFAULT_PRIORITY, |q| q.priority)),
                        p(q.map(|q| q.limits.to_text())),
                        p(q.is_some_and(|q| q.limits.hold)),
                    ],
                ));
            }
            for (from, into) in &to.renames {
                for sql in RENAME_UNITS {
                    ops.push(Op::Exec(
                        sql,
                        vec![p(id.clone()), p(from.clone()), p(into.clone())],
                    ));
                }
            }
            return ops;
        }
        Write::Action(a) => super::actions::insert_action(a),
        Write::CompensateChild { child, parent } => Op::Exec(
            "UPDATE instances SET status = 'pending', wake_at = $3, error = NULL, \
             cancel_requested = GREATEST(cancel_requested, 1), updated_at = $3 \
             WHERE id = $1 AND parent_id = $2 AND status = 'completed'",
            vec![
                p(child.to_string()),
                p(parent.to_string()),
                p(Timestamp::now()),
            ],
        ),
        Write::NotifyParent {
            parent,
            name,
            payload,
        } => Op::Exec(
            "INSERT INTO events (instance_id, name, payload, traceparent, received_at) \
             VALUES ($1, $2, $3, NULL, $4)",
            vec![
                p(parent.to_string()),
                p(name.clone()),
                p(payload.to_string()),
                p(Timestamp::now()),
            ],
        ),
    };
    vec![op]
}

impl PgStore {
    /// Applies `writes` under the fence. The commit carries an id of its
    /// own (kept in `last_commit`): sent again after the connection was
    /// lost (`PgStore::pipeline`), a commit the server applied already
    /// writes nothing and succeeds, so a lost reply is never taken for a
    /// failure nor applied twice.
    pub async fn commit(&self, fence: &Fence, writes: &[Write]) -> Result<()> {
        let id = commit_id();
        let how = batch::commit(&fence.instance, fence.epoch, id, writes);
        let sent = self.send_commit(fence, id, how, true).await;
        self.name_refused(sent, fence, writes).await
    }

    /// A refused batch that writes to children too ([`Write::Child`])
    /// names the instance whose fence refused it, as SQLite's does: the
    /// parent's, unless its epoch is still the runner's and a child's is
    /// not. (Read after the refusal, whose transaction was rolled back: an
    /// epoch only grows.)
    async fn name_refused(&self, sent: Result<()>, fence: &Fence, writes: &[Write]) -> Result<()> {
        let Err(StoreError::Fenced { holder, .. }) = &sent else {
            return sent;
        };
        let mut fences = Vec::new();
        children_fences(writes, &mut fences);
        if fences.is_empty() {
            return sent;
        }
        let ids: Vec<String> = fences.iter().map(|f| f.instance.to_string()).collect();
        let Ok(rows) = self
            .query(
                "SELECT id, lease_epoch, lease_owner FROM instances WHERE id = ANY($1) OR id = $2",
                &[&ids, &fence.instance.as_str()],
            )
            .await
        else {
            return sent;
        };
        let epoch_of = |id: &str| {
            rows.iter()
                .find(|r| r.get::<_, String>(0) == id)
                .map(|r| (r.get::<_, i64>(1), r.get::<_, Option<String>>(2)))
        };
        if epoch_of(&fence.instance).is_some_and(|(e, _)| e == fence.epoch)
            && let Some((child, holder)) = fences.iter().find_map(|f| match epoch_of(&f.instance) {
                Some((e, h)) if e != f.epoch => Some((f.instance.clone(), h)),
                _ => None,
            })
        {
            return Err(StoreError::Fenced { id: child, holder });
        }
        Err(StoreError::Fenced {
            id: fence.instance.clone(),
            holder: holder.clone(),
        })
    }

    /// Sends commit `id`, made into statements as `how`; `synced`: the
    /// reply waits for the WAL's flush (else `synchronous_commit = off`
    /// for this transaction alone: the next synced commit flushes it).
    async fn send_commit(&self, fence: &Fence, id: i64, how: Commit, synced: bool) -> Result<()> {
        let result = match how {
            Commit::One(op) if synced => self.pipeline(vec![op]).await.and_then(fence_held),
            Commit::One(op) => {
                // In a transaction of its own, so that the setting is
                // local to it; the statement's reply is the second.
                let all = vec![Op::Simple(BEGIN_UNSYNCED), op, Op::Simple("COMMIT")];
                self.pipeline(all)
                    .await
                    .and_then(|outs| fence_held(outs.into_iter().skip(1).collect()))
            }
            Commit::Pipeline(ops) => {
                let mut all = Vec::with_capacity(ops.len() + 3);
                all.push(Op::Simple(if synced { "BEGIN" } else { BEGIN_UNSYNCED }));
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
        self.pipeline_in_background(unsynced(fence, writes)).await
    }

    /// [`PgStore::commit_unsynced`], its reply waited for: on a connection
    /// others share (`store::shared`), or when a run on another connection
    /// goes on from it (a child it made, `Store::commit_before_sync`), what
    /// is sent next may go on another connection, and must still land
    /// after it. Made as [`PgStore::commit`] makes a batch (so sent again,
    /// and applied once, when the connection was lost), but not flushed.
    pub async fn commit_unsynced_awaited(&self, fence: &Fence, writes: &[Write]) -> Result<()> {
        if let Some(op) = batch::group_statement(&fence.instance, fence.epoch, writes) {
            return self.pipeline(vec![op]).await.map(|_| ());
        }
        let id = commit_id();
        let how = batch::commit(&fence.instance, fence.epoch, id, writes);
        let sent = self.send_commit(fence, id, how, false).await;
        self.name_refused(sent, fence, writes).await
    }
}

/// The fences of the children `writes` write to, theirs and their own
/// children's.
fn children_fences<'w>(writes: &'w [Write], out: &mut Vec<&'w Fence>) {
    for w in writes {
        if let Write::Child(child) = w {
            out.push(&child.fence);
            children_fences(&child.writes, out);
        }
    }
}

/// Begins a transaction that commits without waiting for the WAL's flush:
/// a later synchronous commit flushes it (the WAL is one sequence). One
/// request, not two.
const BEGIN_UNSYNCED: &str = "BEGIN; SET LOCAL synchronous_commit = off";

/// The requests of an unsynced commit.
fn unsynced(fence: &Fence, writes: &[Write]) -> Vec<Op> {
    if let Some(op) = batch::group_statement(&fence.instance, fence.epoch, writes) {
        return vec![op];
    }
    let mut ops = vec![
        Op::Simple(BEGIN_UNSYNCED),
        Op::Query(FENCE, vec![p(fence.instance.clone()), p(fence.epoch)]),
    ];
    ops.extend(writes.iter().flat_map(|w| write_op(&fence.instance, w)));
    ops.push(Op::Simple("COMMIT"));
    ops
}

/// A commit's id: random, so that no two commits of any runner share one.
pub(super) fn commit_id() -> i64 {
    uuid::Uuid::new_v4().as_u64_pair().0 as i64
}

/// The fence of a commit sent as a pipeline (`$1` the instance, `$2` the
/// epoch, `$3` the commit's id): raises WF002 if the commit is in already.
pub(super) const CHECK_COMMIT: &str = "SELECT check_commit($1, $2, $3)";

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

/// The ways other than [`PgStore::commit`]'s choice that a batch can reach
/// the server, so that the contract tests (`store/contract.rs`) apply the
/// same writes through each and compare.
#[cfg(test)]
#[derive(Debug, Clone, Copy)]
pub(in crate::store) enum CommitPath {
    /// Grouped (`batch`), never as one statement.
    Grouped,
    /// Each write as its own statement (`write_op`), in order.
    EachWrite,
}

#[cfg(test)]
impl PgStore {
    /// [`PgStore::commit`], the batch made into statements as `path` says
    /// rather than as `batch::commit` chooses.
    pub(in crate::store) async fn commit_by(
        &self,
        path: CommitPath,
        fence: &Fence,
        writes: &[Write],
    ) -> Result<()> {
        let id = commit_id();
        let how = match path {
            CommitPath::Grouped => Commit::Pipeline(batch::grouped(&fence.instance, writes)),
            CommitPath::EachWrite => Commit::Pipeline(
                writes
                    .iter()
                    .flat_map(|w| write_op(&fence.instance, w))
                    .collect(),
            ),
        };
        self.send_commit(fence, id, how, true).await
    }

    /// Whether [`PgStore::commit`] sends `writes` as one statement.
    pub(in crate::store) fn one_statement(writes: &[Write]) -> bool {
        matches!(batch::commit("", 0, 0, writes), Commit::One(_))
    }
}

/// [`crate::store::write::RENAME_UNITS`] in PostgreSQL's placeholders.
const RENAME_UNITS: [&str; 5] = [
    "UPDATE steps SET key = $3::text || substr(key, length($2::text) + 1), step_id = $3::text \
     WHERE instance_id = $1 AND step_id = $2::text",
    "UPDATE attempts SET step_key = $3::text || substr(step_key, length($2::text) + 1) \
     WHERE instance_id = $1 AND (step_key = $2::text OR substr(step_key, 1, length($2::text) + 1) IN ($2::text || '[', $2::text || ':'))",
    "UPDATE events SET consumed_by = $3::text || substr(consumed_by, length($2::text) + 1) \
     WHERE instance_id = $1 AND (consumed_by = $2::text OR substr(consumed_by, 1, length($2::text) + 1) IN ($2::text || '[', $2::text || ':'))",
    "UPDATE locks SET unit_key = $3::text || substr(unit_key, length($2::text) + 1) \
     WHERE instance_id = $1 AND (unit_key = $2::text OR substr(unit_key, 1, length($2::text) + 1) IN ($2::text || '[', $2::text || ':'))",
    "UPDATE instances SET parent_key = $3::text || substr(parent_key, length($2::text) + 1) \
     WHERE parent_id = $1 AND (parent_key = $2::text OR substr(parent_key, 1, length($2::text) + 1) IN ($2::text || '[', $2::text || ':'))",
];

#[cfg(test)]
mod tests {
    #[test]
    fn the_renames_are_sqlites_with_postgresqls_placeholders() {
        for (lite, pg) in crate::store::write::RENAME_UNITS
            .iter()
            .zip(super::RENAME_UNITS)
        {
            let pg = pg.replace("::text", "");
            assert_eq!(lite.replace('?', "$"), pg);
        }
    }
}
