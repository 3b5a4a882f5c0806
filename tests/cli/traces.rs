//! Traces (docs/traces.md): `wf trace` as a tree, JSON and OTLP/JSON (parsed by the
//! official protobuf definitions), live OTLP/HTTP export to a real receiver,
//! spans after a crash, and W3C trace context propagation (TRACEPARENT in,
//! TRACEPARENT to step processes, `traceparent` on HTTP calls, `wf signal`
//! links). The tree on a terminal: [`terminal`].
//!
//! Its tests by topic, beside the ones here: `live.rs`, `nesting.rs`, `propagation.rs` (in `traces/`).

mod live;
mod nesting;
mod propagation;

use live::{otlp_receiver, read_request};
use nesting::assert_nested;

use crate::{Ran, Test};
use prost::Message;
use serde_json::{Value, json};
use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod terminal;

const CARD_FLOW: &str = r#"
name: order-flow
steps:
  - id: charge-card
    run: 'if [ "$WF_ATTEMPT" = 1 ]; then exit 3; fi; echo charged'
    errors: { 3: card_declined }
    retry: { max_attempts: 2, interval: 2s }
"#;

const OTEL_VARS: &[&str] = &[
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_TRACES_EXPORTER",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_SDK_DISABLED",
];

/// A `wf` command with no OpenTelemetry configuration from the outside.
fn cmd(t: &Test) -> Command {
    let mut c = t.cmd();
    for v in OTEL_VARS {
        c.env_remove(v);
    }
    c
}

fn wf(t: &Test, args: &[&str]) -> Ran {
    wf_env(t, args, &[])
}

fn wf_env(t: &Test, args: &[&str], env: &[(&str, &str)]) -> Ran {
    let mut c = cmd(t);
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("run wf");
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Writes `yaml` and runs it (`wf run FILE --id ID ARGS…`).
fn run_flow(t: &Test, id: &str, yaml: &str, extra: &[&str], env: &[(&str, &str)]) -> Ran {
    let path = t.write("flow.yaml", yaml);
    let mut args = vec!["run", path.to_str().expect("utf-8"), "--id", id];
    args.extend_from_slice(extra);
    wf_env(t, &args, env)
}

/// `wf trace ID --format json`: the runs.
fn trace_json(t: &Test, id: &str) -> Vec<Value> {
    let v = wf(t, &["trace", id, "--format", "json"]).code(0).json();
    v.as_array()
        .cloned()
        .unwrap_or_else(|| panic!("not an array: {v:#}"))
}

fn all_spans(runs: &[Value]) -> Vec<Value> {
    runs.iter()
        .flat_map(|r| r["spans"].as_array().cloned().unwrap_or_default())
        .collect()
}

fn spans_named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

fn the_span<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    let found = spans_named(spans, name);
    assert_eq!(found.len(), 1, "expected one span {name}: {spans:#?}");
    found[0]
}

/// The charge-card flow, suspended after its declined first attempt and resumed.
fn card_flow(t: &Test, id: &str) {
    let ran = run_flow(t, id, CARD_FLOW, &["--inline-wait", "1s"], &[]);
    ran.code(3);
    assert_eq!(t.inspect(id)["status"], "sleeping");
    wf(t, &["resume", id]).code(0);
}

