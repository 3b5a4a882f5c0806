//! `matrix:` (docs/workflow-file.md#matrix): combinations expanded as
//! GitHub Actions expands them (its documented examples give the jobs its
//! documentation lists), each a unit shown and addressed by its values,
//! `fail_fast`, `max_parallel`, `workflow:` steps, each combination run
//! once per recorded attempt under kill -9, and the file's errors at their
//! line and column.

use crate::durable::{eventually, spawn};
use crate::{Test, XorShift};
use serde_json::{Value, json};
use std::time::Duration;

/// The matrix values each unit of step `id` ran with, in expansion order
/// (the step's output: each combination echoes `toJSON(matrix)`).
fn ran_with(t: &Test, id: &str, step: &str) -> Vec<Value> {
    let i = t.inspect(id);
    Test::step(&i, step)["output"]
        .as_array()
        .expect("a list of outputs")
        .iter()
        .map(|o| o["json"].clone())
        .collect()
}

#[test]
fn githubs_documented_examples_expand_to_the_jobs_github_lists() {
    let t = Test::new();
    // docs.github.com: "Example: Expanding configurations" and
    // "Example: Excluding matrix configurations".
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: github
steps:
  - id: expand
    matrix:
      fruit: [apple, pear]
      animal: [cat, dog]
      include:
        - color: green
        - color: pink
          animal: cat
        - fruit: apple
          shape: circle
        - fruit: banana
        - fruit: banana
          animal: cat
    run: echo '${{ toJSON(matrix) }}'
  - id: exclude
    matrix:
      os: [macos-latest, windows-latest]
      version: [12, 14, 16]
      environment: [staging, production]
      exclude:
        - os: macos-latest
          version: 12
          environment: production
        - os: windows-latest
          version: 16
    run: echo '${{ toJSON(matrix) }}'
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(
        ran_with(&t, &id, "expand"),
        [
            json!({"fruit": "apple", "animal": "cat", "color": "pink", "shape": "circle"}),
            json!({"fruit": "apple", "animal": "dog", "color": "green", "shape": "circle"}),
            json!({"fruit": "pear", "animal": "cat", "color": "pink"}),
            json!({"fruit": "pear", "animal": "dog", "color": "green"}),
            json!({"fruit": "banana"}),
            json!({"fruit": "banana", "animal": "cat"}),
        ]
    );
    let excluded = ran_with(&t, &id, "exclude");
    assert_eq!(excluded.len(), 9, "{excluded:?}");
    assert!(
        !excluded
            .contains(&json!({"os": "macos-latest", "version": 12, "environment": "production"}))
    );
    assert!(
        !excluded
            .iter()
            .any(|c| c["os"] == "windows-latest" && c["version"] == 16)
    );
}

#[test]
fn each_combination_is_shown_and_addressed_by_its_values() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: shown
steps:
  - id: build
    matrix:
      os: [linux, macos]
      arch: [amd64, arm64]
      exclude: [{ os: macos, arch: amd64 }]
    run: echo "$WF_STEP_ID ${{ matrix.os }}/${{ matrix.arch }}"
  - id: count
    run: echo "${{ steps.build.output[2].stdout }}"
"#,
        &[],
    );
    ran.code(0);
    let i = t.inspect(&id);
    let labels: Vec<&str> = i["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["label"].as_str())
        .collect();
    assert_eq!(
        labels,
        [
            "build[os=linux,arch=amd64]",
            "build[os=linux,arch=arm64]",
            "build[os=macos,arch=arm64]"
        ]
    );
    // The key stays its place in the expansion; both name it.
    assert_eq!(
        Test::step(&i, "build[2]")["label"],
        "build[os=macos,arch=arm64]"
    );
    let by_values = t
        .wf(&["logs", &id, "build[os=linux,arch=arm64]"])
        .code(0)
        .stdout
        .clone();
    assert_eq!(by_values, "build[os=linux,arch=arm64] linux/arm64\n");
    assert_eq!(t.wf(&["logs", &id, "build[1]"]).code(0).stdout, by_values);
    assert_eq!(
        t.wf(&["logs", &id, "count"]).code(0).stdout,
        "build[os=macos,arch=arm64] macos/arm64\n"
    );
    let table = t.wf(&["inspect", &id]).code(0).stdout.clone();
    assert!(table.contains("build[os=macos,arch=arm64]"), "{table}");
    let trace = t.wf(&["trace", &id]).code(0).stdout.clone();
    assert!(
        trace.contains("shown/build[os=linux,arch=amd64]"),
        "{trace}"
    );
    assert!(
        ran.stderr.contains("build[os=linux,arch=arm64]: ok"),
        "{}",
        ran.stderr
    );
}

