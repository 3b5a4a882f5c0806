//! End to end with a real OpenTelemetry collector (docs/traces.md): `rotel`, from
//! the PyPI package of that name (`scripts/test` installs it), receives a run's
//! spans live over OTLP/HTTP (protobuf) and accepts `wf trace --format otlp`
//! POSTed as OTLP/JSON; its debug log must show every span `wf trace` shows,
//! by id.

use crate::Test;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The version `scripts/test` installs.
const ROTEL: &str = "rotel==0.0.1a15";

/// The `rotel-agent` binary shipped in the `rotel` Python package.
fn rotel_agent() -> PathBuf {
    let out = Command::new("python3")
        .args([
            "-c",
            "import os, rotel; print(os.path.join(os.path.dirname(rotel.__file__), 'rotel-agent'))",
        ])
        .output()
        .expect("python3");
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(
        out.status.success() && path.is_file(),
        "the rotel collector ({ROTEL}) is missing: run the tests with `scripts/test`, which installs it\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A running collector that logs every span it receives; killed on drop.
struct Collector {
    child: Child,
    log: PathBuf,
    port: u16,
    grpc: u16,
}

impl Collector {
    fn start(t: &Test) -> Collector {
        let (port, grpc) = (free_port(), free_port());
        let log = t.path().join("rotel.log");
        let child = Command::new(rotel_agent())
            .args(["start", "--exporter", "blackhole"])
            .args(["--otlp-http-endpoint", &format!("127.0.0.1:{port}")])
            .args(["--otlp-grpc-endpoint", &format!("127.0.0.1:{grpc}")])
            .args(["--debug-log", "traces", "--debug-log-verbosity", "detailed"])
            .arg("--pid-file")
            .arg(t.path().join("rotel.pid"))
            .stdout(std::fs::File::create(&log).expect("log file"))
            .stderr(Stdio::null())
            .spawn()
            .expect("start rotel-agent");
        let c = Collector {
            child,
            log,
            port,
            grpc,
        };
        c.wait_for("it to listen", |_| {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
                && TcpStream::connect(("127.0.0.1", grpc)).is_ok()
        });
        c
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn grpc_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Polls until `cond(log)` holds (the collector prints in batches).
    #[track_caller]
    fn wait_for(&self, what: &str, cond: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !cond(&self.log()) {
            assert!(
                Instant::now() < deadline,
                "waited 30 s for {what}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// POSTs `body` to `/v1/traces` as OTLP/JSON; returns the status code.
    fn post_json(&self, body: &str) -> u16 {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        write!(
            s,
            "POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .expect("send");
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no HTTP status in {answer:?}"))
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The span ids `wf trace ID --format json` shows, every run.
fn stored_span_ids(t: &Test, id: &str) -> Vec<String> {
    let runs = t.wf(&["trace", id, "--format", "json"]).code(0).json();
    runs.as_array()
        .expect("runs")
        .iter()
        .flat_map(|r| r["spans"].as_array().expect("spans").iter())
        .map(|s| s["span_id"].as_str().expect("span_id").to_string())
        .collect()
}

fn logged(log: &str, span_id: &str) -> usize {
    log.lines()
        .filter(|l| {
            l.trim_start().starts_with("ID ") && l.trim_end().ends_with(&format!(": {span_id}"))
        })
        .count()
}

#[test]
fn a_real_collector_receives_the_runs_live_and_accepts_the_otlp_json() {
    let t = Test::new();
    let collector = Collector::start(&t);
    let t = t.env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.endpoint());
    let flow = "name: relay\nsteps:\n  - id: nap\n    sleep: 10ms\n  - id: hi\n    run: echo hi\n  \
                - id: fail\n    needs: []\n    run: exit 3\n    continue_on_error: true\n";
    let (id, ran) = t.run_yaml("relay.yaml", flow, &[]);
    ran.code(0);
    assert!(!ran.stderr.contains("warning"), "{}", ran.stderr);

    // Live: every stored span reached the collector, once.
    let ids = stored_span_ids(&t, &id);
    assert_eq!(ids.len(), 8, "root, 3 attempts, 2 processes, 2 commits");
    collector.wait_for("the live spans", |log| {
        ids.iter().all(|s| logged(log, s) == 1)
    });
    assert!(collector.log().contains("Name           : relay/workflow"));

    // Printed: the collector accepts the OTLP/JSON, and logs the same spans again.
    let otlp = t
        .wf(&["trace", &id, "--format", "otlp"])
        .code(0)
        .stdout
        .clone();
    assert_eq!(collector.post_json(&otlp), 200);
    collector.wait_for("the posted spans", |log| {
        ids.iter().all(|s| logged(log, s) == 2)
    });
}

#[test]
fn every_standard_otlp_protocol_reaches_the_collector_compressed_or_not() {
    let t = Test::new();
    let collector = Collector::start(&t);
    let flow = "name: proto\nsteps:\n  - id: hi\n    run: echo hi\n";
    for (n, (protocol, compression)) in [
        ("http/protobuf", "gzip"),
        ("http/json", "none"),
        ("http/json", "gzip"),
        ("grpc", "none"),
        ("grpc", "gzip"),
    ]
    .into_iter()
    .enumerate()
    {
        let endpoint = if protocol == "grpc" {
            collector.grpc_endpoint()
        } else {
            collector.endpoint()
        };
        let t = Test::new()
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
            .env("OTEL_EXPORTER_OTLP_COMPRESSION", compression);
        let (id, ran) = t.run_yaml(&format!("p{n}.yaml"), flow, &[]);
        ran.code(0);
        assert!(
            !ran.stderr.contains("warning"),
            "{protocol} {compression}: {}",
            ran.stderr
        );
        let ids = stored_span_ids(&t, &id);
        assert_eq!(ids.len(), 4, "root, attempt, process, commit");
        collector.wait_for(
            &format!("the spans sent over {protocol} ({compression})"),
            |log| ids.iter().all(|s| logged(log, s) == 1),
        );
    }
}

#[test]
fn gzip_compression_really_compresses_the_export() {
    use crate::http::{Reply, Server};
    for protocol in ["http/protobuf", "http/json"] {
        let receiver = Server::always(Reply::status(200));
        let t = Test::new()
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url())
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
            .env("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip");
        let (_, ran) = t.run_yaml(
            "z.yaml",
            "name: zip\nsteps:\n  - id: hi\n    run: echo hi\n",
            &[],
        );
        ran.code(0);
        let reqs = receiver.requests();
        assert!(!reqs.is_empty(), "{protocol}: nothing was exported");
        for r in &reqs {
            assert_eq!(r.header("content-encoding"), Some("gzip"), "{protocol}");
            assert!(
                r.body.starts_with(&[0x1f, 0x8b]),
                "{protocol}: not a gzip stream"
            );
            let expected = if protocol == "http/json" {
                "application/json"
            } else {
                "application/x-protobuf"
            };
            assert_eq!(r.header("content-type"), Some(expected), "{protocol}");
        }
    }
}
