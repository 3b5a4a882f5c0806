//! Spans exported live over OTLP/HTTP while the run goes: in batches, each once, on the console exporter, and never failing a run whose collector is away.

use super::*;

/// A minimal OTLP/HTTP receiver on 127.0.0.1: answers every POST with 200 and
/// an empty `ExportTraceServiceResponse`, keeping what it received.
pub(super) fn otlp_receiver() -> (String, Received) {
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
pub(super) fn read_request(
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
