//! Traces (docs/traces.md): `wf trace` as a tree, JSON and OTLP/JSON (parsed by the
//! official protobuf definitions), live OTLP/HTTP export to a real receiver,
//! spans after a crash, and W3C trace context propagation (TRACEPARENT in,
//! TRACEPARENT to step processes, `traceparent` on HTTP calls, `wf signal`
//! links). The tree on a terminal: [`terminal`].

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

/// A minimal OTLP/HTTP receiver on 127.0.0.1: answers every POST with 200 and
/// an empty `ExportTraceServiceResponse`, keeping what it received.
fn otlp_receiver() -> (String, Received) {
    otlp_receiver_gated(Arc::new(AtomicBool::new(true)))
}

/// [`otlp_receiver`], answering each request only once `open` is true.
fn otlp_receiver_gated(open: Arc<AtomicBool>) -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().unwrap();
    let got: Received = Arc::new(Mutex::new(Vec::new()));
    let keep = got.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let keep = keep.clone();
            let open = open.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut stream = stream;
                loop {
                    let Some((path, headers, body)) = read_request(&mut reader) else {
                        return;
                    };
                    let ctype = headers.get("content-type").cloned().unwrap_or_default();
                    keep.lock().unwrap().push((path, ctype, body));
                    while !open.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    let _ = stream.write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n",
                    );
                }
            });
        }
    });
    (format!("http://{addr}"), got)
}

/// One HTTP/1.1 request: (path, lowercase headers, body).
fn read_request(
    reader: &mut BufReader<std::net::TcpStream>,
) -> Option<(String, HashMap<String, String>, Vec<u8>)> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let path = line.split_whitespace().nth(1)?.to_string();
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body).ok()?;
    Some((path, headers, body))
}

#[test]
fn runs_export_their_spans_live_over_otlp_http() {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    let t = Test::new();
    let (endpoint, got) = otlp_receiver();
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_SERVICE_NAME", "checkout"),
    ];
    let ran = run_flow(&t, "live1", CARD_FLOW, &["--inline-wait", "1s"], &env);
    ran.code(3);
    assert!(!ran.stderr.contains("warning"), "{}", ran.stderr);
    let after_run1 = got.lock().unwrap().len();
    assert!(after_run1 >= 1, "run 1 exported nothing");
    wf_env(&t, &["resume", "live1"], &env).code(0);

    let mut received = Vec::new();
    let mut services = BTreeSet::new();
    for (path, ctype, body) in got.lock().unwrap().iter() {
        assert_eq!(path, "/v1/traces");
        assert_eq!(ctype, "application/x-protobuf");
        let req = ExportTraceServiceRequest::decode(body.as_slice()).expect("a valid protobuf");
        for rs in req.resource_spans {
            for kv in rs.resource.iter().flat_map(|r| r.attributes.iter()) {
                if kv.key == "service.name" {
                    services.insert(format!("{:?}", kv.value));
                }
            }
            for ss in rs.scope_spans {
                assert_eq!(ss.scope.as_ref().map(|s| s.name.as_str()), Some("wf"));
                for s in ss.spans {
                    received.push((
                        hex::encode(&s.trace_id),
                        hex::encode(&s.span_id),
                        hex::encode(&s.parent_span_id),
                    ));
                }
            }
        }
    }
    assert_eq!(services.len(), 1, "{services:?}");
    assert!(
        services.iter().next().unwrap().contains("checkout"),
        "{services:?}"
    );

    // Exactly the spans `wf trace` prints, each sent once, with the stored ids.
    let printed = parse_with_official_protos(
        &wf(&t, &["trace", "live1", "--format", "otlp"])
            .code(0)
            .stdout,
    );
    let mut want: Vec<(String, String, String)> = printed["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["trace_id"].as_str().unwrap().into(),
                s["span_id"].as_str().unwrap().into(),
                s["parent_span_id"].as_str().unwrap().into(),
            )
        })
        .collect();
    want.sort();
    received.sort();
    assert_eq!(received, want);
}

