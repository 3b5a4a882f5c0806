//! `cache:` (docs/workflow-file.md#cache): a step whose key matches a kept
//! result completes `cached` without running, with that result's output
//! and state patch, naming the attempt it came from (inspect, trace);
//! `hashFiles()`, `ttl`, `--no-cache`, a matrix's combinations each with
//! an entry of their own, two concurrent instances with one key running it
//! once (or both, with `wait: false`), an entry outliving a prune of its
//! instance, and the file's errors at their line and column.

use crate::Test;
use crate::durable::{eventually, spawn};
use serde_json::Value;

const BUILD: &str = r#"
name: site
state: { built: none }
steps:
  - id: build
    run: |
      echo ran >> runs.log
      echo "artifact=dist-$(cat src/a.txt)" >> "$WF_OUTPUT"
    cache:
      key: "v1-${{ hashFiles('src/**', '!src/**/*.tmp') }}"
    set_state: { built: "${{ output.artifact }}" }
  - id: show
    run: echo "${{ steps.build.output.artifact }} ${{ state.built }}"
"#;

/// How many times the steps wrote to `runs.log`.
fn runs(t: &Test) -> usize {
    std::fs::read_to_string(t.path().join("runs.log")).map_or(0, |s| s.lines().count())
}

fn last_attempt<'a>(i: &'a Value, step: &str) -> &'a Value {
    let list = Test::step(i, step)["attempt_list"]
        .as_array()
        .expect("attempts");
    list.last().expect("an attempt")
}

#[test]
fn a_kept_result_completes_the_step_without_running_it() {
    let t = Test::new();
    t.write("src/a.txt", "a");
    let (first, ran) = t.run_yaml("site.yaml", BUILD, &[]);
    ran.code(0);
    assert_eq!(runs(&t), 1);
    let (second, ran) = t.run_yaml("site.yaml", BUILD, &[]);
    ran.code(0);
    assert_eq!(runs(&t), 1, "the second instance ran nothing");
    let i = t.inspect(&second);
    let a = last_attempt(&i, "build");
    assert_eq!(a["outcome"], "cached");
    assert_eq!(a["cached_from"]["instance"], first.as_str());
    assert_eq!(a["cached_from"]["attempt"], 1);
    assert_eq!(Test::step(&i, "build")["status"], "completed");
    assert_eq!(Test::step(&i, "build")["output"]["artifact"], "dist-a");
    // Its output and its state patch, as the first run made them.
    assert_eq!(i["state"]["built"], "dist-a");
    assert_eq!(
        t.wf(&["logs", &second, "show"]).code(0).stdout,
        "dist-a dist-a\n"
    );
    let table = t
        .wf(&["inspect", &second, "--attempts"])
        .code(0)
        .stdout
        .clone();
    assert!(
        table.contains("cached") && table.contains(&format!("from {}#1", &first[..12])),
        "{table}"
    );
    // The span says where the result came from.
    let roots = t.wf(&["trace", &second, "--format", "json"]).code(0).json();
    let text = roots.to_string();
    assert!(
        text.contains("workflow.step.cached_from") && text.contains(&format!("{first}#1")),
        "{text}"
    );

    // A file the key reads changes: it runs again; a file left out does not count.
    t.write("src/b.tmp", "ignored");
    t.run_yaml("site.yaml", BUILD, &[]).1.code(0);
    assert_eq!(runs(&t), 1, "an excluded file changes nothing");
    t.write("src/a.txt", "b");
    let (third, ran) = t.run_yaml("site.yaml", BUILD, &[]);
    ran.code(0);
    assert_eq!(runs(&t), 2);
    assert_eq!(last_attempt(&t.inspect(&third), "build")["outcome"], "ok");

    // --no-cache runs it, and what it completes is kept.
    let (fresh, ran) = t.run_yaml("site.yaml", BUILD, &["--no-cache"]);
    ran.code(0);
    assert_eq!(runs(&t), 3);
    let (after, _) = t.run_yaml("site.yaml", BUILD, &[]);
    assert_eq!(runs(&t), 3);
    assert_eq!(
        last_attempt(&t.inspect(&after), "build")["cached_from"]["instance"],
        fresh.as_str()
    );
}

#[test]
fn ttl_empty_keys_and_failures_keep_nothing_to_take() {
    let t = Test::new();
    let yaml = r#"
name: keys
inputs:
  key: { default: k }
  fail: { default: "no" }
steps:
  - id: short
    run: echo ran >> runs.log
    cache: { key: "${{ inputs.key }}", ttl: 1ms }
  - id: empty
    run: echo ran >> runs.log
    cache: { key: "${{ hashFiles('none/**') }}" }
  - id: flaky
    run: |
      echo ran >> runs.log
      [ "${{ inputs.fail }}" = "no" ]
    cache: { key: "${{ inputs.key }}" }
"#;
    t.run_yaml("k.yaml", yaml, &["--input", "fail=yes"])
        .1
        .code(1);
    assert_eq!(runs(&t), 3);
    // Expired, empty, and failed: each runs again.
    t.run_yaml("k.yaml", yaml, &[]).1.code(0);
    assert_eq!(runs(&t), 6);
    // Only `flaky` completed with a key that lasts.
    let (id, ran) = t.run_yaml("k.yaml", yaml, &[]);
    ran.code(0);
    assert_eq!(runs(&t), 8);
    assert_eq!(last_attempt(&t.inspect(&id), "flaky")["outcome"], "cached");
}

