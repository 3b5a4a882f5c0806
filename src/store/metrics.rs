//! What `/metrics` reports, read from counts the store keeps in the
//! commits that change them (triggers on each backend: SQLite migration
//! 17, PostgreSQL migration 14), so that a scrape reads a few rows however
//! long the history: instances by workflow and status, ended attempts and
//! runs by workflow and outcome, their duration histograms by workflow,
//! each queue key's admitted and queued instances, and workers'
//! heartbeats. Every process's history is in the database, so a scrape of
//! any server of a fleet sees the same figures, and pruning never lowers a
//! count of ended attempts or runs (it only deletes the rows counted).

use super::{Result, Store};
use std::collections::BTreeMap;

/// The upper bounds (seconds) of the duration histograms' buckets; the
/// last bucket, `+Inf`, is implied. The stores keep a count per bucket by
/// its index here (the migrations spell these bounds out): changing them
/// takes a migration.
pub const BUCKETS: &[f64] = &[
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];

/// How many queue keys get a series of their own (the busiest); the rest
/// are summed under [`OTHER_KEY`].
pub const TOP_KEYS: usize = 100;

/// The queue key the keys beyond the [`TOP_KEYS`] busiest are summed under.
pub const OTHER_KEY: &str = "other";

/// A duration histogram, cumulative as the text formats write it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    /// How many durations are at most each of [`BUCKETS`] (cumulative).
    pub le: Vec<u64>,
    pub count: u64,
    pub sum: f64,
}

/// One kept gauge: a metric, its workflow (`""` for a queue's), its label
/// (status or queue key) and the count, as the stores read it.
#[derive(Debug, Clone, PartialEq)]
pub struct CountRow {
    pub metric: String,
    pub workflow: String,
    pub label: String,
    pub n: i64,
}

/// One kept count of ends: the attempts or runs (`metric`) of a workflow
/// that ended with `outcome` and lasted a duration in bucket `bucket` (the
/// index of the first of [`BUCKETS`] at least the duration;
/// `BUCKETS.len()` for `+Inf`; -1 for an end without a duration), how
/// many and the sum of their durations. The counters by outcome and the
/// histograms by workflow are its sums: an end is one row's change.
#[derive(Debug, Clone, PartialEq)]
pub struct BucketRow {
    pub metric: String,
    pub workflow: String,
    pub outcome: String,
    pub bucket: i64,
    pub count: i64,
    pub sum: f64,
}

/// A queue key's instances: holding a slot, and waiting for one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueCounts {
    pub key: String,
    pub admitted: u64,
    pub queued: u64,
}

/// What one scrape reads.
#[derive(Debug, Clone, Default)]
pub struct MetricsRows {
    /// (workflow, status, how many instances).
    pub instances: Vec<(String, String, u64)>,
    /// The same, of the instances without a parent (the inspector's list
    /// counts them; `/metrics` does not show them).
    pub roots: Vec<(String, String, u64)>,
    /// (workflow, outcome, how many step attempts ended so).
    pub attempts: Vec<(String, String, u64)>,
    /// (workflow, outcome, how many runs ended so).
    pub runs: Vec<(String, String, u64)>,
    /// Ended step attempts' durations, by workflow.
    pub attempt_seconds: Vec<(String, Histogram)>,
    /// Ended runs' durations, by workflow.
    pub run_seconds: Vec<(String, Histogram)>,
    /// The [`TOP_KEYS`] busiest queue keys by name, and the rest summed
    /// as [`OTHER_KEY`].
    pub queues: Vec<QueueCounts>,
    /// (worker, unix ms of its last heartbeat).
    pub workers: Vec<(String, i64)>,
}

