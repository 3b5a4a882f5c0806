//! `GET /metrics`: Prometheus's classic text format, or OpenMetrics to a
//! scraper that asks (prometheus-client's encoder writes OpenMetrics;
//! [`classic`] renames its counters' families and drops `# EOF`), label
//! values escaped, made at each scrape from the counts the store keeps in
//! its commits (`store::metrics`: a few rows, however long the history):
//!
//! - `wf_instances{workflow, status}`: instances by workflow and status;
//! - `wf_attempts_total{workflow, outcome}`, `wf_runs_total{workflow,
//!   outcome}`: ended step attempts and runs (never lowered by a prune);
//! - `wf_attempt_duration_seconds{workflow}`,
//!   `wf_run_duration_seconds{workflow}`: histograms;
//! - `wf_queue_admitted{key}`, `wf_queue_depth{key}`: the 100 busiest
//!   queue keys' admitted and queued instances, the rest as `key="other"`;
//! - `wf_worker_last_heartbeat_seconds{host}`: unix time of the newest
//!   poll of a worker on each host (alert on `time() - … > 60`), and
//!   `wf_workers_up{host}` (how many polled within the last minute);
//! - `wf_serve_in_process_worker`: 1 when this server runs a worker.

use super::App;
use super::error::ApiError;
use crate::engine::lease::owner_host;
use crate::store::metrics::{BUCKETS, Histogram, MetricsRows};
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// A heartbeat older than this says the worker is gone.
const ALIVE_MS: i64 = 60_000;

/// What one scrape read, encoded when the registry asks.
#[derive(Debug)]
struct Scrape {
    rows: MetricsRows,
    now_ms: i64,
    in_process_worker: bool,
}

type Labels = Vec<(&'static str, String)>;

fn gauge_family(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    values: impl IntoIterator<Item = (Labels, f64)>,
) -> Result<(), std::fmt::Error> {
    let mut m = encoder.encode_descriptor(name, help, None, kind)?;
    for (labels, v) in values {
        let labels: Labels = labels
            .into_iter()
            .map(|(k, v)| (k, escape_label(&v)))
            .collect();
        let e = m.encode_family(&labels)?;
        let mut e = e;
        match kind {
            MetricType::Counter => {
                e.encode_counter::<prometheus_client::encoding::NoLabelSet, _, f64>(
                    &(v as u64),
                    None,
                )?;
            }
            _ => e.encode_gauge(&v)?,
        }
    }
    Ok(())
}

/// A label value as both text formats write it between quotes (the
/// encoder writes it as given): `\`, `"` and a line feed escaped, so that
/// a value from an input (a queue key) can neither end the value nor the
/// sample.
fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// The media type of OpenMetrics text, which the encoder writes.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The media type of Prometheus's classic text format.
const CLASSIC: &str = "text/plain; version=0.0.4; charset=utf-8";

/// OpenMetrics text (the encoder's) as Prometheus's classic text format:
/// a counter's family is named by its samples' name (`wf_attempts_total`
/// in `# HELP` and `# TYPE`, where OpenMetrics names it `wf_attempts`),
/// and there is no `# EOF`. Everything else is written alike.
fn classic(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|p| {
            let rest = line.strip_prefix(p)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{p}{name}_total {tail}"))
        });
        match renamed {
            Some(l) => out.push_str(&l),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

fn histograms(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    by_workflow: &[(String, Histogram)],
) -> Result<(), std::fmt::Error> {
    let mut m = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (workflow, h) in by_workflow {
        // The encoder adds the buckets up; the store counted them cumulative.
        let mut buckets = Vec::with_capacity(BUCKETS.len() + 1);
        let mut below = 0;
        for (b, &le) in BUCKETS.iter().zip(&h.le) {
            buckets.push((*b, le.saturating_sub(below)));
            below = le;
        }
        buckets.push((f64::MAX, h.count.saturating_sub(below)));
        let labels: Labels = vec![("workflow", escape_label(workflow))];
        m.encode_family(&labels)?
            .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                h.sum, h.count, &buckets, None,
            )?;
    }
    Ok(())
}

/// Per host: the newest heartbeat of its workers, and how many of them
/// polled within [`ALIVE_MS`].
fn hosts(workers: &[(String, i64)], now_ms: i64) -> Vec<(String, i64, u64)> {
    let mut by_host: std::collections::BTreeMap<&str, (i64, u64)> = Default::default();
    for (name, ms) in workers {
        let h = by_host.entry(owner_host(name)).or_insert((i64::MIN, 0));
        h.0 = h.0.max(*ms);
        if now_ms - ms <= ALIVE_MS {
            h.1 += 1;
        }
    }
    by_host
        .into_iter()
        .map(|(h, (ms, up))| (h.to_string(), ms, up))
        .collect()
}

fn by_workflow_and<'a>(
    label: &'static str,
    rows: &'a [(String, String, u64)],
) -> impl Iterator<Item = (Labels, f64)> + 'a {
    rows.iter()
        .map(move |(w, l, n)| (vec![("workflow", w.clone()), (label, l.clone())], *n as f64))
}

