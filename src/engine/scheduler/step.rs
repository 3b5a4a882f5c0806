//! The scheduler's one entry point: [`Scheduler::step`] takes the time and
//! one input (a tick with the attempts that ended, a stop, a cancel asked,
//! events delivered, or the run gone idle) and returns the effects the
//! driver carries out (spawn an attempt's job, tell the observer, interrupt
//! what runs, end a span, link an event, look again, end the run). The
//! writes it decides collect in [`Scheduler::writes`] until the driver
//! commits them: several steps may share one transaction (the results that
//! came in and every start they unblock), and the writes that open the run
//! wait there for its first commit.
//!
//! Nothing here reads a clock, does I/O or touches a channel: the driver
//! owns the JoinSet, the signals, the heartbeat, the spawn hold and the
//! commit overlap (`engine::runner`).

use super::{RunOutcome, Scheduler, Stop, Unit};
use crate::engine::{AttemptResult, Failure, http, shell};
use crate::store::{EventRow, Write};
use crate::vocab::{AttemptOutcome, CancelRequest, ShownKey, Timestamp, UnitKeyBuf};
use std::time::Duration;

/// Most units settled in one transaction without a process in between.
pub const MAX_SETTLED_PER_COMMIT: usize = 128;

/// What happened, for the scheduler to decide on.
#[derive(Debug)]
pub enum Input {
    /// The attempts that ended since the last tick (in the order they
    /// ended); then: start what may start now. The workflow's deadline is
    /// looked at first.
    Tick(Vec<Settled>),
    /// Stop what runs, for this reason (a signal, a lease lost, or the
    /// `wf cancel` this run was started for).
    Stop(Stop),
    /// What `wf cancel` has asked of the instance, as last read.
    CancelAsked(CancelRequest),
    /// The events delivered to the instance and not taken, as last read:
    /// those this run does not know yet are added.
    Events(Vec<EventRow>),
    /// A child run in this process ended, and its run handed its last
    /// commit to this one (which makes it with its next): the event it
    /// delivers, `name` and `payload`, as `Events` would read it once
    /// committed. Its step takes it by name (`Write::TakeEventNamed`).
    ChildEnded { name: String, payload: String },
    /// Nothing runs: is the run over?
    Idle,
    /// The driver took the `lock:` of unit `key` (asked for with
    /// [`Effect::TakeLock`]): it may start.
    LockTaken(UnitKeyBuf),
    /// The driver's answer to a `cache:` unit's [`Effect::HashFiles`] or
    /// [`Effect::LookUpCache`].
    Cache {
        key: UnitKeyBuf,
        answer: super::CacheAnswer,
    },
}

/// An attempt that ended, as its executor reported it.
#[derive(Debug)]
pub struct Settled {
    pub unit: Unit,
    pub attempt: i64,
    pub elapsed: Duration,
    pub result: AttemptResult,
}

/// A unit ready to start its process or request, with everything rendered.
#[derive(Debug)]
pub enum Job {
    Shell(shell::ShellJob),
    Http(http::HttpJob),
}

/// What the driver is to do, in the order decided.
#[derive(Debug)]
pub enum Effect {
    /// Start `job`, the work of `attempt` of `unit`, once the writes that
    /// record the attempt are durable (or while they are being committed,
    /// held at its exec).
    Spawn {
        unit: Unit,
        job: Box<Job>,
        attempt: i64,
    },
    /// Tell the observer.
    Note(Note),
    /// Stop these units' running attempts (a `matrix` step's other
    /// combinations, once one failed with `fail_fast`); each settles
    /// `canceled`.
    StopUnits { keys: Vec<UnitKeyBuf> },
    /// Stop the attempts running; `fresh`: the compensations that start
    /// after this are not stopped by it (only a signal stops those).
    Interrupt { fresh: bool },
    /// An attempt ended: end its span with the outcome (a successful one
    /// once the commit that makes it durable returned).
    AttemptEnded {
        key: UnitKeyBuf,
        attempt: i64,
        outcome: AttemptOutcome,
        failure: Option<Failure>,
    },
    /// A step whose `if` was false: its span says `skipped`.
    Skipped { key: UnitKeyBuf },
    /// A step took an event sent under `traceparent`: the run's root span
    /// links to it.
    LinkEvent { name: String, traceparent: String },
    /// Run the child instance `id` (made by a `workflow:` attempt this
    /// step, once the writes that create it are committed, or found open
    /// by this run), unless another process has it or it ended.
    /// `workflow`: its pinned definition, which the parent holds (so the
    /// child's run does not read it again).
    /// `made`: the unit whose attempt made it in this step (none for a
    /// child an earlier run made).
    RunChild {
        id: crate::vocab::InstanceId,
        workflow: Option<std::sync::Arc<crate::workflow::Workflow>>,
        made: Option<UnitKeyBuf>,
    },
    /// The parent ends early: ask child `id` to cancel (or terminate), and
    /// run it here if no process does.
    EndChild {
        id: crate::vocab::InstanceId,
        terminate: bool,
    },
    /// Take step lock `lock` (at most `limit` holders) for unit `key`
    /// before its attempt starts; answer with [`Input::LockTaken`] once
    /// taken (until then the unit waits).
    TakeLock {
        key: UnitKeyBuf,
        lock: String,
        limit: u32,
    },
    /// Hash the files of each `hashFiles` call of unit `key`'s `cache.key`
    /// (the patterns of each call, relative to `dir`); answer with
    /// [`Input::Cache`].
    HashFiles {
        key: UnitKeyBuf,
        dir: std::path::PathBuf,
        calls: Vec<Vec<String>>,
    },
    /// Look up the entry of a `cache:` step (`workflow`, `step`, the
    /// rendered `cache_key`, the unit's `part`) for unit `key`; answer with
    /// [`Input::Cache`].
    LookUpCache {
        key: UnitKeyBuf,
        workflow: String,
        step: String,
        cache_key: String,
        part: String,
    },
    /// A `cached` attempt of unit `key`: its span names where its result
    /// came from (`INSTANCE#ATTEMPT`).
    CachedFrom { key: UnitKeyBuf, from: String },
    /// Decide again now, after committing: more is ready than one
    /// transaction holds, an awaited event arrived, or the outputs failed
    /// to render and the compensations are to run.
    Again,
    /// The run is over.
    End(RunOutcome),
}

