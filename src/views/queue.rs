//! `wf queue list --json` (a key of a `queue:`, where it stands) and the
//! `queue` of `wf inspect --json` (where an instance stands in its queue).

use crate::store::queue::{Admission, QueuePlace, QueueSummary};
use crate::vocab::Timestamp;

/// A queue key (`wf queue list --json` prints an array of them, by key).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct QueueView<'a> {
    pub key: &'a str,
    /// Instances holding a slot.
    pub admitted: i64,
    /// Instances waiting for one.
    pub queued: i64,
    /// `concurrency` (of the key's newest instance); None: no limit.
    #[schema(required)]
    pub limit: Option<u32>,
    /// `rate` as written (`10/1m`); None: no rate.
    #[schema(required)]
    pub rate: Option<String>,
    /// Admissions the rate allows now.
    #[schema(required)]
    pub rate_left: Option<i64>,
    /// When the oldest queued instance was made, and its age in ms.
    #[schema(required)]
    pub oldest_queued_at: Option<Timestamp>,
    #[schema(required)]
    pub oldest_queued_age_ms: Option<i64>,
}

impl<'a> QueueView<'a> {
    pub fn new(q: &'a QueueSummary, now: Timestamp) -> QueueView<'a> {
        QueueView {
            key: &q.key,
            admitted: q.admitted,
            queued: q.queued,
            limit: q.limits.concurrency,
            rate: q.limits.rate.map(|r| r.text()),
            rate_left: q
                .limits
                .rate
                .map(|r| (i64::from(r.count) - q.rate_used).max(0)),
            oldest_queued_at: q.oldest_queued,
            oldest_queued_age_ms: q.oldest_queued.map(|t| (now.ms() - t.ms()).max(0)),
        }
    }
}

/// An instance's place in its queue (`wf inspect --json`'s `queue`).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct QueueStanding<'a> {
    pub key: &'a str,
    pub priority: i64,
    /// It holds a slot.
    pub admitted: bool,
    /// Queued: its place among the due queued instances (1 first), and why
    /// it waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
}

impl<'a> QueueStanding<'a> {
    /// `place`, with `standing` when it is queued (`Store::queue_standing`).
    pub fn new(place: &'a QueuePlace, standing: Option<&Admission>) -> QueueStanding<'a> {
        let (position, waiting_for) = match standing {
            Some(Admission::Waiting {
                position, blocked, ..
            }) => (Some(*position), Some(blocked.describe())),
            _ => (None, None),
        };
        QueueStanding {
            key: &place.key,
            priority: place.priority,
            admitted: place.admitted,
            position,
            waiting_for,
        }
    }
}

/// One key and its line (`wf queue show KEY --json`, `GET
/// /api/v1/queues/{key}`): where it stands, then the instances holding its
/// slots (oldest first) and those waiting (in the order they are admitted),
/// each list cut at the limit asked, with its total.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct QueueLineView<'a> {
    pub key: &'a str,
    /// `concurrency` (of the key's newest instance); None: no limit.
    #[schema(required)]
    pub limit: Option<u32>,
    /// `rate` as written; None: no rate.
    #[schema(required)]
    pub rate: Option<String>,
    #[schema(required)]
    pub rate_left: Option<i64>,
    pub admitted: Vec<MemberView<'a>>,
    pub admitted_total: i64,
    pub waiting: Vec<MemberView<'a>>,
    pub waiting_total: i64,
}

/// An instance of a key's line.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct MemberView<'a> {
    /// Its place in the line (1 is admitted next); none for an admitted one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<usize>,
    pub id: &'a crate::vocab::InstanceId,
    pub workflow: &'a str,
    pub status: crate::vocab::InstanceStatus,
    pub priority: i64,
    pub created_at: Timestamp,
    pub age_ms: i64,
    /// Not admitted before this (`debounce`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_before: Option<Timestamp>,
}

impl<'a> QueueLineView<'a> {
    pub fn new(
        key: &'a str,
        shown: &'a crate::engine::actions::QueueShown,
        now: Timestamp,
    ) -> Self {
        let summary = shown.summary.as_ref().map(|q| QueueView::new(q, now));
        let member =
            |position: Option<usize>, m: &'a crate::store::queue_line::Member| MemberView {
                position,
                id: &m.id,
                workflow: &m.workflow,
                status: m.status,
                priority: m.priority,
                created_at: m.created_at,
                age_ms: (now.ms() - m.created_at.ms()).max(0),
                not_before: m.not_before,
            };
        QueueLineView {
            key,
            limit: summary.as_ref().and_then(|s| s.limit),
            rate: summary.as_ref().and_then(|s| s.rate.clone()),
            rate_left: summary.as_ref().and_then(|s| s.rate_left),
            admitted: shown
                .line
                .admitted
                .iter()
                .map(|m| member(None, m))
                .collect(),
            admitted_total: shown.line.admitted_total,
            waiting: shown
                .line
                .waiting
                .iter()
                .enumerate()
                .map(|(i, m)| member(Some(i + 1), m))
                .collect(),
            waiting_total: shown.line.waiting_total,
        }
    }
}
