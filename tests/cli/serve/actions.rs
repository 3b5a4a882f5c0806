//! The API's actions (signal, cancel, resume, retry, restart), an attempt's output as server-sent events, a graceful stop, the registry, gzip, and pending instances.

use super::*;

#[test]
fn signal_cancel_resume_retry_and_restart_through_the_api() {
    let t = Test::new();
    let s = Server::start(&t, &[], &[]);
    // Signal: the waiting instance becomes due; resume runs it.
    let (id, ran) = t.run_yaml("gated.yaml", GATED, &[]);
    ran.code(3);
    let r = s.post(
        &format!("/api/v1/instances/{id}/signal"),
        json!({ "event": "go", "data": { "n": 7 } }),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["delivered"], true);
    assert_eq!(
        s.post(
            &format!("/api/v1/instances/{id}/signal"),
            json!({ "event": "nobody-waits" })
        )
        .json()["warning"]
            .as_str()
            .map(|w| w.contains("never waits for `nobody-waits`")),
        Some(true)
    );
    assert_eq!(
        s.get(&format!("/api/v1/instances/{id}/events")).json()[0]["name"],
        "go"
    );
    let r = s.post(&format!("/api/v1/instances/{id}/resume"), json!({}));
    assert_eq!(r.status, 202, "{}", r.text());
    let done = s
        .get(&format!("/api/v1/instances/{id}/result?wait=30s"))
        .json();
    assert_eq!(done["status"], "completed", "{done}");
    // Restart from a step: it runs again (202), the other keeps its result.
    let runs = t.inspect(&id)["runs"].as_array().unwrap().len();
    let r = s.post(
        &format!("/api/v1/instances/{id}/restart"),
        json!({ "from": "after" }),
    );
    assert_eq!(r.status, 202, "{}", r.text());
    assert_eq!(r.json()["steps"], json!(["after"]));
    until("the restart's run", || {
        let i = t.inspect(&id);
        i["runs"].as_array().unwrap().len() == runs + 1 && i["status"] == "completed"
    });
    // A step the workflow does not have is not found; a body without
    // `from` is a bad request.
    assert_eq!(
        s.post(
            &format!("/api/v1/instances/{id}/restart"),
            json!({ "from": "nope" })
        )
        .status,
        404
    );
    assert_eq!(
        s.post(&format!("/api/v1/instances/{id}/restart"), json!({}))
            .status,
        400
    );
    // An ended instance takes no more events, and has nothing to cancel:
    // its state refuses both (409).
    let r = s.post(
        &format!("/api/v1/instances/{id}/signal"),
        json!({ "event": "go" }),
    );
    assert_eq!(
        (r.status, r.code().as_str()),
        (409, "conflict"),
        "{}",
        r.text()
    );
    assert!(r.text().contains("takes no more events"), "{}", r.text());
    assert_eq!(
        s.post(&format!("/api/v1/instances/{id}/cancel"), json!({}))
            .status,
        409
    );
    assert_eq!(
        s.post(&format!("/api/v1/instances/{id}/resume"), json!({}))
            .code(),
        "not_resumable"
    );

    // Cancel a waiting instance: canceled here, in the background.
    let (id2, ran) = t.run_yaml("gated.yaml", GATED, &[]);
    ran.code(3);
    let r = s.post(&format!("/api/v1/instances/{id2}/cancel"), json!({}));
    assert_eq!(
        (r.status, r.json()["status"].as_str()),
        (202, Some("canceling"))
    );
    until("the cancel", || t.inspect(&id2)["status"] == "canceled");
    let (id3, ran) = t.run_yaml("gated.yaml", GATED, &[]);
    ran.code(3);
    assert_eq!(
        s.post(&format!("/api/v1/instances/{id3}/terminate"), json!({}))
            .status,
        202
    );
    until("the terminate", || t.inspect(&id3)["status"] == "canceled");

    // Retry a failed instance: its failed step gets a fresh budget.
    let (id4, flag) = t.failed_until_fixed();
    assert_eq!(
        s.post(&format!("/api/v1/instances/{id4}/resume"), json!({}))
            .code(),
        "not_resumable"
    );
    std::fs::write(&flag, "").unwrap();
    assert_eq!(
        s.post(&format!("/api/v1/instances/{id4}/retry"), json!({}))
            .status,
        202
    );
    until("the retry", || t.inspect(&id4)["status"] == "completed");
    // Bodies that are not what the route takes.
    assert_eq!(
        s.post(&format!("/api/v1/instances/{id4}/signal"), json!({}))
            .status,
        400
    );
    assert_eq!(
        s.post(
            &format!("/api/v1/instances/{id4}/resume"),
            json!({ "now": "yes" })
        )
        .status,
        400
    );
    let log = s.log();
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn a_running_attempts_output_streams_as_server_sent_events() {
    let t = Test::new();
    let gate = t.path().join("gate");
    let yaml = format!(
        "name: talk\nsteps:\n  - id: talk\n    run: |\n      echo first\n      while [ ! -e {} ]; do sleep 0.02; done\n      echo second\n      echo oops >&2\n",
        gate.display()
    );
    let path = t.write("talk.yaml", &yaml);
    let s = Server::start(&t, &[], &[]);
    let run = crate::durable::spawn(&t, &["run", path.to_str().unwrap(), "--id", "talk1"]);
    until("the attempt to start", || {
        t.wf(&["inspect", "talk1", "--json"]).code == 0
            && t.inspect("talk1")["steps"][0]["status"] == "running"
    });
    let follow = s.request(
        "GET",
        "/api/v1/instances/talk1/logs/talk?follow=1",
        &[("authorization", format!("Bearer {TOKEN}"))],
        None,
    );
    // The stream is read while the step goes on: the gate opens after
    // `first` was seen by the server's first look.
    let opener = {
        let gate = gate.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            std::fs::write(gate, "").unwrap();
        })
    };
    let r = s.all(vec![follow]).remove(0);
    opener.join().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("text/event-stream")
    );
    let text = r.text();
    let events: Vec<(String, String)> = text
        .split("\n\n")
        .filter_map(|e| {
            let name = e.lines().find_map(|l| l.strip_prefix("event: "))?;
            let data: Vec<&str> = e.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
            Some((name.to_string(), data.join("\n")))
        })
        .collect();
    assert_eq!(
        events.first().map(|e| e.0.as_str()),
        Some("attempt"),
        "{text}"
    );
    let out: String = events
        .iter()
        .filter(|e| e.0 == "stdout")
        .map(|e| serde_json::from_str::<String>(&e.1).unwrap())
        .collect();
    assert_eq!(out, "first\nsecond\n", "{text}");
    assert!(
        events
            .iter()
            .any(|e| e.0 == "stderr" && e.1.contains("oops")),
        "{text}"
    );
    assert_eq!(events.last().unwrap().0, "end", "{text}");
    assert_eq!(
        serde_json::from_str::<Value>(&events.last().unwrap().1).unwrap()["outcome"],
        "ok"
    );
    let ran: Ran = run.finish();
    ran.code(0);
}