#[test]
fn trace_tree_shows_the_runs_of_a_retried_step() {
    let t = Test::new();
    card_flow(&t, "card1");
    let ran = wf(&t, &["trace", "card1"]);
    ran.code(0);
    // Every span has its offset, duration and waterfall bar; each run's root
    // its trace id. Without those, the tree is the one docs/traces.md shows.
    let runs = trace_json(&t, "card1");
    let mut structure = Vec::new();
    for line in ran.stdout.lines() {
        let (head, rest) = line
            .split_once(" +")
            .unwrap_or_else(|| panic!("no offset: {line}"));
        let (timing, details) = rest
            .split_once('▏')
            .unwrap_or_else(|| panic!("no bar: {line}"));
        assert!(timing.contains('▕') && timing.contains('█'), "{line}");
        let mut details = details.trim().to_string();
        if head.starts_with("order-flow/workflow") {
            let run = if details.starts_with("run 1 ") { 0 } else { 1 };
            let suffix = format!("  trace={}", runs[run]["trace_id"].as_str().unwrap());
            assert!(details.ends_with(&suffix), "{line}");
            details.truncate(details.len() - suffix.len());
        }
        structure.push(
            format!("{} {details}", head.trim_end())
                .trim_end()
                .to_string(),
        );
    }
    assert_eq!(
        structure,
        [
            "order-flow/workflow run 1  outcome=sleeping",
            "└── order-flow/charge-card attempt=1  outcome=retry  ERROR  error.type=user.card_declined",
            "    └── process exit.code=3  ERROR",
            "order-flow/workflow run 2  link -> run 1  outcome=completed",
            "└── order-flow/charge-card attempt=2  outcome=ok",
            "    ├── process exit.code=0",
            "    └── wf.commit",
        ],
        "{}",
        ran.stdout
    );
    // One commit span name on both backends; its attributes say which
    // (OpenTelemetry's database conventions).
    let spans = all_spans(&runs);
    let commit = the_span(&spans, "wf.commit");
    let system = if t.on_pg() { "postgresql" } else { "sqlite" };
    assert_eq!(commit["attributes"]["db.system.name"], system, "{commit:#}");
    assert_eq!(commit["attributes"]["db.operation.name"], "COMMIT");
    assert_eq!(commit["attributes"]["workflow.instance.id"], "card1");
    // A child of the attempt it made durable, within it (docs/traces.md).
    let attempt = spans
        .iter()
        .find(|s| {
            s["name"] == "order-flow/charge-card" && s["attributes"]["workflow.step.attempt"] == 2
        })
        .expect("attempt 2");
    assert_eq!(commit["parent_span_id"], attempt["span_id"]);
    assert!(
        commit["end_ns"].as_i64() <= attempt["end_ns"].as_i64(),
        "{commit:#} {attempt:#}"
    );
    // JSON carries the same timing.
    let first = &runs[0]["spans"].as_array().unwrap()[0];
    assert!(first["offset_ms"].is_number() && runs[1]["duration_ms"].as_f64().unwrap() > 0.0);
    // The latest instance is the default; a prefix works; an unknown id is a usage error.
    assert_eq!(wf(&t, &["trace"]).code(0).stdout, ran.stdout);
    assert_eq!(wf(&t, &["trace", "card"]).code(0).stdout, ran.stdout);
    let bad = wf(&t, &["trace", "nope"]);
    bad.code(2);
    assert!(bad.stderr.contains("nope"), "{}", bad.stderr);
}

#[test]
fn trace_of_an_empty_database_is_a_usage_error() {
    let t = Test::new();
    crate::commands::empty_database(&t);
    let ran = wf(&t, &["trace"]);
    ran.code(2);
    assert!(ran.stderr.contains("no instances"), "{}", ran.stderr);
    assert_eq!(
        wf(&t, &["trace", "--all", "--format", "json"])
            .code(0)
            .json(),
        json!([])
    );
}

