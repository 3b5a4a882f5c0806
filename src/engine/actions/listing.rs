//! The instance list both interfaces show (`wf list`, the API's
//! instances, the inspector's list): which instances a query matches,
//! newest first, how many of each status it matches (the inspector's
//! counts, `wf list --counts`), and how many children each listed parent
//! has. Counts come from the counts the store keeps by workflow and status
//! when the query filters on nothing else (exact, a few rows read however
//! long the history), and otherwise from a walk of each status's matches
//! that stops at [`COUNT_CAP`] (said as "at least").

use crate::engine::EngineError;
use crate::store::{ErrorWords, IdPrefix, InstanceRow, Lineage, ListFilter, Store};
use crate::vocab::{InstanceId, InstanceStatus, ShownStatus, Timestamp};

/// The most matches of one status a count walks; past it, the count says
/// "at least".
pub const COUNT_CAP: u64 = 10_000;

/// The status `wf list --status` (the API's `status`, the page's filter)
/// names: any word [`ShownStatus`] shows (`interrupted`: a `running`
/// instance whose runner is gone).
pub fn list_status(word: &str) -> Result<ShownStatus, EngineError> {
    word.parse().map_err(|_| {
        let words: Vec<&str> = ShownStatus::ALL.iter().map(|s| s.as_str()).collect();
        EngineError::Input(format!(
            "unknown status `{word}` (one of: {})",
            words.join(", ")
        ))
    })
}

/// What `wf list` (and the API's instance list) asks for.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub status: Option<ShownStatus>,
    pub workflow: Option<String>,
    /// Created within this long.
    pub since: Option<std::time::Duration>,
    /// The children of this instance (any unique prefix).
    pub parent: Option<String>,
    pub roots: bool,
    pub labels: Vec<(String, String)>,
    /// Only instances of this queue key.
    pub queue: Option<String>,
    /// Only instances whose id starts so.
    pub id_prefix: Option<String>,
    /// Only instances whose error holds these words (each a word or the
    /// start of one).
    pub error: Option<String>,
    /// At most this many, the newest (0: all).
    pub limit: usize,
    /// Listed after this instance (a page's cursor).
    pub after: Option<InstanceId>,
    /// Count the instances beyond the limit (`wf list` says how many);
    /// without it, "more" is 1 when there is at least one (a page's cursor
    /// needs no more, and the count reads every match).
    pub count_more: bool,
}

impl ListQuery {
    /// The store's filter of this query (its parent's id resolved), with
    /// `status` stored, and `limit` rows at most.
    async fn filter(
        &self,
        store: &Store,
        status: Option<InstanceStatus>,
        limit: Option<usize>,
    ) -> Result<ListFilter, EngineError> {
        let since = self.since.map(|d| {
            Timestamp::from(chrono::Utc::now() - chrono::Duration::from_std(d).unwrap_or_default())
        });
        let lineage = match &self.parent {
            Some(prefix) => Lineage::ChildrenOf(store.resolve_id(prefix).await?),
            None if self.roots => Lineage::Roots,
            None => Lineage::Any,
        };
        Ok(ListFilter {
            labels: self.labels.clone(),
            queue: self.queue.clone(),
            status,
            workflow: self.workflow.clone(),
            since,
            lineage,
            id_prefix: self
                .id_prefix
                .as_deref()
                .filter(|p| !p.is_empty())
                .map(IdPrefix::new),
            error_words: self.error.as_deref().and_then(ErrorWords::new),
            after: self.after.clone(),
            limit,
        })
    }
}

/// The stored status a shown one is read from (`interrupted`: `running`).
fn stored(s: ShownStatus) -> InstanceStatus {
    match s {
        ShownStatus::Stored(s) => s,
        ShownStatus::Interrupted => InstanceStatus::Running,
    }
}