#[test]
fn spans_are_exported_while_the_run_still_holds_its_instance() {
    let t = Test::new();
    let open = Arc::new(AtomicBool::new(false));
    let (endpoint, got) = otlp_receiver_gated(open.clone());
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str())];
    let path = t.write(
        "flow.yaml",
        "name: nap\nsteps:\n  - id: nap\n    sleep: 1h\n  - id: after\n    run: echo done\n",
    );
    let mut run = cmd(&t)
        .args(["run", path.to_str().unwrap(), "--id", "held1"])
        .envs(env)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn wf run");
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "run 1 never exported");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Run 1 is committed (sleeping) and exporting: a second process can
    // neither drive the instance nor, so, export the same spans meanwhile.
    let resumed = wf_env(&t, &["resume", "held1", "--now"], &env);
    open.store(true, Ordering::SeqCst);
    resumed.code(5);
    assert!(resumed.stderr.contains("held by"), "{}", resumed.stderr);
    assert_eq!(run.wait().expect("wait").code(), Some(3));
    // Once the export is done, the instance is free.
    wf_env(&t, &["resume", "held1", "--now"], &env).code(0);
    let sent = sent_span_ids(&got);
    let stored = all_spans(&trace_json(&t, "held1")).len();
    assert_eq!(sent.len(), stored, "each span sent once");
}

/// The span ids of every span the receiver got, in the order received.
fn sent_span_ids(got: &Received) -> Vec<String> {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    let mut ids = Vec::new();
    for (_, _, body) in got.lock().unwrap().iter() {
        let req = ExportTraceServiceRequest::decode(body.as_slice()).expect("a valid protobuf");
        for rs in req.resource_spans {
            for ss in rs.scope_spans {
                ids.extend(ss.spans.iter().map(|s| hex::encode(&s.span_id)));
            }
        }
    }
    ids
}

