//! Step outputs (docs/expressions.md): `output.stdout`, `output.exit_code`,
//! `output.json`, keys written to `$WF_OUTPUT` (plain and heredoc form), the
//! output size cap, and how expressions render outputs: a whole-value
//! expression keeps its JSON type, inside a longer string it becomes text.
//! A NUL byte in any of them, in a step's error or in an event's payload is
//! kept, on PostgreSQL as on SQLite.

use crate::Test;
use serde_json::{Value, json};

#[test]
fn stdout_and_exit_code_reach_later_steps() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: stdout
steps:
  - id: a
    run: printf 'hello\nworld\n'
  - id: b
    run: printf '%s|%s' "${{ steps.a.output.stdout }}" "${{ steps.a.output.exit_code }}" > got.txt
"#,
        &[],
    );
    ran.code(0);
    // Trailing newlines are trimmed, inner ones kept.
    assert_eq!(t.read("got.txt"), "hello\nworld|0");
    let a = Test::step(&t.inspect(&id), "a").clone();
    assert_eq!(a["output"]["stdout"], "hello\nworld");
    assert_eq!(a["output"]["exit_code"], 0);
    // Not JSON: `json` is null.
    assert!(a["output"]["json"].is_null(), "{a:#}");
}

#[test]
fn stdout_json_is_parsed_and_indexable() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: json
steps:
  - id: a
    run: echo '{"items":[1,2],"user":{"name":"ann"},"ok":true}'
  - id: b
    run: >-
      printf '%s|%s|%s|%s' "${{ steps.a.output.json.items[1] }}" "${{ steps.a.output.json.user.name }}"
      "${{ steps.a.output.json.items }}" "${{ steps.a.output.json.ok }}" > got.txt
"#,
        &[],
    );
    ran.code(0);
    // An array inside a string is `Array`, as in GitHub Actions.
    assert_eq!(t.read("got.txt"), "2|ann|Array|true");
    let a = Test::step(&t.inspect(&id), "a").clone();
    assert_eq!(
        a["output"]["json"],
        json!({"items": [1, 2], "user": {"name": "ann"}, "ok": true})
    );
}

#[test]
fn output_file_key_value_lines_become_keys() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: outfile
steps:
  - id: a
    run: |
      echo "order=A-17" >> "$WF_OUTPUT"
      echo "total=42" >> "$WF_OUTPUT"
      echo "eq=a=b=c" >> "$WF_OUTPUT"
      echo this is stdout
  - id: b
    run: printf '%s|%s|%s|%s' "${{ steps.a.output.order }}" "${{ steps.a.output.total }}" "${{ steps.a.output.eq }}" "${{ steps.a.output.stdout }}" > got.txt
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(t.read("got.txt"), "A-17|42|a=b=c|this is stdout");
    let out = Test::step(&t.inspect(&id), "a")["output"].clone();
    assert_eq!(out["order"], "A-17");
    assert_eq!(out["total"], "42");
    assert_eq!(out["eq"], "a=b=c");
}

#[test]
fn output_file_heredoc_form_gives_multiline_values() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: heredoc
steps:
  - id: a
    run: |
      {
        echo "notes<<EOF"
        echo "line one"
        echo "x=y is not a key here"
        echo "line three"
        echo "EOF"
        echo "after=1"
      } >> "$WF_OUTPUT"
  - id: b
    run: printf '%s' "${{ steps.a.output.notes }}" > notes.txt
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(
        t.read("notes.txt"),
        "line one\nx=y is not a key here\nline three"
    );
    let out = Test::step(&t.inspect(&id), "a")["output"].clone();
    assert_eq!(out["notes"], "line one\nx=y is not a key here\nline three");
    assert_eq!(out["after"], "1");
    assert!(
        out.get("x").is_none(),
        "a heredoc line became a key: {out:#}"
    );
}

