//! The API's OpenAPI document against the live server: schemathesis (the
//! property-based tester for OpenAPI services, pinned in the tests' venv by
//! `scripts/test`) reads `GET /api/v1/openapi.json` and sends what it
//! allows and what it does not, every check on (answers of the documented
//! statuses, content types, headers and schemas; schema-valid requests
//! accepted and invalid ones refused; no 5xx), then follows the
//! document's links in its stateful phase. Any finding, and any warning
//! (an operation it could not reach, a schema the server mostly refuses),
//! fails the test. On each backend, as every test here runs.

use crate::Test;
use crate::serve::{Server, TOKEN};
use std::process::Command;

/// A workflow with an input, a step, a wait (so that the instance the run
/// starts is there to signal, resume and cancel) and a webhook.
const HELLO: &str = r#"name: hello
inputs:
  who: { default: world }
on:
  webhook:
    name: hello
    secret: HOOK_SECRET
steps:
  - id: greet
    run: echo hello ${{ inputs.who }}
  - id: wait
    needs: [greet]
    wait_for_event: { name: go, timeout: 1h }
"#;

/// What the document cannot say, told to schemathesis: the ids the
/// server holds, and the two bodies whose validity depends on more than
/// their shape. Everything else is checked as the document says.
const CONFIG: &str = r#"
[warnings]
fail-on = true

[parameters]
id = "demo1"
step = "greet"

[[operations]]
include-path-regex = "^/(api/v1/workflows|hooks)/"
parameters = { name = "hello" }

# A webhook's signature is an HMAC of the body with the server's secret,
# which a fuzzer cannot make: every delivery it sends is refused (401).
# tests/cli/webhooks.rs sends signed ones.
[[operations]]
include-operation-id = "deliver_webhook"
warnings.fail-on = ["missing_test_data", "unresolvable_reference", "unsupported_regex", "validation_mismatch"]

# The inputs a registered workflow declares, and a step of it to restart
# from, are the workflow's, not the document's: most bodies carry ones
# that fit, and inputs of the right shape that do not are refused (400).
[[operations]]
include-operation-id = "start_instance"
parameters = { "body.inputs" = { who = "ana" } }
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409"]

[[operations]]
include-operation-id = "restart_instance"
parameters = { "body.from" = "greet" }

# The bytes of an archive are more than a schema says: a body of the
# right shape may be refused (400), never answered otherwise.
[[operations]]
include-operation-id = "import_archive"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409"]
"#;

#[test]
fn schemathesis_finds_nothing_in_the_document_or_the_server() {
    let t = Test::new();
    t.write("hello.yaml", HELLO);
    t.wf(&["workflow", "add", "hello.yaml"]).code(0);
    t.wf(&["run", "--detach", "--id", "demo1", "hello.yaml"])
        .code(0);
    let config = t.write("schemathesis.toml", CONFIG);
    let s = Server::start(&t, &["--worker"], &[("HOOK_SECRET", "s3cret")]);
    // `POST /api/v1/db/copy` is left out: it writes a database wherever
    // its `to` names, and a fuzzer's `to` could be any path of the
    // machine. tests/cli/db_api.rs tests it.
    let out = Command::new("schemathesis")
        .current_dir(t.path())
        .arg("--no-color")
        .arg("--config-file")
        .arg(&config)
        .args(["run", &format!("{}/api/v1/openapi.json", s.base)])
        .args(["-H", &format!("Authorization: Bearer {TOKEN}")])
        .args(["--checks", "all", "--max-examples", "25"])
        .args([
            "--generation-deterministic",
            "--exclude-path",
            "/api/v1/db/copy",
        ])
        .output()
        .expect("schemathesis (run `scripts/test`, which installs it into the tests' venv)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "schemathesis found something:\n{text}\n{}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        s.log()
    );
    // It ran every phase on every operation but the one left out.
    assert!(text.contains("Selected: 36/37"), "{text}");
    for phase in ["Examples", "Coverage", "Fuzzing", "Stateful"] {
        assert!(text.contains(&format!("✅ {phase}")), "{phase}:\n{text}");
    }
}