#[test]
fn a_long_run_is_exported_in_batches_each_span_once() {
    let t = Test::new();
    let (endpoint, got) = otlp_receiver();
    // 300 steps: 300 attempt spans, 300 commits and the root, over 512.
    let steps: String = (0..300)
        .map(|i| format!("  - id: s{i}\n    set_state: {{ n: {i} }}\n"))
        .collect();
    run_flow(
        &t,
        "long1",
        &format!("name: long\nsteps:\n{steps}"),
        &[],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)],
    )
    .code(0);
    assert!(got.lock().unwrap().len() >= 2, "one request per batch");
    let mut sent = sent_span_ids(&got);
    let mut stored: Vec<String> = all_spans(&trace_json(&t, "long1"))
        .iter()
        .map(|s| s["span_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(stored.len(), 601);
    sent.sort();
    stored.sort();
    assert_eq!(sent, stored);
}

#[test]
fn the_console_exporter_prints_spans_on_stderr_and_leaves_stdout_to_data() {
    let t = Test::new();
    let ran = run_flow(
        &t,
        "console1",
        "name: hello\nsteps:\n  - id: hi\n    run: echo hi\n",
        &["--json"],
        &[("OTEL_TRACES_EXPORTER", "console")],
    );
    ran.code(0);
    let out: Value = serde_json::from_str(&ran.stdout).expect("stdout is the JSON result alone");
    assert_eq!(out["id"], "console1");
    let spans = all_spans(&trace_json(&t, "console1"));
    assert_eq!(spans.len(), 4, "root, attempt, process, commit");
    for s in spans {
        let id = s["span_id"].as_str().unwrap();
        assert!(
            ran.stderr.contains(&format!("SpanId       : {id}")),
            "span {id} not in the dump:\n{}",
            ran.stderr
        );
    }
}

#[test]
fn an_unreachable_collector_never_fails_the_run() {
    let t = Test::new();
    // A port nobody listens on.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let ran = run_flow(
        &t,
        "dead1",
        "name: hello\nsteps:\n  - id: hi\n    run: echo hi\n",
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2000"),
        ],
    );
    ran.code(0);
    let warnings: Vec<&str> = ran
        .stderr
        .lines()
        .filter(|l| l.contains("warning"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", ran.stderr);
    assert!(
        warnings[0].contains(&format!("{endpoint}/v1/traces")),
        "{}",
        ran.stderr
    );
    assert_eq!(t.inspect("dead1")["status"], "completed");
}

const PARENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_SPAN: &str = "00f067aa0ba902b7";

#[test]
fn traceparent_makes_run_one_a_child_and_reaches_step_processes() {
    let t = Test::new();
    let traceparent = format!("00-{PARENT_TRACE}-{PARENT_SPAN}-01");
    let ran = run_flow(
        &t,
        "tp1",
        "name: prop\nsteps:\n  - id: echo\n    run: 'echo \"$TRACEPARENT\" > tp.txt'\n",
        &[],
        &[("TRACEPARENT", &traceparent)],
    );
    ran.code(0);
    let runs = trace_json(&t, "tp1");
    assert_eq!(runs[0]["trace_id"], PARENT_TRACE);
    assert_eq!(runs[0]["parent_span_id"], PARENT_SPAN);
    let spans = all_spans(&runs);
    let root = the_span(&spans, "prop/workflow");
    assert_eq!(root["trace_id"], PARENT_TRACE);
    assert_eq!(root["parent_span_id"], PARENT_SPAN);
    let attempt = the_span(&spans, "prop/echo");
    assert_eq!(
        t.read("tp.txt").trim(),
        format!(
            "00-{PARENT_TRACE}-{}-01",
            attempt["span_id"].as_str().unwrap()
        ),
        "the step process gets its attempt span as TRACEPARENT"
    );
    // In OTLP the root's parent is the remote caller's span.
    let parsed =
        parse_with_official_protos(&wf(&t, &["trace", "tp1", "--format", "otlp"]).code(0).stdout);
    let root = parsed["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "prop/workflow")
        .unwrap();
    assert_eq!(root["parent_span_id"], PARENT_SPAN);
}

#[test]
fn traceparent_applies_to_resume_as_to_run() {
    let t = Test::new();
    // Run 1 under no parent; it suspends on the event.
    let ran = run_flow(
        &t,
        "tp2",
        "name: prop\nsteps:\n  - id: gate\n    wait_for_event: { name: go }\n  - id: echo\n    run: 'echo \"$TRACEPARENT\" > tp.txt'\n",
        &[],
        &[],
    );
    ran.code(3);
    wf(&t, &["signal", "tp2", "go"]).code(0);
    // Run 2, resumed under the caller's context, is its child.
    let traceparent = format!("00-{PARENT_TRACE}-{PARENT_SPAN}-01");
    wf_env(&t, &["resume", "tp2"], &[("TRACEPARENT", &traceparent)]).code(0);
    let runs = trace_json(&t, "tp2");
    assert_eq!(runs.len(), 2);
    assert_ne!(runs[0]["trace_id"], PARENT_TRACE);
    assert_eq!(runs[1]["trace_id"], PARENT_TRACE);
    assert_eq!(runs[1]["parent_span_id"], PARENT_SPAN);
    let spans = all_spans(&runs[1..]);
    let attempt = the_span(&spans, "prop/echo");
    assert_eq!(
        t.read("tp.txt").trim(),
        format!(
            "00-{PARENT_TRACE}-{}-01",
            attempt["span_id"].as_str().unwrap()
        )
    );
}

#[test]
fn a_signal_sent_under_traceparent_is_linked_from_the_run_it_wakes() {
    let t = Test::new();
    let yaml = "name: approve\nsteps:\n  - id: approval\n    wait_for_event: { name: approved }\n  - id: apply\n    run: echo applied\n";
    run_flow(&t, "sig1", yaml, &[], &[]).code(3);
    let traceparent = format!("00-{PARENT_TRACE}-{PARENT_SPAN}-01");
    wf_env(
        &t,
        &["signal", "sig1", "approved", "--data", "{\"ok\": true}"],
        &[("TRACEPARENT", &traceparent)],
    )
    .code(0);
    wf(&t, &["resume", "sig1"]).code(0);
    let runs = trace_json(&t, "sig1");
    assert_eq!(runs.len(), 2, "{runs:#?}");
    let run2: Vec<Value> = runs[1]["spans"].as_array().cloned().unwrap();
    let root = the_span(&run2, "approve/workflow");
    let links = root["links"].as_array().unwrap();
    let signal = links
        .iter()
        .find(|l| l["attributes"]["wf.event.name"] == "approved")
        .unwrap_or_else(|| panic!("no link to the signal: {root:#}"));
    assert_eq!(signal["trace_id"], PARENT_TRACE);
    assert_eq!(signal["span_id"], PARENT_SPAN);
    // Run 2 is its own trace, not the sender's.
    assert_ne!(runs[1]["trace_id"], PARENT_TRACE);
    let tree = wf(&t, &["trace", "sig1"]).code(0).stdout.clone();
    assert!(tree.contains("link -> signal approved"), "{tree}");
}

#[test]
fn http_steps_send_traceparent() {
    let t = Test::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Arc<Mutex<Vec<HashMap<String, String>>>> = Arc::default();
    let keep = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut stream = stream;
            if let Some((_, headers, _)) = read_request(&mut reader) {
                keep.lock().unwrap().push(headers);
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
                );
            }
        }
    });
    let yaml =
        format!("name: web\nsteps:\n  - id: call\n    http: {{ url: \"http://{addr}/ping\" }}\n");
    run_flow(&t, "http1", &yaml, &[], &[]).code(0);
    let headers = seen.lock().unwrap().clone();
    assert_eq!(headers.len(), 1, "{headers:?}");
    let tp = headers[0]
        .get("traceparent")
        .unwrap_or_else(|| panic!("no traceparent header: {headers:?}"));
    let parts: Vec<&str> = tp.split('-').collect();
    assert_eq!(parts.len(), 4, "{tp}");
    let runs = trace_json(&t, "http1");
    let spans = all_spans(&runs);
    assert_eq!(parts[1], runs[0]["trace_id"].as_str().unwrap(), "{tp}");
    let client = the_span(&spans, "GET");
    assert_eq!(client["kind"], "client");
    assert_eq!(client["attributes"]["http.response.status_code"], 200);
    assert_eq!(
        client["attributes"]["url.full"],
        format!("http://{addr}/ping")
    );
    let attempt = the_span(&spans, "web/call");
    // The server's span is a child of the call: the HTTP client span, or the
    // attempt span it belongs to.
    assert!(
        parts[2] == client["span_id"] || parts[2] == attempt["span_id"],
        "traceparent {tp} names neither the client span nor the attempt: {spans:#?}"
    );
    let tree = wf(&t, &["trace", "http1"]).code(0).stdout.clone();
    assert!(
        tree.lines()
            .any(|l| l.contains("── GET") && l.contains(&format!("http://{addr}/ping  200"))),
        "{tree}"
    );
}