#[test]
fn output_over_the_cap_fails_the_step_with_a_clear_error() {
    let t = Test::new().env("WF_OUTPUT_LIMIT", "1000");
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: cap
steps:
  - id: big
    run: head -c 5000 /dev/zero | tr '\0' x
  - id: after
    run: echo ran > after.txt
"#,
        &[],
    );
    ran.code(1);
    assert_eq!(t.read("after.txt"), "", "the next step ran");
    let i = t.inspect(&id);
    assert_eq!(i["status"], "failed");
    let big = Test::step(&i, "big");
    assert_eq!(big["status"], "failed");
    assert_eq!(big["error_type"], "output.limit");
    let attempt = &big["attempt_list"][0];
    assert_eq!(attempt["error_type"], "output.limit");
    let msg = attempt["error_message"]
        .as_str()
        .or_else(|| big["error_message"].as_str())
        .unwrap_or_else(|| panic!("no error_message: {big:#}"));
    assert!(
        msg.contains("limit") && msg.contains("1000"),
        "unclear error message: {msg}"
    );
    // Nothing was silently truncated into an output later steps could read.
    let out = &big["output"];
    assert!(
        out.is_null() || out.get("stdout").is_none(),
        "a truncated output was recorded: {out:#}"
    );
}

#[test]
fn output_file_over_the_cap_fails_the_step() {
    let t = Test::new().env("WF_OUTPUT_LIMIT", "1000");
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: capfile
steps:
  - id: big
    run: printf 'blob=%s\n' "$(head -c 5000 /dev/zero | tr '\0' y)" >> "$WF_OUTPUT"
"#,
        &[],
    );
    ran.code(1);
    let i = t.inspect(&id);
    let big = Test::step(&i, "big");
    assert_eq!(big["status"], "failed");
    assert_eq!(big["error_type"], "output.limit");
    let out = &big["output"];
    assert!(
        out.is_null() || out.get("blob").is_none(),
        "an over-limit output was recorded: {out:#}"
    );
}

#[test]
fn output_under_the_cap_is_kept_whole() {
    let t = Test::new().env("WF_OUTPUT_LIMIT", "1000");
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: undercap
steps:
  - id: small
    run: head -c 500 /dev/zero | tr '\0' z
"#,
        &[],
    );
    ran.code(0);
    let out = Test::step(&t.inspect(&id), "small")["output"]["stdout"].clone();
    assert_eq!(out.as_str().map(str::len), Some(500));
}

#[test]
fn whole_value_expressions_keep_their_json_type() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: types
state: {}
steps:
  - id: a
    run: echo '{"n":5,"f":1.5,"ok":true,"list":[1,"two"],"obj":{"k":"v"},"s":"text","nothing":null}'
  - id: keep
    set_state:
      n: "${{ steps.a.output.json.n }}"
      f: "${{ steps.a.output.json.f }}"
      ok: "${{ steps.a.output.json.ok }}"
      list: "${{ steps.a.output.json.list }}"
      obj: "${{ steps.a.output.json.obj }}"
      s: "${{ steps.a.output.json.s }}"
      spaced: "  ${{ steps.a.output.json.n }}  "
      code: "${{ steps.a.output.exit_code }}"
      text_n: "n=${{ steps.a.output.json.n }}"
      text_ok: "ok: ${{ steps.a.output.json.ok }}"
      text_list: "list ${{ steps.a.output.json.list }}"
      two: "${{ steps.a.output.json.n }}${{ steps.a.output.json.n }}"
"#,
        &[],
    );
    ran.code(0);
    let state = t.inspect(&id)["state"].clone();
    assert_eq!(state["n"], json!(5));
    assert_eq!(state["f"], json!(1.5));
    assert_eq!(state["ok"], json!(true));
    assert_eq!(state["list"], json!([1, "two"]));
    assert_eq!(state["obj"], json!({"k": "v"}));
    assert_eq!(state["s"], json!("text"));
    assert_eq!(state["spaced"], json!(5));
    assert_eq!(state["code"], json!(0));
    assert_eq!(state["text_n"], json!("n=5"));
    assert_eq!(state["text_ok"], json!("ok: true"));
    assert_eq!(state["text_list"], json!("list Array"));
    assert_eq!(state["two"], json!("55"));
}

#[test]
fn set_state_can_use_the_steps_own_output() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: own-output
state: { charged: false }
steps:
  - id: charge
    run: |
      echo '{"id":"ch_123","amount":250}'
      echo "receipt=r-9" >> "$WF_OUTPUT"
    set_state:
      charged: true
      charge_id: "${{ output.json.id }}"
      amount: "${{ output.json.amount }}"
      receipt: "${{ output.receipt }}"
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(
        t.inspect(&id)["state"],
        json!({"charged": true, "charge_id": "ch_123", "amount": 250, "receipt": "r-9"})
    );
}

