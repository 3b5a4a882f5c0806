//! Secrets in HTTP steps: sent where asked, never written, masked inside JSON bodies, and missing ones refused before anything runs.

use super::*;

/// With characters a URL or a form percent-encodes.
const SECRET: &str = "sekr1t+Tok3n/9f3=KzQ";

/// The forms SECRET takes once encoded: as `query:` parameters and form
/// bodies encode it (upper- and lower-case hex).
const SECRET_FORMS: [&str; 3] = [
    SECRET,
    "sekr1t%2BTok3n%2F9f3%3DKzQ",
    "sekr1t%2bTok3n%2f9f3%3dKzQ",
];

/// Every byte `wf` stored: the database and its WAL and shm files (on
/// PostgreSQL: a dump of the test's schema, every row of every table).
pub(crate) fn database_bytes(t: &Test) -> Vec<(String, Vec<u8>)> {
    if let Some((url, schema)) = &t.pg {
        let exists = t.psql(&format!(
            "SELECT count(*) FROM pg_namespace WHERE nspname = '{schema}'"
        ));
        if exists == "0" {
            return Vec::new();
        }
        let out = std::process::Command::new(crate::pg_tool("pg_dump"))
            .arg(url)
            .args(["--data-only", "--schema", schema])
            .output()
            .expect("pg_dump");
        assert!(
            out.status.success(),
            "pg_dump: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let has_rows = String::from_utf8_lossy(&out.stdout).contains("COPY");
        return if has_rows {
            vec![(format!("pg_dump of schema {schema}"), out.stdout)]
        } else {
            Vec::new()
        };
    }
    let mut files = Vec::new();
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let path = format!("{}{suffix}", t.db.display());
        if let Ok(bytes) = std::fs::read(&path) {
            files.push((path, bytes));
        }
    }
    files
}

