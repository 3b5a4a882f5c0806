//! Resuming: completed steps replayed, the pinned definition, a fresh budget for failed steps, one holder at a time however many resume at once.

use super::*;

#[test]
fn resume_replays_completed_steps_without_running_them() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: replay
steps:
  - id: a
    run: 'echo a >> side.log; echo "{\"v\": \"$$\"}"'
  - id: nap
    sleep: 1h
  - id: c
    run: echo "c ${{ steps.a.output.json.v }}" >> side.log
"#,
        &[],
    );
    ran.code(3);
    let a_out = Test::step(&t.inspect(&id), "a")["output"]["json"]["v"]
        .as_str()
        .expect("a's output")
        .to_string();

    t.wf(&["resume", &id, "--now"]).code(0);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    // `a` ran once; `c` saw the output recorded in the first run.
    assert_eq!(
        lines(&t, "side.log"),
        ["a".to_string(), format!("c {a_out}")]
    );
    let a = Test::step(&v, "a");
    assert_eq!(a["attempts"], 1);
    assert_eq!(a["attempt_list"][0]["run"], 1);
    assert_eq!(Test::step(&v, "c")["attempt_list"][0]["run"], 2);

    // Resuming a completed instance runs nothing.
    t.wf(&["resume", &id]).code(0);
    assert_eq!(count_lines(&t, "side.log", "a"), 1);
    assert_eq!(run_outcomes(&t.inspect(&id)), ["sleeping", "completed"]);
}

#[test]
fn resume_runs_the_pinned_definition_not_the_file_on_disk() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: pinned
steps:
  - id: nap
    sleep: 1h
  - id: c
    run: echo "c v1" >> side.log
"#,
        &[],
    );
    ran.code(3);
    let hash = t.inspect(&id)["definition_hash"].clone();
    t.write(
        "wf.yaml",
        r#"
name: pinned
steps:
  - id: nap
    sleep: 1h
  - id: c
    run: echo "c v2" >> side.log
  - id: d
    run: echo "d v2" >> side.log
"#,
    );
    t.wf(&["resume", &id, "--now"]).code(0);
    assert_eq!(lines(&t, "side.log"), ["c v1"]);
    let v = t.inspect(&id);
    assert_eq!(v["definition_hash"], hash);
    let ids: Vec<&str> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["nap", "c"]);

    // Even with the file gone.
    let (id, ran) = t.run_yaml(
        "other.yaml",
        "name: gone\nsteps:\n  - id: nap\n    sleep: 1h\n  - id: c\n    run: echo gone >> side.log\n",
        &[],
    );
    ran.code(3);
    std::fs::remove_file(t.path().join("other.yaml")).expect("rm");
    t.wf(&["resume", &id, "--now"]).code(0);
    assert_eq!(lines(&t, "side.log"), ["c v1", "gone"]);
}

#[test]
fn resume_retry_failed_gives_a_fresh_attempt_budget_and_continues() {
    let t = Test::new();
    // Fails on attempts 1, 2 and 3, succeeds on the 4th.
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: again
steps:
  - id: first
    run: echo first >> side.log
  - id: flaky
    retry: { max_attempts: 2, backoff: fixed, interval: 10ms }
    run: 'n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; [ $n -ge 4 ]'
  - id: last
    run: echo last >> side.log
"#,
        &[],
    );
    ran.code(1);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "failed");
    assert_eq!(outcomes(Test::step(&v, "flaky")), ["retry", "failed"]);

    // Plain resume refuses a failed instance, and runs nothing.
    let refused = t.wf(&["resume", &id]);
    assert_ne!(refused.code, 0, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("--retry-failed"),
        "{}",
        refused.stderr
    );
    assert_eq!(t.read("count").trim(), "2");

    // A fresh budget: two more attempts; the second of them succeeds.
    t.wf(&["resume", &id, "--retry-failed"]).code(0);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    let flaky = Test::step(&v, "flaky");
    assert_eq!(outcomes(flaky), ["retry", "failed", "retry", "ok"]);
    assert_eq!(flaky["attempts"], 4);
    assert_eq!(
        lines(&t, "side.log"),
        ["first", "last"],
        "first is not re-run"
    );
}

// ------------------------------------------------------------ 4. leases