#[test]
fn fail_fast_stops_the_running_combinations_and_the_workflow() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: ff
steps:
  - id: build
    matrix:
      n: [1, 2, 3]
    run: |
      if [ "${{ matrix.n }}" = 2 ]; then
        while [ ! -e started.1 ] || [ ! -e started.3 ]; do sleep 0.01; done
        exit 4
      fi
      touch started.${{ matrix.n }}
      sleep 30
      touch finished.${{ matrix.n }}
  - id: after
    run: touch after
"#,
        &[],
    );
    ran.code(1);
    let i = t.inspect(&id);
    assert_eq!(i["status"], "failed");
    assert_eq!(Test::step(&i, "build")["status"], "failed");
    assert_eq!(Test::step(&i, "build[1]")["error_type"], "exit.4");
    for n in [0, 2] {
        let s = Test::step(&i, &format!("build[{n}]"));
        assert_eq!(s["status"], "canceled", "{s}");
        assert_eq!(s["attempt_list"][0]["outcome"], "canceled", "{s}");
        assert!(
            s["error_message"]
                .as_str()
                .is_some_and(|m| m.contains("fail_fast") && m.contains("build[n=2]")),
            "{s}"
        );
    }
    for f in ["finished.1", "finished.3", "after"] {
        assert!(!t.path().join(f).exists(), "{f}");
    }
    assert!(
        i["error"]
            .as_str()
            .is_some_and(|e| e.contains("build[n=2]")),
        "{i}"
    );
}

#[test]
fn without_fail_fast_the_others_run_to_their_end_then_the_step_fails() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: nf
steps:
  - id: build
    matrix:
      n: [1, 2, 3]
    fail_fast: false
    run: |
      if [ "${{ matrix.n }}" = 2 ]; then touch failed.2; exit 4; fi
      # Goes on after the other failed.
      while [ ! -e failed.2 ]; do sleep 0.01; done
      echo "done ${{ matrix.n }}"
  - id: after
    run: touch after
  - id: tolerant
    needs: []
    matrix:
      n: [1, 2]
    continue_on_error: true
    run: exit ${{ matrix.n }}
"#,
        &[],
    );
    ran.code(1);
    let i = t.inspect(&id);
    assert_eq!(Test::step(&i, "build[0]")["status"], "completed");
    assert_eq!(Test::step(&i, "build[2]")["status"], "completed");
    assert_eq!(Test::step(&i, "build")["status"], "failed");
    assert!(
        i["error"]
            .as_str()
            .is_some_and(|e| e.contains("build[n=2]")),
        "{i}"
    );
    assert!(!t.path().join("after").exists());
    // continue_on_error: the step fails (fail_fast stops the other) without failing the workflow.
    assert_eq!(Test::step(&i, "tolerant")["status"], "failed");
}

#[test]
fn max_parallel_bounds_the_combinations_running_at_once() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: mp
steps:
  - id: build
    matrix:
      a: [1, 2]
      b: [x, y, z]
    max_parallel: 2
    run: |
      echo "start" >> log
      n=$(grep -c start log); e=$(grep -c end log || true)
      echo $((n - e)) >> running
      sleep 0.05
      echo "end" >> log
"#,
        &[],
    );
    ran.code(0);
    let running = t.read("running");
    let most = running.lines().filter_map(|l| l.parse::<u32>().ok()).max();
    assert!(most.is_some_and(|m| m <= 2), "{running}");
    assert_eq!(running.lines().count(), 6);
    let i = t.inspect(&id);
    assert_eq!(
        Test::step(&i, "build")["output"].as_array().map(Vec::len),
        Some(6)
    );
}