#[test]
fn sigterm_lets_in_flight_requests_finish_and_stops_the_worker() {
    let t = Test::new();
    let (id, ran) = t.run_yaml("gated.yaml", GATED, &[]);
    ran.code(3);
    let s = Server::start(&t, &["--worker", "--poll", "50ms"], &[]);
    until("the worker's start", || s.log().contains("worker on"));
    // A request in flight (waiting for a result) when SIGTERM comes.
    let waiting = s.request(
        "GET",
        &format!("/api/v1/instances/{id}/result?wait=60s"),
        &[("authorization", format!("Bearer {TOKEN}"))],
        None,
    );
    let pid = s.pid();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
    });
    let started = Instant::now();
    let r = s.all(vec![waiting]).remove(0);
    killer.join().unwrap();
    // It was answered (the instance as it stands), not cut off.
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["status"], "waiting");
    assert!(started.elapsed() < Duration::from_secs(30));
    let code = s.stop("TERM");
    assert_eq!(code, 0);
}

#[test]
fn the_registry_names_workflows_and_their_triggers() {
    let t = Test::new();
    let a = t.write(
        "a.yaml",
        "name: a\non:\n  webhook: { name: deploy, secret: A_KEY }\n  schedule:\n    - every: 1h\nsteps:\n  - id: s\n    run: 'true'\n",
    );
    let b = t.write(
        "b.yaml",
        "name: b\non:\n  webhook: { name: deploy, secret: B_KEY }\nsteps:\n  - id: s\n    run: 'true'\n",
    );
    let r = t.wf(&["workflow", "add", a.to_str().unwrap()]);
    r.code(0);
    assert!(r.stderr.contains("registered a ("), "{}", r.stderr);
    assert!(
        r.stderr.contains("webhook POST /hooks/deploy"),
        "{}",
        r.stderr
    );
    // One workflow per hook.
    let r = t.wf(&["workflow", "add", b.to_str().unwrap()]);
    r.code(2);
    assert!(
        r.stderr
            .contains("webhook `deploy` is the hook of the registered workflow `a`"),
        "{}",
        r.stderr
    );
    let list = wf_json(&t, &["workflow", "list", "--json"]);
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["webhook"]["path"], "/hooks/deploy");
    assert_eq!(list[0]["schedules"][0]["spec"], "every 1h");
    // `wf schedule` sees the same registry.
    assert_eq!(
        wf_json(&t, &["schedule", "list", "--json"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let table = t.wf(&["workflow", "list"]);
    table.code(0);
    assert!(
        table.stdout.contains("every 1h, /hooks/deploy"),
        "{}",
        table.stdout
    );
    // Registered again without its schedule: the schedule goes.
    let a2 = t.write(
        "a.yaml",
        "name: a\non:\n  webhook: { name: deploy, secret: A_KEY }\nsteps:\n  - id: s\n    run: 'true'\n",
    );
    t.wf(&["workflow", "add", a2.to_str().unwrap()]).code(0);
    assert_eq!(wf_json(&t, &["schedule", "list", "--json"]), json!([]));
    t.wf(&["workflow", "rm", "a"]).code(0);
    assert_eq!(wf_json(&t, &["workflow", "list", "--json"]), json!([]));
    let r = t.wf(&["workflow", "rm", "a"]);
    r.code(2);
    assert!(
        r.stderr.contains("no workflow is registered as `a`"),
        "{}",
        r.stderr
    );
    t.wf(&["workflow", "add", b.to_str().unwrap()]).code(0);
    // `wf schedule add` registers the workflow too.
    let c = t.write(
        "c.yaml",
        "name: c\non:\n  schedule:\n    - every: 1h\nsteps:\n  - id: s\n    run: 'true'\n",
    );
    t.wf(&["schedule", "add", c.to_str().unwrap()]).code(0);
    let names: Vec<Value> = wf_json(&t, &["workflow", "list", "--json"])
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].clone())
        .collect();
    assert_eq!(names, vec![json!("b"), json!("c")]);
    // Read from stdin: refused (its steps would have no directory).
    let r = t.wf(&["workflow", "add", "-"]);
    assert_ne!(r.code, 0);
}

