//! Applies a batch of [`Write`]s to SQLite in one transaction.

use super::history::*;
use super::lease::release_instance;
use super::spans::insert_span;
use super::{Durability, SqliteStore};
use crate::store::rows::*;
use crate::store::{Fence, Result, Write};
use rusqlite::Connection;

fn apply(c: &Connection, id: &str, w: &Write) -> Result<()> {
    match w {
        Write::StartAttempt {
            key,
            attempt,
            run,
            started_at,
            span_id,
            started_ns,
        } => insert_attempt(
            c,
            id,
            &NewAttempt {
                key,
                attempt: *attempt,
                run: *run,
                started_at: *started_at,
                span_id,
                started_ns: *started_ns,
            },
        ),
        Write::EndAttempt { key, attempt, end } => finish_attempt(c, id, key, *attempt, end),
        Write::AttemptCachedFrom { key, attempt, from } => {
            cached(
                c,
                "UPDATE attempts SET cached_from=?4 WHERE instance_id=?1 AND step_key=?2 AND attempt=?3",
                rusqlite::params![id, key, attempt, from.text()],
            )?;
            Ok(())
        }
        Write::PutCache(e) => super::cache::put_cache(c, e),
        Write::AttemptProcess { key, attempt, tag } => {
            set_attempt_process(c, id, key, *attempt, tag)
        }
        Write::Step(row) => put_step(c, id, row),
        Write::State(state) => set_state(c, id, state),
        Write::Span(span) => insert_span(c, span),
        Write::TakeEvent { event, key } => take_event(c, *event, key),
        Write::TakeEventNamed { name, key } => take_event_named(c, id, name, key),
        Write::Status {
            status,
            wake_at,
            waiting_event,
            error,
        } => set_instance_status(
            c,
            id,
            status,
            wake_at.as_ref(),
            waiting_event.as_deref(),
            error.as_deref(),
        ),
        Write::CloseAbandonedRuns => close_abandoned_runs(c, id),
        Write::Reopen => reopen(c, id),
        Write::Outputs(v) => set_outputs(c, id, v),
        Write::StartRun {
            run,
            trace,
            restart_from,
            definition_hash,
        } => start_run(c, id, *run, trace, restart_from.as_deref(), definition_hash),
        Write::FinishRun { run, outcome } => finish_run(c, id, *run, outcome),
        Write::Release => release_instance(c, id),
        Write::ReleaseLock { key } => {
            cached(
                c,
                "DELETE FROM locks WHERE instance_id = ?1 AND unit_key = ?2",
                rusqlite::params![id, key],
            )?;
            Ok(())
        }
        Write::ReleaseLocks => {
            cached(
                c,
                "DELETE FROM locks WHERE instance_id = ?1",
                rusqlite::params![id],
            )?;
            Ok(())
        }
        Write::CreateChild(child) => {
            let detail = child
                .parent
                .as_ref()
                .map(crate::store::actions::child_start_detail)
                .unwrap_or_default();
            super::history::insert_instance_row(c, child, &detail)
        }
        Write::NotifyParent {
            parent,
            name,
            payload,
        } => super::history::insert_event(c, parent, name, payload, None, false),
        Write::Action(a) => super::actions::insert_action(c, a),
        Write::Upgrade(to) => {
            for def in &to.definitions {
                super::history::insert_definition(c, def)?;
            }
            cached(
                c,
                "UPDATE instances SET definition_hash = ?2, workflow_path = ?3, base_dir = ?4, \
                 inputs = ?5, updated_at = ?6 WHERE id = ?1",
                rusqlite::params![
                    id,
                    to.definition_hash,
                    to.workflow_path,
                    to.base_dir,
                    to.inputs.to_string(),
                    Timestamp::now()
                ],
            )?;
            if let Some(place) = &to.queue {
                let q = place.as_ref();
                cached(
                    c,
                    "UPDATE instances SET queue_key = ?2, queue_priority = ?3, queue_limits = ?4, \
                     queue_hold = ?5, admitted = 0, \
                     wake_at = CASE WHEN status = 'queued' AND ?2 IS NULL THEN NULL ELSE wake_at END, \
                     status = CASE WHEN status = 'queued' AND ?2 IS NULL THEN 'pending' ELSE status END \
                     WHERE id = ?1",
                    rusqlite::params![
                        id,
                        q.map(|q| q.key.as_str()),
                        q.map_or(crate::store::queue::DEFAULT_PRIORITY, |q| q.priority),
                        q.map(|q| q.limits.to_text()),
                        q.is_some_and(|q| q.limits.hold),
                    ],
                )?;
            }
            for (from, into) in &to.renames {
                for sql in crate::store::write::RENAME_UNITS {
                    cached(c, sql, rusqlite::params![id, from, into])?;
                }
            }
            Ok(())
        }
        Write::CompensateChild { child, parent } => {
            let now = Timestamp::now();
            cached(
                c,
                "UPDATE instances SET status = 'pending', wake_at = ?3, error = NULL, \
                 cancel_requested = MAX(cancel_requested, 1), updated_at = ?3 \
                 WHERE id = ?1 AND parent_id = ?2 AND status = 'completed'",
                rusqlite::params![child, parent, now],
            )?;
            Ok(())
        }
        Write::Child(child) => {
            super::lease::check_fence(c, &child.fence)?;
            child
                .writes
                .iter()
                .try_for_each(|w| apply(c, &child.fence.instance, w))
        }
    }
}

