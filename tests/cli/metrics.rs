//! `/metrics` parsed by a real Prometheus text parser (the Python client's,
//! `prometheus_client.parser`, installed by `scripts/test`), and the API's
//! OpenAPI document checked by a real validator (`openapi-spec-validator`)
//! and against the routes the server answers.

use crate::Test;
use crate::serve::{Server, until};
use serde_json::Value;
use std::process::Command;

/// The samples of `text`, parsed by prometheus_client: `[name, labels, value]`,
/// once Prometheus's own `promtool check metrics` finds nothing wrong with
/// it (parse and lint: a counter's `_total`, help texts, units).
pub(crate) fn parse(text: &str) -> Vec<(String, Value, f64)> {
    promtool_check(text);
    parse_with("prometheus_client.parser", text)
}

/// What `cmd` prints given `input` on its stdin (`missing`: what to say
/// when it cannot be started).
fn piped(cmd: &mut Command, input: &str, missing: &str) -> std::process::Output {
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect(missing);
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// `promtool check metrics` (Debian's `prometheus`, which `.ci/run`
/// installs) on `text`: it must pass, with nothing to say.
pub(crate) fn promtool_check(text: &str) {
    let out = piped(
        Command::new("promtool").args(["check", "metrics"]),
        text,
        "promtool (Debian's prometheus package) is needed: apt-get install prometheus",
    );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics: {:?}\n{said}\n{text}",
        out.status
    );
}

/// The samples of `text`, parsed by prometheus_client's parser `module`
/// (`prometheus_client.parser` for the classic text format,
/// `prometheus_client.openmetrics.parser` for OpenMetrics).
fn parse_with(module: &str, text: &str) -> Vec<(String, Value, f64)> {
    let script = format!(
        "import json, sys\n\
        from {module} import text_string_to_metric_families\n\
        out = []\n\
        for fam in text_string_to_metric_families(sys.stdin.read()):\n\
        \x20   for s in fam.samples:\n\
        \x20       out.append([s.name, s.labels, s.value])\n\
        print(json.dumps(out))\n"
    );
    let out = piped(
        Command::new("python3").args(["-c", &script]),
        text,
        "python3",
    );
    assert!(
        out.status.success(),
        "the Prometheus parser refused the metrics (is prometheus-client installed? run `scripts/test`):\n{}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Vec<(String, Value, f64)> = serde_json::from_slice(&out.stdout).unwrap();
    v
}

fn sample(samples: &[(String, Value, f64)], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| n == name && labels.iter().all(|(k, v)| l[*k] == *v))
        .map(|s| s.2)
}

