//! Workers sharing instances, the README's approval example, compiled definitions, and an attempt committed before its command runs.

use super::*;

#[test]
fn several_workers_never_run_the_same_instance_twice() {
    let t = Test::new();
    let mut yaml = String::from("name: fleet\nsteps:\n  - id: nap\n    sleep: 1s\n");
    for i in 1..=3 {
        yaml += &format!(
            "  - id: s{i}\n    run: echo \"$WF_INSTANCE_ID $WF_STEP_ID\" >> side.log; sleep 0.1\n"
        );
    }
    let path = t.write("wf.yaml", &yaml);
    let ids: Vec<String> = (1..=5).map(|i| format!("inst{i}")).collect();
    for id in &ids {
        t.wf(&[
            "run",
            path.to_str().unwrap(),
            "--id",
            id,
            "--inline-wait",
            "100ms",
        ])
        .code(3);
    }

    let workers: Vec<Bg> = (0..3)
        .map(|_| spawn(&t, &["worker", "--poll", "100ms"]))
        .collect();
    eventually("every instance to complete", || {
        let list = t.wf(&["list", "--json"]).code(0).json();
        list.as_array()
            .is_some_and(|l| l.len() == 5 && l.iter().all(|i| i["status"] == "completed"))
    });

    // While they run: an event delivered to a waiting instance gets it resumed.
    let (ev, ran) = t.run_yaml(
        "ev.yaml",
        "name: ev\nsteps:\n  - id: go\n    wait_for_event: { name: go }\n  - id: after\n    run: echo \"$WF_INSTANCE_ID after\" >> ev.log\n",
        &["--id", "ev"],
    );
    ran.code(3);
    t.wf(&["signal", &ev, "go"]).code(0);
    eventually("the signalled instance to complete", || {
        listed_status(&t, "ev") == "completed"
    });
    assert_eq!(lines(&t, "ev.log"), ["ev after"]);

    for w in &workers {
        w.signal("TERM");
    }
    for w in workers {
        let ran = w.finish();
        assert!(
            ran.code == 0 || ran.code == 130,
            "worker exited {}: {}",
            ran.code,
            ran.stderr
        );
    }

    let log = lines(&t, "side.log");
    for id in &ids {
        for s in 1..=3 {
            let line = format!("{id} s{s}");
            assert_eq!(
                log.iter().filter(|l| **l == line).count(),
                1,
                "`{line}` ran exactly once: {log:#?}"
            );
        }
        let v = t.inspect(id);
        let runs = v["runs"].as_array().unwrap();
        // Runs of one instance never overlap.
        for pair in runs.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            assert!(
                epoch_ms(a["finished_at"].as_str().unwrap())
                    <= epoch_ms(b["started_at"].as_str().unwrap()),
                "{id}: overlapping runs {runs:#?}"
            );
        }
        assert_eq!(run_outcomes(&v), ["sleeping", "completed"], "{id}");
    }
    assert_eq!(log.len(), 15);
}

