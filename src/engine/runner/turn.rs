//! The run's loop, in two halves: [`Runner::receive`] waits for what
//! happens next (attempts that ended, children run here that ended, a
//! timer or the poll interval, a signal, the lease lost) and returns it as
//! a [`Received`]; the loop hands it to the scheduler with the next turn.
//! A turn ([`Runner::turn`]) has the scheduler decide, commits, and carries
//! out what the commit allows ([`Runner::carry_out`]); with nothing in
//! flight, [`Runner::when_idle`] waits for timers and events or suspends.

use super::Signals;
use super::children::{self, Ran};
use super::commit::Decided;
use super::{Applied, Done, POLL_EVERY, Runner};
use crate::engine::EngineError;
use crate::engine::RunOutcome;
use crate::engine::scheduler::{Input, Settled, Stop};
use crate::store::RunStore;
use crate::vocab::{CancelRequest, Timestamp};
use std::time::{Duration, Instant};

/// What the loop woke for.
pub(super) enum Received {
    /// Attempts whose tasks ended.
    Ended(Vec<Done>),
    /// Children run in this process whose runs ended.
    Children(Vec<Ran>),
    /// A timer came due, or it is time to poll.
    Timer,
    /// SIGINT, SIGTERM or SIGHUP.
    Signal,
}

/// What the loop does after a turn or an idle wait.
enum Flow {
    /// Decide again.
    Again,
    /// Wait for what happens next.
    Wait,
    /// The run is over.
    Done(RunOutcome),
}