#[test]
fn step_outputs_render_as_text_in_env() {
    let t = Test::new();
    let (_, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: env-text
steps:
  - id: a
    run: echo '{"obj":{"k":[1,2]},"n":3}'
  - id: b
    env:
      OBJ: "${{ steps.a.output.json.obj }}"
      JSON: "${{ toJSON(steps.a.output.json.obj.k) }}"
      N: "${{ steps.a.output.json.n }}"
      MISSING: "${{ steps.a.output.json.nope }}"
    run: printf '%s|%s|%s|[%s]' "$OBJ" "$JSON" "$N" "$MISSING" > got.txt
"#,
        &[],
    );
    ran.code(0);
    // An object is `Object` as text, as in GitHub Actions; toJSON gives JSON.
    assert_eq!(t.read("got.txt"), "Object|[\n  1,\n  2\n]|3|[]");
}

#[test]
fn argv_form_renders_outputs_as_single_arguments() {
    let t = Test::new();
    t.write(
        "args.sh",
        "#!/bin/sh\nprintf '%s\\n' \"$#\" \"$1\" \"$2\" > args.txt\n",
    );
    let (_, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: argv-out
steps:
  - id: a
    run: echo '{"name":"two words","items":[1,2]}'
  - id: b
    run: ["./args.sh", "${{ steps.a.output.json.name }}", "items=${{ steps.a.output.json.items }}"]
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(t.read("args.txt"), "2\ntwo words\nitems=Array\n");
}

#[test]
fn each_attempt_starts_with_an_empty_output_file() {
    // A key written by a failed attempt does not leak into the output of the
    // attempt that succeeds.
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: fresh-output
steps:
  - id: a
    retry: { max_attempts: 2, interval: 10ms }
    run: |
      if [ "$WF_ATTEMPT" = 1 ]; then echo "stale=yes" >> "$WF_OUTPUT"; exit 1; fi
      echo "fresh=yes" >> "$WF_OUTPUT"
"#,
        &[],
    );
    ran.code(0);
    let out = Test::step(&t.inspect(&id), "a")["output"].clone();
    assert_eq!(out["fresh"], "yes");
    assert!(out.get("stale").is_none(), "{out:#}");
}

#[test]
fn every_attempt_has_a_file_of_its_own_and_none_is_left_behind() {
    // wf makes the next `$WF_OUTPUT` file ahead and removes used ones while
    // steps run: each attempt still gets a fresh file (parallel ones and a
    // retry included), and nothing stays in the temp folder after the run,
    // whether it completes or fails.
    let t = Test::new();
    let tmp = t.tmp_path();
    let step = |id: &str, needs: &str| {
        format!(
            "  - id: {id}\n    needs: [{needs}]\n    retry: {{ max_attempts: 2, interval: 10ms }}\n    run: |\n      \
             [ -s \"$WF_OUTPUT\" ] && exit 9\n      echo \"$WF_OUTPUT\" >> paths.txt\n      \
             echo \"me={id}\" >> \"$WF_OUTPUT\"\n      \
             if [ {id} = b ] && [ \"$WF_ATTEMPT\" = 1 ]; then exit 1; fi\n"
        )
    };
    let yaml = format!(
        "name: files\nsteps:\n{}{}{}{}",
        step("a", ""),
        step("b", "a"),
        step("c", "a"),
        step("d", "b, c")
    );
    let (id, ran) = t.run_yaml("wf.yaml", &yaml, &[]);
    ran.code(0);
    let inspect = t.inspect(&id);
    for s in ["a", "b", "c", "d"] {
        assert_eq!(Test::step(&inspect, s)["output"]["me"], s, "{inspect:#}");
    }
    let paths: Vec<String> = t.read("paths.txt").lines().map(String::from).collect();
    assert_eq!(paths.len(), 5, "a, b twice, c, d: {paths:?}");
    let distinct: std::collections::BTreeSet<&String> = paths.iter().collect();
    assert_eq!(distinct.len(), 5, "{paths:?}");
    assert!(
        paths.iter().all(|p| p.starts_with(tmp.to_str().unwrap())),
        "{paths:?}"
    );
    assert_eq!(left_in(tmp), Vec::<String>::new());

    let (_, ran) = t.run_yaml(
        "fails.yaml",
        "name: fails\nsteps:\n  - id: a\n    run: echo k=v >> \"$WF_OUTPUT\"\n  - id: b\n    needs: [a]\n    run: exit 3\n",
        &[],
    );
    ran.code(1);
    assert_eq!(left_in(tmp), Vec::<String>::new());
}

