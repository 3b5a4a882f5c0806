//! What the driven tests drive a run with: a [`Run`] (the scheduler and
//! the span ids a driver's tracer would give), the results a job may end
//! with, and the writes and effects read back as short lines.

use super::*;
use crate::engine::{AttemptResult, Failure};
use serde_json::Value;

/// Span ids as a driver's tracer gives them: new for each attempt, the
/// same for every question about it until it ends.
#[derive(Default)]
pub(super) struct Ids {
    made: u64,
    open: HashMap<String, String>,
}

impl SpanIds for Ids {
    fn attempt(&mut self, key: &crate::vocab::ShownKey) -> (String, i64) {
        let made = &mut self.made;
        let id = self
            .open
            .entry(key.as_str().to_string())
            .or_insert_with(|| {
                *made += 1;
                format!("{made:016x}")
            })
            .clone();
        (id, 0)
    }
}

/// A run under test: the scheduler, its span ids, and every effect seen.
pub(super) struct Run {
    pub(super) s: Scheduler,
    pub(super) ids: Ids,
}

impl Run {
    pub(super) fn of(history: History) -> Run {
        Run {
            s: history.scheduler(),
            ids: Ids::default(),
        }
    }

    pub(super) fn step(&mut self, now: Timestamp, input: Input) -> Vec<Effect> {
        let effects = self.s.step(now, input, &mut self.ids);
        for e in &effects {
            if let Effect::AttemptEnded { key, .. } = e {
                self.ids.open.remove(key.as_str());
            }
        }
        effects
    }

    pub(super) fn tick(&mut self, now: Timestamp) -> Vec<Effect> {
        self.step(now, Input::Tick(Vec::new()))
    }

    /// `key`'s attempt ended with `result` by `now`.
    pub(super) fn settle(
        &mut self,
        now: Timestamp,
        key: &str,
        result: AttemptResult,
    ) -> Vec<Effect> {
        let attempt = self.s.running[key];
        let parsed = UnitKey::parse(key);
        let unit = Unit {
            idx: self
                .s
                .wf
                .steps
                .iter()
                .position(|s| s.id == parsed.step)
                .expect("a step of the workflow"),
            item: parsed.item,
            compensation: parsed.compensation,
        };
        let settled = Settled {
            unit,
            attempt,
            elapsed: Duration::from_millis(5),
            result,
        };
        self.step(now, Input::Tick(vec![settled]))
    }

    /// The writes decided since the last call, one line each.
    pub(super) fn writes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.s.writes)
            .iter()
            .map(describe)
            .collect()
    }
}

pub(super) fn describe(w: &Write) -> String {
    match w {
        Write::StartAttempt { key, attempt, .. } => format!("start {key}#{attempt}"),
        Write::EndAttempt { key, attempt, end } => {
            format!("end {key}#{attempt} {}", end.outcome.as_str())
        }
        Write::Step(r) => match r.retry_at {
            Some(t) => format!(
                "{} {} until {}",
                r.key,
                r.status.as_str(),
                t.since(at(0)).as_secs()
            ),
            None => format!("{} {}", r.key, r.status.as_str()),
        },
        Write::State(v) => format!("state {v}"),
        Write::TakeEvent { event, key } => format!("{key} takes event {event}"),
        Write::TakeEventNamed { name, key } => format!("{key} takes event {name}"),
        Write::Outputs(v) => format!("outputs {v}"),
        other => format!("{other:?}"),
    }
}

/// The units whose jobs are to start (by key), with their attempts.
pub(super) fn spawned(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Spawn { unit, attempt, job } => {
                let key = match &**job {
                    Job::Shell(j) => j.env.iter().find(|(k, _)| k == "WF_STEP_ID"),
                    Job::Http(_) => None,
                }
                .map_or_else(|| format!("step {}", unit.idx), |(_, v)| v.clone());
                Some(format!("{key}#{attempt}"))
            }
            _ => None,
        })
        .collect()
}

pub(super) fn notes(effects: &[Effect]) -> Vec<Note> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Note(n) => Some(n.clone()),
            _ => None,
        })
        .collect()
}

pub(super) fn ended(effects: &[Effect]) -> Option<RunOutcome> {
    effects.iter().find_map(|e| match e {
        Effect::End(o) => Some(o.clone()),
        _ => None,
    })
}

pub(super) fn ok(v: Value) -> AttemptResult {
    AttemptResult {
        outcome: Ok(v),
        exit_code: Some(0),
        ..AttemptResult::default()
    }
}

pub(super) fn exit(code: i32) -> AttemptResult {
    AttemptResult {
        exit_code: Some(code),
        ..AttemptResult::failed(Failure::new(
            ErrorType::Exit(code),
            format!("exited with code {code}"),
        ))
    }
}

pub(super) fn interrupted() -> AttemptResult {
    AttemptResult {
        interrupted: true,
        ..AttemptResult::failed(Failure::new(ErrorType::Interrupted, "stopped".into()))
    }
}
