//! One queue key's line (`wf queue show KEY`, the inspector's queue page,
//! `GET /api/v1/queues/{key}`): the instances holding its slots, oldest
//! first, and those waiting for one in the order admission takes them
//! (priority, then age, then creation order: `queue::admit_line`'s order),
//! over both backends. Read only; what admission decides stays in
//! `queue.rs`.

use super::{Result, Store};
use crate::vocab::{InstanceId, InstanceStatus, Timestamp};

/// An instance of a key's line.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub id: InstanceId,
    pub workflow: String,
    pub status: InstanceStatus,
    /// 0 (first) .. 9.
    pub priority: i64,
    pub created_at: Timestamp,
    /// A queued one is not admitted before this (`debounce`).
    pub not_before: Option<Timestamp>,
}

/// A key's admitted instances and its line, each cut at the limit asked,
/// with how many there are in all.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QueueLine {
    pub admitted: Vec<Member>,
    pub admitted_total: i64,
    pub waiting: Vec<Member>,
    pub waiting_total: i64,
}

/// The columns a [`Member`] is read from, in its fields' order (`wake_at`
/// gives `not_before`).
pub(super) const MEMBER_COLS: &str = "id, workflow, status, queue_priority, created_at, wake_at";

impl Member {
    /// From its columns ([`MEMBER_COLS`]).
    pub(super) fn of(
        id: InstanceId,
        workflow: String,
        status: InstanceStatus,
        priority: i64,
        created_at: Timestamp,
        wake_at: Option<Timestamp>,
    ) -> Member {
        Member {
            not_before: super::queue::not_before(status, wake_at).map(Timestamp::from_ms),
            id,
            workflow,
            status,
            priority,
            created_at,
        }
    }
}

impl Store {
    /// Key `key`'s line: at most `limit` admitted and `limit` waiting.
    pub async fn queue_line(&self, key: &str, limit: usize) -> Result<QueueLine> {
        each!(self.queue_line(key, limit))
    }
}
