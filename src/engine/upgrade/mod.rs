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