#[test]
fn http_client_spans_follow_the_semantic_conventions() {
    use crate::http::{Reply, Server};
    let t = Test::new();
    let server = Server::sequence(vec![Reply::status(503), Reply::status(200)]);
    let port = server
        .url()
        .rsplit(':')
        .next()
        .unwrap()
        .parse::<i64>()
        .unwrap();
    let ran = run_flow(
        &t,
        "sem1",
        &format!(
            "name: sem\nsteps:\n  - id: call\n    http: {{ url: \"{}/x\" }}\n    retry: {{ max_attempts: 2, interval: 10ms }}\n",
            server.url()
        ),
        &[],
        &[],
    );
    ran.code(0);
    let spans = all_spans(&trace_json(&t, "sem1"));
    let http: Vec<&Value> = spans.iter().filter(|s| s["kind"] == "client").collect();
    assert_eq!(http.len(), 2, "{spans:#?}");
    for s in &http {
        assert_eq!(s["attributes"]["server.address"], "127.0.0.1");
        assert_eq!(s["attributes"]["server.port"], port);
    }
    // The status code is the HTTP span's error.type; wf's own type stays on the attempt.
    assert_eq!(http[0]["attributes"]["error.type"], "503");
    let failed_attempt = spans
        .iter()
        .find(|s| s["name"] == "sem/call" && s["attributes"]["workflow.step.attempt"] == 1)
        .unwrap();
    assert_eq!(failed_attempt["attributes"]["error.type"], "http.503");
    // The resource names the service's version.
    let otlp: Value = serde_json::from_str(
        &wf(&t, &["trace", "sem1", "--format", "otlp"])
            .code(0)
            .stdout,
    )
    .unwrap();
    let attrs = otlp["resourceSpans"][0]["resource"]["attributes"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        attrs.iter().any(|a| a["key"] == "service.version"
            && a["value"]["stringValue"] == env!("CARGO_PKG_VERSION")),
        "{attrs:#?}"
    );
}