/// Applies `writes` on `conn` in one transaction, refused (nothing applied)
/// unless `fence` still holds the instance. `durability`: what `conn` is
/// set to.
pub(super) fn commit(
    conn: &mut Connection,
    durability: Durability,
    fence: &Fence,
    writes: &[Write],
) -> Result<()> {
    let tx = super::fenced(conn, fence)?;
    for w in writes {
        apply(&tx, &fence.instance, w)?;
    }
    durability.commit(tx)?;
    Ok(())
}

impl SqliteStore {
    /// Applies each member's writes under its own fence, all in one
    /// transaction (one sync): a member whose fence no longer holds, or
    /// whose writes fail, is rolled back to where it began (its savepoint)
    /// and told why; the others are applied. `Err`: the transaction itself
    /// failed, nothing applied.
    /// `synced`: false to leave the group's sync to the next synced commit
    /// (every member asked for that, `Store::commit_before_sync`).
    pub fn commit_group(
        &mut self,
        members: &[(&Fence, &[Write])],
        synced: bool,
    ) -> Result<Vec<Result<()>>> {
        if synced {
            self.commit_group_now(members, true)
        } else {
            self.unsynced(|s| s.commit_group_now(members, false))
        }
    }

    fn commit_group_now(
        &mut self,
        members: &[(&Fence, &[Write])],
        synced: bool,
    ) -> Result<Vec<Result<()>>> {
        let durability = self.durability;
        let mut tx = self.write()?;
        let mut outcomes = Vec::with_capacity(members.len());
        for (fence, writes) in members {
            let sp = tx.savepoint()?;
            let applied = super::lease::check_fence(&sp, fence).and_then(|()| {
                writes
                    .iter()
                    .try_for_each(|w| apply(&sp, &fence.instance, w))
            });
            if applied.is_ok() {
                sp.commit()?;
            }
            // (A savepoint dropped unreleased is rolled back.)
            outcomes.push(applied);
        }
        if synced {
            durability.commit(tx)?;
        } else {
            tx.commit()?;
        }
        Ok(outcomes)
    }

    /// Applies `writes` in one transaction, refused (nothing applied) unless
    /// `fence` still holds the instance.
    pub fn commit(&mut self, fence: &Fence, writes: &[Write]) -> Result<()> {
        commit(&mut self.conn, self.durability, fence, writes)
    }

    /// [`Store::commit`] without waiting for the disk (see
    /// [`Store::fenced_unsynced`]): for what need not outlive the machine.
    pub fn commit_unsynced(&mut self, fence: &Fence, writes: &[Write]) -> Result<()> {
        self.fenced_unsynced(fence, |c| {
            for w in writes {
                apply(c, &fence.instance, w)?;
            }
            Ok(())
        })
    }
}
