//! Injection safety (docs/expressions.md): a value from an output, an input or state is
//! only ever data. Spliced into a `run:` string, an argv element or a step
//! `env:` value, shell metacharacters (`;`, `#`, `$( )`, backticks, quotes)
//! run nothing, and the later step still receives the exact text.

use crate::Test;
use std::path::Path;

/// Texts that would run `touch pwned` if they ever became shell code.
const PAYLOADS: [&str; 6] = [
    "\"; touch pwned #",
    "$(touch pwned)",
    "`touch pwned`",
    "'; touch pwned; echo '",
    "x && touch pwned || touch pwned",
    "a\ntouch pwned\n",
];

/// Every file named `pwned` under `dir`, at any depth.
fn pwned_files(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.file_name().is_some_and(|n| n == "pwned") {
                found.push(path.display().to_string());
            }
            if path.is_dir() {
                stack.push(path);
            }
        }
    }
    found
}

#[track_caller]
fn assert_not_pwned(t: &Test) {
    let found = pwned_files(t.path());
    assert!(found.is_empty(), "a value ran as shell code: {found:?}");
}

/// A workflow whose step `src` emits `payload` three ways: as stdout, as a
/// JSON string field, and as a `$WF_OUTPUT` key (through a file, so the
/// producer itself never interprets it), followed by `consumer` steps.
fn producer_yaml(name: &str, payload: &str, consumers: &str) -> (String, String) {
    let json = serde_json::json!({ "v": payload }).to_string();
    let yaml = format!(
        r#"
name: {name}
steps:
  - id: src
    run: |
      cat payload.txt
      printf 'val<<WF_EOF\n' >> "$WF_OUTPUT"
      cat payload.txt >> "$WF_OUTPUT"
      printf '\nWF_EOF\n' >> "$WF_OUTPUT"
      cp payload.json json.txt
{consumers}"#
    );
    (yaml, json)
}

fn write_payload(t: &Test, payload: &str, json: &str) {
    t.write("payload.txt", payload);
    t.write("payload.json", json);
}

#[test]
fn outputs_spliced_into_a_run_string_are_data() {
    for (n, payload) in PAYLOADS.iter().enumerate() {
        let t = Test::new();
        let consumers = r#"  - id: use-stdout
    run: printf '%s' "${{ steps.src.output.stdout }}" > got-stdout.txt
  - id: use-key
    run: printf '%s' "${{ steps.src.output.val }}" > got-key.txt
  - id: unquoted
    run: echo ${{ steps.src.output.stdout }} > /dev/null; echo ${{ steps.src.output.val }}; true
  - id: in-text
    run: printf '%s' "before ${{ steps.src.output.stdout }} after" > got-text.txt
"#;
        let (yaml, json) = producer_yaml("inject", payload, consumers);
        write_payload(&t, payload, &json);
        let (id, ran) = t.run_yaml("wf.yaml", &yaml, &[]);
        ran.code(0);
        assert_not_pwned(&t);
        // stdout keeps inner newlines but has trailing ones trimmed.
        let trimmed = payload.trim_end_matches('\n');
        assert_eq!(t.read("got-stdout.txt"), trimmed, "payload #{n}");
        // A heredoc value is kept exactly, trailing newline included.
        assert_eq!(t.read("got-key.txt"), *payload, "payload #{n}");
        assert_eq!(
            t.read("got-text.txt"),
            format!("before {trimmed} after"),
            "payload #{n}"
        );
        assert_eq!(t.inspect(&id)["status"], "completed");
    }
}

#[test]
fn json_fields_spliced_into_a_run_string_are_data() {
    let t = Test::new();
    let payload = "\"; touch pwned # $(touch pwned) `touch pwned`";
    let json = serde_json::json!({ "v": payload }).to_string();
    t.write("payload.json", &json);
    let (_, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: inject-json
steps:
  - id: src
    run: cat payload.json
  - id: use
    run: printf '%s' "${{ steps.src.output.json.v }}" > got.txt; echo ${{ steps.src.output.json.v }}
"#,
        &[],
    );
    ran.code(0);
    assert_not_pwned(&t);
    assert_eq!(t.read("got.txt"), payload);
}

