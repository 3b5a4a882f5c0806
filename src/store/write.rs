//! What a runner changes, as data. The engine decides (which attempt starts,
//! what a result means for its step, the state, the spans to keep) and
//! collects its decisions as [`Write`]s; the store applies a batch of them
//! atomically, under the runner's fence ([`Store::commit`]). The engine never
//! reads the database in the middle of a batch, so the same batch means the
//! same thing to any backend.

use super::records::*;
use super::{Result, Store};
use rusqlite::Connection;
use serde_json::Value;

/// One change to the instance a runner holds.
#[derive(Debug, Clone)]
pub enum Write {
    /// An attempt recorded before its command starts.
    StartAttempt {
        key: String,
        attempt: i64,
        run: i64,
        started_at: String,
        span_id: String,
        started_ns: i64,
    },
    /// An attempt's outcome, logs and error.
    EndAttempt {
        key: String,
        attempt: i64,
        end: AttemptEnd,
    },
    /// The process group an attempt started.
    AttemptProcess {
        key: String,
        attempt: i64,
        tag: ProcessTag,
    },
    /// A step (or item, or compensation) row, as it now is.
    Step(Box<StepRow>),
    /// The instance's committed state.
    State(Value),
    /// An ended span.
    Span(Box<SpanRow>),
    /// A delivered event taken by a waiting step.
    TakeEvent {
        event: i64,
        key: String,
    },
    /// The instance's status and what it waits for.
    Status {
        status: String,
        wake_at: Option<String>,
        waiting_event: Option<String>,
        error: Option<String>,
    },
    /// Runs left without an outcome by a runner that died become `crashed`.
    CloseAbandonedRuns,
    /// The instance's result (`outputs:`), rendered when it completed.
    Outputs(Value),
    /// A new run and its trace.
    StartRun {
        run: i64,
        trace: RunTrace,
    },
    FinishRun {
        run: i64,
        outcome: String,
    },
}

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
                started_at,
                span_id,
                started_ns: *started_ns,
            },
        ),
        Write::EndAttempt { key, attempt, end } => finish_attempt(c, id, key, *attempt, end),
        Write::AttemptProcess { key, attempt, tag } => {
            set_attempt_process(c, id, key, *attempt, tag)
        }
        Write::Step(row) => put_step(c, id, row),
        Write::State(state) => set_state(c, id, state),
        Write::Span(span) => insert_span(c, span),
        Write::TakeEvent { event, key } => take_event(c, *event, key),
        Write::Status {
            status,
            wake_at,
            waiting_event,
            error,
        } => set_instance_status(
            c,
            id,
            status,
            wake_at.as_deref(),
            waiting_event.as_deref(),
            error.as_deref(),
        ),
        Write::CloseAbandonedRuns => close_abandoned_runs(c, id),
        Write::Outputs(v) => set_outputs(c, id, v),
        Write::StartRun { run, trace } => start_run(c, id, *run, trace),
        Write::FinishRun { run, outcome } => finish_run(c, id, *run, outcome),
    }
}

impl Store {
    /// Applies `writes` in one transaction, refused (nothing applied) unless
    /// `fence` still holds the instance.
    pub fn commit(&mut self, fence: &Fence, writes: &[Write]) -> Result<()> {
        let tx = self.fenced(fence)?;
        for w in writes {
            apply(&tx, &fence.instance, w)?;
        }
        tx.commit()?;
        Ok(())
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