#[test]
fn worker_once_resumes_every_due_instance_and_only_those() {
    let t = Test::new();
    let yaml = format!(
        r#"
name: due
inputs:
  kind: {{ required: true }}
steps:
  - id: nap
    if: "${{{{ inputs.kind == 'timer' || inputs.kind == 'later' }}}}"
    sleep: 1s
  - id: later
    if: "${{{{ inputs.kind == 'later' }}}}"
    sleep: 1h
  - id: event
    if: "${{{{ inputs.kind == 'event' || inputs.kind == 'no-event' }}}}"
    wait_for_event: {{ name: go }}
  - id: block
    if: "${{{{ inputs.kind == 'dead' }}}}"
    retry: {{ max_attempts: 2 }}
    run: '{}'
  - id: done
    run: echo "$WF_INSTANCE_ID" >> side.log
"#,
        blocking_step("started")
    );
    let path = t.write("wf.yaml", &yaml);
    let path = path.to_str().unwrap();
    let run = |id: &str, code: i32| {
        t.wf(&[
            "run",
            path,
            "--id",
            id,
            "--input",
            &format!("kind={id}"),
            "--inline-wait",
            "100ms",
        ])
        .code(code);
    };
    run("timer", 3);
    run("later", 3);
    run("event", 3);
    run("no-event", 3);
    t.wf(&["signal", "event", "go", "--data", "{}"]).code(0);
    // A runner killed with SIGKILL while its step runs leaves a dead lease.
    let mut dead = spawn(&t, &["run", path, "--id", "dead", "--input", "kind=dead"]);
    eventually("the step to start", || t.path().join("started").exists());
    dead.kill_and_reap();
    std::fs::write(t.path().join("release"), "").unwrap();
    // The 1 s timer of `timer` is due.
    let wake = t.inspect("timer")["wake_at"].as_str().unwrap().to_string();
    eventually("the timer to be due", || now_ms() > epoch_ms(&wake));
    assert_eq!(listed_status(&t, "dead"), "interrupted");

    t.wf(&["worker", "--once", "--concurrency", "2"]).code(0);

    for id in ["timer", "event", "dead"] {
        assert_eq!(t.inspect(id)["status"], "completed", "{id}");
    }
    assert_eq!(t.inspect("later")["status"], "sleeping");
    assert_eq!(t.inspect("no-event")["status"], "waiting");
    let mut log = lines(&t, "side.log");
    log.sort();
    assert_eq!(log, ["dead", "event", "timer"]);
    assert_eq!(
        outcomes(Test::step(&t.inspect("dead"), "block")),
        ["crashed", "ok"]
    );
}

#[test]
fn a_stopped_worker_leaves_its_instance_interrupted_and_resumable() {
    let t = Test::new();
    let yaml = format!(
        "name: stopme\nsteps:\n  - id: nap\n    sleep: 1s\n  - id: block\n    run: '{}'\n  - id: after\n    run: echo after >> side.log\n",
        blocking_step("started")
    );
    let (id, ran) = t.run_yaml("wf.yaml", &yaml, &["--inline-wait", "100ms"]);
    ran.code(3);

    let worker = spawn(&t, &["worker", "--poll", "100ms"]);
    eventually("the worker to start the step", || {
        t.path().join("started").exists()
    });
    let step_pid: u32 = t.read("started.pid").trim().parse().expect("step pid");
    worker.signal("TERM");
    let ran = worker.finish();
    assert!(
        ran.code == 0 || ran.code == 130,
        "worker exited {}: {}",
        ran.code,
        ran.stderr
    );
    eventually("the step's process to be stopped", || !alive(step_pid));

    let v = t.inspect(&id);
    assert_eq!(v["status"], "interrupted");
    assert_eq!(outcomes(Test::step(&v, "block")), ["interrupted"]);
    std::fs::write(t.path().join("release"), "").unwrap();
    t.wf(&["resume", &id]).code(0);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    assert_eq!(outcomes(Test::step(&v, "block")), ["interrupted", "ok"]);
    assert_eq!(lines(&t, "side.log"), ["after"]);
}

// ------------------------------------------------- the approval example

/// The instance id in a `wf run` line such as `instance ID sleeping until …`.
fn id_in(line: &str) -> String {
    line.split_whitespace()
        .nth(1)
        .unwrap_or_else(|| panic!("no instance id in {line:?}"))
        .to_string()
}