#[test]
fn every_span_names_its_workflow_and_instance_and_replays_are_not_traced() {
    let t = Test::new();
    let yaml = format!(
        "{}\n  - id: ship\n    run: echo shipped\n",
        CARD_FLOW
            .replace(
                "steps:\n",
                "steps:\n  - id: reserve\n    run: echo reserved\n"
            )
            .trim_end()
    );
    let ran = run_flow(&t, "replay1", &yaml, &["--inline-wait", "1s"], &[]);
    ran.code(3);
    wf(&t, &["resume", "replay1"]).code(0);
    let runs = trace_json(&t, "replay1");
    assert_eq!(runs.len(), 2, "{runs:#?}");
    for (i, run) in runs.iter().enumerate() {
        assert_eq!(run["run"], i as i64 + 1);
        assert_eq!(run["instance_id"], "replay1");
        assert_eq!(run["workflow"], "order-flow");
        for s in run["spans"].as_array().unwrap() {
            assert_eq!(s["attributes"]["workflow.name"], "order-flow", "{s:#}");
            assert_eq!(s["attributes"]["workflow.instance.id"], "replay1", "{s:#}");
            assert_eq!(s["trace_id"], run["trace_id"], "one trace per run: {s:#}");
        }
    }
    let run1: Vec<Value> = runs[0]["spans"].as_array().cloned().unwrap();
    let run2: Vec<Value> = runs[1]["spans"].as_array().cloned().unwrap();
    assert_eq!(spans_named(&run1, "order-flow/reserve").len(), 1);
    // `reserve` completed in run 1: run 2 replays it without a span.
    assert!(
        spans_named(&run2, "order-flow/reserve").is_empty(),
        "{run2:#?}"
    );
    assert_eq!(spans_named(&run2, "order-flow/charge-card").len(), 1);
    assert_eq!(spans_named(&run2, "order-flow/ship").len(), 1);
    assert_ne!(
        runs[0]["trace_id"], runs[1]["trace_id"],
        "each run is its own trace"
    );
    // Run 2's root links to run 1's root.
    let root2 = the_span(&run2, "order-flow/workflow");
    assert_eq!(root2["links"][0]["span_id"], runs[0]["span_id"]);
    assert_eq!(root2["links"][0]["trace_id"], runs[0]["trace_id"]);
    assert_eq!(root2["links"][0]["attributes"]["workflow.run"], 1);
}

/// `wf run FILE --id ID`, SIGKILLed once its step wrote its pid to
/// `started`; then that step's process group and shell (which outlived
/// their runner) are killed too, not left behind.
fn kill_when_started(t: &Test, path: &std::path::Path, id: &str) {
    use std::os::unix::process::ExitStatusExt;
    let mut child = cmd(t)
        .args(["run", path.to_str().unwrap(), "--id", id])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn wf run");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !t.path().join("started").exists() {
        assert!(Instant::now() < deadline, "the step never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL wf run");
    let status = child.wait().expect("wait");
    assert_eq!(status.signal(), Some(9), "wf run was killed by SIGKILL");
    let pid = t.read("started").trim().to_string();
    // Its process group (steps run in their own), then the shell itself.
    let _ = Command::new("kill")
        .args(["-9", "--", &format!("-{pid}")])
        .stderr(std::process::Stdio::null())
        .status();
    let _ = Command::new("kill")
        .args(["-9", &pid])
        .stderr(std::process::Stdio::null())
        .status();
}