#[test]
fn trace_per_instance_puts_every_run_in_one_trace_named_after_the_instance() {
    use sha2::Digest as _;
    let t = Test::new();
    let yaml = "name: pi\ntrace: { per: instance }\nsteps:\n  - id: a\n    run: echo a\n  - id: gate\n    wait_for_event: { name: go }\n  - id: b\n    run: echo b\n";
    run_flow(&t, "pi-1", yaml, &[], &[]).code(3);
    wf(&t, &["signal", "pi-1", "go"]).code(0);
    let traceparent = format!("00-{PARENT_TRACE}-{PARENT_SPAN}-01");
    wf_env(&t, &["resume", "pi-1"], &[("TRACEPARENT", &traceparent)]).code(0);
    let expected = hex::encode(&sha2::Sha256::digest(b"pi-1")[..16]);
    let runs = trace_json(&t, "pi-1");
    assert_eq!(runs.len(), 2);
    for r in &runs {
        assert_eq!(r["trace_id"], expected.as_str());
        for s in r["spans"].as_array().unwrap() {
            assert_eq!(s["trace_id"], expected.as_str(), "{s:#}");
        }
    }
    let root2 = runs[1]["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "pi/workflow")
        .unwrap();
    // Still a root (the caller's context is linked, not its parent), linked
    // to run 1's root and to the caller.
    assert!(root2["parent_span_id"].is_null(), "{root2:#}");
    let links: Vec<&str> = root2["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["span_id"].as_str().unwrap())
        .collect();
    assert!(
        links.contains(&runs[0]["span_id"].as_str().unwrap()),
        "{links:?}"
    );
    assert!(links.contains(&PARENT_SPAN), "{links:?}");
    // A bad `per` is a definition error.
    let bad = t.write(
        "bad.yaml",
        "name: x\ntrace: { per: step }\nsteps:\n  - id: a\n    run: echo\n",
    );
    let ran = wf(&t, &["validate", bad.to_str().unwrap()]);
    ran.code(2);
    assert!(ran.stderr.contains("bad.yaml:2:"), "{}", ran.stderr);
}

#[test]
fn the_callers_sampled_flag_and_tracestate_are_carried_not_forced() {
    use crate::http::{Reply, Server};
    let t = Test::new();
    let server = Server::always(Reply::status(200));
    let traceparent = format!("00-{PARENT_TRACE}-{PARENT_SPAN}-00");
    let ran = run_flow(
        &t,
        "ts1",
        &format!(
            "name: ts\nsteps:\n  - id: sh\n    run: 'echo \"$TRACEPARENT $TRACESTATE\" > tp.txt'\n  - id: call\n    http: {{ url: \"{}/x\" }}\n",
            server.url()
        ),
        &[],
        &[
            ("TRACEPARENT", &traceparent),
            ("TRACESTATE", "vendor=abc,other=1"),
        ],
    );
    ran.code(0);
    let runs = trace_json(&t, "ts1");
    assert_eq!(runs[0]["trace_id"], PARENT_TRACE);
    assert_eq!(runs[0]["parent_span_id"], PARENT_SPAN);
    let got = t.read("tp.txt");
    let (tp, state) = got.trim().split_once(' ').unwrap();
    assert!(
        tp.starts_with(&format!("00-{PARENT_TRACE}-")) && tp.ends_with("-00"),
        "{tp}"
    );
    assert_eq!(state, "vendor=abc,other=1");
    let req = &server.requests()[0];
    let header = req.header("traceparent").unwrap();
    assert!(
        header.ends_with("-00") && header.contains(PARENT_TRACE),
        "{header}"
    );
    assert_eq!(req.header("tracestate"), Some("vendor=abc,other=1"));
}

/// A program that gains privileges at exec (here set-user-ID) cannot be held
/// at its exec while its attempt commits (a traced exec drops them): it is
/// started once the commit returned. Its step runs all the same, between
/// held ones, with one process span like every other attempt.
#[test]
fn a_set_user_id_program_is_started_after_its_commit_with_one_process_span() {
    use std::os::unix::fs::PermissionsExt;
    let t = Test::new();
    let program = t.path().join("suid-echo");
    std::fs::copy("/bin/echo", &program).expect("copy /bin/echo");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o4755)).expect("chmod");
    let yaml = "name: suid\nsteps:\n  \
                - id: before\n    run: [echo, one]\n  \
                - id: suid\n    run: [./suid-echo, two]\n  \
                - id: after\n    run: [echo, three]\n";
    run_flow(&t, "suid1", yaml, &[], &[]).code(0);
    let doc = t.inspect("suid1");
    let texts: Vec<&Value> = ["before", "suid", "after"]
        .iter()
        .map(|s| {
            let step = doc["steps"]
                .as_array()
                .and_then(|steps| steps.iter().find(|x| x["id"] == *s))
                .unwrap_or_else(|| panic!("no step {s}: {doc:#}"));
            &step["output"]["stdout"]
        })
        .collect();
    assert_eq!(
        texts,
        [&json!("one"), &json!("two"), &json!("three")],
        "{doc:#}"
    );
    let spans = all_spans(&trace_json(&t, "suid1"));
    let processes = spans_named(&spans, "process");
    assert_eq!(processes.len(), 3, "{spans:#?}");
    let attempts: BTreeSet<&str> = spans
        .iter()
        .filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with("suid/")))
        .filter(|s| s["name"] != "suid/workflow")
        .filter_map(|s| s["span_id"].as_str())
        .collect();
    let parents: BTreeSet<&str> = processes
        .iter()
        .filter_map(|p| p["parent_span_id"].as_str())
        .collect();
    assert_eq!(
        parents, attempts,
        "one process span under each attempt: {spans:#?}"
    );
}

