//! Secrets and outputs (docs/expressions.md, docs/secrets.md, issue 12): nothing leaks in any
//! encoding, nothing is silently lost. Secrets as object keys and in event
//! payloads, secrets a step does not reference, redirects to another origin
//! (a real loopback server logging raw requests), `$WF_OUTPUT` that is not
//! UTF-8 or too large, values in quoted here-documents, values too large for
//! an environment variable.

use crate::Test;
use crate::http::{Reply, Server, contains, database_bytes};
use serde_json::{Value, json};

const KEY_SECRET: &str = "k3y-s3cr3t-Qz81";

/// Asserts `needle` is in no database file and no output of the commands.
#[track_caller]
fn nowhere(t: &Test, id: &str, needle: &str) {
    for (path, bytes) in database_bytes(t) {
        assert!(
            !contains(&bytes, needle.as_bytes()),
            "{path} holds {needle:?}"
        );
    }
    for args in [
        vec!["inspect", id, "--json", "--attempts"],
        vec!["inspect", id],
        vec!["logs", id],
        vec!["trace", id, "--format", "json"],
        vec!["trace", id, "--format", "otlp"],
    ] {
        let ran = t.wf(&args);
        assert!(
            !ran.stdout.contains(needle) && !ran.stderr.contains(needle),
            "`wf {}` shows {needle:?}:\n{}{}",
            args.join(" "),
            ran.stdout,
            ran.stderr
        );
    }
}

#[test]
fn a_secret_as_an_object_key_or_in_an_event_payload_is_masked() {
    let t = Test::new().env("WF_TEST_KEY_SECRET", KEY_SECRET);
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: keys
secrets: [WF_TEST_KEY_SECRET]
steps:
  - id: keys
    run: |
      printf '{"%s": 1, "nested": [{"x-%s": {"%s": 2}}]}' "${{ secrets.WF_TEST_KEY_SECRET }}" "${{ secrets.WF_TEST_KEY_SECRET }}" "${{ secrets.WF_TEST_KEY_SECRET }}"
      echo "${{ secrets.WF_TEST_KEY_SECRET }}=as a key" >> "$WF_OUTPUT"
    set_state:
      seen: "${{ output.json }}"
  - id: gate
    wait_for_event: { name: go }
"#,
        &[],
    );
    ran.code(3);
    // The sender knows the secret: the payload is masked before it is stored.
    let sent = t.wf(&[
        "signal",
        &id,
        "go",
        "--data",
        &json!({ "token": KEY_SECRET, KEY_SECRET: true }).to_string(),
    ]);
    sent.code(0);
    t.wf(&["resume", &id]).code(0);
    let v = t.inspect(&id);
    let keys = Test::step(&v, "keys");
    assert_eq!(
        keys["output"]["json"],
        json!({"***": 1, "nested": [{"x-***": {"***": 2}}]})
    );
    assert_eq!(keys["output"]["***"], "as a key");
    assert_eq!(
        Test::step(&v, "gate")["output"]["json"],
        json!({"token": "***", "***": true})
    );
    nowhere(&t, &id, KEY_SECRET);
}

#[test]
fn a_step_inherits_no_secret_it_does_not_reference() {
    let t = Test::new()
        .env("WF_TEST_SECRET_A", "aaa-secret-1")
        .env("WF_TEST_SECRET_B", "bbb-secret-2")
        .env("WF_TEST_PLAIN", "plain-value");
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: inherit
secrets: [WF_TEST_SECRET_A, WF_TEST_SECRET_B]
steps:
  - id: none
    run: echo "${WF_TEST_SECRET_A-unset} ${WF_TEST_SECRET_B-unset} $WF_TEST_PLAIN" > none.txt
  - id: uses-a
    run: test "${{ secrets.WF_TEST_SECRET_A }}" = aaa-secret-1 && echo "${WF_TEST_SECRET_A-unset} ${WF_TEST_SECRET_B-unset}" > a.txt
  - id: maps-b
    env: { WF_TEST_SECRET_B: "${{ secrets.WF_TEST_SECRET_B }}" }
    run: echo "${WF_TEST_SECRET_A-unset} $WF_TEST_SECRET_B" > b.txt
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(t.read("none.txt").trim(), "unset unset plain-value");
    // Referenced in `run`: the value arrives (through wf's own variable), the
    // secret's variable does not.
    assert_eq!(t.read("a.txt").trim(), "unset unset");
    assert_eq!(t.read("b.txt").trim(), "unset bbb-secret-2");
    assert_eq!(t.inspect(&id)["status"], "completed");
}