impl MetricsRows {
    /// The scrape made of what a store read: its kept counts and buckets
    /// (in any order, a metric's rows possibly split in parts to be added
    /// up, as PostgreSQL's not yet folded changes are) and its workers.
    pub fn of(counts: Vec<CountRow>, buckets: Vec<BucketRow>, workers: Vec<(String, i64)>) -> Self {
        let mut sums: BTreeMap<(String, String, String), i64> = BTreeMap::new();
        for c in counts {
            *sums.entry((c.metric, c.workflow, c.label)).or_default() += c.n;
        }
        let mut out = MetricsRows {
            workers,
            ..MetricsRows::default()
        };
        let mut keys: BTreeMap<String, QueueCounts> = BTreeMap::new();
        for ((metric, workflow, label), n) in sums {
            let n = u64::try_from(n).unwrap_or(0);
            match metric.as_str() {
                "instances" => out.instances.push((workflow, label, n)),
                "roots" => out.roots.push((workflow, label, n)),
                "queue_admitted" | "queue_depth" if n > 0 => {
                    let q = keys.entry(label.clone()).or_insert_with(|| QueueCounts {
                        key: label,
                        ..QueueCounts::default()
                    });
                    if metric == "queue_admitted" {
                        q.admitted = n;
                    } else {
                        q.queued = n;
                    }
                }
                _ => {}
            }
        }
        out.queues = busiest(keys.into_values().collect());
        let mut ends: BTreeMap<(String, String, String), u64> = BTreeMap::new();
        let mut hist: BTreeMap<(String, String), (Vec<u64>, u64, f64)> = BTreeMap::new();
        for b in buckets {
            let count = u64::try_from(b.count).unwrap_or(0);
            *ends
                .entry((b.metric.clone(), b.workflow.clone(), b.outcome))
                .or_default() += count;
            // An end without a duration is counted, not in the histogram.
            let Ok(at) = usize::try_from(b.bucket) else {
                continue;
            };
            let at = at.min(BUCKETS.len());
            let h = hist
                .entry((b.metric, b.workflow))
                .or_insert_with(|| (vec![0; BUCKETS.len()], 0, 0.0));
            // Cumulative: a duration in bucket i is at most every bound from i on.
            for le in h.0.iter_mut().skip(at) {
                *le += count;
            }
            h.1 += count;
            h.2 += b.sum;
        }
        for ((metric, workflow, outcome), n) in ends {
            match metric.as_str() {
                "attempts" => out.attempts.push((workflow, outcome, n)),
                "runs" => out.runs.push((workflow, outcome, n)),
                _ => {}
            }
        }
        for ((metric, workflow), (le, count, sum)) in hist {
            let h = Histogram { le, count, sum };
            match metric.as_str() {
                "attempts" => out.attempt_seconds.push((workflow, h)),
                "runs" => out.run_seconds.push((workflow, h)),
                _ => {}
            }
        }
        out
    }
}

/// The [`TOP_KEYS`] busiest keys (most admitted and queued, then by name)
/// by name, and the others summed under [`OTHER_KEY`] (with a key of that
/// name among the busiest, if there is one: one series per key).
fn busiest(mut keys: Vec<QueueCounts>) -> Vec<QueueCounts> {
    if keys.len() <= TOP_KEYS {
        return keys;
    }
    keys.sort_by(|a, b| {
        (b.admitted + b.queued)
            .cmp(&(a.admitted + a.queued))
            .then_with(|| a.key.cmp(&b.key))
    });
    let rest = keys.split_off(TOP_KEYS);
    let mut other = QueueCounts {
        key: OTHER_KEY.into(),
        ..QueueCounts::default()
    };
    for q in rest {
        other.admitted += q.admitted;
        other.queued += q.queued;
    }
    if let Some(same) = keys.iter_mut().find(|q| q.key == OTHER_KEY) {
        same.admitted += other.admitted;
        same.queued += other.queued;
    } else {
        keys.push(other);
    }
    keys.sort_by(|a, b| a.key.cmp(&b.key));
    keys
}

impl Store {
    /// What `/metrics` reports, now.
    pub async fn metrics(&self) -> Result<MetricsRows> {
        each!(self.metrics())
    }

    /// Moves the changes of the kept counts not folded into their totals
    /// yet into them (PostgreSQL's deltas, as a scrape does first; nothing
    /// to do on SQLite, whose triggers add to the totals), so that a read
    /// of the counts reads a few rows. Unless another fold is under way.
    pub async fn fold_counts(&self) -> Result<()> {
        match self {
            Store::Sqlite(_) => Ok(()),
            Store::Postgres(p) => p.fold_metrics().await,
            Store::Lent(shared) => {
                let lease = shared.take().await?;
                match &*lease {
                    Store::Postgres(p) => p.fold_metrics().await,
                    _ => Ok(()),
                }
            }
        }
    }