/// Every span of `runs` (one instance's) lies within its parent's interval,
/// its parent among them; the spans, for a message.
#[track_caller]
fn assert_nested(runs: &[Value]) {
    let spans = all_spans(runs);
    let by_id: std::collections::HashMap<&str, &Value> = spans
        .iter()
        .filter_map(|s| Some((s["span_id"].as_str()?, s)))
        .collect();
    let ns = |s: &Value, f: &str| s[f].as_i64().unwrap_or_else(|| panic!("no {f} in {s:#}"));
    for s in &spans {
        let Some(parent) = s["parent_span_id"].as_str() else {
            continue;
        };
        let p = by_id
            .get(parent)
            .unwrap_or_else(|| panic!("no parent {parent} of {s:#}"));
        assert!(
            ns(s, "start_ns") >= ns(p, "start_ns") && ns(s, "end_ns") <= ns(p, "end_ns"),
            "{} ({} .. {}) is not within its parent {} ({} .. {})",
            s["name"],
            s["start_time"],
            s["end_time"],
            p["name"],
            p["start_time"],
            p["end_time"]
        );
    }
}

#[test]
fn every_span_lies_within_its_parent() {
    let t = Test::new();
    // Parallel and sequential steps, an inline retry, a run suspended by a
    // sleep and its resume.
    let ran = run_flow(
        &t,
        "nested",
        r#"
name: nested
steps:
  - id: a
    run: echo a
  - id: b
    run: echo b
  - id: c
    needs: [a, b]
    retry: { max_attempts: 2, interval: 10ms }
    run: '[ "$WF_ATTEMPT" = 2 ]'
  - id: nap
    needs: [c]
    sleep: 1h
  - id: d
    needs: [nap]
    set_state: { done: true }
    run: echo d
"#,
        &["--inline-wait", "1s"],
        &[],
    );
    ran.code(3);
    wf(&t, &["resume", "nested", "--now"]).code(0);
    let runs = trace_json(&t, "nested");
    assert_eq!(runs.len(), 2);
    // Commits in both runs (how many depends on what ends together).
    for run in &runs {
        assert!(
            !spans_named(run["spans"].as_array().unwrap(), "wf.commit").is_empty(),
            "{run:#}"
        );
    }
    assert_nested(&runs);

    // A failure: the compensation's own commit.
    let ran = run_flow(
        &t,
        "undone",
        "name: undone\nsteps:\n  - id: a\n    run: echo a\n    compensate: { run: echo undo }\n  \
         - id: boom\n    needs: [a]\n    run: exit 1\n",
        &[],
        &[],
    );
    ran.code(1);
    let runs = trace_json(&t, "undone");
    assert_eq!(spans_named(&all_spans(&runs), "wf.commit").len(), 2);
    assert_nested(&runs);
}

