//! `wf upgrade`: moving instances that are not running onto a new
//! definition of their workflow (SPEC §3 Upgrades). [`plan`] decides, for
//! one instance, what becomes of each step and whether the move is refused;
//! it is pure, so the CLI's `--dry-run`, the API and the apply all show and
//! write the same plan. [`preview`] reads the instances asked for and plans
//! each (what `--dry-run` prints); [`upgrade`] answers a whole request,
//! applying each plan not refused ([`apply`]).

pub mod apply;
pub mod plan;
pub mod preview;
pub mod request;

pub use apply::{Applied, Target, apply};
pub use plan::{Fate, Instance, Plan, Refusal, StepPlan};
pub use preview::{Outcome, Preview, Targets, preview};
pub use request::{Done, Overall, Request, Verdict, overall, registered_target, upgrade};

/// The definitions `runs` used, in order, each with its first run, then
/// `current` (the instance's) from the next run if the last run did not
/// use it (an upgrade moved it since). Runs from a history that did not
/// record theirs are passed over.
pub fn uses<'a>(runs: &'a [crate::store::RunRow], current: &'a str) -> Vec<(&'a str, i64)> {
    let mut out: Vec<(&'a str, i64)> = Vec::new();
    for r in runs {
        if let Some(h) = r.definition_hash.as_deref()
            && out.last().is_none_or(|(u, _)| *u != h)
        {
            out.push((h, r.number));
        }
    }
    if out.last().is_none_or(|(u, _)| *u != current) {
        out.push((current, runs.last().map_or(1, |r| r.number + 1)));
    }
    out
}