/// A server that redirects every request to `to` with `status`.
fn redirector(status: u16, to: String) -> Server {
    Server::always(Reply::status(status).header("Location", &to))
}

fn http_step(url: &str, extra: &str) -> String {
    format!(
        "name: redirects\nsecrets: [WF_TEST_REDIR]\nsteps:\n  - id: call\n    http:\n      url: \"{url}\"\n{extra}"
    )
}

#[test]
fn a_request_carrying_a_secret_never_follows_a_redirect_to_another_origin() {
    let t = Test::new().env("WF_TEST_REDIR", "r3dir-s3cret");
    let target = Server::always(Reply::json(200, &json!({"ok": true})));
    let hop = redirector(302, format!("{}/landing", target.url()));

    // A secret in a custom header: refused, naming the other origin.
    let yaml = http_step(
        &format!("{}/start", hop.url()),
        "      headers: { X-Api-Key: \"${{ secrets.WF_TEST_REDIR }}\" }\n",
    );
    let (id, ran) = t.run_yaml("h.yaml", &yaml, &[]);
    ran.code(1);
    let step = Test::step(&t.inspect(&id), "call").clone();
    assert_eq!(step["error_type"], "http.redirect", "{step:#}");
    let msg = step["attempt_list"][0]["error_type"].clone();
    assert_eq!(msg, "http.redirect");
    let said = format!("{}{}", ran.stdout, ran.stderr);
    assert!(
        said.contains(&target.url()),
        "the target origin is named: {said}"
    );
    assert!(
        target.requests().is_empty(),
        "the other origin got {:#?}",
        target.requests()
    );

    // A secret in the body only: refused too.
    let yaml = http_step(
        &format!("{}/start", hop.url()),
        "      method: POST\n      json: { key: \"${{ secrets.WF_TEST_REDIR }}\" }\n",
    );
    t.run_yaml("b.yaml", &yaml, &[]).1.code(1);
    assert!(target.requests().is_empty());

    // No secret: followed (the default), the other origin answers.
    let yaml = http_step(&format!("{}/start", hop.url()), "");
    let (id, ran) = t.run_yaml("n.yaml", &yaml, &[]);
    ran.code(0);
    assert_eq!(
        Test::step(&t.inspect(&id), "call")["output"]["json"],
        json!({"ok": true})
    );
    assert_eq!(target.requests().len(), 1);
    assert_eq!(target.requests()[0].path(), "/landing");

    // `same-origin`: a cross-origin redirect is refused even without a secret.
    let yaml = http_step(
        &format!("{}/start", hop.url()),
        "      follow_redirects: same-origin\n",
    );
    let (id, ran) = t.run_yaml("s.yaml", &yaml, &[]);
    ran.code(1);
    assert_eq!(
        Test::step(&t.inspect(&id), "call")["error_type"],
        "http.redirect"
    );

    // `false`: the redirect itself is the answer.
    let yaml = http_step(
        &format!("{}/start", hop.url()),
        "      follow_redirects: false\n      expect_status: [302]\n",
    );
    let (id, ran) = t.run_yaml("f.yaml", &yaml, &[]);
    ran.code(0);
    assert_eq!(Test::step(&t.inspect(&id), "call")["output"]["status"], 302);
    assert_eq!(target.requests().len(), 1, "not followed");
}

#[test]
fn a_same_origin_redirect_is_followed_with_the_secret() {
    let t = Test::new().env("WF_TEST_REDIR", "r3dir-s3cret");
    let server = Server::start(|_, req| {
        if req.path() == "/start" {
            Reply::status(307).header("Location", "/landing")
        } else {
            Reply::json(200, &json!({"key": req.header("x-api-key")}))
        }
    });
    let yaml = http_step(
        &format!("{}/start", server.url()),
        "      method: POST\n      headers: { X-Api-Key: \"${{ secrets.WF_TEST_REDIR }}\" }\n      body: data\n",
    );
    let (id, ran) = t.run_yaml("h.yaml", &yaml, &[]);
    ran.code(0);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    // 307 keeps the method, the body and the headers.
    assert_eq!(
        (reqs[1].method.as_str(), reqs[1].path()),
        ("POST", "/landing")
    );
    assert_eq!(reqs[1].body, b"data");
    assert_eq!(reqs[1].header("x-api-key"), Some("r3dir-s3cret"));
    assert_eq!(
        Test::step(&t.inspect(&id), "call")["output"]["json"]["key"],
        "***"
    );
}