pub(crate) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn secrets_are_used_but_never_written() {
    let otlp = Server::always(Reply::status(200).header("Content-Type", "application/x-protobuf"));
    let t = Test::new()
        .env("WF_TEST_API_TOKEN", SECRET)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp.url());
    // The API echoes the secret back: in an error body, a header and JSON.
    let api = Server::start(|n, req| {
        let auth = req.header("authorization").unwrap_or("").to_string();
        if n == 0 {
            Reply::text(503, &format!("overloaded, retry with {auth}"))
        } else {
            Reply::json(200, &json!({"echo": SECRET, "auth": auth})).header("X-Echo", SECRET)
        }
    });
    let path = t.write(
        "secret.yaml",
        r#"
name: secret-flow
inputs:
  base: { required: true }
secrets: [WF_TEST_API_TOKEN]
env: { TOKEN_URL: "${{ inputs.base }}/t?token=${{ secrets.WF_TEST_API_TOKEN }}" }
steps:
  - id: call
    http:
      method: POST
      url: "${{ inputs.base }}/charge?token=${{ secrets.WF_TEST_API_TOKEN }}"
      query: { t: "${{ secrets.WF_TEST_API_TOKEN }}" }
      headers: { Authorization: "Bearer ${{ secrets.WF_TEST_API_TOKEN }}" }
      json: { token: "${{ secrets.WF_TEST_API_TOKEN }}" }
    retry: { max_attempts: 2, interval: 10ms }
    set_state: { echoed: "${{ output.json.echo }}" }
  - id: shell
    run: echo "token is ${{ secrets.WF_TEST_API_TOKEN }}"; echo "err $TOKEN_URL" >&2; echo "key=${{ secrets.WF_TEST_API_TOKEN }}" >> "$WF_OUTPUT"
  - id: argv
    run: ["echo", "${{ secrets.WF_TEST_API_TOKEN }}"]
  - id: as-key
    run: |
      printf '{"%s": {"%s": 1}}' "${{ secrets.WF_TEST_API_TOKEN }}" "${{ secrets.WF_TEST_API_TOKEN }}"
    set_state: { keyed: "${{ output.json }}" }
  - id: fails
    run: echo "failing with ${{ secrets.WF_TEST_API_TOKEN }}" >&2; exit 7
    retry: { max_attempts: 2, interval: 10ms }
"#,
    );
    let run = t.wf(&[
        "run",
        path.to_str().unwrap(),
        "--id",
        "sec1",
        "--input",
        &format!("base={}", api.url()),
    ]);
    run.code(1);

    // The secret was really used.
    let reqs = api.requests();
    assert_eq!(reqs.len(), 2, "{reqs:#?}");
    for r in &reqs {
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {SECRET}").as_str())
        );
        // Sent as given in `url`, and form-encoded from `query`.
        assert!(
            r.target.contains(&format!("token={SECRET}&")),
            "{}",
            r.target
        );
        assert!(
            r.target.ends_with(&format!("&t={}", SECRET_FORMS[1])),
            "{}",
            r.target
        );
        assert_eq!(
            serde_json::from_slice::<Value>(&r.body).unwrap(),
            json!({"token": SECRET})
        );
    }
    let logs = t.wf(&["logs", "sec1", "shell"]);
    logs.code(0);
    assert!(
        logs.stdout.contains("token is ***"),
        "the shell step got the secret, masked in its log:\n{}{}",
        logs.stdout,
        logs.stderr
    );
    let inspect = t.inspect("sec1");
    assert_eq!(inspect["state"]["echoed"], "***");
    assert_eq!(Test::step(&inspect, "shell")["output"]["key"], "***");
    assert_eq!(Test::step(&inspect, "argv")["output"]["stdout"], "***");
    assert_eq!(inspect["state"]["keyed"], json!({"***": {"***": 1}}));
    let call = Test::step(&inspect, "call");
    assert_eq!(call["attempts"], 2);
    assert_eq!(call["output"]["headers"]["x-echo"], "***");
    assert_eq!(call["output"]["json"]["auth"], "Bearer ***");

    // A second instance, run with `--json` (the API now answers 200 at once).
    let run_json = t.wf(&[
        "run",
        path.to_str().unwrap(),
        "--json",
        "--id",
        "sec2",
        "--input",
        &format!("base={}", api.url()),
    ]);
    run_json.code(1);
    assert_eq!(run_json.json()["status"], "failed");

    // ...and is nowhere in what wf printed.
    let mut outputs: Vec<(String, Ran)> =
        vec![("run".into(), run), ("run --json".into(), run_json)];
    let commands: Vec<Vec<&str>> = vec![
        vec!["inspect", "sec1"],
        vec!["inspect", "sec1", "--attempts"],
        vec!["inspect", "sec1", "--json"],
        vec!["inspect", "sec1", "--json", "--attempts"],
        vec!["logs", "sec1"],
        vec!["logs", "sec1", "call"],
        vec!["logs", "sec1", "call", "--attempt", "1"],
        vec!["logs", "sec1", "shell"],
        vec!["logs", "sec1", "argv"],
        vec!["logs", "sec1", "fails"],
        vec!["logs", "sec1", "fails", "--attempt", "1"],
        vec!["list"],
        vec!["list", "--json"],
    ];
    for args in &commands {
        let ran = t.wf(args);
        ran.code(0);
        outputs.push((args.join(" "), ran));
    }
    // `wf trace` in every format; asserted whenever the command exists.
    let has_trace = t.wf(&["trace", "--help"]).code == 0;
    if has_trace {
        for args in [
            vec!["trace", "sec1"],
            vec!["trace", "sec1", "--format", "tree"],
            vec!["trace", "sec1", "--format", "otlp"],
            vec!["trace", "sec1", "--format", "json"],
            vec!["trace", "--all", "--format", "otlp"],
        ] {
            let ran = t.wf(&args);
            ran.code(0);
            outputs.push((args.join(" "), ran));
        }
    }
    for (what, ran) in &outputs {
        for form in SECRET_FORMS {
            assert!(
                !ran.stdout.contains(form) && !ran.stderr.contains(form),
                "`wf {what}` shows the secret as {form}:\n--- stdout\n{}\n--- stderr\n{}",
                ran.stdout,
                ran.stderr
            );
        }
    }
    // The trace did record the HTTP call (with the URL masked).
    if has_trace {
        let json = &outputs
            .iter()
            .find(|(w, _)| w == "trace sec1 --format json")
            .unwrap()
            .1
            .stdout;
        assert!(
            json.contains("token=***") && json.contains("t=***"),
            "{json}"
        );
    }

    // Live OTLP export got the spans, masked.
    let exported = otlp.requests();
    assert!(
        exported
            .iter()
            .any(|r| r.path() == "/v1/traces" && contains(&r.body, b"secret-flow")),
        "no spans were exported live: {exported:#?}"
    );
    for r in &exported {
        for form in SECRET_FORMS {
            assert!(
                !contains(&r.body, form.as_bytes()),
                "the OTLP export carries the secret as {form}"
            );
        }
    }

    // The database, byte for byte, after wf exited.
    let files = database_bytes(&t);
    assert!(!files.is_empty(), "no database at {}", t.db.display());
    for (path, bytes) in &files {
        for form in SECRET_FORMS {
            assert!(
                !contains(bytes, form.as_bytes()),
                "{path} holds the secret as {form}"
            );
        }
    }
}