/// A parent whose `workflow:` step makes a child that sleeps: the parent's
/// first run suspends on the child, which a later run of its own ends
/// (`--now`: the sleep is long enough never to be due by the time the
/// child's run looks, however slow its commits).
fn parent_and_sleeping_child(t: &Test, env: &[(&str, &str)]) -> (String, String) {
    t.write(
        "child.yaml",
        "name: kid\nsteps:\n  - id: first\n    run: echo one\n  - id: nap\n    sleep: 1h\n  \
         - id: last\n    run: echo two\n",
    );
    let parent = t.write(
        "parent.yaml",
        "name: mom\nsteps:\n  - id: before\n    run: echo before\n  - id: call\n    \
         workflow: ./child.yaml\n  - id: after\n    run: echo after\n",
    );
    let p = parent.to_str().unwrap();
    wf_env(t, &["run", p, "--id", "mom1", "--inline-wait", "0s"], env).code(3);
    let kid = wf(t, &["inspect", "mom1", "--json"]).code(0).json()["children"][0]["id"]
        .as_str()
        .expect("a child")
        .to_string();
    wf_env(t, &["resume", &kid, "--now"], env).code(0);
    wf_env(t, &["resume", "mom1"], env).code(0);
    ("mom1".into(), kid)
}

#[test]
fn a_childs_first_run_is_a_child_of_the_attempt_that_made_it() {
    let t = Test::new();
    let (mom, kid) = parent_and_sleeping_child(&t, &[]);
    let runs = trace_json(&t, &mom);
    let of = |id: &str| -> Vec<&Value> { runs.iter().filter(|r| r["instance_id"] == id).collect() };
    assert_eq!(of(&mom).len(), 2, "the parent's two runs: {runs:#?}");
    assert_eq!(
        of(&kid).len(),
        2,
        "the child's two runs, after the parent's"
    );
    assert_eq!(runs[0]["instance_id"], mom.as_str());
    // The attempt that made the child: one span, in the run that began it
    // (it outlived that run), ended ok when the child ended.
    let calls: Vec<Value> = all_spans(&runs)
        .into_iter()
        .filter(|s| s["name"] == "mom/call")
        .collect();
    assert_eq!(calls.len(), 1, "{calls:#?}");
    let call = &calls[0];
    assert_eq!(call["attributes"]["workflow.step.outcome"], "ok");
    assert_eq!(call["trace_id"], of(&mom)[0]["trace_id"]);
    assert_eq!(call["parent_span_id"], of(&mom)[0]["span_id"]);
    assert!(
        call["end_ns"].as_i64()
            > of(&mom)[0]["spans"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["name"] == "mom/workflow")
                .unwrap()["end_ns"]
                .as_i64(),
        "it ends with the child, after the parent's first run"
    );
    // The child's first run: in the parent's trace, under that attempt.
    let first = of(&kid)[0];
    assert_eq!(first["trace_id"], call["trace_id"]);
    assert_eq!(first["parent_span_id"], call["span_id"]);
    // Its second run is a trace of its own, linked to its first.
    let second = of(&kid)[1];
    assert_ne!(second["trace_id"], first["trace_id"]);

    // The tree nests the child's runs under the attempt.
    let tree = wf(&t, &["trace", &mom]).code(0).stdout.clone();
    let lines: Vec<&str> = tree.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("└── mom/call") || l.starts_with("├── mom/call"))
        .unwrap_or_else(|| panic!("no call line:\n{tree}"));
    assert!(
        lines[at + 1..]
            .iter()
            .take_while(|l| l.starts_with("    ") || l.starts_with("│   "))
            .filter(|l| l.contains("kid/workflow"))
            .count()
            == 2,
        "both child runs under the call:\n{tree}"
    );
    assert!(tree.contains(&format!("instance={}", &kid[..12])), "{tree}");
    // `wf trace` with no id: the newest instance that is not a child.
    assert_eq!(wf(&t, &["trace"]).code(0).stdout, tree);
    // --depth 0: the parent alone.
    let alone = wf(&t, &["trace", &mom, "--depth", "0"])
        .code(0)
        .stdout
        .clone();
    assert!(!alone.contains("kid/"), "{alone}");
    assert!(alone.contains("mom/call"), "{alone}");
    let alone_json = wf(&t, &["trace", &mom, "--format", "json", "--depth", "0"])
        .code(0)
        .json();
    assert_eq!(alone_json.as_array().unwrap().len(), 2);
    // OTLP carries the children's spans too, with their parents.
    let otlp =
        parse_with_official_protos(&wf(&t, &["trace", &mom, "--format", "otlp"]).code(0).stdout);
    assert_eq!(
        otlp["spans"].as_array().unwrap().len(),
        all_spans(&runs).len()
    );
    let root = otlp["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["span_id"] == first["span_id"])
        .expect("the child's first root");
    assert_eq!(root["parent_span_id"], call["span_id"]);
    assert_eq!(root["trace_id"], call["trace_id"]);
    // --all shows each instance by itself and takes no --depth.
    wf(&t, &["trace", "--all", "--depth", "1"]).code(2);
}