#[test]
fn a_process_left_holding_an_output_file_cannot_write_into_a_later_steps() {
    // wf gives an ended attempt's file to a later attempt only when nothing
    // else can write to it. Here `a` leaves a process (in a session of its
    // own, so the end of a's process group does not stop it) that holds a's
    // `$WF_OUTPUT` open and writes to it while `c` runs (a waits until it has
    // left the group; c until it has written), when a's file would be
    // recycled: c's outputs must be c's alone.
    let t = Test::new();
    let tmp = t.tmp_path();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: holder
steps:
  - id: a
    run: |
      setsid sh -c 'touch started; i=0; while [ ! -e go ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done; echo leak=yes >&3; touch written' 3>>"$WF_OUTPUT" </dev/null >/dev/null 2>&1 &
      while [ ! -e started ]; do sleep 0.01; done
      echo mine=a >> "$WF_OUTPUT"
  - id: b
    needs: [a]
    run: echo mine=b >> "$WF_OUTPUT"
  - id: c
    needs: [b]
    run: |
      touch go
      i=0; while [ ! -e written ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done
      [ -e written ] || exit 7
      echo mine=c >> "$WF_OUTPUT"
"#,
        &[],
    );
    ran.code(0);
    let inspect = t.inspect(&id);
    for s in ["a", "b", "c"] {
        let out = &Test::step(&inspect, s)["output"];
        assert_eq!(out["mine"], s, "{inspect:#}");
        assert!(out.get("leak").is_none(), "{out:#}");
    }
    assert_eq!(left_in(tmp), Vec::<String>::new());
}

#[test]
fn an_output_file_moved_onto_wf_output_is_read() {
    // Writing a file aside and moving it into place is a common way to write
    // a file whole: the file the name holds when the step ends is read.
    let t = Test::new();
    let tmp = t.tmp_path();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: moved
steps:
  - id: a
    run: |
      printf 'k=v\nn=2\n' > out.tmp
      mv out.tmp "$WF_OUTPUT"
  - id: b
    needs: [a]
    run: |
      [ -s "$WF_OUTPUT" ] && exit 9
      echo k=b >> "$WF_OUTPUT"
"#,
        &[],
    );
    ran.code(0);
    let inspect = t.inspect(&id);
    assert_eq!(Test::step(&inspect, "a")["output"]["k"], "v", "{inspect:#}");
    assert_eq!(Test::step(&inspect, "a")["output"]["n"], "2", "{inspect:#}");
    assert_eq!(Test::step(&inspect, "b")["output"]["k"], "b", "{inspect:#}");
    assert_eq!(left_in(tmp), Vec::<String>::new());
}

#[test]
fn output_files_are_in_a_private_folder_of_the_run() {
    // A run's `$WF_OUTPUT` files are named by a count in a folder of their
    // own: nobody else may look into it or make a file there.
    let t = Test::new();
    let tmp = t.tmp_path();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: private
steps:
  - id: a
    run: |
      stat -c '%a %U' "$(dirname "$WF_OUTPUT")" > folder.txt
      echo "k=$(basename "$WF_OUTPUT")" >> "$WF_OUTPUT"
"#,
        &[],
    );
    ran.code(0);
    let inspect = t.inspect(&id);
    assert!(
        Test::step(&inspect, "a")["output"]["k"].is_string(),
        "{inspect:#}"
    );
    let user = String::from_utf8(
        std::process::Command::new("id")
            .arg("-un")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(t.read("folder.txt").trim(), format!("700 {}", user.trim()));
    assert_eq!(left_in(tmp), Vec::<String>::new());
}

#[test]
fn expression_functions_and_arrays_work_in_run_if_and_set_state() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "fns.yaml",
        r#"
name: fns
inputs:
  tags: { default: "a,b" }
state: { list: [x, y] }
steps:
  - id: show
    run: |
      echo '${{ format('{0}-{1} {{ok}}', inputs.tags, 3) }}'
      echo ${{ join(state.list, '+') }} ${{ contains(state.list, 'Y') }} ${{ startsWith('Hello', 'he') }}
  - id: json
    run: |
      echo '${{ toJSON(fromJSON('{"k": [1, 2]}')) }}'
    set_state: { k: "${{ fromJSON(output.stdout).k }}", both: "${{ [state.list[0], output.json.k[1]] }}" }
  - id: skipped
    if: ${{ contains(state.list, 'z') }}
    run: echo never > never.txt