impl Runner<'_> {
    pub(super) async fn decide_until_done(
        &mut self,
        store: &mut impl RunStore,
        signals: &mut Signals,
    ) -> Result<RunOutcome, EngineError> {
        let replayed = self.sched.units_done();
        if replayed > 0 {
            self.observer.steps_replayed(replayed);
        }
        let mut settled: Vec<Settled> = Vec::new();
        let mut last_poll = Instant::now();
        loop {
            let flow = match self.turn(store, std::mem::take(&mut settled)).await? {
                Flow::Wait if self.is_idle() => self.when_idle(store, signals).await?,
                flow => flow,
            };
            match flow {
                Flow::Done(outcome) => return Ok(outcome),
                Flow::Again => continue,
                Flow::Wait => {}
            }
            match self.receive(signals).await? {
                Received::Ended(done) => {
                    settled.extend(done.into_iter().map(|d| self.ended(d)));
                }
                Received::Children(ran) => {
                    if self.children_ran(ran) {
                        last_poll = Instant::now();
                        self.poll_external(store).await?;
                    }
                }
                Received::Timer => {}
                Received::Signal => self.stop(Stop::Signal),
            }
            if last_poll.elapsed() >= POLL_EVERY {
                last_poll = Instant::now();
                self.poll_external(store).await?;
                self.try_locks(store).await?;
            }
        }
    }

    /// One turn: results that came in, then every start they unblock, in
    /// one transaction (a child's first turn: made by its parent's commit),
    /// carried out.
    async fn turn(
        &mut self,
        store: &mut impl RunStore,
        settled: Vec<Settled>,
    ) -> Result<Flow, EngineError> {
        let mut commit_spans = Vec::new();
        let applied = match self.precommitted.take() {
            Some(applied) => {
                self.sched.opening_committed();
                applied
            }
            None => {
                let mut applied = self.decide(Input::Tick(settled));
                match self.commit_decided(store, &mut applied).await? {
                    Decided::Committed(spans) => commit_spans = spans,
                    Decided::Ended(outcome) => return Ok(Flow::Done(outcome)),
                }
                applied
            }
        };
        let again = applied.again;
        self.carry_out(store, applied).await?;
        drop(commit_spans);
        self.record_groups(store).await?;
        self.output_files.lock().tidy();
        // Locks asked for now are tried at once: taken, their units start;
        // so are the `cache:` units' questions answered.
        let answered = self.answer_cache(store).await?;
        if self.try_locks(store).await? || answered || again {
            return Ok(Flow::Again);
        }
        Ok(Flow::Wait)
    }

    /// Starts what a committed turn allows: its jobs, the children it made,
    /// and the ends it asked of children.
    async fn carry_out(
        &mut self,
        store: &mut impl RunStore,
        applied: Applied,
    ) -> Result<(), EngineError> {
        for (unit, job, attempt) in applied.spawns {
            self.spawn(unit, *job, attempt);
        }
        for start in applied.children {
            self.children.start(start, self.opts.inline_wait);
        }
        for (id, terminate) in applied.ending {
            // Asked, then run here: a suspended child has no process to
            // see the request (one that runs elsewhere or here sees it,
            // and this run of it is refused).
            let ask = if terminate {
                CancelRequest::Terminate
            } else {
                CancelRequest::Cancel
            };
            store.request_cancel(&id, ask).await?;
            let start = children::Start {
                id,
                workflow: None,
                parent_span: None,
                claimed: None,
                opened: None,
                end: children::EndSlot::default(),
            };
            self.children.start(start, self.opts.inline_wait);
        }
        Ok(())
    }

    /// Whether nothing is in flight: no attempt, no task, no child.
    fn is_idle(&self) -> bool {
        !self.sched.has_running() && self.tasks.is_empty() && self.children.is_empty()
    }

    /// With nothing in flight: the run ends, or waits for a step lock
    /// another instance holds, or for a timer due within the inline wait;
    /// else it suspends (an event not yet delivered ends the run at once).
    async fn when_idle(
        &mut self,
        store: &mut impl RunStore,
        signals: &mut Signals,
    ) -> Result<Flow, EngineError> {
        let idle = self.decide(Input::Idle);
        if let Some(outcome) = idle.end {
            return Ok(Flow::Done(outcome));
        }
        if idle.again {
            return Ok(Flow::Again);
        }
        // Units waiting for a step lock another instance holds: it is asked
        // for again every poll (its holder's attempt ends, or its holder's
        // lease dies).
        if !self.lock_waits.is_empty() {
            tokio::select! {
                _ = tokio::time::sleep(POLL_EVERY) => {}
                _ = signals.recv() => self.stop(Stop::Signal),
                news = self.lost.next() => self.heard(news)?,
            }
            self.poll_external(store).await?;
            self.try_locks(store).await?;
            return Ok(Flow::Again);
        }
        // Only timers and events left. Short waits happen here.
        let next = self.sched.next_wake();
        let within = self
            .sched
            .next_timer()
            .filter(|t| t.since(Timestamp::now()) <= self.opts.inline_wait);
        let Some(timer) = within else {
            // An event delivered while earlier steps ran (or a cancel asked
            // meanwhile) is looked for once more before the run suspends.
            let stop_before = self.sched.stopped();
            if self.poll_external(store).await? || self.sched.stopped() != stop_before {
                return Ok(Flow::Again);
            }
            return Ok(Flow::Done(
                self.sched.suspend_outcome(next, Timestamp::now()),
            ));
        };
        let until = next.map_or(timer, |n| n.min(timer));
        // In slices, so that a cancel or an awaited event from another
        // process is seen within 200 ms.
        let stop_before = self.sched.stopped();
        loop {
            let wait = until.since(Timestamp::now());
            if wait.is_zero() || self.sched.stopped() != stop_before {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(wait.min(POLL_EVERY)) => {}
                _ = signals.recv() => {
                    // Nothing runs: the instance stays as it was, sleeping
                    // or waiting, not interrupted.
                    self.idle_when_stopped = true;
                    self.stop(Stop::Signal);
                }
                news = self.lost.next() => {
                    // Nothing runs: it stays sleeping or waiting, and the
                    // run ends (`Runner::heard`).
                    self.idle_when_stopped = true;
                    self.heard(news)?;
                }
            }
            if self.poll_external(store).await? {
                break;
            }
        }
        Ok(Flow::Again)
    }

    /// Waits for a result, a child's end, a due timer (or the poll
    /// interval), or a signal; the lease lost ends the run with an error.
    async fn receive(&mut self, signals: &mut Signals) -> Result<Received, EngineError> {
        let timer = self
            .sched
            .next_wake()
            .map(|t| t.since(Timestamp::now()))
            .unwrap_or(Duration::from_secs(3600))
            .min(POLL_EVERY)
            .min(self.next_group_due().unwrap_or(POLL_EVERY));
        let joined_err =
            |e: tokio::task::JoinError| EngineError::Internal(format!("step task failed: {e}"));
        Ok(tokio::select! {
            // The lease's news first: an attempt whose processes its
            // watch killed (`lapse`) ends as the lapse's interrupt says,
            // never as a failure of its own.
            biased;
            news = self.lost.next() => {
                self.heard(news)?;
                Received::Timer
            }
            Some(joined) = self.tasks.join_next() => {
                let mut done = vec![joined.map_err(joined_err)?];
                while let Some(joined) = self.tasks.try_join_next() {
                    done.push(joined.map_err(joined_err)?);
                }
                Received::Ended(done)
            }
            ran = self.children.next_ended() => {
                let mut all = vec![ran];
                all.extend(self.children.also_ended());
                Received::Children(all)
            }
            _ = tokio::time::sleep(timer) => Received::Timer,
            _ = signals.recv() => Received::Signal,
        })
    }

    /// Children run here ended: their notes said, their handed ends kept
    /// for the next commit. True when one's end went to this instance's
    /// events instead, to be looked for now.
    fn children_ran(&mut self, ran: Vec<Ran>) -> bool {
        self.children_ended = true;
        let mut look = false;
        for ran in ran {
            if let Some(said) = ran.said {
                self.observer.message(&said);
            }
            match ran.end {
                Some(end) => self.child_ended_here(end),
                // Its end, if it ended, was delivered to this instance.
                None => look = true,
            }
        }
        look
    }
}