#[test]
fn the_approval_example_in_the_readme_runs_end_to_end() {
    let t = Test::new();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/workflows/approval.yaml");

    // The README's session, step by step, with an id prefix as it uses one.
    let ran = t.wf(&["run", example, "--inline-wait", "0s"]);
    ran.code(3);
    assert!(ran.stdout.contains("sleeping until"), "{}", ran.stdout);
    let id = id_in(&ran.stdout);
    let prefix = &id[..4];
    let v = t.inspect(&id);
    assert_eq!(v["status"], "sleeping");
    assert!(v["wake_at"].is_string());

    let ran = t.wf(&["resume", prefix]);
    ran.code(3);
    assert!(
        ran.stdout.contains("waiting for event `approved`"),
        "{}",
        ran.stdout
    );
    assert_eq!(t.inspect(&id)["waiting_event"], "approved");

    t.wf(&[
        "signal",
        prefix,
        "approved",
        "--data",
        r#"{"ok": true, "by": "ana"}"#,
    ])
    .code(0);
    let ran = t.wf(&["resume", prefix]);
    ran.code(0);
    assert!(ran.stdout.contains("completed"), "{}", ran.stdout);

    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    assert_eq!(v["state"], json!({ "approved": true, "approver": "ana" }));
    assert_eq!(run_outcomes(&v), ["sleeping", "waiting", "completed"]);
    let apply = Test::step(&v, "apply");
    assert_eq!(apply["status"], "completed");
    assert_eq!(
        apply["output"]["stdout"].as_str().map(str::trim),
        Some("applying deploy v2, approved by ana")
    );
}

#[test]
fn the_approval_example_with_the_default_inline_wait_and_a_refusal() {
    let t = Test::new();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/workflows/approval.yaml");
    // The 2 s timer passes inside the run, which then waits for the approval.
    let ran = t.wf(&["run", example, "--json"]);
    ran.code(3);
    let id = ran.json()["id"].as_str().expect("id").to_string();
    let v = t.inspect(&id);
    assert_eq!(v["status"], "waiting");
    assert_eq!(run_outcomes(&v), ["waiting"]);
    t.wf(&[
        "signal",
        &id,
        "approved",
        "--data",
        r#"{"ok": false, "by": "bo"}"#,
    ])
    .code(0);
    t.wf(&["resume", &id]).code(0);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    assert_eq!(v["state"], json!({ "approved": false, "approver": "bo" }));
    assert_eq!(Test::step(&v, "apply")["status"], "skipped");
}

// ------------------------------------------------- the compiled definition

/// `wf run` stores the validated definition beside its text; `wf resume`
/// runs that compiled form instead of parsing the YAML again, unless it is
/// missing, damaged or from another version of wf.
#[test]
fn resume_runs_the_compiled_definition_else_the_pinned_yaml() {
    type Tamper = fn(String) -> Option<String>;
    let cases: [(&str, Tamper, &str); 4] = [
        // Changed behind wf's back, to show which form the resume ran.
        (
            "used",
            |c| Some(c.replace("from-yaml", "from-compiled")),
            "from-compiled",
        ),
        ("damaged", |_| Some("{\"format\": ".into()), "from-yaml"),
        (
            "other version",
            |c| Some(c.replace("\"format\":\"wf ", "\"format\":\"wf 0.0.0-older ")),
            "from-yaml",
        ),
        ("missing", |_| None, "from-yaml"),
    ];
    for (case, tamper, ran) in cases {
        let t = Test::new();
        let (id, run) = t.run_yaml(
            "wf.yaml",
            "name: pinned\nsteps:\n  - id: gate\n    wait_for_event: { name: go }\n  \
             - id: after\n    run: echo from-yaml >> after.txt\n",
            &[],
        );
        run.code(3);
        let compiled = if t.on_pg() {
            Some(t.psql("SELECT compiled FROM definitions")).filter(|c| !c.is_empty())
        } else {
            let db = rusqlite::Connection::open(&t.db).expect("open the database");
            db.query_row("SELECT compiled FROM definitions", [], |r| r.get(0))
                .expect("one definition")
        };
        let compiled = compiled.expect("wf run stores the compiled form");
        let changed = tamper(compiled.clone());
        assert_ne!(
            changed.as_deref(),
            Some(compiled.as_str()),
            "{case}: tampered"
        );
        if t.on_pg() {
            let value = changed.map_or("NULL".to_string(), |c| format!("$wf${c}$wf$"));
            t.psql(&format!("UPDATE definitions SET compiled = {value}"));
        } else {
            let db = rusqlite::Connection::open(&t.db).expect("open the database");
            db.execute("UPDATE definitions SET compiled = ?1", [changed])
                .expect("update");
        }
        t.wf(&["signal", &id, "go"]).code(0);
        t.wf(&["resume", &id]).code(0);
        assert_eq!(t.read("after.txt").trim(), ran, "{case}");
    }
}

