//! A request across attempts: interrupted and resumed, the same Idempotency-Key on every attempt and after a crash, a traceparent for each.

use super::*;

#[test]
fn sigterm_mid_request_interrupts_and_resume_completes() {
    let t = Test::new();
    let server = Server::sequence(vec![
        Reply::hang(),
        Reply::json(200, &json!({"id": "ch_1"})),
    ]);
    let path = t.write(
        "term.yaml",
        r#"
name: http-term
inputs:
  base: { required: true }
steps:
  - id: charge
    http:
      method: POST
      url: "${{ inputs.base }}/charge"
      json: { amount: 5 }
      idempotency_key: true
"#,
    );
    let mut child = t
        .cmd()
        .args(["run", path.to_str().unwrap(), "--id", "term1"])
        .args(["--input", &format!("base={}", server.url())])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn wf run");
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.requests().is_empty() {
        if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
            let _ = child.kill();
            panic!("wf never sent the request");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = child.id().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill -TERM");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130), "interrupted exit code");
    let inspect = t.inspect("term1");
    let step = Test::step(&inspect, "charge");
    assert_eq!(
        attempt_field(step, "outcome"),
        vec![json!("interrupted")],
        "{step:#}"
    );

    t.wf(&["resume", "term1"]).code(0);
    let inspect = t.inspect("term1");
    assert_eq!(inspect["status"], "completed");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].header("idempotency-key"), Some("term1/charge"));
    assert_eq!(
        reqs[0].header("idempotency-key"),
        reqs[1].header("idempotency-key")
    );
}

// ---------------------------------------------------------------------------
// Idempotency key and trace context
// ---------------------------------------------------------------------------

#[test]
fn idempotency_key_is_the_same_on_every_attempt() {
    let t = Test::new();
    let server = Server::sequence(vec![
        Reply::text(503, "busy"),
        Reply::text(500, "oops"),
        Reply::json(200, &json!({"id": "ch_1"})),
    ]);
    let ran = run_with_base(
        &t,
        r#"
name: http-idem
inputs:
  base: { required: true }
steps:
  - id: charge
    http:
      method: POST
      url: "${{ inputs.base }}/charge"
      json: { amount: 5 }
      idempotency_key: true
    retry: { max_attempts: 3, interval: 10ms }
"#,
        &server.url(),
        "idem1",
    );
    ran.code(0);
    let keys: Vec<Option<String>> = server
        .requests()
        .iter()
        .map(|r| r.header("idempotency-key").map(String::from))
        .collect();
    assert_eq!(
        keys,
        vec![Some("idem1/charge".to_string()); 3],
        "Idempotency-Key: <instance>/<step> on every attempt"
    );
}

#[test]
fn idempotency_key_survives_a_crash_and_resume() {
    use std::os::unix::process::ExitStatusExt;
    let t = Test::new();
    let server = Server::sequence(vec![
        Reply::hang(),
        Reply::json(200, &json!({"id": "ch_1"})),
    ]);
    let path = t.write(
        "crash.yaml",
        r#"
name: http-crash
inputs:
  base: { required: true }
steps:
  - id: charge
    http:
      method: POST
      url: "${{ inputs.base }}/charge"
      json: { amount: 5 }
      idempotency_key: true
    retry: { max_attempts: 3, interval: 10ms }
"#,
    );
    let mut child = t
        .cmd()
        .args(["run", path.to_str().unwrap(), "--id", "crash-idem"])
        .args(["--input", &format!("base={}", server.url())])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn wf run");
    // wf is mid-request once the server has the (hanging) request.
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.requests().is_empty() {
        if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
            let _ = child.kill();
            panic!("wf never sent the request");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL wf run");
    let status = child.wait().expect("wait");
    assert_eq!(status.signal(), Some(9), "wf run was killed by SIGKILL");

    t.wf(&["resume", "crash-idem"]).code(0);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2, "{reqs:#?}");
    assert_eq!(reqs[0].header("idempotency-key"), Some("crash-idem/charge"));
    assert_eq!(
        reqs[0].header("idempotency-key"),
        reqs[1].header("idempotency-key"),
        "the key is the same after the crash"
    );
    let inspect = t.inspect("crash-idem");
    assert_eq!(inspect["status"], "completed");
    let step = Test::step(&inspect, "charge");
    assert_eq!(step["attempts"], 2);
    assert_eq!(
        attempt_field(step, "outcome"),
        vec![json!("crashed"), json!("ok")]
    );
}

#[test]
fn traceparent_header_is_sent_for_each_attempt() {
    let t = Test::new();
    let server = Server::sequence(vec![Reply::text(503, "busy"), Reply::json(200, &json!({}))]);
    let ran = run_with_base(
        &t,
        r#"
name: http-trace
inputs:
  base: { required: true }
steps:
  - id: call
    http: { url: "${{ inputs.base }}/x" }
    retry: { max_attempts: 2, interval: 10ms }
"#,
        &server.url(),
        "tp1",
    );
    ran.code(0);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let sent: Vec<(String, String)> = reqs
        .iter()
        .map(|r| {
            parse_traceparent(
                r.header("traceparent")
                    .unwrap_or_else(|| panic!("no traceparent header: {:?}", r.headers)),
            )
        })
        .collect();
    assert_eq!(sent[0].0, sent[1].0, "one run, one trace");
    assert_ne!(sent[0].1, sent[1].1, "each attempt has its own span");

    // The header points into the run's recorded trace.
    let trace = t.wf(&["trace", "tp1", "--format", "json"]);
    if t.wf(&["trace", "--help"]).code == 0 {
        trace.code(0);
        let runs = trace.json();
        let run = &runs.as_array().expect("array of runs")[0];
        assert_eq!(run["trace_id"], sent[0].0.as_str());
        let spans = run["spans"].as_array().expect("spans");
        for (_, parent) in &sent {
            assert!(
                spans.iter().any(|s| s["span_id"] == parent.as_str()),
                "the traceparent's span {parent} is not in the trace: {spans:#?}"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Secrets
// ---------------------------------------------------------------------------
