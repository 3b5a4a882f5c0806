//! Retries of HTTP steps: which statuses retry, retryable and non_retryable, refused connections, slow servers, Retry-After, and response data never run as shell code.

use super::*;

#[test]
fn a_503_is_retried_then_succeeds() {
    let t = Test::new();
    let server = Server::sequence(vec![
        Reply::text(503, "busy"),
        Reply::json(200, &json!({"ok": true})),
    ]);
    let ran = run_with_base(
        &t,
        r#"
name: http-retry
inputs:
  base: { required: true }
steps:
  - id: call
    http: { url: "${{ inputs.base }}/flaky" }
    retry: { max_attempts: 3, interval: 10ms }
"#,
        &server.url(),
        "retry1",
    );
    ran.code(0);
    let inspect = t.inspect("retry1");
    let step = Test::step(&inspect, "call");
    assert_eq!(step["status"], "completed");
    assert_eq!(step["attempts"], 2);
    assert_eq!(
        attempt_field(step, "outcome"),
        vec![json!("retry"), json!("ok")]
    );
    assert_eq!(attempt_field(step, "error_type")[0], "http.503");
    assert_eq!(step["output"]["json"]["ok"], true);
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn default_retryability_by_status() {
    // 5xx and 429 are retried; other 4xx are not.
    for (status, attempts) in [
        (500, 3),
        (502, 3),
        (503, 3),
        (429, 3),
        (400, 1),
        (404, 1),
        (402, 1),
    ] {
        let t = Test::new();
        let server = Server::always(Reply::text(status, "no"));
        let id = format!("st{status}");
        let ran = run_with_base(
            &t,
            r#"
name: http-status
inputs:
  base: { required: true }
steps:
  - id: call
    http: { url: "${{ inputs.base }}/x" }
    retry: { max_attempts: 3, interval: 10ms }
"#,
            &server.url(),
            &id,
        );
        ran.code(1);
        let inspect = t.inspect(&id);
        let step = Test::step(&inspect, "call");
        assert_eq!(step["status"], "failed", "status {status}");
        assert_eq!(
            step["error_type"],
            format!("http.{status}"),
            "status {status}"
        );
        assert_eq!(step["attempts"], attempts, "status {status}: {step:#}");
        assert_eq!(server.requests().len(), attempts, "status {status}");
        let last = attempt_field(step, "outcome");
        assert_eq!(last.last().unwrap(), "failed", "status {status}: {last:?}");
    }
}

#[test]
fn non_retryable_402_fails_at_once_with_its_error_type() {
    let t = Test::new();
    let server = Server::always(Reply::json(402, &json!({"error": "card_declined"})));
    let ran = run_with_base(
        &t,
        r#"
name: http-402
inputs:
  base: { required: true }
steps:
  - id: charge
    http: { method: POST, url: "${{ inputs.base }}/charge", json: { amount: 5 } }
    retry: { max_attempts: 3, interval: 10ms, non_retryable: [http.402] }
  - id: ship
    run: echo shipped > shipped.txt
"#,
        &server.url(),
        "pay1",
    );
    ran.code(1);
    let inspect = t.inspect("pay1");
    assert_eq!(inspect["status"], "failed");
    let step = Test::step(&inspect, "charge");
    assert_eq!(step["status"], "failed");
    assert_eq!(step["error_type"], "http.402");
    assert_eq!(step["attempts"], 1);
    assert_eq!(attempt_field(step, "outcome"), vec![json!("failed")]);
    assert_eq!(server.requests().len(), 1);
    assert_eq!(t.read("shipped.txt"), "", "the next step did not run");
    let text = t.wf(&["inspect", "pay1"]);
    assert!(text.stdout.contains("http.402"), "{}", text.stdout);
}

#[test]
fn retryable_makes_a_4xx_retryable() {
    let t = Test::new();
    let server = Server::sequence(vec![
        Reply::text(404, "not yet"),
        Reply::text(404, "not yet"),
        Reply::json(200, &json!({"ready": true})),
    ]);
    let ran = run_with_base(
        &t,
        r#"
name: http-404-retry
inputs:
  base: { required: true }
steps:
  - id: poll
    http: { url: "${{ inputs.base }}/report" }
    retry: { max_attempts: 3, interval: 10ms, retryable: [http.404] }
"#,
        &server.url(),
        "poll1",
    );
    ran.code(0);
    let inspect = t.inspect("poll1");
    let step = Test::step(&inspect, "poll");
    assert_eq!(step["attempts"], 3);
    assert_eq!(
        attempt_field(step, "error_type"),
        vec![json!("http.404"), json!("http.404"), Value::Null]
    );
    assert_eq!(step["output"]["json"]["ready"], true);
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn non_retryable_makes_a_5xx_final() {
    let t = Test::new();
    let server = Server::always(Reply::text(503, "down"));
    let ran = run_with_base(
        &t,
        r#"
name: http-503-final
inputs:
  base: { required: true }
steps:
  - id: call
    http: { url: "${{ inputs.base }}/x" }
    retry: { max_attempts: 3, interval: 10ms, non_retryable: [http.503] }
"#,
        &server.url(),
        "final1",
    );
    ran.code(1);
    let inspect = t.inspect("final1");
    let step = Test::step(&inspect, "call");
    assert_eq!(step["error_type"], "http.503");
    assert_eq!(step["attempts"], 1);
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn connection_refused_is_http_connect_and_retryable() {
    let t = Test::new();
    let port = closed_port();
    let ran = run_with_base(
        &t,
        r#"
name: http-refused
inputs:
  base: { required: true }
steps:
  - id: call
    http: { url: "${{ inputs.base }}/x" }
    retry: { max_attempts: 2, interval: 10ms }
"#,
        &format!("http://127.0.0.1:{port}"),
        "refused1",
    );
    ran.code(1);
    let inspect = t.inspect("refused1");
    assert_eq!(inspect["status"], "failed");
    let step = Test::step(&inspect, "call");
    assert_eq!(step["error_type"], "http.connect");
    assert_eq!(step["attempts"], 2, "connection errors are retryable");
    assert_eq!(
        attempt_field(step, "error_type"),
        vec![json!("http.connect"), json!("http.connect")]
    );
}

#[test]
fn a_slow_server_times_out() {
    let t = Test::new();
    let server = Server::always(Reply::text(200, "late").delay(Duration::from_secs(2)));
    let ran = run_with_base(
        &t,
        r#"
name: http-timeout
inputs:
  base: { required: true }
steps:
  - id: call
    http: { url: "${{ inputs.base }}/slow" }
    timeout: 300ms
"#,
        &server.url(),
        "slow1",
    );
    ran.code(1);
    let inspect = t.inspect("slow1");
    let step = Test::step(&inspect, "call");
    assert_eq!(step["status"], "failed");
    assert_eq!(step["error_type"], "timeout");
    assert_eq!(step["outcome"], "timeout");
    assert_eq!(step["attempts"], 1);
    assert_eq!(server.requests().len(), 1, "the request was sent");
}

#[test]
fn retry_after_is_honoured_when_longer_than_the_backoff() {
    for status in [503, 429] {
        let t = Test::new();
        let server = Server::sequence(vec![
            Reply::text(status, "later").header("Retry-After", "1"),
            Reply::json(200, &json!({"ok": true})),
        ]);
        let id = format!("ra{status}");
        let ran = run_with_base(
            &t,
            r#"
name: http-retry-after
inputs:
  base: { required: true }
steps:
  - id: call
    http: { url: "${{ inputs.base }}/x" }
    retry: { max_attempts: 2, interval: 10ms }
"#,
            &server.url(),
            &id,
        );
        ran.code(0);
        let inspect = t.inspect(&id);
        let step = Test::step(&inspect, "call");
        let attempts = attempt_list(step);
        assert_eq!(attempts.len(), 2, "{step:#}");
        let first_end = epoch_secs(attempts[0]["finished_at"].as_str().unwrap());
        let second_start = epoch_secs(attempts[1]["started_at"].as_str().unwrap());
        assert!(
            second_start - first_end >= 0.95,
            "status {status}: the retry started {:.3}s after the failure, Retry-After asked for 1s",
            second_start - first_end
        );
        let reqs = server.requests();
        assert_eq!(reqs.len(), 2);
        let gap = reqs[1].at.duration_since(reqs[0].at);
        assert!(
            gap >= Duration::from_millis(950),
            "status {status}: requests {gap:?} apart"
        );
    }
}

#[test]
fn a_short_retry_after_does_not_shorten_the_backoff() {
    let t = Test::new();
    let server = Server::sequence(vec![
        Reply::text(503, "later").header("Retry-After", "0"),
        Reply::json(200, &json!({"ok": true})),
    ]);
    let ran = run_with_base(
        &t,
        r#"
name: http-retry-after-short
inputs:
  base: { required: true }
steps:
  - id: call
    http: { url: "${{ inputs.base }}/x" }
    retry: { max_attempts: 2, interval: 1s }
"#,
        &server.url(),
        "ra0",
    );
    ran.code(0);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let gap = reqs[1].at.duration_since(reqs[0].at);
    assert!(
        gap >= Duration::from_millis(950),
        "the configured 1s backoff was cut short: requests {gap:?} apart"
    );
}

#[test]
fn a_retry_after_beyond_the_inline_wait_suspends_the_instance() {
    let t = Test::new();
    let server = Server::sequence(vec![
        Reply::text(429, "slow down").header("Retry-After", "3600"),
        Reply::json(200, &json!({"ok": true})),
    ]);
    let (id, ran) = t.run_yaml(
        "suspend.yaml",
        r#"
name: http-retry-after-long
inputs:
  base: { required: true }
steps:
  - id: call
    http: { url: "${{ inputs.base }}/x", idempotency_key: true }
    retry: { max_attempts: 2, interval: 10ms }
"#,
        &[
            "--input",
            &format!("base={}", server.url()),
            "--id",
            "ra-long",
            "--inline-wait",
            "1s",
        ],
    );
    assert_eq!(id, "ra-long");
    ran.code(3);
    assert_eq!(ran.json()["status"], "sleeping");
    let inspect = t.inspect("ra-long");
    assert_eq!(inspect["status"], "sleeping");
    let step = Test::step(&inspect, "call");
    assert_eq!(step["attempts"], 1);
    assert_eq!(step["error_type"], "http.429");
    assert_eq!(server.requests().len(), 1, "no early retry");

    t.wf(&["resume", "ra-long", "--now"]).code(0);
    let inspect = t.inspect("ra-long");
    assert_eq!(inspect["status"], "completed");
    let step = Test::step(&inspect, "call");
    assert_eq!(step["attempts"], 2);
    assert_eq!(step["output"]["json"]["ok"], true);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        reqs[0].header("idempotency-key"),
        reqs[1].header("idempotency-key")
    );
}

#[test]
fn response_data_is_never_shell_code() {
    let t = Test::new();
    let server = Server::always(Reply::json(
        200,
        &json!({
            "name": "\"; touch pwned1; echo \"",
            "cmd": "$(touch pwned2)`touch pwned3`",
        }),
    ));
    let ran = run_with_base(
        &t,
        r#"
name: http-injection
inputs:
  base: { required: true }
steps:
  - id: fetch
    http: { url: "${{ inputs.base }}/evil" }
  - id: use
    run: echo "${{ steps.fetch.output.json.name }}|${{ steps.fetch.output.json.cmd }}|${{ steps.fetch.output.body }}"
"#,
        &server.url(),
        "inj1",
    );
    ran.code(0);
    for f in ["pwned1", "pwned2", "pwned3"] {
        assert!(
            !t.path().join(f).exists(),
            "{f} was created: data ran as code"
        );
    }
    let inspect = t.inspect("inj1");
    let stdout = Test::step(&inspect, "use")["output"]["stdout"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        stdout.starts_with("\"; touch pwned1; echo \"|$(touch pwned2)`touch pwned3`|{"),
        "{stdout}"
    );
}