/// What the observer hears (see `engine::Observer`).
#[derive(Debug, Clone, PartialEq)]
pub enum Note {
    StepStarted {
        key: UnitKeyBuf,
        attempt: i64,
    },
    StepFinished {
        key: UnitKeyBuf,
        attempt: i64,
        outcome: AttemptOutcome,
        failure: Option<Failure>,
        elapsed: Duration,
    },
    StepSkipped {
        key: UnitKeyBuf,
    },
    StepRetrying {
        key: UnitKeyBuf,
        next_attempt: i64,
        try_n: i64,
        max_attempts: u32,
        delay: Duration,
    },
    FanOutFinished {
        key: UnitKeyBuf,
        items: usize,
    },
    Message(String),
}

/// Where an attempt's span id comes from. The driver opens the attempt's
/// span (its id is the tracer's, so that the attempt's row and its span
/// agree); a test counts.
pub trait SpanIds {
    /// The span id and start (Unix ns) of the attempt of `key` about to
    /// begin: the same on every call until that attempt ends.
    /// (`key` prints as the unit is shown: the span's name.)
    fn attempt(&mut self, key: &ShownKey) -> (String, i64);
}

/// What starting a unit amounted to.
pub(super) enum Started {
    Spawn(Box<Job>, i64),
    /// Settled within the transaction (skipped, pure step, timer fired, event taken, failed).
    Settled,
    /// Waiting on a timer or an event, or nothing to do yet.
    Blocked,
}

impl Scheduler {
    /// Decides what `input` at `now` means: the writes go to
    /// [`Scheduler::writes`], the effects are returned.
    pub fn step(&mut self, now: Timestamp, input: Input, spans: &mut dyn SpanIds) -> Vec<Effect> {
        match input {
            Input::Tick(settled) => self.tick(now, settled, spans),
            Input::Stop(why) => self.stop(why),
            Input::CancelAsked(asked) => {
                if asked == CancelRequest::Terminate {
                    self.terminate = true;
                }
                if self.stop.is_none() && asked.is_asked() {
                    self.stop(Stop::Cancel);
                }
            }
            Input::Events(delivered) => {
                // All of them, not those after the last id seen: ids are
                // given as events are sent and become visible as their
                // senders commit, so on PostgreSQL an event can appear
                // after one with a higher id (a hundred children ending
                // together left one behind). One taken by this run and not
                // committed yet is still delivered: it is not taken twice.
                let awaited = self.awaited_events();
                let mut arrived = false;
                for e in delivered {
                    if self.taken_events.contains(&e.id)
                        || self.events.iter().any(|k| k.id == e.id)
                        || self.ended_here.contains_key(&e.name)
                    {
                        continue;
                    }
                    arrived |= awaited.contains(&e.name);
                    self.events.push(e);
                }
                if arrived {
                    self.effects.push(Effect::Again);
                }
            }
            Input::ChildEnded { name, payload } => {
                if self.awaited_events().contains(&name) {
                    self.effects.push(Effect::Again);
                }
                self.ended_here.insert(name, payload);
            }
            Input::Idle => self.idle(now),
            Input::LockTaken(key) => {
                self.locks_asked.remove(key.as_str());
                self.locks_held.insert(key);
                self.effects.push(Effect::Again);
            }
            Input::Cache { key, answer } => self.cache_answered(key, answer),
        }
        std::mem::take(&mut self.effects)
    }

