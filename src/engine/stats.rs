//! How a workflow has been doing (`wf workflow list`, the API's workflows,
//! the inspector's workflows page): its last instance, and over the last 7
//! days the share of its ended instances that completed, the p50 and p95
//! of their durations (from start to end), and the same per day. Read from
//! the newest instances alone (at most [`CAP`]), so the figures cost the
//! same however long the history; [`summarize`] is pure and unit-tested.

use super::EngineError;
use crate::store::{Recent, Store};
use crate::vocab::{InstanceStatus, Timestamp};

/// The window the figures cover.
pub const DAYS: usize = 7;

/// The most instances the figures are read from (the newest).
pub const CAP: usize = 10_000;

const DAY_MS: i64 = 86_400_000;

/// A workflow's figures.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Stats {
    /// Its newest instance, whenever it started.
    pub last: Option<Recent>,
    /// Instances started in the window (at most [`CAP`]), and of those,
    /// the ones that completed, failed, were canceled.
    pub started: usize,
    pub completed: usize,
    pub failed: usize,
    pub canceled: usize,
    /// Durations of the completed and failed ones, start to end.
    pub p50_ms: Option<i64>,
    pub p95_ms: Option<i64>,
    /// Per 24 hours, oldest first (the last: the 24 hours before now).
    pub days: Vec<Day>,
    /// More started in the window than [`CAP`]: the figures are the newest
    /// [`CAP`]'s.
    pub capped: bool,
}

/// One day of a workflow's figures.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Day {
    pub completed: usize,
    pub failed: usize,
    pub p50_ms: Option<i64>,
}

impl Stats {
    /// Completed / (completed + failed), when any ended so.
    pub fn success_rate(&self) -> Option<f64> {
        let ended = self.completed + self.failed;
        (ended > 0).then(|| self.completed as f64 / ended as f64)
    }
}

/// The `q` quantile (0..=1) of `sorted`, nearest rank.
fn quantile(sorted: &[i64], q: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// The figures of `recent` (newest first, started since `now` less
/// [`DAYS`]), `last` its newest instance ever, `capped` whether more
/// started in the window than were read.
pub fn summarize(recent: &[Recent], last: Option<Recent>, now: Timestamp, capped: bool) -> Stats {
    let mut s = Stats {
        last,
        started: recent.len(),
        days: vec![Day::default(); DAYS],
        capped,
        ..Stats::default()
    };
    let mut all = Vec::new();
    let mut by_day: Vec<Vec<i64>> = vec![Vec::new(); DAYS];
    for r in recent {
        let age_days = ((now.ms() - r.created_at.ms()).max(0) / DAY_MS) as usize;
        let day = DAYS - 1 - age_days.min(DAYS - 1);
        let took = (r.updated_at.ms() - r.created_at.ms()).max(0);
        match r.status {
            InstanceStatus::Completed => {
                s.completed += 1;
                s.days[day].completed += 1;
            }
            InstanceStatus::Failed => {
                s.failed += 1;
                s.days[day].failed += 1;
            }
            InstanceStatus::Canceled => {
                s.canceled += 1;
                continue;
            }
            _ => continue,
        }
        all.push(took);
        by_day[day].push(took);
    }
    all.sort_unstable();
    s.p50_ms = quantile(&all, 0.5);
    s.p95_ms = quantile(&all, 0.95);
    for (d, mut took) in s.days.iter_mut().zip(by_day) {
        took.sort_unstable();
        d.p50_ms = quantile(&took, 0.5);
    }
    s
}

/// Workflow `name`'s figures, read now.
pub async fn stats(store: &Store, name: &str) -> Result<Stats, EngineError> {
    let now = Timestamp::now();
    let since = Timestamp::from_ms(now.ms() - DAY_MS * DAYS as i64);
    let mut recent = store.recent(name, Some(since), CAP + 1).await?;
    let capped = recent.len() > CAP;
    recent.truncate(CAP);
    let last = match recent.first() {
        Some(r) => Some(r.clone()),
        None => store.recent(name, None, 1).await?.into_iter().next(),
    };
    Ok(summarize(&recent, last, now, capped))
}

/// The figures of each of `names`, in order.
pub async fn each(
    store: &Store,
    names: impl Iterator<Item = &str>,
) -> Result<Vec<Stats>, EngineError> {
    let mut out = Vec::new();
    for n in names {
        out.push(stats(store, n).await?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(id: &str, status: InstanceStatus, started_ago_ms: i64, took_ms: i64) -> Recent {
        let now = Timestamp::from_ms(10 * DAY_MS);
        Recent {
            id: id.into(),
            status,
            created_at: Timestamp::from_ms(now.ms() - started_ago_ms),
            updated_at: Timestamp::from_ms(now.ms() - started_ago_ms + took_ms),
        }
    }

    #[test]
    fn rates_percentiles_and_days_count_ended_instances_only() {
        let now = Timestamp::from_ms(10 * DAY_MS);
        let mut recent: Vec<Recent> = (1..=20)
            .map(|i| r(&format!("c{i}"), InstanceStatus::Completed, 1_000, i * 100))
            .collect();
        recent.push(r("f1", InstanceStatus::Failed, 3 * DAY_MS + 5, 5_000));
        recent.push(r("x1", InstanceStatus::Canceled, 1_000, 99_999));
        recent.push(r("w1", InstanceStatus::Waiting, 1_000, 99_999));
        let s = summarize(&recent, recent.first().cloned(), now, false);
        assert_eq!(
            (s.started, s.completed, s.failed, s.canceled),
            (23, 20, 1, 1)
        );
        assert_eq!(s.success_rate(), Some(20.0 / 21.0));
        // 21 durations: 100..=2000 and 5000; nearest rank.
        assert_eq!((s.p50_ms, s.p95_ms), (Some(1_100), Some(2_000)));
        assert_eq!(s.days.len(), DAYS);
        assert_eq!((s.days[6].completed, s.days[6].failed), (20, 0));
        assert_eq!((s.days[3].completed, s.days[3].failed), (0, 1));
        assert_eq!(s.days[3].p50_ms, Some(5_000));
        assert_eq!(s.days[0], Day::default());
    }

    #[test]
    fn nothing_ended_has_no_rate_nor_durations() {
        let s = summarize(&[], None, Timestamp::from_ms(DAY_MS), false);
        assert_eq!((s.success_rate(), s.p50_ms, s.p95_ms), (None, None, None));
    }
}