#[test]
fn a_secret_echoed_inside_a_json_body_is_masked_too() {
    // A secret with characters JSON escapes: an API that echoes it back in a
    // JSON document puts it in the raw `body` in its escaped form.
    const ODD: &str = r#"odd"se\cr3t-x7Q"#;
    let t = Test::new().env("WF_TEST_ODD_TOKEN", ODD);
    let server = Server::start(|_, req| {
        let sent: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        Reply::json(200, &json!({"echo": sent["token"]}))
    });
    let ran = run_with_base(
        &t,
        r#"
name: secret-json
inputs:
  base: { required: true }
secrets: [WF_TEST_ODD_TOKEN]
steps:
  - id: call
    http:
      method: POST
      url: "${{ inputs.base }}/echo"
      json: { token: "${{ secrets.WF_TEST_ODD_TOKEN }}" }
"#,
        &server.url(),
        "odd1",
    );
    ran.code(0);
    let reqs = server.requests();
    assert_eq!(
        serde_json::from_slice::<Value>(&reqs[0].body).unwrap()["token"],
        ODD,
        "the secret was sent"
    );
    let escaped = serde_json::to_string(ODD).unwrap();
    let escaped = &escaped[1..escaped.len() - 1];
    let inspect = t.inspect("odd1");
    let out = &Test::step(&inspect, "call")["output"];
    assert_eq!(out["json"]["echo"], "***");
    let body = out["body"].as_str().unwrap();
    assert!(
        !body.contains(ODD) && !body.contains(escaped),
        "the raw body shows the secret: {body}"
    );
    let files = database_bytes(&t);
    for (path, bytes) in &files {
        for needle in [ODD, escaped] {
            assert!(
                !contains(bytes, needle.as_bytes()),
                "{path} holds the secret as {needle}"
            );
        }
    }
}

#[test]
fn a_missing_secret_is_an_error_before_anything_runs() {
    let t = Test::new();
    let server = Server::always(Reply::text(200, "ok"));
    let path = t.write(
        "secret.yaml",
        r#"
name: secret-missing
inputs:
  base: { required: true }
secrets: [WF_TEST_MISSING_SECRET]
steps:
  - id: first
    http: { url: "${{ inputs.base }}/first" }
  - id: call
    http:
      url: "${{ inputs.base }}/x"
      headers: { Authorization: "Bearer ${{ secrets.WF_TEST_MISSING_SECRET }}" }
"#,
    );
    let out = t
        .cmd()
        .env_remove("WF_TEST_MISSING_SECRET")
        .args(["run", path.to_str().unwrap()])
        .args(["--input", &format!("base={}", server.url())])
        .output()
        .expect("run wf");
    let ran = Ran::from(out);
    ran.code(2);
    assert!(
        ran.stderr.contains("WF_TEST_MISSING_SECRET"),
        "the error names the variable:\n{}",
        ran.stderr
    );
    assert_eq!(
        ran.stderr.trim_end().lines().count(),
        1,
        "one clear line:\n{}",
        ran.stderr
    );
    assert!(database_bytes(&t).is_empty(), "a database was written");
    assert!(server.requests().is_empty(), "a step ran");
}

// ---------------------------------------------------------------------------
// The README example
// ---------------------------------------------------------------------------

#[test]
fn the_http_example_runs_against_a_server() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("workflows");
    let example = dir.join("http.yaml");
    let document =
        std::fs::read(dir.join("http-example.json")).expect("workflows/http-example.json");
    let doc: Value = serde_json::from_slice(&document).expect("the example document is JSON");
    let server = Server::start(move |_, req| match req.path() {
        "/http-example.json" => Reply::status(200)
            .header("Content-Type", "application/json")
            .body(document.clone()),
        _ => Reply::text(404, "not found"),
    });
    let t = Test::new();
    t.wf(&["validate", example.to_str().unwrap()]).code(0);
    let ran = t.wf(&[
        "run",
        example.to_str().unwrap(),
        "--json",
        "--input",
        &format!("base_url={}", server.url()),
    ]);
    ran.code(0);
    let id = ran.json()["id"].as_str().expect("id").to_string();
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1, "{reqs:#?}");
    assert_eq!(reqs[0].method, "GET");
    assert_eq!(reqs[0].path(), "/http-example.json");

    let inspect = t.inspect(&id);
    assert_eq!(inspect["status"], "completed");
    let fetch = Test::step(&inspect, "fetch");
    assert_eq!(fetch["output"]["status"], 200);
    assert_eq!(fetch["output"]["json"], doc);
    let version = doc["release"]["version"].as_str().expect("release.version");
    let announce = Test::step(&inspect, "announce");
    assert!(
        announce["output"]["stdout"]
            .as_str()
            .is_some_and(|s| s.contains(version)),
        "the JSON field reached the shell step: {announce:#}"
    );
    assert_eq!(inspect["state"]["release"], version);
}