"#,
        &[],
    );
    ran.code(0);
    let v = t.inspect(&id);
    assert_eq!(
        Test::step(&v, "show")["output"]["stdout"],
        "a,b-3 {ok}\nx+y true true"
    );
    assert_eq!(v["state"]["k"], json!([1, 2]));
    assert_eq!(v["state"]["both"], json!(["x", 2]));
    assert_eq!(Test::step(&v, "skipped")["status"], "skipped");
    // An unknown function is a definition error naming the ones that exist.
    let path = t.write(
        "bad.yaml",
        "name: x\nsteps:\n  - id: a\n    run: echo ${{ upper('x') }}\n",
    );
    let ran = t.wf(&["validate", path.to_str().unwrap()]);
    ran.code(2);
    assert!(
        ran.stderr.contains("Unrecognized function: 'upper' (functions: contains, startsWith, endsWith, format, join, toJSON, fromJSON, case, hashFiles, success, failure, always, cancelled)"),
        "{}",
        ran.stderr
    );
}

/// The names of the files left in `dir`.
fn left_in(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn nul_bytes_in_outputs_errors_and_payloads_are_kept_on_every_backend() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: nul
steps:
  - id: print
    run: printf 'a\0b'; printf 'c\0d' >&2
  - id: approval
    wait_for_event: { name: go }
    set_state: { got: "${{ output.json.v }}" }
  - id: exits
    run: printf 'x\0y\n' >&2; exit 3
    retry: { max_attempts: 1 }
    continue_on_error: true
  - id: outfile
    run: printf 'bad\0line\n' >> "$WF_OUTPUT"
"#,
        &[],
    );
    ran.code(3);
    t.wf(&["signal", &id, "go", "--data", r#"{"v": "x\u0000y"}"#])
        .code(0);
    let resumed = t.wf(&["resume", &id]);
    // The step's errors hold the NUL (PostgreSQL's TEXT cannot, as such):
    // the run ends `failed` as it should, never `interrupted`.
    resumed.code(1);
    let exit_message = "exited with code 3: x\0y";
    let outfile_message =
        "$WF_OUTPUT line 1: expected KEY=VALUE or KEY<<DELIMITER, got `bad\0line`";
    for text in [exit_message, outfile_message] {
        assert!(
            resumed.stderr.contains(text),
            "{text:?} in\n{}",
            resumed.stderr
        );
    }

    let v = t.inspect(&id);
    assert_eq!(v["status"], "failed");
    assert_eq!(
        Test::step(&v, "print")["output"]["stdout"],
        "a\u{0}b",
        "{v:#}"
    );
    assert_eq!(
        Test::step(&v, "approval")["output"]["json"],
        json!({ "v": "x\u{0}y" })
    );
    assert_eq!(v["state"], json!({ "got": "x\u{0}y" }));
    assert_eq!(Test::step(&v, "exits")["error_type"], "exit.3");
    assert_eq!(Test::step(&v, "outfile")["error_type"], "output.invalid");
    let listed = t.wf(&["list", "--json"]).code(0).json();
    assert_eq!(listed[0]["status"], "failed", "{listed:#}");

    let logs = t.wf(&["logs", &id, "print", "--json"]).code(0).json();
    assert_eq!(logs["logs"][0]["stdout"], "a\u{0}b");
    assert_eq!(logs["logs"][0]["stderr"], "c\u{0}d");
    let result = t.wf(&["result", &id, "--json"]).json();
    let error = result["error"].as_str().unwrap_or_default();
    assert!(error.contains(outfile_message), "{result:#}");

    // The attempts' spans carry the messages whole.
    let runs = t.wf(&["trace", &id, "--format", "json"]).code(0).json();
    let message = |name: &str| -> Value {
        runs.as_array()
            .into_iter()
            .flatten()
            .flat_map(|r| r["spans"].as_array().cloned().unwrap_or_default())
            .find(|s| s["name"] == name)
            .map(|s| s["status_message"].clone())
            .unwrap_or_else(|| panic!("no span {name} in {runs:#}"))
    };
    assert_eq!(message("nul/exits"), exit_message);
    assert_eq!(message("nul/outfile"), outfile_message);
}
