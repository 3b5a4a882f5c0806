//! `wf workflow list --json` and `wf workflow add FILE --json` (and the
//! API's `/api/v1/workflows`): registered workflows and their triggers.

use crate::store::{ScheduleRow, WorkflowRow};
use crate::vocab::Timestamp;
use crate::workflow::Workflow;

/// A registered workflow.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct WorkflowView<'a> {
    pub name: &'a str,
    #[schema(required)]
    pub description: Option<&'a str>,
    /// The file it was registered from, and the pinned definition.
    pub workflow_path: &'a str,
    pub definition_hash: &'a str,
    pub registered_at: Timestamp,
    /// Its inputs: name, whether required, default.
    pub inputs: Vec<InputView<'a>>,
    /// Its `on.schedule` entries (`wf schedule list` has their cursors).
    pub schedules: Vec<TriggerSchedule<'a>>,
    /// Its `on.webhook`: `POST /hooks/NAME`.
    #[schema(required)]
    pub webhook: Option<WebhookView<'a>>,
    /// How it has been doing (`engine::stats`): its last instance, and
    /// over the last 7 days its success rate and durations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<StatsView<'a>>,
}

/// A workflow's figures over the last 7 days (`engine::stats::Stats`).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct StatsView<'a> {
    /// Its newest instance, whenever it started.
    #[schema(required)]
    pub last_instance: Option<LastView<'a>>,
    /// Started in the last 7 days (at most 10,000: `capped`), and how many
    /// of those completed, failed, were canceled.
    pub started: usize,
    pub completed: usize,
    pub failed: usize,
    pub canceled: usize,
    /// Completed / (completed + failed); null when none ended so.
    #[schema(required)]
    pub success_rate: Option<f64>,
    /// Start-to-end durations of the completed and failed ones.
    #[schema(required)]
    pub p50_ms: Option<i64>,
    #[schema(required)]
    pub p95_ms: Option<i64>,
    /// Per 24 hours, oldest first.
    pub days: Vec<DayView>,
    pub capped: bool,
}

#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct LastView<'a> {
    pub id: &'a crate::vocab::InstanceId,
    pub status: crate::vocab::InstanceStatus,
    pub created_at: Timestamp,
}

#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct DayView {
    pub completed: usize,
    pub failed: usize,
    #[schema(required)]
    pub p50_ms: Option<i64>,
}

impl<'a> StatsView<'a> {
    pub fn new(s: &'a crate::engine::stats::Stats) -> StatsView<'a> {
        StatsView {
            last_instance: s.last.as_ref().map(|l| LastView {
                id: &l.id,
                status: l.status,
                created_at: l.created_at,
            }),
            started: s.started,
            completed: s.completed,
            failed: s.failed,
            canceled: s.canceled,
            success_rate: s.success_rate(),
            p50_ms: s.p50_ms,
            p95_ms: s.p95_ms,
            days: s
                .days
                .iter()
                .map(|d| DayView {
                    completed: d.completed,
                    failed: d.failed,
                    p50_ms: d.p50_ms,
                })
                .collect(),
            capped: s.capped,
        }
    }
}

#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct InputView<'a> {
    pub name: &'a str,
    pub required: bool,
    #[schema(required)]
    pub default: Option<&'a serde_json::Value>,
    #[schema(required)]
    pub description: Option<&'a str>,
}

#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct TriggerSchedule<'a> {
    pub spec: &'a str,
    #[schema(required)]
    pub timezone: Option<&'a str>,
    pub next_fire_at: Timestamp,
}

#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct WebhookView<'a> {
    pub name: &'a str,
    pub path: String,
    /// The server's environment variable holding its key (never the key).
    pub secret: &'a str,
}

impl<'a> WorkflowView<'a> {
    /// The registry's listing (`engine::registry::listing`), a view a
    /// row, each with its figures.
    pub fn all(l: &'a crate::engine::registry::Listing) -> Vec<WorkflowView<'a>> {
        l.rows
            .iter()
            .zip(&l.defs)
            .zip(&l.stats)
            .map(|((r, d), st)| WorkflowView {
                stats: Some(StatsView::new(st)),
                ..WorkflowView::new(r, d.as_ref(), &l.schedules)
            })
            .collect()
    }

    /// `row`, with its definition (`None`: unreadable) and its entries
    /// among `schedules`.
    pub fn new(
        row: &'a WorkflowRow,
        wf: Option<&'a Workflow>,
        schedules: &'a [ScheduleRow],
    ) -> WorkflowView<'a> {
        WorkflowView {
            name: &row.name,
            description: wf.and_then(|w| w.description.as_deref()),
            workflow_path: &row.workflow_path,
            definition_hash: &row.definition_hash,
            registered_at: row.registered_at,
            stats: None,
            inputs: wf
                .map(|w| {
                    w.inputs
                        .iter()
                        .map(|(name, spec)| InputView {
                            name,
                            required: spec.required && spec.default.is_none(),
                            default: spec.default.as_ref(),
                            description: spec.description.as_deref(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            schedules: schedules
                .iter()
                .filter(|s| s.workflow == row.name)
                .map(|s| TriggerSchedule {
                    spec: &s.spec,
                    timezone: s.timezone.as_deref(),
                    next_fire_at: Timestamp::from_ms(s.next_fire_ms),
                })
                .collect(),
            webhook: wf.and_then(|w| w.webhook.as_ref()).map(|h| WebhookView {
                name: &h.name,
                path: format!("/hooks/{}", h.name),
                secret: &h.secret,
            }),
        }
    }
}