    fn tick(&mut self, now: Timestamp, settled: Vec<Settled>, spans: &mut dyn SpanIds) {
        if !self.children_started {
            self.children_started = true;
            self.run_open_children();
        }
        if self.deadline.is_some_and(|d| d <= now) && self.stop.is_none() {
            self.stop(Stop::Deadline);
        }
        for s in settled {
            self.settle(s, now);
        }
        if self.stop != Some(Stop::Signal) {
            let mut settled_in_tx = 0;
            loop {
                let mut settled = false;
                for unit in self.candidates(now) {
                    // A unit waiting on its child is looked at (its end may
                    // have come) whatever runs: it takes no new slot.
                    if self.running.len() + self.open_children.len() >= self.wf.concurrency
                        && !self.open_children.contains(&unit.key(&self.wf))
                    {
                        continue;
                    }
                    match self.start(&unit, now, spans) {
                        Started::Spawn(job, attempt) => {
                            // Counted as running from now on, so no later pass starts it again.
                            let key = unit.key(&self.wf);
                            // `set_state` sees the state as committed when its step started.
                            if self.wf.steps[unit.idx].set_state.is_some() {
                                self.start_states.insert(key.clone(), self.state.clone());
                            }
                            self.running.insert(key, attempt);
                            self.effects.push(Effect::Spawn { unit, job, attempt });
                        }
                        Started::Settled => {
                            settled = true;
                            settled_in_tx += 1;
                        }
                        Started::Blocked => {}
                    }
                }
                // Bound a transaction of steps that settle without a
                // process (pure set_state steps): memory stays flat and
                // progress reaches the disk in chunks.
                if settled_in_tx >= MAX_SETTLED_PER_COMMIT {
                    self.effects.push(Effect::Again);
                    break;
                }
                if !settled {
                    break;
                }
            }
        }
        // After the starts too: a unit that failed as it started (its
        // inputs) ends the children as much as a result does.
        self.end_children();
        if std::mem::take(&mut self.state_dirty) {
            self.writes.push(Write::State(self.state.clone()));
        }
    }

    /// Nothing runs: the run ends, or waits for a timer or an event.
    fn idle(&mut self, now: Timestamp) {
        let Some(outcome) = self.final_outcome(now) else {
            return;
        };
        // A completed instance's result is rendered now, from its final
        // state and step outputs. One that cannot be rendered fails the
        // instance as a failed step does: the compensations of its
        // completed steps run first.
        if outcome == RunOutcome::Completed {
            match self.render_outputs() {
                Ok(Some(v)) => self.writes.push(Write::Outputs(v)),
                Ok(None) => {}
                Err(e) => {
                    let why = self.redactor.text(&format!("`outputs`: {e}"));
                    self.note(Note::Message(format!("{why}: the workflow fails")));
                    self.failed = Some(why);
                    self.effects.push(Effect::Again);
                    return;
                }
            }
        }
        self.effects.push(Effect::End(outcome));
    }

    /// Stops running units for `why`; a signal outranks everything.
    fn stop(&mut self, why: Stop) {
        if why == Stop::Lost {
            self.stop = Some(why);
            return;
        }
        if matches!(self.stop, Some(Stop::Signal | Stop::Lost))
            || (self.stop.is_some() && why != Stop::Signal)
        {
            return;
        }
        self.stop = Some(why);
        // A compensation in flight (they run one at a time, after every forward
        // unit ended) is never cut short by a deadline or a cancel: only a
        // signal to this process stops it.
        if why != Stop::Signal && self.running.keys().any(UnitKeyBuf::is_compensation) {
            if why == Stop::Cancel {
                self.note(Note::Message(
                    "canceled: letting the running compensation finish".into(),
                ));
            }
            return;
        }
        let message = match why {
            Stop::Signal | Stop::Lost => "interrupted: stopping running steps",
            Stop::Cancel => "canceled: stopping running steps",
            Stop::Deadline => "workflow timeout reached: stopping running steps",
        };
        self.note(Note::Message(message.into()));
        if why == Stop::Deadline && self.failed.is_none() {
            let t = self.wf.timeout.unwrap_or_default();
            self.failed = Some(format!(
                "workflow timed out after {}",
                crate::workflow::duration::human(t)
            ));
        }
        // Compensations start after this (unless it is a signal): they get
        // a channel of their own, which only a signal to this process trips.
        self.effects.push(Effect::Interrupt {
            fresh: why != Stop::Signal,
        });
    }

    pub(super) fn note(&mut self, note: Note) {
        self.effects.push(Effect::Note(note));
    }

    /// The names of the events steps wait for now (a `wait_for_event`'s,
    /// a child's end).
    pub fn awaited_events(&self) -> Vec<String> {
        self.records
            .values()
            .filter_map(|r| self.awaited_event(r))
            .collect()
    }
}
