//! `wf upgrade`: moving instances that are not running onto a new
//! definition of their workflow (SPEC §3 Upgrades). [`plan`] decides, for
//! one instance, what becomes of each step and whether the move is refused;
//! it is pure, so the CLI's `--dry-run`, the API and the apply all show and
//! write the same plan.

pub mod plan;

pub use plan::{Fate, Instance, Plan, Refusal, StepPlan};