#[test]
fn inputs_and_state_spliced_into_a_run_string_are_data() {
    let t = Test::new();
    let payload = "\"; touch pwned #";
    let (_, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: inject-inputs
inputs:
  name: { required: true }
state: { label: "$(touch pwned)" }
steps:
  - id: use
    run: printf '%s|%s' "${{ inputs.name }}" "${{ state.label }}" > got.txt
"#,
        &["--input", &format!("name={payload}")],
    );
    ran.code(0);
    assert_not_pwned(&t);
    assert_eq!(t.read("got.txt"), format!("{payload}|$(touch pwned)"));
}

#[test]
fn outputs_in_argv_elements_are_single_arguments() {
    for (n, payload) in PAYLOADS.iter().enumerate() {
        let t = Test::new();
        t.write(
            "args.sh",
            "#!/bin/sh\nprintf '%s' \"$#\" > argc.txt\nprintf '%s' \"$1\" > arg1.txt\nprintf '%s' \"$2\" > arg2.txt\n",
        );
        let consumers = r#"  - id: use
    run: ["./args.sh", "${{ steps.src.output.val }}", "pre ${{ steps.src.output.json.v }} post"]
  - id: via-sh
    run: ["sh", "-c", "printf '%s' \"$1\" > via-sh.txt", "sh", "${{ steps.src.output.val }}"]
"#;
        let (yaml, json) = producer_yaml("inject-argv", payload, consumers);
        // Make stdout JSON so `output.json.v` exists too.
        let yaml = yaml.replace(
            "      cat payload.txt\n      printf",
            "      cat payload.json\n      printf",
        );
        write_payload(&t, payload, &json);
        let (_, ran) = t.run_yaml("wf.yaml", &yaml, &[]);
        ran.code(0);
        assert_not_pwned(&t);
        assert_eq!(t.read("argc.txt"), "2", "payload #{n}");
        assert_eq!(t.read("arg1.txt"), *payload, "payload #{n}");
        assert_eq!(
            t.read("arg2.txt"),
            format!("pre {payload} post"),
            "payload #{n}"
        );
        assert_eq!(t.read("via-sh.txt"), *payload, "payload #{n}");
    }
}

#[test]
fn outputs_in_step_env_values_are_data() {
    for (n, payload) in PAYLOADS.iter().enumerate() {
        let t = Test::new();
        let consumers = r#"  - id: use
    env:
      VAL: "${{ steps.src.output.val }}"
      MIXED: "<${{ steps.src.output.stdout }}>"
    run: printf '%s' "$VAL" > got-env.txt; printf '%s' "$MIXED" > got-mixed.txt; echo $VAL $MIXED
  - id: argv
    env:
      VAL: "${{ steps.src.output.val }}"
    run: ["sh", "-c", "printf '%s' \"$VAL\" > got-argv-env.txt"]
"#;
        let (yaml, json) = producer_yaml("inject-env", payload, consumers);
        write_payload(&t, payload, &json);
        let (_, ran) = t.run_yaml("wf.yaml", &yaml, &[]);
        ran.code(0);
        assert_not_pwned(&t);
        let trimmed = payload.trim_end_matches('\n');
        assert_eq!(t.read("got-env.txt"), *payload, "payload #{n}");
        assert_eq!(
            t.read("got-mixed.txt"),
            format!("<{trimmed}>"),
            "payload #{n}"
        );
        assert_eq!(t.read("got-argv-env.txt"), *payload, "payload #{n}");
    }
}

#[test]
fn workflow_env_values_from_inputs_are_data() {
    let t = Test::new();
    let payload = "$(touch pwned)`touch pwned`\"; touch pwned #";
    let (_, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: inject-wf-env
inputs:
  v: { required: true }
env:
  V: "${{ inputs.v }}"
steps:
  - id: use
    run: printf '%s' "$V" > got.txt; echo $V
"#,
        &["--input", &format!("v={payload}")],
    );
    ran.code(0);
    assert_not_pwned(&t);
    assert_eq!(t.read("got.txt"), payload);
}

