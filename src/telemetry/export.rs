//! Live export: after each run's final commit, and before it releases the
//! instance's lease (so no other process exports the same spans meanwhile),
//! the engine calls [`export_instance`], which sends the instance's spans not
//! yet exported to the configured exporters and then marks them exported, so
//! spans recorded by a run that crashed go out with the next run.
//!
//! Configuration follows the standard OpenTelemetry environment variables:
//! - `OTEL_EXPORTER_OTLP_ENDPOINT` (base URL; over HTTP spans are POSTed to
//!   `/v1/traces` under it) or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used
//!   as-is) turn on OTLP export; `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL` picks
//!   `http/protobuf` (default), `http/json` or `grpc`;
//!   `OTEL_EXPORTER_OTLP_HEADERS`, `..._TIMEOUT` and `..._COMPRESSION=gzip`
//!   are honoured by the exporter.
//! - `OTEL_TRACES_EXPORTER` (comma list): `otlp` (the default, and then on
//!   even without an endpoint: the standard `http://localhost:4318`),
//!   `console` (the `opentelemetry-stdout` exporter; its dump goes to stderr,
//!   as diagnostics do, so stdout stays data), `none`.
//! - `OTEL_SDK_DISABLED=true` turns everything off.
//! - `OTEL_SERVICE_NAME` names the resource (default `wf`).
//!
//! Spans are built from the database rows with their stored ids (see
//! [`super::otlp`]), so what the collector receives is what `wf trace` shows.
//! A failed export never fails the run: it prints one warning line on stderr
//! and leaves the spans unexported, to go out with the instance's next run.

use super::otlp;
use crate::store::{self, SpanRow, Store};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::{SpanData, SpanExporter as _};

/// Where finished spans go, from the environment.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Targets {
    /// OTLP to this endpoint (as the exporter resolves it).
    pub otlp: Option<String>,
    /// How OTLP is sent (`OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`).
    pub protocol: OtlpProtocol,
    /// The console (stdout) exporter.
    pub console: bool,
}

/// The OTLP transports of the specification.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// `http/protobuf`, the default.
    #[default]
    HttpProtobuf,
    /// `http/json`
    HttpJson,
    /// `grpc`
    Grpc,
}

impl Targets {
    pub fn any(&self) -> bool {
        self.otlp.is_some() || self.console
    }
}