#[test]
fn metrics_parse_as_prometheus_text_and_count_what_the_store_holds() {
    let t = Test::new();
    let ok = "name: ok\nsteps:\n  - id: a\n    run: 'true'\n  - id: b\n    needs: [a]\n    run: 'true'\n";
    for _ in 0..3 {
        t.run_yaml("ok.yaml", ok, &[]).1.code(0);
    }
    t.run_yaml(
        "bad.yaml",
        "name: bad\nsteps:\n  - id: a\n    run: exit 3\n    retry: { max_attempts: 2, interval: 1ms }\n",
        &[],
    )
    .1
    .code(1);
    // A queue with one admitted (held by a sleeper) and one queued.
    let q = "name: q\nqueue: { key: k1, concurrency: 1, hold_while_suspended: true }\nsteps:\n  - id: nap\n    sleep: 1h\n";
    let path = t.write("q.yaml", q);
    t.wf(&["run", path.to_str().unwrap()]).code(3);
    t.wf(&["run", path.to_str().unwrap(), "--detach"]).code(0);
    let s = Server::start(&t, &["--worker", "--poll", "50ms"], &[]);
    until("the worker's heartbeat", || {
        s.get("/metrics").text().contains("wf_workers_up{")
    });
    let r = s.get("/metrics");
    assert_eq!(r.status, 200);
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let m = parse(&r.text());
    assert_eq!(
        sample(
            &m,
            "wf_instances",
            &[("workflow", "ok"), ("status", "completed")]
        ),
        Some(3.0)
    );
    assert_eq!(
        sample(
            &m,
            "wf_instances",
            &[("workflow", "bad"), ("status", "failed")]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &m,
            "wf_attempts_total",
            &[("workflow", "ok"), ("outcome", "ok")]
        ),
        Some(6.0)
    );
    assert_eq!(
        sample(
            &m,
            "wf_attempts_total",
            &[("workflow", "bad"), ("outcome", "retry")]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &m,
            "wf_attempts_total",
            &[("workflow", "bad"), ("outcome", "failed")]
        ),
        Some(1.0)
    );
    let ok = [("workflow", "ok")];
    assert_eq!(
        sample(&m, "wf_attempt_duration_seconds_count", &ok),
        Some(6.0)
    );
    assert_eq!(
        sample(
            &m,
            "wf_attempt_duration_seconds_bucket",
            &[("workflow", "bad"), ("le", "+Inf")]
        ),
        Some(2.0)
    );
    let bucket = |le| {
        sample(
            &m,
            "wf_attempt_duration_seconds_bucket",
            &[("workflow", "ok"), ("le", le)],
        )
        .unwrap()
    };
    let (small, big) = (bucket("0.01"), bucket("60.0"));
    assert!(small <= big && big == 6.0, "{small} {big}");
    // Five runs ended: the three `ok`, the `bad` one, the sleeper's first.
    assert_eq!(sample(&m, "wf_run_duration_seconds_count", &ok), Some(3.0));
    assert_eq!(
        sample(
            &m,
            "wf_runs_total",
            &[("workflow", "ok"), ("outcome", "completed")]
        ),
        Some(3.0)
    );
    assert_eq!(
        sample(
            &m,
            "wf_runs_total",
            &[("workflow", "bad"), ("outcome", "failed")]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&m, "wf_run_duration_seconds_count", &[("workflow", "q")]),
        Some(1.0)
    );
    assert_eq!(sample(&m, "wf_queue_admitted", &[("key", "k1")]), Some(1.0));
    assert_eq!(sample(&m, "wf_queue_depth", &[("key", "k1")]), Some(1.0));
    assert_eq!(sample(&m, "wf_serve_in_process_worker", &[]), Some(1.0));
    let beat = m
        .iter()
        .find(|(n, _, _)| n == "wf_worker_last_heartbeat_seconds")
        .expect("a heartbeat")
        .2;
    let now = chrono::Utc::now().timestamp() as f64;
    assert!((now - beat).abs() < 60.0, "{beat} vs {now}");
    // By host (this machine's name), not by process.
    let up: Vec<_> = m.iter().filter(|(n, _, _)| n == "wf_workers_up").collect();
    assert_eq!(up.len(), 1);
    assert_eq!(up[0].2, 1.0);
    let host = nix::unistd::gethostname().unwrap().into_string().unwrap();
    assert_eq!(up[0].1["host"], host.as_str());
    // Stopped, the worker is gone from the metrics.
    assert_eq!(s.stop("TERM"), 0);
    let s = Server::start(&t, &[], &[]);
    let m = parse(&s.get("/metrics").text());
    assert!(m.iter().all(|(n, _, _)| n != "wf_workers_up"), "{m:?}");
    assert_eq!(sample(&m, "wf_serve_in_process_worker", &[]), Some(0.0));
}