#[test]
fn a_successful_attempts_span_survives_a_crash_before_it_was_stored() {
    let t = Test::new();
    // `first`'s span is stored by the commit after the one that made its
    // result durable, which never comes: wf is killed while `second` runs.
    let path = t.write(
        "flow.yaml",
        r#"
name: lost
steps:
  - id: first
    run: echo one
  - id: second
    needs: [first]
    run: 'if [ "$WF_ATTEMPT" = 1 ]; then echo $$ > started.tmp; mv started.tmp started; exec sleep 30; fi; echo two'
"#,
    );
    kill_when_started(&t, &path, "lost1");

    wf(&t, &["resume", "lost1"]).code(0);
    let runs = trace_json(&t, "lost1");
    let first: Vec<&Value> = runs[0]["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] == "lost/first")
        .collect();
    assert_eq!(first.len(), 1, "{runs:#?}");
    assert_eq!(first[0]["attributes"]["workflow.step.outcome"], "ok");
    assert_eq!(first[0]["attributes"]["workflow.step.attempt"], 1);
    assert_eq!(first[0]["status"], "unset");
    // The same span id as its attempt recorded, under the run's root.
    assert_eq!(first[0]["parent_span_id"], runs[0]["span_id"]);
    assert_nested(&runs);
}

#[test]
fn a_crashed_attempt_shows_as_crashed() {
    let t = Test::new();
    let path = t.write(
        "flow.yaml",
        r#"
name: crashy
steps:
  - id: slow
    run: 'if [ "$WF_ATTEMPT" = 1 ]; then echo $$ > started.tmp; mv started.tmp started; sleep 30; fi; echo done'
    retry: { max_attempts: 2, interval: 250ms }
"#,
    );
    kill_when_started(&t, &path, "crash1");

    wf(&t, &["resume", "crash1"]).code(0);
    let inspect = t.inspect("crash1");
    let attempts = &Test::step(&inspect, "slow")["attempt_list"];
    assert_eq!(attempts[0]["outcome"], "crashed", "{attempts:#}");

    let ran = wf(&t, &["trace", "crash1"]);
    ran.code(0);
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert!(
        lines[0].starts_with("crashy/workflow") && lines[0].contains("run 1  outcome=crashed"),
        "{}",
        ran.stdout
    );
    assert!(
        lines[1].starts_with("└── crashy/slow")
            && lines[1].contains("attempt=1  outcome=crashed  ERROR  error.type=crashed"),
        "{}",
        ran.stdout
    );
    let run2 = lines
        .iter()
        .position(|l| l.starts_with("crashy/workflow") && l.contains("run 2"))
        .unwrap_or_else(|| panic!("no run 2: {}", ran.stdout));
    assert!(
        lines[run2].contains("link -> run 1  outcome=completed"),
        "{}",
        ran.stdout
    );
    assert!(
        lines[run2 + 1].contains("attempt=2  outcome=ok"),
        "{}",
        ran.stdout
    );
}

/// Runs `python3` with the official OTLP protobuf definitions on an
/// OTLP/JSON document: converts the hex ids to the base64 protobuf's JSON
/// mapping expects (OTLP/JSON's one deviation from it), parses strictly
/// (unknown fields fail), and prints what it parsed as JSON with hex ids.
fn parse_with_official_protos(otlp_json: &str) -> Value {
    const SCRIPT: &str = r#"
import base64, json, sys
from google.protobuf.json_format import Parse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

doc = json.loads(sys.stdin.read())
def hex_ids(node):
    if isinstance(node, dict):
        for k, v in list(node.items()):
            if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str):
                node[k] = base64.b64encode(bytes.fromhex(v)).decode()
            else:
                hex_ids(v)
    elif isinstance(node, list):
        for v in node:
            hex_ids(v)
hex_ids(doc)
req = Parse(json.dumps(doc), ExportTraceServiceRequest(), ignore_unknown_fields=False)
out = {"resources": [], "spans": []}
for rs in req.resource_spans:
    out["resources"].append({kv.key: kv.value.string_value for kv in rs.resource.attributes})
    for ss in rs.scope_spans:
        for s in ss.spans:
            assert len(s.trace_id) == 16 and len(s.span_id) == 8, s
            assert len(s.parent_span_id) in (0, 8), s
            out["spans"].append({
                "scope": ss.scope.name, "scope_version": ss.scope.version,
                "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                "parent_span_id": s.parent_span_id.hex(), "name": s.name, "kind": s.kind,
                "status": s.status.code, "start": str(s.start_time_unix_nano),
                "end": str(s.end_time_unix_nano),
                "attributes": {kv.key: kv.value.WhichOneof("value") for kv in s.attributes},
                "links": [{"trace_id": l.trace_id.hex(), "span_id": l.span_id.hex()} for l in s.links],
            })
print(json.dumps(out))
"#;
    let mut child = Command::new("python3")
        .args(["-c", SCRIPT])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 is needed (`scripts/test` installs opentelemetry-proto in a venv)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(otlp_json.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the official OTLP protobuf definitions rejected the output (or are not installed: \
         run the tests with `scripts/test`, which installs them):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("python printed JSON")
}

#[test]
fn otlp_json_parses_with_the_official_definitions_and_keeps_stored_ids() {
    let t = Test::new();
    card_flow(&t, "otlp1");
    let first = wf(&t, &["trace", "otlp1", "--format", "otlp"]);
    first.code(0);
    let parsed = parse_with_official_protos(&first.stdout);
    let runs = trace_json(&t, "otlp1");
    let stored = all_spans(&runs);
    let spans = parsed["spans"].as_array().unwrap();
    assert_eq!(spans.len(), stored.len(), "{parsed:#}");
    let ids = |v: &[Value], p: &str| -> BTreeSet<(String, String, String)> {
        v.iter()
            .map(|s| {
                (
                    s["trace_id"].as_str().unwrap().to_string(),
                    s["span_id"].as_str().unwrap().to_string(),
                    s[p].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    };
    assert_eq!(ids(spans, "parent_span_id"), ids(&stored, "parent_span_id"));
    assert_eq!(parsed["resources"][0]["service.name"], "wf");
    for s in spans {
        assert_eq!(s["scope"], "wf");
        assert_eq!(s["scope_version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(s["attributes"]["workflow.name"], "string_value");
        assert!(
            s["end"].as_str().unwrap().parse::<u64>().unwrap()
                >= s["start"].as_str().unwrap().parse::<u64>().unwrap()
        );
    }
    let attempt = spans
        .iter()
        .find(|s| s["name"] == "order-flow/charge-card" && s["status"] == 2);
    assert!(
        attempt.is_some(),
        "the failed attempt has status ERROR: {parsed:#}"
    );
    let root2 = spans
        .iter()
        .find(|s| s["name"] == "order-flow/workflow" && s["trace_id"] == runs[1]["trace_id"])
        .unwrap();
    assert_eq!(root2["links"][0]["span_id"], runs[0]["span_id"]);
    assert_eq!(root2["attributes"]["workflow.run"], "int_value");

    // Stable: the ids come from the database, not from a new export.
    let second = wf(&t, &["trace", "otlp1", "--format", "otlp"]);
    second.code(0);
    assert_eq!(first.stdout, second.stdout);

    // OTEL_SERVICE_NAME names the resource.
    let named = wf_env(
        &t,
        &["trace", "otlp1", "--format", "otlp"],
        &[("OTEL_SERVICE_NAME", "shop")],
    );
    assert_eq!(
        parse_with_official_protos(&named.code(0).stdout)["resources"][0]["service.name"],
        "shop"
    );
}

#[test]
fn trace_all_covers_every_instance() {
    let t = Test::new();
    let path = t.write(
        "hello.yaml",
        "name: hello\nsteps:\n  - id: hi\n    run: echo hi\n",
    );
    let p = path.to_str().unwrap();
    wf(&t, &["run", p, "--id", "aaa"]).code(0);
    wf(&t, &["run", p, "--id", "bbb"]).code(0);
    let runs = wf(&t, &["trace", "--all", "--format", "json"])
        .code(0)
        .json();
    let ids: Vec<&str> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["instance_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["aaa", "bbb"]);
    let tree = wf(&t, &["trace", "--all"]).code(0).stdout.clone();
    assert!(
        tree.contains("instance aaa (hello)") && tree.contains("instance bbb (hello)"),
        "{tree}"
    );
    let otlp = wf(&t, &["trace", "--all", "--format", "otlp"])
        .code(0)
        .stdout
        .clone();
    let parsed = parse_with_official_protos(&otlp);
    assert_eq!(
        parsed["spans"].as_array().unwrap().len(),
        all_spans(runs.as_array().unwrap()).len()
    );
    // --all and an id contradict each other.
    wf(&t, &["trace", "aaa", "--all"]).code(2);
}

/// What an OTLP/HTTP receiver got: each request's path, content type and body.
type Received = Arc<Mutex<Vec<(String, String, Vec<u8>)>>>;