/// The instances `q` asks for, newest first, and how many more match (all
/// of one moment; with `count_more` false, 1 for any number).
pub async fn list(store: &Store, q: &ListQuery) -> Result<(Vec<InstanceRow>, usize), EngineError> {
    // `interrupted` is told from `running` after the query: limit after it.
    let limit_in_query = q.status != Some(ShownStatus::Interrupted);
    let limit = match q.limit {
        0 => usize::MAX,
        n => n,
    };
    // One more than shown tells whether there are more.
    let filter = q
        .filter(
            store,
            q.status.map(stored),
            Some(limit.saturating_add(1)).filter(|_| limit_in_query),
        )
        .await?;
    // The rows and the count of the rest, of one moment.
    let (mut rows, more) = store
        .snapshot(async |store: &Store| -> Result<_, EngineError> {
            let now_ms = Timestamp::now().ms();
            let rows: Vec<_> = store
                .list_instances(&filter)
                .await?
                .into_iter()
                // `running` and `interrupted` are told apart here.
                .filter(|i| match q.status {
                    Some(
                        s @ (ShownStatus::Interrupted
                        | ShownStatus::Stored(InstanceStatus::Running)),
                    ) => super::super::lease::shown(i, now_ms) == s,
                    _ => true,
                })
                .collect();
            let more = if rows.len() <= limit {
                0
            } else if limit_in_query && q.count_more {
                let mut all = filter.clone();
                all.limit = None;
                (store.count_instances(&all).await? as usize).saturating_sub(limit)
            } else {
                rows.len() - limit
            };
            Ok((rows, more))
        })
        .await?;
    rows.truncate(limit);
    Ok((rows, more))
}

/// How many instances of one status a query matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusCount {
    pub status: ShownStatus,
    pub count: u64,
    /// More match: the count stopped at [`COUNT_CAP`].
    pub at_least: bool,
}

/// How many instances a query matches, by status (its own status aside).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counts {
    /// Every status [`ShownStatus::ALL`] names, in its order.
    pub statuses: Vec<StatusCount>,
    /// Their sum.
    pub total: u64,
    /// Some count stopped at [`COUNT_CAP`]: the total is at least this.
    pub at_least: bool,
    /// Read from the kept counts (the query filters on its workflow and
    /// lineage alone), rather than counted.
    pub kept: bool,
}

/// How many instances of each status `q`'s filters match, whatever its
/// status, cursor and limit, all of one moment.
pub async fn counts(store: &Store, q: &ListQuery) -> Result<Counts, EngineError> {
    let filter = ListFilter {
        after: None,
        ..q.filter(store, None, None).await?
    };
    let kept = filter.since.is_none()
        && filter.labels.is_empty()
        && filter.queue.is_none()
        && filter.id_prefix.is_none()
        && filter.error_words.is_none()
        && matches!(filter.lineage, Lineage::Any | Lineage::Roots);
    if kept {
        // PostgreSQL's changes not folded yet are summed by the read: a
        // million of them (a busy hour without a worker or a scrape to
        // fold them) took 1.2 s. Folded first, as a scrape does.
        store.fold_counts().await?;
    }
    store
        .snapshot(async |store: &Store| -> Result<_, EngineError> {
            let by_status: Vec<(InstanceStatus, u64)> = if kept {
                let m = store.kept_instance_counts().await?;
                let rows = match filter.lineage {
                    Lineage::Roots => m.roots,
                    _ => m.instances,
                };
                InstanceStatus::ALL
                    .iter()
                    .map(|s| {
                        let n = rows
                            .iter()
                            .filter(|(w, st, _)| {
                                st == s.as_str() && filter.workflow.as_ref().is_none_or(|f| f == w)
                            })
                            .map(|(_, _, n)| n)
                            .sum();
                        (*s, n)
                    })
                    .collect()
            } else {
                store.count_by_status(&filter, COUNT_CAP + 1).await?
            };
            // `running` rows whose runner is gone are shown `interrupted`:
            // told apart here, by the running rows themselves (a few: one
            // per instance being run).
            let running = store
                .list_instances(&ListFilter {
                    status: Some(InstanceStatus::Running),
                    limit: Some(COUNT_CAP as usize + 1),
                    ..filter.clone()
                })
                .await?;
            let now_ms = Timestamp::now().ms();
            let interrupted = running
                .iter()
                .filter(|i| super::super::lease::interrupted(i, now_ms))
                .count() as u64;
            Ok(Counts {
                kept,
                ..Counts::of(&by_status, interrupted, filter.counts_a_sample())
            })
        })
        .await
}