#[test]
fn the_openapi_document_is_valid_and_names_every_route() {
    let t = Test::new();
    let s = Server::start(&t, &[], &[]);
    let r = s.get("/api/v1/openapi.json");
    assert_eq!(r.status, 200);
    let doc = r.json();
    assert_eq!(
        doc["openapi"].as_str().map(|v| v.starts_with("3.1")),
        Some(true)
    );
    let file = t.path().join("openapi.json");
    std::fs::write(&file, &r.body).unwrap();
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys; from openapi_spec_validator import validate; from openapi_spec_validator.readers import read_from_filename; validate(read_from_filename(sys.argv[1])[0]); print('valid')",
        ])
        .arg(&file)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "openapi-spec-validator refused the document (is it installed? run `scripts/test`):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every documented route answers (with the token, with made-up ids:
    // anything but the router's "no route").
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.len() >= 20, "{}", paths.len());
    for (path, item) in paths {
        for method in item.as_object().unwrap().keys() {
            let concrete = path
                .replace("{id}", "nosuchinstance")
                .replace("{step}", "nostep")
                .replace("{name}", "noname");
            let r = s.call(&method.to_uppercase(), &concrete, &[], Some(b"{}".to_vec()));
            assert!(
                !(r.status == 404 && r.text().contains("no route")) && r.status != 405,
                "{method} {path}: {} {}",
                r.status,
                r.text()
            );
        }
    }
}