#[test]
fn wf_output_that_is_not_utf8_or_not_key_value_fails_the_step_with_the_line() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: bad-output
steps:
  - id: bytes
    run: printf 'good=1\nbad=\377\n' >> "$WF_OUTPUT"
    continue_on_error: true
  - id: words
    needs: []
    run: printf 'good=1\n\njust some words\n' >> "$WF_OUTPUT"
    continue_on_error: true
  - id: open
    needs: []
    run: printf 'text<<EOF\nline\n' >> "$WF_OUTPUT"
    continue_on_error: true
  - id: fine
    needs: []
    run: printf 'a=1\n\nmulti<<END\nx\ny\nEND\n' >> "$WF_OUTPUT"
"#,
        &[],
    );
    ran.code(0);
    let v = t.inspect(&id);
    let failed = |step: &str| {
        let s = Test::step(&v, step);
        assert_eq!(s["status"], "failed", "{s:#}");
        assert_eq!(s["error_type"], "output.invalid", "{s:#}");
        s["attempt_list"][0].clone()
    };
    failed("bytes");
    failed("words");
    failed("open");
    let logs = t.wf(&["inspect", &id, "--json", "--attempts"]).stdout;
    assert!(logs.contains("$WF_OUTPUT line 2: not UTF-8"), "{logs}");
    assert!(
        logs.contains("$WF_OUTPUT line 3: expected KEY=VALUE"),
        "{logs}"
    );
    assert!(
        logs.contains("$WF_OUTPUT line 1: `text<<EOF` is never closed"),
        "{logs}"
    );
    let fine = Test::step(&v, "fine");
    assert_eq!(fine["output"]["a"], "1");
    assert_eq!(fine["output"]["multi"], "x\ny");
}

#[test]
fn a_huge_wf_output_fails_over_the_limit() {
    let t = Test::new().env("WF_OUTPUT_LIMIT", "100000");
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: huge
steps:
  - id: big
    run: yes k=0123456789abcdef | head -c 20000000 >> "$WF_OUTPUT"
"#,
        &[],
    );
    ran.code(1);
    let step = Test::step(&t.inspect(&id), "big").clone();
    assert_eq!(step["error_type"], "output.limit", "{step:#}");
}

#[test]
fn a_quoted_heredoc_gets_values_and_a_value_cannot_end_it_early() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: heredocs
inputs:
  text: { default: "plain $HOME `id` value" }
  evil: { default: "x" }
steps:
  - id: quoted
    run: |
      cat <<'EOF' > quoted.txt
      ${{ inputs.text }}
      EOF
  - id: unquoted
    run: |
      cat <<EOF > unquoted.txt
      ${{ inputs.text }}
      EOF
  - id: injected
    run: |
      cat <<'EOF' > injected.txt
      ${{ inputs.evil }}
      EOF
"#,
        &["--input", "evil=a\nEOF\ntouch pwned\ncat <<'EOF'"],
    );
    ran.code(1);
    assert_eq!(t.read("quoted.txt"), "plain $HOME `id` value\n");
    assert_eq!(t.read("unquoted.txt"), "plain $HOME `id` value\n");
    assert!(
        !t.path().join("pwned").exists(),
        "the value ran as a command"
    );
    let step = Test::step(&t.inspect(&id), "injected").clone();
    assert_eq!(step["error_type"], "expression", "{step:#}");
    assert!(!t.path().join("injected.txt").exists(), "the step ran");
}

#[test]
fn a_large_value_reaches_a_run_string_intact_and_argv_says_the_limit() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: large
steps:
  - id: make
    run: head -c 200000 /dev/zero | tr '\0' 'x'; printf '\n\n'
  - id: shell
    run: |
      printf '%s' "${{ steps.make.output.stdout }}" | wc -c > size.txt
      printf '%s' "${{ steps.make.output.stdout }}" | head -c 3 > head.txt
  - id: argv
    run: ["printf", "%s", "${{ steps.make.output.stdout }}"]
"#,
        &[],
    );
    ran.code(1);
    assert_eq!(t.read("size.txt").trim(), "200000");
    assert_eq!(t.read("head.txt"), "xxx");
    let v = t.inspect(&id);
    assert_eq!(Test::step(&v, "shell")["status"], "completed");
    let argv = Test::step(&v, "argv");
    assert_eq!(argv["error_type"], "spawn", "{argv:#}");
    let shown = t.wf(&["inspect", &id, "--json", "--attempts"]).stdout;
    assert!(
        shown.contains("over the system's limit of 131071 bytes for one argument"),
        "{shown}"
    );
    let _: Value = serde_json::from_str(&shown).unwrap();
}