#[test]
fn each_matrix_combination_has_an_entry_of_its_own() {
    let t = Test::new();
    let yaml = r#"
name: m
steps:
  - id: build
    matrix: { os: [linux, macos] }
    run: |
      echo "${{ matrix.os }}" >> runs.log
      echo "built ${{ matrix.os }}"
    cache: { key: same }
"#;
    t.run_yaml("m.yaml", yaml, &[]).1.code(0);
    let (id, ran) = t.run_yaml("m.yaml", yaml, &[]);
    ran.code(0);
    let mut ran: Vec<String> = t.read("runs.log").lines().map(String::from).collect();
    ran.sort();
    assert_eq!(ran, ["linux", "macos"], "each ran once");
    let i = t.inspect(&id);
    let outs: Vec<&str> = Test::step(&i, "build")["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["stdout"].as_str().unwrap())
        .collect();
    assert_eq!(outs, ["built linux", "built macos"]);
    assert_eq!(last_attempt(&i, "build[1]")["outcome"], "cached");
}

#[test]
fn two_instances_with_one_key_run_the_step_once() {
    let t = Test::new();
    let yaml = t.write(
        "w.yaml",
        r#"
name: shared
steps:
  - id: build
    run: |
      echo ran >> runs.log
      while [ ! -e go ]; do sleep 0.01; done
      echo built
    cache: { key: one }
"#,
    );
    let yaml = yaml.to_str().unwrap();
    let a = spawn(&t, &["run", yaml, "--id", "a", "--json"]);
    eventually("a's step to start", || runs(&t) == 1);
    let b = spawn(&t, &["run", yaml, "--id", "b", "--json"]);
    // b is recorded and waits on a's lock of the key.
    eventually("b to be recorded", || {
        t.wf(&["inspect", "b", "--json"]).code == 0
    });
    std::fs::write(t.path().join("go"), "").unwrap();
    a.finish().code(0);
    b.finish().code(0);
    assert_eq!(runs(&t), 1, "the step ran once");
    let b = t.inspect("b");
    assert_eq!(last_attempt(&b, "build")["outcome"], "cached");
    assert_eq!(last_attempt(&b, "build")["cached_from"]["instance"], "a");
    assert_eq!(Test::step(&b, "build")["output"]["stdout"], "built");
}

#[test]
fn without_wait_concurrent_instances_both_run() {
    let t = Test::new();
    let yaml = t.write(
        "w.yaml",
        r#"
name: racy
steps:
  - id: build
    run: |
      echo "$WF_INSTANCE_ID" >> runs.log
      touch "started.$WF_INSTANCE_ID"
      while [ ! -e started.a ] || [ ! -e started.b ]; do sleep 0.01; done
    cache: { key: one, wait: false }
"#,
    );
    let yaml = yaml.to_str().unwrap();
    let a = spawn(&t, &["run", yaml, "--id", "a"]);
    let b = spawn(&t, &["run", yaml, "--id", "b"]);
    a.finish().code(0);
    b.finish().code(0);
    assert_eq!(runs(&t), 2, "both ran, each waiting for the other");
    let (c, ran) = t.run_yaml("w.yaml", &std::fs::read_to_string(yaml).unwrap(), &[]);
    ran.code(0);
    assert_eq!(runs(&t), 2);
    assert_eq!(last_attempt(&t.inspect(&c), "build")["outcome"], "cached");
}

#[test]
fn an_entry_outlives_a_prune_of_the_instance_it_came_from() {
    let t = Test::new();
    t.write("src/a.txt", "a");
    let (first, ran) = t.run_yaml("site.yaml", BUILD, &[]);
    ran.code(0);
    t.wf(&["prune", "--older-than", "0s", "--status", "completed"])
        .code(0);
    assert_ne!(t.wf(&["inspect", &first, "--json"]).code, 0, "pruned");
    let (second, ran) = t.run_yaml("site.yaml", BUILD, &[]);
    ran.code(0);
    assert_eq!(runs(&t), 1);
    let i = t.inspect(&second);
    assert_eq!(
        last_attempt(&i, "build")["cached_from"]["instance"],
        first.as_str()
    );
    assert_eq!(i["state"]["built"], "dist-a");
}

#[test]
fn a_cache_the_file_cannot_use_is_an_error_at_its_line_and_column() {
    let t = Test::new();
    t.refuses(&[
        (
            "name: c\nsteps:\n  - id: a\n    sleep: 1s\n    cache: { key: k }\n",
            "wf.yaml:5:12",
            "`cache` applies to `run` and `http` steps",
        ),
        (
            "name: c\nsecrets: [TOKEN]\nsteps:\n  - id: a\n    run: echo\n    cache: { key: \"${{ secrets.TOKEN }}\" }\n",
            "wf.yaml:6:",
            "`cache.key` reads a secret",
        ),
        (
            "name: c\nsteps:\n  - id: a\n    run: echo ${{ hashFiles('x') }}\n",
            "wf.yaml:4:",
            "hashFiles() is only available in `cache.key`",
        ),
        (
            "name: c\ninputs: { p: {} }\nsteps:\n  - id: a\n    run: echo\n    cache: { key: \"${{ hashFiles(inputs.p) }}\" }\n",
            "wf.yaml:6:",
            "takes its patterns as quoted text",
        ),
        (
            "name: c\nsteps:\n  - id: a\n    run: echo\n    lock: { key: l }\n    cache: { key: k }\n",
            "wf.yaml:6:12",
            "wait: false",
        ),
    ]);
}

#[test]
fn the_api_resumes_without_the_cache_when_asked() {
    let t = Test::new();
    let yaml = r#"
name: later
steps:
  - id: gate
    wait_for_event: { name: go }
  - id: build
    run: echo ran >> runs.log
    cache: { key: k }
"#;
    // An entry for the key.
    let (_, ran) = t.run_yaml(
        "keep.yaml",
        &yaml.replace("  - id: gate\n    wait_for_event: { name: go }\n", ""),
        &[],
    );
    ran.code(0);
    assert_eq!(runs(&t), 1);
    let (a, ran) = t.run_yaml("w.yaml", yaml, &[]);
    ran.code(3);
    let (b, ran) = t.run_yaml("w.yaml", yaml, &[]);
    ran.code(3);
    let s = crate::serve::Server::start(&t, &[], &[]);
    for (id, no_cache) in [(&a, false), (&b, true)] {
        let r = s.post(
            &format!("/api/v1/instances/{id}/signal"),
            serde_json::json!({ "event": "go" }),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        let r = s.post(
            &format!("/api/v1/instances/{id}/resume"),
            serde_json::json!({ "no_cache": no_cache }),
        );
        assert_eq!(r.status, 202, "{}", r.text());
        let done = s
            .get(&format!("/api/v1/instances/{id}/result?wait=30s"))
            .json();
        assert_eq!(done["status"], "completed", "{done}");
    }
    assert_eq!(last_attempt(&t.inspect(&a), "build")["outcome"], "cached");
    assert_eq!(last_attempt(&t.inspect(&b), "build")["outcome"], "ok");
    assert_eq!(runs(&t), 2, "only the resume without the cache ran it");
}

/// The README's example (`workflows/build.yaml`): a matrix built once, then
/// taken from the cache while its sources are unchanged.
#[test]
fn the_build_example_runs_its_matrix_once_then_from_the_cache() {
    let t = Test::new();
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("workflows");
    t.write(
        "site/src/index.txt",
        &std::fs::read_to_string(repo.join("site/src/index.txt")).unwrap(),
    );
    let yaml = std::fs::read_to_string(repo.join("build.yaml")).unwrap();
    let (first, ran) = t.run_yaml("build.yaml", &yaml, &[]);
    ran.code(0);
    assert_eq!(
        t.read("site/dist/web-debug.txt"),
        "HELLO FROM THE SOURCES\n"
    );
    let report = t.wf(&["logs", &first, "report"]).code(0).stdout.clone();
    assert_eq!(report.lines().count(), 3, "{report}");
    std::fs::remove_dir_all(t.path().join("site/dist")).unwrap();
    let (second, ran) = t.run_yaml("build.yaml", &yaml, &[]);
    ran.code(0);
    let i = t.inspect(&second);
    for n in 0..3 {
        assert_eq!(
            last_attempt(&i, &format!("build[{n}]"))["outcome"],
            "cached"
        );
    }
    assert!(
        !t.path().join("site/dist").exists(),
        "nothing was built again"
    );
    assert_eq!(t.wf(&["logs", &second, "report"]).code(0).stdout, report);
}

#[test]
fn an_http_step_is_cached_as_a_shell_step_is() {
    let t = Test::new();
    let server = crate::http::Server::always(crate::http::Reply::json(
        200,
        &serde_json::json!({"version": 7}),
    ));
    let yaml = format!(
        "name: h\nsteps:\n  - id: fetch\n    http: {{ url: \"{}/v\" }}\n    cache: {{ key: v }}\n  - id: show\n    run: echo ${{{{ steps.fetch.output.json.version }}}}\n",
        server.url()
    );
    t.run_yaml("h.yaml", &yaml, &[]).1.code(0);
    let (id, ran) = t.run_yaml("h.yaml", &yaml, &[]);
    ran.code(0);
    assert_eq!(server.requests().len(), 1, "one request for both instances");
    assert_eq!(last_attempt(&t.inspect(&id), "fetch")["outcome"], "cached");
    assert_eq!(t.wf(&["logs", &id, "show"]).code(0).stdout, "7\n");
}