/// Label values from inputs (queue keys) are escaped as the format requires:
/// quotes, backslashes and line feeds cannot end a value or add a series,
/// and UTF-8 passes as it is; the classic text format is served as such
/// (`# TYPE wf_attempts_total counter`, no `# EOF`), and OpenMetrics to a
/// scraper that asks for it, each parsed by its own parser (issue 54).
#[test]
fn label_values_are_escaped_and_each_format_is_served_as_itself() {
    let t = Test::new();
    let file = t.write(
        "q.yaml",
        "name: q\ninputs:\n  k: { required: true }\n\
         queue: { key: \"${{ inputs.k }}\", concurrency: 1, hold_while_suspended: true }\n\
         steps:\n  - id: nap\n    sleep: 1h\n",
    );
    let keys = [
        "inj\"} 1\nwf_injected_total 999\nx{k=\"",
        "back\\slash\\",
        "ünïcödé ✓",
    ];
    for key in keys {
        let input = format!("k={key}");
        let args = ["run", file.to_str().unwrap(), "--input", &input];
        t.wf(&[&args[..], &["--inline-wait", "0s"]].concat())
            .code(3);
        t.wf(&[&args[..], &["--detach"]].concat()).code(0);
    }
    let s = Server::start(&t, &[], &[]);
    let classic = s.get("/metrics");
    assert_eq!(
        classic.header("content-type").as_deref(),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = classic.text();
    assert!(text.contains("# TYPE wf_attempts_total counter"), "{text}");
    assert!(!text.contains("# EOF"), "{text}");
    let open = s.raw(
        "GET",
        "/metrics",
        &[
            ("authorization", format!("Bearer {}", crate::serve::TOKEN)),
            (
                "accept",
                "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
                    .to_string(),
            ),
        ],
        None,
    );
    assert_eq!(
        open.header("content-type").as_deref(),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    assert!(open.text().trim_end().ends_with("# EOF"), "{}", open.text());
    for (format, samples) in [
        ("classic", parse(&text)),
        (
            "openmetrics",
            parse_with("prometheus_client.openmetrics.parser", &open.text()),
        ),
    ] {
        assert!(
            samples
                .iter()
                .all(|(n, _, _)| !n.starts_with("wf_injected")),
            "{format}: a forged series: {samples:?}"
        );
        for key in keys {
            assert_eq!(
                sample(&samples, "wf_queue_admitted", &[("key", key)]),
                Some(1.0),
                "{format}: {key:?}: {samples:?}"
            );
            assert_eq!(
                sample(&samples, "wf_queue_depth", &[("key", key)]),
                Some(1.0),
                "{format}: {key:?}"
            );
        }
    }
}

/// The value of one sample of a scrape of `s`, 0 when it is absent.
fn scraped(s: &Server, name: &str, labels: &[(&str, &str)]) -> f64 {
    sample(&parse(&s.get("/metrics").text()), name, labels).unwrap_or(0.0)
}

/// Counters never go down: a prune deletes instances and their attempts,
/// but `wf_attempts_total` and `wf_runs_total` stay where they were (the
/// gauge of instances falls); another server of the same database answers
/// the same figures, and so does a server started again (SPEC §8).
#[test]
fn counters_never_go_down_across_prune_restarts_and_servers() {
    let t = Test::new();
    let ok = "name: ok\nsteps:\n  - id: a\n    run: 'true'\n  - id: b\n    needs: [a]\n    run: 'true'\n";
    for _ in 0..3 {
        t.run_yaml("ok.yaml", ok, &[]).1.code(0);
    }
    let a = Server::start(&t, &[], &[]);
    let b = Server::start(&t, &[], &[]);
    let attempts = [("workflow", "ok"), ("outcome", "ok")];
    let runs = [("workflow", "ok"), ("outcome", "completed")];
    let completed = [("workflow", "ok"), ("status", "completed")];
    assert_eq!(scraped(&a, "wf_attempts_total", &attempts), 6.0);
    assert_eq!(scraped(&b, "wf_instances", &completed), 3.0);
    t.wf(&["prune", "--older-than", "0s"]).code(0);
    assert_eq!(
        t.wf(&["list", "--json"]).json().as_array().map(Vec::len),
        Some(0),
        "the prune deleted every instance"
    );
    for s in [&a, &b] {
        assert_eq!(scraped(s, "wf_attempts_total", &attempts), 6.0);
        assert_eq!(scraped(s, "wf_runs_total", &runs), 3.0);
        assert_eq!(
            scraped(
                s,
                "wf_attempt_duration_seconds_count",
                &[("workflow", "ok")]
            ),
            6.0
        );
        assert_eq!(scraped(s, "wf_instances", &completed), 0.0);
    }
    t.run_yaml("ok.yaml", ok, &[]).1.code(0);
    assert_eq!(scraped(&b, "wf_attempts_total", &attempts), 8.0);
    assert_eq!(a.stop("TERM"), 0);
    let a = Server::start(&t, &[], &[]);
    assert_eq!(scraped(&a, "wf_attempts_total", &attempts), 8.0);
    assert_eq!(scraped(&a, "wf_runs_total", &runs), 4.0);
    assert_eq!(scraped(&a, "wf_instances", &completed), 1.0);
}

/// No label takes an unbounded set of values: the 100 busiest queue keys
/// have series of their own, the rest are summed as `key="other"`; a
/// key's series ends when its work does.
#[test]
fn queue_keys_beyond_the_busiest_are_summed_as_other() {
    let t = Test::new();
    let file = t.write(
        "q.yaml",
        "name: q\ninputs:\n  k: { required: true }\n\
         queue: { key: \"order-${{ inputs.k }}\", concurrency: 1 }\n\
         steps:\n  - id: a\n    run: 'true'\n",
    );
    let keys = 103;
    for k in 0..keys {
        let input = format!("k={k:03}");
        t.wf(&["run", file.to_str().unwrap(), "--input", &input, "--detach"])
            .code(0);
    }
    let s = Server::start(&t, &[], &[]);
    let m = parse(&s.get("/metrics").text());
    let depth: Vec<_> = m.iter().filter(|(n, _, _)| n == "wf_queue_depth").collect();
    assert_eq!(depth.len(), 101, "{depth:?}");
    let total: f64 = depth.iter().map(|(_, _, v)| v).sum();
    assert_eq!(total, f64::from(keys));
    assert_eq!(sample(&m, "wf_queue_depth", &[("key", "other")]), Some(3.0));
    // Their work done, the keys' series are gone.
    t.wf(&["worker", "--once"]).code(0);
    until("every queued instance to complete", || {
        t.wf(&["list", "--status", "completed", "--json", "--limit", "200"])
            .json()
            .as_array()
            .map_or(0, Vec::len)
            == keys as usize
    });
    let m = parse(&s.get("/metrics").text());
    assert!(
        m.iter()
            .all(|(n, _, _)| n != "wf_queue_depth" && n != "wf_queue_admitted"),
        "{m:?}"
    );
    assert_eq!(
        sample(
            &m,
            "wf_instances",
            &[("workflow", "q"), ("status", "completed")]
        ),
        Some(f64::from(keys))
    );
}