    /// The kept counts of instances by workflow and status, of all and of
    /// those without a parent (the `instances` and `roots` of
    /// [`MetricsRows`]; nothing else of it is read), without writing
    /// anything: readable in a read-only snapshot
    /// ([`Store::snapshot`](super::Store::snapshot)), as a scrape's read is
    /// not on PostgreSQL (it folds the deltas first).
    pub async fn kept_instance_counts(&self) -> Result<MetricsRows> {
        each!(self.kept_instance_counts())
    }

    /// Records that worker `name` (started at `started_ms`) is alive now
    /// (by the database server's clock on PostgreSQL), and forgets workers
    /// not heard of for a day (a killed worker never says it stopped).
    pub async fn heartbeat(&self, name: &str, started_ms: i64) -> Result<()> {
        each!(self.heartbeat(name, started_ms))
    }

    /// Forgets worker `name` (it stopped).
    pub async fn worker_gone(&self, name: &str) -> Result<()> {
        each!(self.worker_gone(name))
    }
}

/// How long a worker not heard of is remembered.
pub const FORGET_WORKER_MS: i64 = 86_400_000;

#[cfg(test)]
mod tests {
    use super::*;

    fn count(metric: &str, workflow: &str, label: &str, n: i64) -> CountRow {
        CountRow {
            metric: metric.into(),
            workflow: workflow.into(),
            label: label.into(),
            n,
        }
    }

    #[test]
    fn parts_add_up_and_histograms_are_cumulative() {
        let end = |outcome: &str, bucket, count, sum| BucketRow {
            metric: "attempts".into(),
            workflow: "w".into(),
            outcome: outcome.into(),
            bucket,
            count,
            sum,
        };
        let m = MetricsRows::of(
            vec![
                count("instances", "w", "running", 1),
                count("instances", "w", "running", -1),
            ],
            vec![
                end("ok", 2, 2, 0.15),
                end("failed", 14, 1, 5000.0),
                // A part not folded yet (PostgreSQL), and an end without a duration.
                end("ok", 2, 1, 0.0),
                end("ok", -1, 1, 0.0),
            ],
            Vec::new(),
        );
        assert_eq!(
            m.attempts,
            vec![
                ("w".into(), "failed".into(), 1),
                ("w".into(), "ok".into(), 4)
            ]
        );
        assert_eq!(m.instances, vec![("w".into(), "running".into(), 0)]);
        let (w, h) = &m.attempt_seconds[0];
        assert_eq!(w, "w");
        assert_eq!(h.count, 4);
        assert_eq!(h.le[..3], [0, 0, 3]);
        assert_eq!(*h.le.last().expect("buckets"), 3);
        assert!((h.sum - 5000.15).abs() < 1e-9);
    }

    #[test]
    fn beyond_the_busiest_keys_everything_is_other() {
        let mut counts = Vec::new();
        for i in 0..(TOP_KEYS + 5) {
            counts.push(count("queue_depth", "", &format!("k{i:03}"), i as i64 + 1));
        }
        // A key named like the sum, busy enough to be among the busiest.
        counts.push(count("queue_admitted", "", OTHER_KEY, 1000));
        counts.push(count("queue_depth", "", "empty", 0));
        let m = MetricsRows::of(counts, Vec::new(), Vec::new());
        // `other` is among the busiest: it takes the sum, no second series.
        assert_eq!(m.queues.len(), TOP_KEYS);
        let other: Vec<_> = m.queues.iter().filter(|q| q.key == OTHER_KEY).collect();
        assert_eq!(other.len(), 1);
        // 106 busy keys: the 6 least busy (1..=6 queued) summed into
        // `other`, with its own 1000 admitted.
        assert_eq!((other[0].admitted, other[0].queued), (1000, 21));
        assert!(!m.queues.iter().any(|q| q.key == "empty" || q.key == "k000"));
        let total: u64 = m.queues.iter().map(|q| q.queued).sum();
        assert_eq!(total, (1..=(TOP_KEYS as u64 + 5)).sum::<u64>());
    }
}