#[test]
fn a_second_resume_is_refused_naming_the_holder_and_a_killed_holder_is_taken_over() {
    let t = Test::new();
    let yaml = format!(
        "name: held\nsteps:\n  - id: block\n    retry: {{ max_attempts: 2 }}\n    run: '{}'\n  - id: after\n    run: echo after >> side.log\n",
        blocking_step("started")
    );
    let path = t.write("wf.yaml", &yaml);
    let mut runner = spawn(&t, &["run", path.to_str().unwrap(), "--id", "held"]);
    eventually("the step to start", || t.path().join("started").exists());

    let refused = t.wf(&["resume", "held"]);
    refused.code(5);
    let holder = format!("{}:{}", hostname(), runner.pid());
    assert!(
        refused.stderr.contains(&holder),
        "the refusal names the holder {holder}: {}",
        refused.stderr
    );
    assert_eq!(listed_status(&t, "held"), "running");

    // SIGKILL: the lease (valid for a while yet) names a pid that no longer runs.
    runner.kill9();
    eventually("the runner to die", || !alive(runner.pid()));
    assert_eq!(listed_status(&t, "held"), "interrupted");
    assert_eq!(t.inspect("held")["status"], "interrupted");

    // Taken over at once, even before the dead runner is reaped.
    std::fs::write(t.path().join("release"), "").unwrap();
    t.wf(&["resume", "held"]).code(0);
    runner.kill_and_reap();
    let v = t.inspect("held");
    assert_eq!(v["status"], "completed");
    assert_eq!(outcomes(Test::step(&v, "block")), ["crashed", "ok"]);
    assert_eq!(run_outcomes(&v), ["crashed", "completed"]);
    assert_eq!(lines(&t, "side.log"), ["after"]);
}

#[test]
fn ten_concurrent_resumes_run_each_step_exactly_once() {
    let t = Test::new();
    let mut yaml = String::from("name: herd\nsteps:\n  - id: nap\n    sleep: 1h\n");
    for i in 1..=5 {
        yaml += &format!("  - id: s{i}\n    run: echo s{i} >> side.log; sleep 0.1\n");
    }
    let (id, ran) = t.run_yaml("wf.yaml", &yaml, &[]);
    ran.code(3);

    let herd: Vec<Bg> = (0..10)
        .map(|_| spawn(&t, &["resume", &id, "--now"]))
        .collect();
    let results: Vec<Ran> = herd.into_iter().map(Bg::finish).collect();
    for r in &results {
        assert!(
            r.code == 0 || r.code == 5,
            "a resume exited {}: {}",
            r.code,
            r.stderr
        );
    }
    assert!(results.iter().any(|r| r.code == 0), "no resume ran it");

    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    let mut log = lines(&t, "side.log");
    log.sort();
    assert_eq!(log, ["s1", "s2", "s3", "s4", "s5"], "each step ran once");
    for i in 1..=5 {
        assert_eq!(outcomes(Test::step(&v, &format!("s{i}"))), ["ok"]);
    }
    assert_eq!(
        run_outcomes(&v),
        ["sleeping", "completed"],
        "one resume ran it; the others ran nothing"
    );
}

#[test]
fn ten_concurrent_takeovers_of_a_dead_lease_run_each_step_exactly_once() {
    let t = Test::new();
    let mut yaml = format!(
        "name: herd\nsteps:\n  - id: block\n    retry: {{ max_attempts: 2 }}\n    run: '{}'\n",
        blocking_step("started")
    );
    for i in 1..=5 {
        yaml += &format!("  - id: s{i}\n    run: echo s{i} >> side.log; sleep 0.1\n");
    }
    let path = t.write("wf.yaml", &yaml);
    let mut runner = spawn(&t, &["run", path.to_str().unwrap(), "--id", "herd"]);
    eventually("the step to start", || t.path().join("started").exists());
    runner.kill_and_reap();
    std::fs::write(t.path().join("release"), "").unwrap();
    assert_eq!(listed_status(&t, "herd"), "interrupted");

    let herd: Vec<Bg> = (0..10).map(|_| spawn(&t, &["resume", "herd"])).collect();
    let results: Vec<Ran> = herd.into_iter().map(Bg::finish).collect();
    for r in &results {
        assert!(
            r.code == 0 || r.code == 5,
            "a resume exited {}: {}",
            r.code,
            r.stderr
        );
    }
    let v = t.inspect("herd");
    assert_eq!(v["status"], "completed");
    assert_eq!(outcomes(Test::step(&v, "block")), ["crashed", "ok"]);
    let mut log = lines(&t, "side.log");
    log.sort();
    assert_eq!(log, ["s1", "s2", "s3", "s4", "s5"], "each step ran once");
    assert_eq!(run_outcomes(&v), ["crashed", "completed"]);
}

// ---------------------------------------------------- 5. crash recovery
