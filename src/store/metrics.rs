//! What `/metrics` reports, read from the store at each scrape: instances
//! by workflow and status, attempts by outcome, step attempt and run
//! duration histograms, and workers' heartbeats. Every process's history
//! is in the database, so a scrape of any server sees the whole fleet's.
//! The histograms are over the whole kept history (`wf prune` bounds it),
//! counted by the database in one pass ([`BUCKETS`]).

use super::{Result, Store};

/// The upper bounds (seconds) of the duration histograms' buckets; the
/// last bucket, `+Inf`, is implied.
pub const BUCKETS: &[f64] = &[
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];

/// A duration histogram as the database counted it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    /// How many durations are at most each of [`BUCKETS`] (cumulative).
    pub le: Vec<u64>,
    pub count: u64,
    pub sum: f64,
}

/// What one scrape reads.
#[derive(Debug, Clone, Default)]
pub struct MetricsRows {
    /// (workflow, status, how many instances).
    pub instances: Vec<(String, String, u64)>,
    /// (outcome, how many attempts).
    pub attempts: Vec<(String, u64)>,
    /// Ended step attempts' durations.
    pub attempt_seconds: Histogram,
    /// Ended runs' durations.
    pub run_seconds: Histogram,
    /// (worker, unix ms of its last heartbeat).
    pub workers: Vec<(String, i64)>,
}

/// `SELECT count(d), sum(d), sum(d <= b) for each b FROM (durations)`, the
/// durations in seconds from `expr`.
pub(super) fn histogram_sql(d: &str, from: &str, as_int: &str) -> String {
    let mut sql = format!("SELECT count({d}), COALESCE(sum({d}), 0)");
    for b in BUCKETS {
        sql.push_str(&format!(", COALESCE(sum(({d} <= {b:?}){as_int}), 0)"));
    }
    sql.push_str(&format!(" FROM {from}"));
    sql
}

impl Store {
    /// What `/metrics` reports, now.
    pub async fn metrics(&self) -> Result<MetricsRows> {
        each!(self.metrics())
    }

    /// Records that worker `name` (started at `started_ms`) is alive now
    /// (by the database server's clock on PostgreSQL).
    pub async fn heartbeat(&self, name: &str, started_ms: i64) -> Result<()> {
        each!(self.heartbeat(name, started_ms))
    }

    /// Forgets worker `name` (it stopped).
    pub async fn worker_gone(&self, name: &str) -> Result<()> {
        each!(self.worker_gone(name))
    }
}