impl prometheus_client::collector::Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let rows = &self.rows;
        gauge_family(
            &mut encoder,
            "wf_instances",
            "Instances by workflow and status",
            MetricType::Gauge,
            by_workflow_and("status", &rows.instances),
        )?;
        gauge_family(
            &mut encoder,
            "wf_attempts",
            "Ended step attempts by workflow and outcome",
            MetricType::Counter,
            by_workflow_and("outcome", &rows.attempts),
        )?;
        gauge_family(
            &mut encoder,
            "wf_runs",
            "Ended runs by workflow and outcome",
            MetricType::Counter,
            by_workflow_and("outcome", &rows.runs),
        )?;
        histograms(
            &mut encoder,
            "wf_attempt_duration_seconds",
            "Durations of ended step attempts, by workflow",
            &rows.attempt_seconds,
        )?;
        histograms(
            &mut encoder,
            "wf_run_duration_seconds",
            "Durations of ended runs, by workflow",
            &rows.run_seconds,
        )?;
        gauge_family(
            &mut encoder,
            "wf_queue_admitted",
            "Admitted instances by queue key (the 100 busiest keys, the rest as key=other)",
            MetricType::Gauge,
            rows.queues
                .iter()
                .map(|q| (vec![("key", q.key.clone())], q.admitted as f64)),
        )?;
        gauge_family(
            &mut encoder,
            "wf_queue_depth",
            "Queued instances by queue key (the 100 busiest keys, the rest as key=other)",
            MetricType::Gauge,
            rows.queues
                .iter()
                .map(|q| (vec![("key", q.key.clone())], q.queued as f64)),
        )?;
        let hosts = hosts(&rows.workers, self.now_ms);
        gauge_family(
            &mut encoder,
            "wf_worker_last_heartbeat_seconds",
            "Unix time of the newest poll of a worker on each host",
            MetricType::Gauge,
            hosts
                .iter()
                .map(|(h, ms, _)| (vec![("host", h.clone())], *ms as f64 / 1000.0)),
        )?;
        gauge_family(
            &mut encoder,
            "wf_workers_up",
            "Workers on each host that polled within the last minute",
            MetricType::Gauge,
            hosts
                .iter()
                .map(|(h, _, up)| (vec![("host", h.clone())], *up as f64)),
        )?;
        gauge_family(
            &mut encoder,
            "wf_serve_in_process_worker",
            "1 when this server runs a worker (--worker)",
            MetricType::Gauge,
            [(Vec::new(), if self.in_process_worker { 1.0 } else { 0.0 })],
        )?;
        Ok(())
    }
}

/// `GET /metrics`: Prometheus's classic text format, or OpenMetrics for a
/// scraper that asks for it (`Accept: application/openmetrics-text`), each
/// under its own media type.
pub async fn scrape(
    State(app): State<App>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let in_process_worker = app.worker;
    let scrape = app
        .db
        .run(move |l| async move {
            let rows = l.conn().await?.metrics().await?;
            Ok(Scrape {
                rows,
                now_ms: chrono::Utc::now().timestamp_millis(),
                in_process_worker,
            })
        })
        .await?;
    let mut registry = Registry::default();
    registry.register_collector(Box::new(scrape));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)
        .map_err(|e| ApiError::internal(format!("cannot encode the metrics: {e}")))?;
    let (media, body) = if openmetrics {
        (OPENMETRICS, text)
    } else {
        (CLASSIC, classic(&text))
    };
    Ok((
        [(header::CONTENT_TYPE, HeaderValue::from_static(media))],
        body,
    )
        .into_response())
}