#[test]
fn a_matrix_of_workflow_steps_starts_a_child_per_combination() {
    let t = Test::new();
    t.write(
        "child.yaml",
        r#"
name: child
inputs:
  region: { required: true }
outputs:
  got: "${{ steps.a.output.stdout }}"
steps:
  - id: a
    run: echo "hi ${{ inputs.region }}"
"#,
    );
    let (id, ran) = t.run_yaml(
        "parent.yaml",
        r#"
name: parent
steps:
  - id: deploy
    matrix:
      region: [eu, us]
    workflow: child.yaml
    with: { region: "${{ matrix.region }}" }
"#,
        &[],
    );
    ran.code(0);
    let i = t.inspect(&id);
    assert_eq!(
        Test::step(&i, "deploy")["output"],
        json!([{"got": "hi eu"}, {"got": "hi us"}])
    );
    let children: Vec<String> = i["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["step"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(children.len(), 2, "{children:?}");
    let table = t.wf(&["inspect", &id]).code(0).stdout.clone();
    assert!(table.contains("deploy[region=us]"), "{table}");
}

#[test]
fn lists_given_as_expressions_are_expanded_when_the_step_starts() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf2.yaml",
        r#"
name: dynamic
inputs:
  oses: { default: [linux, macos] }
steps:
  - id: list
    run: echo '[1, 2, 3]'
  - id: build
    matrix:
      os: "${{ inputs.oses }}"
      n: "${{ steps.list.output.json }}"
    run: echo "${{ matrix.os }}${{ matrix.n }}"
  - id: big
    matrix:
      a: "${{ fromJSON('[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]') }}"
      b: "${{ fromJSON('[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]') }}"
    run: "true"
"#,
        &[],
    );
    ran.code(1);
    let i = t.inspect(&id);
    let outs: Vec<&str> = Test::step(&i, "build")["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["stdout"].as_str().unwrap())
        .collect();
    assert_eq!(
        outs,
        ["linux1", "linux2", "linux3", "macos1", "macos2", "macos3"]
    );
    let big = Test::step(&i, "big");
    assert_eq!(big["error_type"], "expression");
    assert!(
        big["error_message"]
            .as_str()
            .is_some_and(|m| m.contains("289 combinations, more than 256")),
        "{big}"
    );
}