#[test]
fn answers_are_gzipped_for_a_client_that_asks_but_event_streams_never() {
    let t = Test::new();
    let (id, ran) = t.run_yaml("greet.yaml", GREET, &[]);
    ran.code(0);
    let s = Server::start(&t, &[], &[]);
    let gz = [("accept-encoding", "gzip")];
    let r = s.call(
        "GET",
        &format!("/api/v1/instances/{id}?attempts=1"),
        &gz,
        None,
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-encoding").as_deref(), Some("gzip"));
    assert_eq!(&r.body[..2], &[0x1f, 0x8b], "a gzip stream");
    // Without asking: plain.
    assert!(
        s.get(&format!("/api/v1/instances/{id}"))
            .header("content-encoding")
            .is_none()
    );
    // A log stream goes out as it comes.
    let r = s.call(
        "GET",
        &format!("/api/v1/instances/{id}/logs/hello?follow=1"),
        &gz,
        None,
    );
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("text/event-stream")
    );
    assert!(r.header("content-encoding").is_none());
    assert!(r.text().contains("event: end"), "{}", r.text());
}

/// An instance the API starts, with no worker yet, is `pending` (issue 53,
/// item 9): in the start's answer, the API's list and its filter, the
/// inspector's list and instance page, `wf list`, and `/metrics`.
#[test]
fn an_instance_nobody_started_yet_is_pending_everywhere() {
    let t = Test::new();
    register_greet(&t);
    let s = Server::start(&t, &[], &[]);
    let r = s.post(
        "/api/v1/workflows/greet/instances",
        json!({ "inputs": { "who": "bo" } }),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["status"], "pending", "{}", r.text());
    let id = r.json()["id"].as_str().unwrap().to_string();
    let listed = s.get("/api/v1/instances?status=pending").json();
    assert_eq!(listed[0]["id"], id.as_str(), "{listed}");
    assert_eq!(
        s.get(&format!("/api/v1/instances/{id}")).json()["status"],
        "pending"
    );
    let page = s.get("/?status=pending").text();
    assert!(
        page.contains(&id[..12]) && page.contains("s-pending"),
        "{page}"
    );
    let page = s.get(&format!("/instances/{id}")).text();
    assert!(page.contains("s-pending"), "{page}");
    let metrics = s.get("/metrics").text();
    assert!(
        metrics.lines().any(|l| l.starts_with("wf_instances{")
            && l.contains("status=\"pending\"")
            && l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) == Some(1.0)),
        "{metrics}"
    );
    assert_eq!(wf_json(&t, &["list", "--json"])[0]["status"], "pending");
    // A worker starts it: no longer pending.
    t.wf(&["worker", "--once"]).code(0);
    assert_eq!(t.inspect(&id)["status"], "completed");
}

