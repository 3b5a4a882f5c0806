//! Two runs of an instance side by side (`wf inspect ID --compare A,B`,
//! the inspector's comparison page): each unit with what each run did of
//! it (its attempts in that run, the last one's outcome and error, how long
//! they took), and whether the two differ. Built from the attempts alone,
//! so it is pure and unit-tested.

use crate::store::{AttemptRow, RunRow};
use crate::vocab::{AttemptOutcome, RunEnd, Timestamp};

/// The comparison (`--json`): the two runs, then a row per unit either ran.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct CompareView<'a> {
    pub a: RunSide<'a>,
    pub b: RunSide<'a>,
    pub steps: Vec<CompareRow<'a>>,
}

/// One run of the two.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct RunSide<'a> {
    pub number: i64,
    #[schema(required)]
    pub outcome: Option<RunEnd>,
    pub started_at: Timestamp,
    #[schema(required)]
    pub finished_at: Option<Timestamp>,
    #[schema(required)]
    pub definition_hash: Option<&'a str>,
}

/// A unit in the two runs.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct CompareRow<'a> {
    pub step: &'a str,
    /// What each run did of it (none: it did not run it).
    #[schema(required)]
    pub a: Option<UnitInRun<'a>>,
    #[schema(required)]
    pub b: Option<UnitInRun<'a>>,
    /// The two differ: one ran it and the other not, or their last
    /// outcomes or errors are not the same.
    pub differs: bool,
}

/// A unit's attempts in one run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct UnitInRun<'a> {
    pub attempts: usize,
    #[schema(required)]
    pub outcome: Option<AttemptOutcome>,
    #[schema(required)]
    pub error_type: Option<String>,
    #[schema(required)]
    pub error_message: Option<&'a str>,
    /// From its first attempt's start to its last one's end (none while it
    /// runs).
    #[schema(required)]
    pub took_ms: Option<i64>,
}

/// Runs `a` and `b` of `runs`, side by side over `attempts`; `None` when
/// either run does not exist.
pub fn compare<'a>(
    runs: &'a [RunRow],
    attempts: &'a [AttemptRow],
    a: i64,
    b: i64,
) -> Option<CompareView<'a>> {
    let side = |n: i64| {
        runs.iter().find(|r| r.number == n).map(|r| RunSide {
            number: r.number,
            outcome: r.outcome,
            started_at: r.started_at,
            finished_at: r.finished_at,
            definition_hash: r.definition_hash.as_deref(),
        })
    };
    let (side_a, side_b) = (side(a)?, side(b)?);
    let mut keys: Vec<&str> = Vec::new();
    for at in attempts.iter().filter(|x| x.run == a || x.run == b) {
        if !keys.contains(&at.step_key.as_str()) {
            keys.push(at.step_key.as_str());
        }
    }
    let in_run = |key: &str, run: i64| -> Option<UnitInRun<'a>> {
        let list: Vec<&'a AttemptRow> = attempts
            .iter()
            .filter(|x| x.run == run && x.step_key.as_str() == key)
            .collect();
        let (first, last) = (list.first()?, list.last()?);
        Some(UnitInRun {
            attempts: list.len(),
            outcome: last.outcome,
            error_type: last.error_type.as_ref().map(ToString::to_string),
            error_message: last.error_message.as_deref(),
            took_ms: last
                .finished_at
                .map(|f| (f.ms() - first.started_at.ms()).max(0)),
        })
    };
    let steps = keys
        .into_iter()
        .map(|key| {
            let (x, y) = (in_run(key, a), in_run(key, b));
            let differs = match (&x, &y) {
                (Some(x), Some(y)) => {
                    (x.outcome, &x.error_type, x.error_message)
                        != (y.outcome, &y.error_type, y.error_message)
                }
                _ => true,
            };
            CompareRow {
                step: key,
                a: x,
                b: y,
                differs,
            }
        })
        .collect();
    Some(CompareView {
        a: side_a,
        b: side_b,
        steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{ErrorType, UnitKeyBuf};

    fn run(n: i64, outcome: RunEnd) -> RunRow {
        RunRow {
            number: n,
            outcome: Some(outcome),
            started_at: Timestamp::from_ms(n * 1000),
            finished_at: Some(Timestamp::from_ms(n * 1000 + 500)),
            restart_from: None,
            definition_hash: Some(format!("h{n}")),
        }
    }

    fn at(
        key: &str,
        attempt: i64,
        run: i64,
        outcome: AttemptOutcome,
        err: Option<i64>,
    ) -> AttemptRow {
        AttemptRow {
            step_key: UnitKeyBuf::new(key),
            attempt,
            run,
            outcome: Some(outcome),
            error_type: err.map(|c| ErrorType::Exit(c as i32)),
            error_message: err.map(|c| format!("exited with code {c}")),
            exit_code: err,
            started_at: Timestamp::from_ms(run * 1000 + attempt * 10),
            finished_at: Some(Timestamp::from_ms(run * 1000 + attempt * 10 + 5)),
            cached_from: None,
        }
    }

    #[test]
    fn each_unit_shows_what_each_run_did_and_whether_they_differ() {
        let runs = [run(1, RunEnd::Failed), run(2, RunEnd::Completed)];
        let attempts = [
            at("a", 1, 1, AttemptOutcome::Ok, None),
            at("b", 1, 1, AttemptOutcome::Retry, Some(3)),
            at("b", 2, 1, AttemptOutcome::Failed, Some(3)),
            at("b", 3, 2, AttemptOutcome::Ok, None),
            at("c", 1, 2, AttemptOutcome::Ok, None),
        ];
        let v = compare(&runs, &attempts, 1, 2).expect("both runs");
        let rows: Vec<(&str, bool)> = v.steps.iter().map(|r| (r.step, r.differs)).collect();
        assert_eq!(rows, [("a", true), ("b", true), ("c", true)]);
        let b = &v.steps[1];
        assert_eq!(
            b.a.as_ref().map(|u| (u.attempts, u.outcome, u.took_ms)),
            Some((2, Some(AttemptOutcome::Failed), Some(15)))
        );
        assert_eq!(b.b.as_ref().map(|u| u.attempts), Some(1));
        assert_eq!(v.a.definition_hash, Some("h1"));
        // The same run against itself differs nowhere.
        let same = compare(&runs, &attempts, 1, 1).expect("run 1");
        assert!(same.steps.iter().all(|r| !r.differs));
        assert!(compare(&runs, &attempts, 1, 9).is_none());
    }
}