#[test]
fn under_kill_9_each_combination_runs_once_per_recorded_attempt() {
    const KILLS: usize = 8;
    let seed = std::env::var("WF_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_0f4a_7c15_u64);
    eprintln!("matrix kill seed: {seed} (set WF_CRASH_SEED to change it)");
    let mut rng = XorShift(seed);
    let t = Test::new();
    let path = t.write(
        "wf.yaml",
        r#"
name: crashy
steps:
  - id: build
    matrix:
      os: [linux, macos]
      n: [1, 2, 3, 4]
    max_parallel: 3
    retry: { max_attempts: 30 }
    run: |
      echo "$WF_STEP_ID $WF_ATTEMPT" >> side.log
      sleep 0.05
      echo "${{ matrix.os }}-${{ matrix.n }}"
"#,
    );
    let path = path.to_str().unwrap();
    let exists = |t: &Test| t.wf(&["inspect", "crashy", "--json"]).code == 0;
    for k in 0..KILLS {
        let args: Vec<&str> = if exists(&t) {
            vec!["resume", "crashy"]
        } else {
            vec!["run", path, "--id", "crashy"]
        };
        let mut wf = spawn(&t, &args);
        if k == 0 {
            // The first kill lands inside the combinations.
            eventually("a combination to start", || {
                std::fs::read_to_string(t.path().join("side.log")).is_ok_and(|s| !s.is_empty())
            });
        } else {
            std::thread::sleep(Duration::from_millis(10 + rng.below(150)));
        }
        wf.kill9();
        eventually("wf to die", || wf.exited());
    }
    let args: Vec<&str> = if exists(&t) {
        vec!["resume", "crashy"]
    } else {
        vec!["run", path, "--id", "crashy"]
    };
    t.wf(&args).code(0);
    let i = t.inspect("crashy");
    assert_eq!(i["status"], "completed");
    let side = t.read("side.log");
    let mut crashed_total = 0;
    let mut expected = Vec::new();
    for (c, os) in ["linux", "macos"].iter().enumerate() {
        for n in 1..=4 {
            let idx = c * 4 + (n - 1);
            let label = format!("build[os={os},n={n}]");
            let s = Test::step(&i, &format!("build[{idx}]"));
            assert_eq!(s["label"], label.as_str());
            assert_eq!(s["status"], "completed", "{s}");
            let list = s["attempt_list"].as_array().unwrap();
            let ok = list.iter().filter(|a| a["outcome"] == "ok").count();
            assert_eq!(ok, 1, "{label}: {list:?}");
            let crashed = list.iter().filter(|a| a["outcome"] == "crashed").count();
            assert_eq!(crashed + 1, list.len(), "{label}: {list:?}");
            crashed_total += crashed;
            let effects = side
                .lines()
                .filter(|l| l.split(' ').next() == Some(label.as_str()))
                .count();
            assert!(
                effects >= 1 && effects <= list.len(),
                "{label}: {effects} runs for {} recorded attempts",
                list.len()
            );
            expected.push(format!("{os}-{n}"));
        }
    }
    eprintln!("{crashed_total} crashed attempts in all");
    assert!(crashed_total >= 1, "no kill landed inside a combination");
    let outs: Vec<String> = Test::step(&i, "build")["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["stdout"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(outs, expected);
}

#[test]
fn a_matrix_the_engine_would_refuse_is_an_error_at_its_line_and_column() {
    let t = Test::new();
    t.refuses(&[
        (
            "name: m\nsteps:\n  - id: a\n    matrix: {}\n    run: echo\n",
            "wf.yaml:4:13",
            "no combination",
        ),
        (
            "name: m\nsteps:\n  - id: a\n    matrix:\n      os: []\n    run: echo\n",
            "wf.yaml:5:7",
            "matrix list `os` is empty",
        ),
        (
            "name: m\nsteps:\n  - id: a\n    matrix:\n      os: [a, b]\n      exclude: [{ os: c }]\n    run: echo\n",
            "wf.yaml:6:7",
            "matches no combination",
        ),
        (
            "name: m\nsteps:\n  - id: a\n    matrix:\n      x: [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]\n      y: [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]\n    run: echo\n",
            "wf.yaml:5:7",
            "289 combinations, more than 256",
        ),
        (
            "name: m\nsteps:\n  - id: a\n    matrix:\n      os: [a]\n    run: echo ${{ matrix.arch }}\n",
            "wf.yaml:6:",
            "`matrix.arch`, which no combination of the matrix has",
        ),
        (
            "name: m\nsteps:\n  - id: a\n    run: echo ${{ matrix.os }}\n",
            "wf.yaml:4:",
            "`matrix` is only available in a `matrix` step",
        ),
        (
            "name: m\nsteps:\n  - id: a\n    fail_fast: false\n    run: echo\n",
            "wf.yaml:4:16",
            "`fail_fast` only applies to `matrix` steps",
        ),
        (
            "name: m\nsteps:\n  - id: a\n    for_each: [1]\n    matrix: { os: [a] }\n    run: echo\n",
            "wf.yaml:5:13",
            "both `matrix` and `for_each`",
        ),
    ]);
}

#[test]
fn retry_failed_runs_the_failed_and_stopped_combinations_again() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: again
steps:
  - id: build
    matrix:
      n: [1, 2, 3]
    run: |
      echo "${{ matrix.n }}" >> runs.log
      if [ -e fixed ]; then exit 0; fi
      if [ "${{ matrix.n }}" = 2 ]; then
        while [ "$(wc -l < runs.log)" -lt 3 ]; do sleep 0.01; done
        exit 4
      fi
      sleep 30
  - id: after
    run: echo after
"#,
        &[],
    );
    ran.code(1);
    let i = t.inspect(&id);
    assert_eq!(Test::step(&i, "build[0]")["status"], "canceled");
    t.write("fixed", "");
    t.wf(&["resume", &id, "--retry-failed"]).code(0);
    let i = t.inspect(&id);
    for n in 0..3 {
        let s = Test::step(&i, &format!("build[{n}]"));
        assert_eq!(s["status"], "completed", "{s}");
        assert_eq!(s["attempts"], 2, "{s}");
    }
    assert_eq!(Test::step(&i, "build")["status"], "completed");
    assert_eq!(Test::step(&i, "build")["error_type"], Value::Null);
    assert_eq!(Test::step(&i, "after")["status"], "completed");
    assert_eq!(t.read("runs.log").lines().count(), 6);
    // A restart from the step expands and runs its combinations again.
    t.wf(&["restart", &id, "--from", "build"]).code(0);
    assert_eq!(t.read("runs.log").lines().count(), 9);
}
