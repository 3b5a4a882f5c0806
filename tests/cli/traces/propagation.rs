//! W3C trace context: TRACEPARENT makes a run a child and reaches step processes and HTTP requests; signals link; trace-per-instance; tracestate and sampling carried.

use super::*;

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