/// docs/execution.md: every attempt is recorded before it starts. While another
/// process holds the database's write lock (SQLite) or the instance's row
/// (PostgreSQL), the commit that records the `probe` attempt waits; the
/// probe's first act is to read its own attempt from another process, and it
/// finds it committed, not ended — so nothing of it ran before the record was
/// in (a process started before the commit would have run inside the window).
#[test]
fn an_attempt_is_committed_before_its_command_runs() {
    let t = Test::new();
    let query = "SELECT attempt, outcome IS NULL FROM attempts WHERE instance_id = '$WF_INSTANCE_ID' \
                 AND step_key = 'probe' ORDER BY attempt";
    let psql = || crate::pg_tool("psql");
    let read = match &t.pg {
        Some((url, schema)) => format!(
            "PGOPTIONS=-csearch_path={schema} {} '{url}' -qAtc \"{query}\"",
            psql()
        ),
        None => format!(
            "python3 -c \"import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); \
             print('\\n'.join('|'.join(str(v) for v in r) for r in c.execute(sys.argv[2])))\" '{}' \"{query}\"",
            t.db.display()
        ),
    };
    // `before` waits until the lock is held, then ends: the commit of its
    // end and of `probe`'s start waits for the lock.
    let yaml = format!(
        "name: probe\nsteps:\n  - id: before\n    \
         run: echo $WF_INSTANCE_ID > id.txt; while [ ! -f locked ]; do sleep 0.01; done\n  \
         - id: probe\n    retry: {{ max_attempts: 2, interval: 10ms }}\n    \
         run: |\n      {read} > seen-$WF_ATTEMPT.txt\n      [ \"$WF_ATTEMPT\" = 2 ]\n"
    );
    let path = t.write("probe.yaml", &yaml);
    let run = spawn(&t, &["run", path.to_str().unwrap()]);
    eventually("step `before` to start", || {
        t.path().join("id.txt").exists()
    });
    let id = t.read("id.txt").trim().to_string();
    // Holds the lock for a second, saying so on stdout first.
    let mut holder = match &t.pg {
        Some((url, schema)) => Command::new(psql())
            .arg(url)
            .args(["-qAt", "-c"])
            .arg(format!(
                "BEGIN; SET search_path TO {schema}; \
                 SELECT 'locked' FROM instances WHERE id = '{id}' FOR UPDATE; \
                 SELECT pg_sleep(1); COMMIT;"
            ))
            .stdout(Stdio::piped())
            .spawn()
            .expect("psql"),
        None => Command::new("python3")
            .args([
                "-c",
                "import sqlite3, sys, time\n\
                 c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
                 c.execute('BEGIN IMMEDIATE')\n\
                 print('locked', flush=True)\n\
                 time.sleep(1)\n\
                 c.execute('COMMIT')\n",
            ])
            .arg(&t.db)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3"),
    };
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "locked");
    std::fs::write(t.path().join("locked"), "").unwrap();
    let ran = run.finish();
    assert!(holder.wait().unwrap().success());
    ran.code(0);
    // Attempt 1 saw itself open; attempt 2 saw attempt 1 ended and itself open.
    let open = if t.pg.is_some() { "t" } else { "1" };
    let ended = if t.pg.is_some() { "f" } else { "0" };
    assert_eq!(
        t.read("seen-1.txt").trim(),
        format!("1|{open}"),
        "{}",
        ran.stderr
    );
    let second = t.read("seen-2.txt");
    let lines: Vec<&str> = second.lines().collect();
    assert_eq!(
        lines,
        [format!("1|{ended}"), format!("2|{open}")],
        "{second}"
    );
}