#[test]
fn literal_shell_text_around_expressions_still_works() {
    // The safety mechanism must not break ordinary shell in the same command.
    let t = Test::new();
    let (_, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: literal
steps:
  - id: src
    run: echo 'a b'
  - id: use
    run: X=$(echo "${{ steps.src.output.stdout }}" | tr a-z A-Z); echo "$X;${{ steps.src.output.exit_code }}" > got.txt
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(t.read("got.txt"), "A B;0\n");
}

#[test]
fn values_keep_their_exact_text_in_every_quoting_context() {
    // However the command text quotes an expression, the value arrives as
    // exactly the same text: never word-split, never globbed, never run.
    let t = Test::new();
    let payload = "a  b * ? [x] $(touch pwned) `touch pwned` it's \"q\" \\ $HOME";
    t.write("payload.txt", payload);
    // Files a glob in the value would match if it were expanded.
    for f in ["x", "file1", "file2"] {
        t.write(f, "");
    }
    let (_, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: contexts
steps:
  - id: src
    run: cat payload.txt
  - id: unquoted
    run: printf '%s' ${{ steps.src.output.stdout }} > unquoted.txt
  - id: single
    run: printf '%s' '${{ steps.src.output.stdout }}' > single.txt
  - id: single-mixed
    run: printf '%s' 'pre ${{ steps.src.output.stdout }} post' > single-mixed.txt
  - id: double
    run: printf '%s' "${{ steps.src.output.stdout }}" > double.txt
  - id: escaped-quotes
    run: printf '%s' "say \"${{ steps.src.output.stdout }}\"" it\'s${{ steps.src.output.stdout }} > escaped.txt
  - id: after-comment
    run: |
      # the value isn't trusted, "really"
      printf '%s' "${{ steps.src.output.stdout }}" > comment.txt
  - id: expression-in-comment
    run: |
      # it's ${{ steps.src.output.stdout }}
      printf '%s' "${{ steps.src.output.stdout }}" > comment2.txt
  - id: nested-substitution
    run: printf '%s' "$(printf '%s' "${{ steps.src.output.stdout }}")" > nested.txt
  - id: backticks
    run: v=`printf '%s' "${{ steps.src.output.stdout }}"`; printf '%s' "$v" > backticks.txt
  - id: heredoc
    run: |
      cat > heredoc.txt <<EOF
      it's ${{ steps.src.output.stdout }}
      EOF
      printf '%s' "${{ steps.src.output.stdout }}" > after-heredoc.txt
  - id: quoted-heredoc
    run: |
      cat > quoted-heredoc.txt <<'EOF'
      it's ${{ steps.src.output.stdout }}
      EOF
      printf '%s' "${{ steps.src.output.stdout }}" > after-quoted-heredoc.txt
"#,
        &[],
    );
    ran.code(0);
    assert_not_pwned(&t);
    for (file, want) in [
        ("unquoted.txt", payload.to_string()),
        ("single.txt", payload.to_string()),
        ("single-mixed.txt", format!("pre {payload} post")),
        ("double.txt", payload.to_string()),
        ("escaped.txt", format!("say \"{payload}\"it's{payload}")),
        ("comment.txt", payload.to_string()),
        ("comment2.txt", payload.to_string()),
        ("nested.txt", payload.to_string()),
        ("backticks.txt", payload.to_string()),
        ("heredoc.txt", format!("it's {payload}\n")),
        ("after-heredoc.txt", payload.to_string()),
        ("after-quoted-heredoc.txt", payload.to_string()),
        // A quoted here-document expands nothing: the value arrives as its
        // text, which is only data there (nothing ran, checked above).
        ("quoted-heredoc.txt", format!("it's {payload}\n")),
    ] {
        assert_eq!(t.read(file), want, "{file}");
    }
}