#[derive(Debug, thiserror::Error)]
enum ExportError {
    #[error("{0}")]
    Spans(#[from] otlp::OtlpError),
    #[error("{0}")]
    Store(#[from] store::StoreError),
    #[error("{0}")]
    Sql(#[from] rusqlite::Error),
    #[error("cannot set up the OTLP exporter: {0}")]
    Build(#[from] opentelemetry_otlp::ExporterBuildError),
    #[error("{0}")]
    Export(#[from] opentelemetry_sdk::error::OTelSdkError),
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The exporters the environment asks for, read through `get` (the process
/// environment in [`Targets::from_env`]).
pub fn targets(get: impl Fn(&str) -> Option<String>) -> Targets {
    if get("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Targets::default();
    }
    let protocol = match get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|| get("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .map(|p| p.to_ascii_lowercase())
        .as_deref()
    {
        Some("grpc") => OtlpProtocol::Grpc,
        Some("http/json") => OtlpProtocol::HttpJson,
        _ => OtlpProtocol::HttpProtobuf,
    };
    let traces_endpoint = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    let base_endpoint = get("OTEL_EXPORTER_OTLP_ENDPOINT");
    let endpoint = traces_endpoint.clone().unwrap_or_else(|| match protocol {
        // gRPC has no path: the base endpoint is the endpoint.
        OtlpProtocol::Grpc => base_endpoint
            .clone()
            .unwrap_or_else(|| "http://localhost:4317".into()),
        _ => {
            let base = base_endpoint
                .clone()
                .unwrap_or_else(|| "http://localhost:4318".into());
            format!("{}/v1/traces", base.trim_end_matches('/'))
        }
    });
    let configured = traces_endpoint.is_some() || base_endpoint.is_some();
    let mut t = Targets {
        protocol,
        ..Targets::default()
    };
    match get("OTEL_TRACES_EXPORTER") {
        None => {
            if configured {
                t.otlp = Some(endpoint);
            }
        }
        Some(list) => {
            for name in list.split(',').map(|n| n.trim().to_ascii_lowercase()) {
                match name.as_str() {
                    "otlp" => t.otlp = Some(endpoint.clone()),
                    "console" => t.console = true,
                    _ => {} // `none`, and exporters wf does not ship
                }
            }
        }
    }
    t
}

impl Targets {
    pub fn from_env() -> Targets {
        targets(env)
    }
}

/// Spans per export request (the SDK batch processor's default batch size),
/// so memory stays flat however long the run was.
const BATCH: usize = 512;

/// Whether runs export their spans live (an exporter is configured).
pub fn configured() -> bool {
    Targets::from_env().any()
}

/// Sends the instance's unexported spans to the configured exporters, in
/// batches, marking each batch exported once it is sent. Never fails:
/// problems become one warning on stderr, and what was not sent goes out
/// with the instance's next run.
pub async fn export_instance(store: &mut Store, fence: &store::Fence) {
    let targets = Targets::from_env();
    if !targets.any() {
        return;
    }
    if let Err(e) = export_batches(store, fence, &targets).await {
        warn(&targets, &e.to_string());
    }
}

async fn export_batches(
    store: &mut Store,
    fence: &store::Fence,
    targets: &Targets,
) -> Result<(), ExportError> {
    let instance_id = &fence.instance;
    let mut exporters: Option<Exporters> = None;
    let mut after: Option<SpanRow> = None;
    let result = loop {
        let batch = store
            .unexported_spans(instance_id, after.as_ref(), BATCH)
            .await?;
        let Some(last) = batch.last().cloned() else {
            break Ok(());
        };
        let exporters = match &mut exporters {
            Some(e) => e,
            None => exporters.insert(Exporters::new(targets)?),
        };
        if let Err(e) = exporters.send(otlp::span_data_all(&batch)?).await {
            break Err(e);
        }
        mark(store, fence, &batch).await?;
        if batch.len() < BATCH {
            break Ok(());
        }
        after = Some(last);
    };
    if let Some(e) = exporters {
        e.shutdown();
    }
    result
}

fn warn(targets: &Targets, reason: &str) {
    let to = targets.otlp.as_deref().unwrap_or("the console");
    let reason = reason.split_whitespace().collect::<Vec<_>>().join(" ");
    eprintln!("warning: could not export spans to {to}: {reason}");
}

/// Points this process's stdout at its stderr until dropped. The console
/// exporter (opentelemetry-stdout) prints with `println!`, and stdout is for
/// data (docs/commands.md: `wf run --json` must stay one JSON document); a span dump is
/// a diagnostic.
struct StdoutToStderr(Option<std::os::fd::OwnedFd>);

impl StdoutToStderr {
    fn new() -> StdoutToStderr {
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        let saved = nix::unistd::dup(std::io::stdout())
            .ok()
            .filter(|_| nix::unistd::dup2_stdout(std::io::stderr()).is_ok());
        StdoutToStderr(saved)
    }
}

impl Drop for StdoutToStderr {
    fn drop(&mut self) {
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        if let Some(saved) = self.0.take() {
            let _ = nix::unistd::dup2_stdout(&saved);
        }
    }
}

/// The SDK exporters the environment asks for, built once per export.
struct Exporters {
    console: Option<opentelemetry_stdout::SpanExporter>,
    otlp: Option<opentelemetry_otlp::SpanExporter>,
}

impl Exporters {
    fn new(targets: &Targets) -> Result<Exporters, ExportError> {
        let resource = otlp::resource();
        let console = targets.console.then(|| {
            let mut console = opentelemetry_stdout::SpanExporter::default();
            console.set_resource(&resource);
            console
        });
        // Headers, timeout and compression (gzip) come from the standard
        // variables, which the exporter reads itself.
        let otlp = match &targets.otlp {
            Some(endpoint) => {
                let builder = opentelemetry_otlp::SpanExporter::builder();
                let mut exporter = match targets.protocol {
                    OtlpProtocol::Grpc => builder
                        .with_tonic()
                        .with_endpoint(endpoint.clone())
                        .build()?,
                    OtlpProtocol::HttpJson => builder
                        .with_http()
                        .with_protocol(Protocol::HttpJson)
                        .with_endpoint(endpoint.clone())
                        .build()?,
                    OtlpProtocol::HttpProtobuf => builder
                        .with_http()
                        .with_protocol(Protocol::HttpBinary)
                        .with_endpoint(endpoint.clone())
                        .build()?,
                };
                exporter.set_resource(&resource);
                Some(exporter)
            }
            None => None,
        };
        Ok(Exporters { console, otlp })
    }

    async fn send(&mut self, data: Vec<SpanData>) -> Result<(), ExportError> {
        if let Some(console) = &mut self.console {
            let _to_stderr = StdoutToStderr::new();
            console.export(data.clone()).await?;
        }
        if let Some(exporter) = &mut self.otlp {
            exporter.export(data).await?;
        }
        Ok(())
    }

    fn shutdown(self) {
        if let Some(e) = self.otlp {
            let _ = e.shutdown();
        }
    }
}

/// Marks a batch sent, under the runner's lease (a runner that lost the
/// instance marks nothing: the new holder sends what is left).
async fn mark(
    store: &mut Store,
    fence: &store::Fence,
    spans: &[SpanRow],
) -> Result<(), ExportError> {
    // One transaction: one fsync, not one per span.
    store.mark_exported(fence, spans).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)]) -> Targets {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        targets(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn nothing_configured_exports_nothing() {
        assert!(!with(&[]).any());
        assert!(!with(&[("OTEL_TRACES_EXPORTER", "none")]).any());
    }

    #[test]
    fn base_endpoint_gets_the_traces_path() {
        let t = with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/")]);
        assert_eq!(t.otlp.as_deref(), Some("http://127.0.0.1:4318/v1/traces"));
        let t = with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/base")]);
        assert_eq!(
            t.otlp.as_deref(),
            Some("http://collector:4318/base/v1/traces")
        );
    }

    #[test]
    fn traces_endpoint_is_used_as_is_and_wins() {
        let t = with(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:9999/custom"),
        ]);
        assert_eq!(t.otlp.as_deref(), Some("http://b:9999/custom"));
    }

    #[test]
    fn exporter_list_and_kill_switch() {
        let t = with(&[("OTEL_TRACES_EXPORTER", "console")]);
        assert!(t.console && t.otlp.is_none());
        let t = with(&[("OTEL_TRACES_EXPORTER", "otlp, console")]);
        assert_eq!(t.otlp.as_deref(), Some("http://localhost:4318/v1/traces"));
        assert!(t.console);
        let t = with(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ]);
        assert!(!t.any());
    }
}
