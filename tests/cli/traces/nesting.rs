//! Spans nested within their parents, and a child instance's runs under the attempt that made it, stored and exported live.

use super::*;

/// Every span of `runs` (one instance's) lies within its parent's interval,
/// its parent among them; the spans, for a message.
#[track_caller]
pub(super) fn assert_nested(runs: &[Value]) {
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
