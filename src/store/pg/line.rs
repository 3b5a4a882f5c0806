//! One queue key's line on PostgreSQL (`store::queue_line`): its admitted
//! instances and its waiting ones in admission order, read without the
//! key's lock (a look, not a decision).

use super::PgStore;
use super::history::get;
use crate::store::Result;
use crate::store::queue_line::{Member, QueueLine};

/// A key's admitted instances, oldest first (`queue_line::MEMBER_COLS`).
const ADMITTED: &str = "SELECT id, workflow, status, queue_priority, created_at, wake_at \
     FROM instances WHERE queue_key = $1 AND admitted ORDER BY created_at, seq LIMIT $2";

/// A key's line, in admission order (`queue_line::MEMBER_COLS`).
const WAITING: &str = "SELECT id, workflow, status, queue_priority, created_at, wake_at \
     FROM instances WHERE queue_key = $1 AND NOT admitted AND status = 'queued' \
     ORDER BY queue_priority, created_at, seq LIMIT $2";

impl PgStore {
    /// Key `key`'s line: at most `limit` of each.
    pub async fn queue_line(&self, key: &str, limit: usize) -> Result<QueueLine> {
        let limit = limit as i64;
        let admitted = self.query(ADMITTED, &[&key, &limit]).await?;
        let waiting = self.query(WAITING, &[&key, &limit]).await?;
        let totals = self
            .query(
                "SELECT count(*) FILTER (WHERE admitted), \
                 count(*) FILTER (WHERE NOT admitted AND status = 'queued') \
                 FROM instances WHERE queue_key = $1",
                &[&key],
            )
            .await?;
        let members = |rows: Vec<tokio_postgres::Row>| -> Result<Vec<Member>> {
            rows.iter()
                .map(|r| {
                    Ok(Member::of(
                        get(r, 0)?,
                        get(r, 1)?,
                        get(r, 2)?,
                        get(r, 3)?,
                        get(r, 4)?,
                        get(r, 5)?,
                    ))
                })
                .collect()
        };
        let (admitted_total, waiting_total) = match totals.first() {
            Some(r) => (get(r, 0)?, get(r, 1)?),
            None => (0, 0),
        };
        Ok(QueueLine {
            admitted: members(admitted)?,
            admitted_total,
            waiting: members(waiting)?,
            waiting_total,
        })
    }
}