/// The answers the document promises where the CLI's words once leaked:
/// each refusal names the field or value in HTTP words, with the status
/// of its kind, and a refused request records nothing.
#[test]
fn refusals_name_the_field_and_have_the_status_of_their_kind() {
    let t = Test::new();
    t.write("hello.yaml", HELLO);
    t.wf(&["workflow", "add", "hello.yaml"]).code(0);
    t.wf(&["run", "--detach", "--id", "demo1", "hello.yaml"])
        .code(0);
    let s = Server::start(&t, &[], &[("HOOK_SECRET", "s3cret")]);
    let before = t.inspect("demo1");
    let refused = |r: crate::serve::Resp, status: u16, code: &str, words: &str| {
        assert_eq!(
            (r.status, r.code().as_str()),
            (status, code),
            "{}",
            r.text()
        );
        let message = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(message.contains(words), "{message}");
        assert!(
            !message.contains("--"),
            "a CLI flag in an API answer: {message}"
        );
    };
    // A NUL anywhere in a request: a query's value, a path, a body's
    // string or key, however deep.
    refused(
        s.get("/api/v1/instances?workflow=a%00b"),
        400,
        "invalid",
        "`workflow` holds a NUL",
    );
    refused(s.get("/api/v1/workflows/a%00b"), 400, "invalid", "NUL");
    let r = s.call(
        "POST",
        "/api/v1/instances/demo1/signal",
        &[("content-type", "application/json")],
        Some(br#"{"event": "g\u0000o"}"#.to_vec()),
    );
    refused(r, 400, "invalid", "the body's `event` holds a NUL");
    refused(
        s.post(
            "/api/v1/bulk/cancel",
            serde_json::json!({"ids": ["demo1"], "reason": "a\u{0}"}),
        ),
        400,
        "invalid",
        "the body's `reason`",
    );
    refused(
        s.post(
            "/api/v1/workflows/hello/instances",
            serde_json::json!({"labels": {"a\u{0}": "b"}}),
        ),
        400,
        "invalid",
        "holds a NUL",
    );
    // Flags take true or false (1 or 0), nothing else.
    refused(
        s.get("/api/v1/instances/demo1?attempts"),
        400,
        "invalid",
        "`attempts` is ``",
    );
    assert_eq!(s.get("/api/v1/instances/demo1?attempts=true").status, 200);
    assert_eq!(s.get("/api/v1/instances/demo1?attempts=0").status, 200);
    // Out of range, and not a duration.
    refused(
        s.get("/api/v1/queues/k?limit=0"),
        400,
        "invalid",
        "`limit` is 0: from 1 to 1000",
    );
    refused(
        s.get("/api/v1/db/actions?limit=-1"),
        400,
        "invalid",
        "`limit` is -1",
    );
    refused(
        s.get("/api/v1/instances/demo1/logs/greet?attempt=0"),
        400,
        "invalid",
        "`attempt` is 0",
    );
    refused(
        s.get("/api/v1/instances?since=1h%20"),
        400,
        "invalid",
        "`since`",
    );
    assert_eq!(
        s.get("/api/v1/instances?since=99999999999999999999999d")
            .status,
        200
    );
    // What is not there is not found; what the state refuses, a conflict.
    refused(
        s.get("/api/v1/instances/demo1/logs/greet?attempt=7"),
        404,
        "not_found",
        "has no attempt 7",
    );
    refused(
        s.post(
            "/api/v1/instances/demo1/restart",
            serde_json::json!({"from": "greet"}),
        ),
        409,
        "conflict",
        "only an ended instance",
    );
    let (done, _) = t.run_yaml(
        "done.yaml",
        "name: done\nsteps:\n  - id: a\n    run: 'true'\n",
        &[],
    );
    refused(
        s.post(
            &format!("/api/v1/instances/{done}/restart"),
            serde_json::json!({"from": "nope"}),
        ),
        404,
        "not_found",
        "has no step `nope`",
    );
    // A prefix that names several is well formed: the ids there are make
    // it ambiguous (409), as a missing one is not found (404).
    for id in ["amb-1", "amb-2"] {
        t.wf(&["run", "--id", id, "done.yaml"]).code(0);
    }
    refused(
        s.get("/api/v1/instances/amb-"),
        409,
        "ambiguous",
        "matches amb-1, amb-2",
    );
    refused(
        s.get("/api/v1/instances?parent=amb-"),
        409,
        "ambiguous",
        "is ambiguous",
    );
    refused(
        s.call("DELETE", "/api/v1/tokens/ghost", &[], None),
        404,
        "not_found",
        "no token is named `ghost`",
    );
    let made = s.post(
        "/api/v1/tokens",
        serde_json::json!({"name": "ci", "scope": "read"}),
    );
    assert_eq!(made.status, 201, "{}", made.text());
    refused(
        s.post(
            "/api/v1/tokens",
            serde_json::json!({"name": "ci", "scope": "read"}),
        ),
        409,
        "conflict",
        "a token named `ci` exists",
    );
    refused(
        s.post(
            "/api/v1/tokens",
            serde_json::json!({"name": "default", "scope": "read"}),
        ),
        409,
        "conflict",
        "the server's own token",
    );
    // A bulk body gives `ids` (not empty) or `filter`, not both; a filter
    // is an object.
    refused(
        s.post(
            "/api/v1/bulk/cancel",
            serde_json::json!({"ids": ["demo1"], "filter": {}}),
        ),
        400,
        "invalid",
        "one of the two",
    );
    refused(
        s.post("/api/v1/bulk/cancel", serde_json::json!({"filter": [null]})),
        400,
        "invalid",
        "`filter`",
    );
    // wf's own labels may be filtered on, not set.
    assert_eq!(
        s.get("/api/v1/instances?label=wf.webhook=hello").status,
        200
    );
    // Nothing above was recorded.
    let after = t.inspect("demo1");
    assert_eq!(after["events"], before["events"]);
    assert_eq!(after["runs"], before["runs"]);
    assert_eq!(after["status"], before["status"]);
    // Free JSON is kept as JSON text, where a NUL is an escape: a signal's
    // data may hold one, on either backend, and reads back as sent.
    let r = s.call(
        "POST",
        "/api/v1/instances/demo1/signal",
        &[("content-type", "application/json")],
        Some(br#"{"event": "go", "data": {"a\u0000": [1, "x\u0000y"]}}"#.to_vec()),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let events = s.get("/api/v1/instances/demo1/events").json();
    assert_eq!(
        events[0]["data"],
        serde_json::json!({"a\u{0}": [1, "x\u{0}y"]}),
        "{events}"
    );
}

/// What the generated client does: start an instance of `hello`, wait
/// for it to wait, signal it, and read its result, all through the typed
/// functions openapi-python-client made from the document. It prints the
/// result's status and the instance's id.
const CLIENT: &str = r#"
import json, sys, time
from wf_client import AuthenticatedClient
from wf_client.api.default import get_instance, get_instance_result, signal_instance, start_instance
from wf_client.models import Error, ResultView, SignalBody, SignalView, StartBody, Started

client = AuthenticatedClient(base_url=sys.argv[1], token=sys.argv[2], raise_on_unexpected_status=True)
started = start_instance.sync(name="hello", client=client, body=StartBody.from_dict({"inputs": {"who": "ana"}, "labels": {"via": "client"}}))
assert isinstance(started, Started), started
assert started.created and started.workflow == "hello", started
deadline = time.time() + 60
while True:
    inst = get_instance.sync(id=started.id, client=client)
    if inst.status.value == "waiting":
        break
    assert time.time() < deadline, inst.status
    time.sleep(0.05)
refused = signal_instance.sync(id=started.id, client=client, body=SignalBody(event="child:x"))
assert isinstance(refused, Error) and refused.error.code.value == "invalid", refused
sent = signal_instance.sync(id=started.id, client=client, body=SignalBody(event="go", data={"by": "client"}))
assert isinstance(sent, SignalView) and sent.delivered, sent
result = get_instance_result.sync(id=started.id, client=client, wait="60s")
assert isinstance(result, ResultView), result
print(json.dumps({"id": started.id, "status": result.status.value}))
"#;

#[test]
fn a_client_generated_from_the_document_starts_signals_and_reads_an_instance() {
    let t = Test::new();
    t.write("hello.yaml", HELLO);
    t.wf(&["workflow", "add", "hello.yaml"]).code(0);
    let s = Server::start(&t, &["--worker"], &[("HOOK_SECRET", "s3cret")]);
    let doc = s.get("/api/v1/openapi.json");
    assert_eq!(doc.status, 200);
    let spec = t.path().join("openapi.json");
    std::fs::write(&spec, &doc.body).unwrap();
    // No formatter run after it (its default runs ruff); the SQLite file
    // a backup answers is bytes to this generator.
    let config = t.write(
        "generator.yaml",
        "post_hooks: []\npackage_name_override: wf_client\ncontent_type_overrides:\n  application/vnd.sqlite3: application/octet-stream\n",
    );
    let out = Command::new("openapi-python-client")
        .current_dir(t.path())
        .args(["generate", "--meta", "none", "--path"])
        .arg(&spec)
        .arg("--config")
        .arg(&config)
        .args(["--output-path", "wf_client"])
        .output()
        .expect(
            "openapi-python-client (run `scripts/test`, which installs it into the tests' venv)",
        );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    // Every schema and operation made it into the client.
    assert!(!said.contains("Warning"), "{said}");
    let out = Command::new("python3")
        .current_dir(t.path())
        .env("PYTHONPATH", t.path())
        .args(["-c", CLIENT, &s.base, TOKEN])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        s.log()
    );
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["status"], "completed", "{got}");
    // The CLI sees what the client did.
    let id = got["id"].as_str().unwrap();
    let i = t.inspect(id);
    assert_eq!(i["status"], "completed");
    assert_eq!(i["inputs"]["who"], "ana");
    assert_eq!(i["labels"]["via"], "client");
    assert_eq!(i["events"][0]["name"], "go");
    assert_eq!(i["events"][0]["data"]["by"], "client");
    assert_eq!(i["started_by"], "token:default");
}

/// Checks each answer given (a JSON file of `[[path, method, status,
/// body], …]`) against the schema the document gives that answer, with
/// the document's components beside it for its `$ref`s (jsonschema, Draft
/// 2020-12, formats checked). Prints how many it checked.
const VALIDATE: &str = r#"
import json, sys, jsonschema
doc = json.load(open(sys.argv[1]))
answers = json.load(open(sys.argv[2]))
for path, method, status, body in answers:
    answer = doc["paths"][path][method]["responses"][str(status)]
    schema = dict(answer["content"]["application/json"]["schema"])
    schema["components"] = doc["components"]
    v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    errors = sorted(v.iter_errors(body), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        sys.exit(f"{method} {path} {status}: at {list(e.absolute_path)}: {e.message}")
print(len(answers))
"#;

/// A history with what a schema must say and a fuzzer's data seldom
/// reaches: children of a `for_each` of `workflow:` steps, a matrix whose
/// units are labelled, a cached attempt, a failed step with its error, an
/// instance queued behind another, a schedule, a webhook, labels, events.
/// Every read's answer is checked against the document's schema for it.
#[test]
fn every_read_of_a_rich_history_answers_as_the_document_says() {
    let t = Test::new();
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("workflows");
    let release = repo.join("release.yaml");
    t.wf(&["workflow", "add", release.to_str().unwrap()])
        .code(0);
    t.wf(&["run", release.to_str().unwrap()]).code(0);
    t.wf(&[
        "schedule",
        "add",
        repo.join("nightly.yaml").to_str().unwrap(),
    ])
    .code(0);
    t.write("src/a.txt", "a");
    let built = "name: built\nlabels: { team: infra }\nsteps:\n  - id: build\n    matrix: { os: [linux, mac] }\n    run: echo ${{ matrix.os }}\n    cache: { key: \"${{ hashFiles('src/**') }}\" }\n  - id: wait\n    needs: [build]\n    wait_for_event: { name: go, timeout: 1h }\n";
    let (first, _) = t.run_yaml("built.yaml", built, &["--id", "built1"]);
    t.wf(&["signal", &first, "go", "--data", r#"{"by": "ana"}"#])
        .code(0);
    t.wf(&["resume", &first]).code(0);
    t.wf(&["run", "--id", "built2", "built.yaml"]).code(3);
    let failing = "name: failing\nsteps:\n  - id: boom\n    run: echo no >&2; exit 3\n";
    t.run_yaml("failing.yaml", failing, &[]).1.code(1);
    let deploy = repo.join("deploy.yaml");
    for _ in 0..2 {
        t.wf(&[
            "run",
            "--detach",
            "--input",
            "env=prod",
            deploy.to_str().unwrap(),
        ])
        .code(0);
    }
    let s = Server::start(&t, &[], &[("HOOK_SECRET", "s3cret")]);
    let doc = s.get("/api/v1/openapi.json").json();
    let mut answers = Vec::new();
    let mut read = |template: &str, path: String| {
        let r = s.get(&path);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        answers.push(serde_json::json!([template, "get", 200, r.json()]));
        r.json()
    };
    let list = read("/api/v1/instances", "/api/v1/instances?limit=1000".into());
    let ids: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect();
    assert!(ids.len() >= 9, "{ids:?}");
    for id in &ids {
        let one = read(
            "/api/v1/instances/{id}",
            format!("/api/v1/instances/{id}?attempts=true"),
        );
        for (tail, template) in [
            ("attempts", "/api/v1/instances/{id}/attempts"),
            ("events", "/api/v1/instances/{id}/events"),
            ("logs", "/api/v1/instances/{id}/logs"),
            ("result", "/api/v1/instances/{id}/result"),
            ("definitions", "/api/v1/instances/{id}/definitions"),
        ] {
            read(template, format!("/api/v1/instances/{id}/{tail}"));
        }
        if let Some(step) = one["steps"][0]["id"]
            .as_str()
            .filter(|_| one["steps"][0]["attempts"] != 0)
        {
            read(
                "/api/v1/instances/{id}/logs/{step}",
                format!("/api/v1/instances/{id}/logs/{step}"),
            );
        }
    }
    read(
        "/api/v1/instances/counts",
        "/api/v1/instances/counts?label=team=infra".into(),
    );
    let queues = read("/api/v1/queues", "/api/v1/queues".into());
    let key = queues[0]["key"].as_str().expect("a queue key").to_string();
    read("/api/v1/queues/{key}", format!("/api/v1/queues/{key}"));
    for (template, path) in [
        ("/api/v1/schedules", "/api/v1/schedules"),
        ("/api/v1/workflows", "/api/v1/workflows"),
        ("/api/v1/workflows/{name}", "/api/v1/workflows/release"),
        ("/api/v1/db/check", "/api/v1/db/check"),
        ("/api/v1/db/actions", "/api/v1/db/actions"),
        ("/api/v1/tokens", "/api/v1/tokens"),
        ("/healthz", "/healthz"),
    ] {
        read(template, path.into());
    }
    // What the history holds is in the answers checked.
    let seen = serde_json::to_string(&answers).unwrap();
    for what in [
        "\"children\"",
        "\"label\":\"build[os=linux]\"",
        "\"cached_from\"",
        "\"error_type\":\"exit.3\"",
        "\"status\":\"queued\"",
        "\"next_fire_at\"",
        "\"webhook\"",
        "\"by\":\"ana\"",
    ] {
        assert!(seen.contains(what), "{what} is in no answer");
    }
    let spec = t.path().join("openapi.json");
    std::fs::write(&spec, serde_json::to_vec(&doc).unwrap()).unwrap();
    let given = t.path().join("answers.json");
    std::fs::write(&given, serde_json::to_vec(&answers).unwrap()).unwrap();
    let checked = crate::python(VALIDATE, &[spec.as_os_str(), given.as_os_str()]);
    assert_eq!(checked.trim(), answers.len().to_string());
}