#[test]
fn a_child_is_exported_live_under_the_attempt_that_made_it() {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    let t = Test::new();
    let (endpoint, got) = otlp_receiver();
    let (mom, kid) =
        parent_and_sleeping_child(&t, &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str())]);
    let mut received = Vec::new();
    for (_, _, body) in got.lock().unwrap().iter() {
        let req = ExportTraceServiceRequest::decode(body.as_slice()).expect("a valid protobuf");
        for rs in req.resource_spans {
            for ss in rs.scope_spans {
                received.extend(ss.spans.iter().map(|s| {
                    (
                        hex::encode(&s.trace_id),
                        hex::encode(&s.span_id),
                        hex::encode(&s.parent_span_id),
                    )
                }));
            }
        }
    }
    // Each stored span of the parent and of the child sent once, with the
    // stored ids and parents.
    let runs = trace_json(&t, &mom);
    let mut want: Vec<(String, String, String)> = all_spans(&runs)
        .iter()
        .map(|s| {
            (
                s["trace_id"].as_str().unwrap().into(),
                s["span_id"].as_str().unwrap().into(),
                s["parent_span_id"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    want.sort();
    received.sort();
    assert_eq!(received, want);
    let first = runs
        .iter()
        .find(|r| r["instance_id"] == kid.as_str())
        .unwrap();
    let call = all_spans(&runs)
        .into_iter()
        .find(|s| s["name"] == "mom/call")
        .unwrap();
    assert!(received.contains(&(
        call["trace_id"].as_str().unwrap().into(),
        first["span_id"].as_str().unwrap().into(),
        call["span_id"].as_str().unwrap().into(),
    )));
}