#[test]
fn a_retry_that_cannot_help_is_refused_before_anything_runs_as_the_cli_refuses_it() {
    // Failed by its workflow's timeout: a retry would time out at once.
    let t = Test::new();
    let s = Server::start(&t, &[], &[]);
    let (id, ran) = t.run_yaml(
        "late.yaml",
        "name: late\ntimeout: 1s\nsteps:\n  - id: slow\n    run: sleep 30\n",
        &[],
    );
    ran.code(1);
    let cli = t.wf(&["resume", &id, "--retry-failed"]);
    cli.code(1);
    assert!(cli.stderr.contains("deadline"), "{}", cli.stderr);
    let r = s.post(&format!("/api/v1/instances/{id}/retry"), json!({}));
    assert_eq!(
        (r.status, r.code()),
        (409, "not_resumable".into()),
        "{}",
        r.text()
    );
    assert!(r.text().contains("deadline"), "{}", r.text());
    // In HTTP words: the route that helps, never the CLI's command.
    assert!(
        r.text()
            .contains(&format!("POST /api/v1/instances/{id}/restart"))
            && !r.text().contains("wf restart")
            && !r.text().contains("--"),
        "{}",
        r.text()
    );
    // Nothing ran: still the one run it had.
    assert_eq!(t.inspect(&id)["runs"].as_array().unwrap().len(), 1);
    assert_eq!(t.inspect(&id)["status"], "failed");
}

#[test]
fn the_instance_page_says_which_run_each_run_follows() {
    let t = Test::new();
    let s = Server::start(&t, &[], &[]);
    let (id, ran) = t.run_yaml(
        "nap.yaml",
        "name: nap\nsteps:\n  - id: nap\n    sleep: 1h\n  - id: after\n    run: 'true'\n",
        &["--inline-wait", "0s"],
    );
    ran.code(3);
    t.wf(&["resume", &id, "--now"]).code(0);
    let page = s.get(&format!("/instances/{id}")).text();
    assert!(page.contains("Run 2"), "{page}");
    assert!(page.contains("follows run 1"), "{page}");
    assert!(!page.contains("follows run 2"), "{page}");
}
