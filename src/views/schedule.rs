//! `wf schedule list --json` and `wf schedule add FILE --json`: registered
//! `on.schedule` entries and where each stands.

use super::ShownStatus;
use crate::store::{InstanceRow, ScheduleRow};
use crate::vocab::{InstanceId, Timestamp};
use serde_json::Value;

/// A registered schedule entry (`wf schedule list --json` prints an array
/// of them).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ScheduleView<'a> {
    pub workflow: &'a str,
    /// Its position in the workflow's `on.schedule`.
    pub index: i64,
    /// The cron expression, or `every 30s`.
    pub spec: &'a str,
    /// The zone of a cron expression (None for `every`).
    #[schema(required)]
    pub timezone: Option<&'a str>,
    pub overlap: &'a str,
    /// The catch-up window (`1h`), None when missed fire times are skipped.
    #[schema(required)]
    pub catchup: Option<String>,
    /// The inputs of the instances it starts.
    pub inputs: &'a Value,
    /// The next fire time not yet taken.
    pub next_fire_at: Timestamp,
    /// `overlap: buffer_one`: a fire time waiting for the previous instance
    /// to end.
    #[schema(required)]
    pub buffered_fire_at: Option<Timestamp>,
    /// The newest instance it started, and how that one is doing (None once
    /// pruned).
    #[schema(required)]
    pub last_instance: Option<&'a InstanceId>,
    #[schema(required)]
    pub last_instance_status: Option<ShownStatus>,
    #[schema(required)]
    pub last_fire_at: Option<Timestamp>,
    /// Fire times that started nothing (missed beyond `catchup`, or refused
    /// by `overlap`).
    pub skipped: i64,
    /// The pinned definition its instances run, and the file it came from.
    pub definition_hash: &'a str,
    pub workflow_path: &'a str,
}

/// `wf schedule add FILE --json`: `{workflow, schedules}`, the entries as
/// registered.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ScheduleAdded<'a> {
    pub workflow: &'a str,
    pub schedules: Vec<ScheduleView<'a>>,
}

impl<'a> ScheduleView<'a> {
    /// Entry `row`; `last`: the row of the instance it started last, when
    /// there is one and it was not pruned.
    pub fn new(row: &'a ScheduleRow, last: Option<&InstanceRow>) -> ScheduleView<'a> {
        ScheduleView {
            workflow: &row.workflow,
            index: row.idx,
            spec: &row.spec,
            timezone: row.timezone.as_deref(),
            overlap: &row.overlap,
            catchup: u64::try_from(row.catchup_ms)
                .ok()
                .filter(|&ms| ms > 0)
                .map(crate::workflow::duration::format),
            inputs: &row.inputs,
            next_fire_at: Timestamp::from_ms(row.next_fire_ms),
            buffered_fire_at: row.buffered_ms.map(Timestamp::from_ms),
            last_instance: row.last_instance.as_ref(),
            last_instance_status: last.map(ShownStatus::of),
            last_fire_at: row.last_fire_ms.map(Timestamp::from_ms),
            skipped: row.skipped,
            definition_hash: &row.definition_hash,
            workflow_path: &row.workflow_path,
        }
    }
}