impl Counts {
    /// The counts of `by_status` (each at most [`COUNT_CAP`] + 1, which
    /// means more than the cap), with `interrupted` of the `running` ones
    /// shown so. A `sample`'s counts are of its first [`COUNT_CAP`] + 1
    /// matches in all: past that, each is at least what it says.
    fn of(by_status: &[(InstanceStatus, u64)], interrupted: u64, sample: bool) -> Counts {
        let sampled = sample && by_status.iter().map(|(_, n)| n).sum::<u64>() > COUNT_CAP;
        let stored = |s: InstanceStatus| {
            by_status
                .iter()
                .find(|(t, _)| *t == s)
                .map_or(0, |(_, n)| *n)
        };
        let statuses: Vec<StatusCount> = ShownStatus::ALL
            .iter()
            .map(|&status| {
                let n = match status {
                    ShownStatus::Interrupted => interrupted,
                    ShownStatus::Stored(InstanceStatus::Running) => {
                        stored(InstanceStatus::Running).saturating_sub(interrupted)
                    }
                    ShownStatus::Stored(s) => stored(s),
                };
                StatusCount {
                    status,
                    count: n.min(COUNT_CAP),
                    at_least: n > COUNT_CAP || (sampled && n > 0),
                }
            })
            .collect();
        let total: u64 = statuses.iter().map(|s| s.count).sum();
        Counts {
            total: if sampled { total.min(COUNT_CAP) } else { total },
            at_least: sampled || statuses.iter().any(|s| s.at_least),
            statuses,
            kept: false,
        }
    }
}

/// How many children each of `rows` has (a row with none left out).
pub async fn children_counts(
    store: &Store,
    rows: &[InstanceRow],
) -> Result<std::collections::HashMap<InstanceId, u64>, EngineError> {
    let ids: Vec<InstanceId> = rows.iter().map(|r| r.id.clone()).collect();
    Ok(store.children_counts(&ids).await?.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_rows_whose_runner_is_gone_are_counted_interrupted() {
        let c = Counts::of(
            &[
                (InstanceStatus::Running, 5),
                (InstanceStatus::Failed, COUNT_CAP + 1),
                (InstanceStatus::Completed, 7),
            ],
            2,
            false,
        );
        let of = |s: ShownStatus| c.statuses.iter().find(|x| x.status == s).copied();
        assert_eq!(
            of(ShownStatus::Stored(InstanceStatus::Running)).map(|s| s.count),
            Some(3)
        );
        assert_eq!(of(ShownStatus::Interrupted).map(|s| s.count), Some(2));
        let failed = of(ShownStatus::Stored(InstanceStatus::Failed));
        assert_eq!(
            failed.map(|s| (s.count, s.at_least)),
            Some((COUNT_CAP, true))
        );
        assert_eq!(c.total, 5 + COUNT_CAP + 7);
        assert!(c.at_least);
        assert_eq!(c.statuses.len(), ShownStatus::ALL.len());
    }

    #[test]
    fn a_sample_past_the_cap_says_at_least_for_each_status_it_met() {
        let c = Counts::of(
            &[
                (InstanceStatus::Failed, 9_000),
                (InstanceStatus::Completed, 1_001),
            ],
            0,
            true,
        );
        assert!(c.at_least);
        assert_eq!(c.total, COUNT_CAP);
        assert!(
            c.statuses
                .iter()
                .filter(|s| s.count > 0)
                .all(|s| s.at_least)
        );
        let few = Counts::of(&[(InstanceStatus::Failed, 12)], 0, true);
        assert_eq!((few.total, few.at_least), (12, false));
    }
}
