//! `wf schema` (issue 14): the JSON Schema of the workflow file comes from
//! the parser's own types, the copy in `docs/` is the same, every example in
//! `workflows/` names it in its modeline and passes it (checked with the
//! PyPI `jsonschema` validator), and a misspelt key fails it.

use crate::Test;
use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Validates `doc` against `schema` with python's `jsonschema`; the errors.
fn violations(schema: &str, doc: &Value) -> Vec<String> {
    const SCRIPT: &str = r#"
import json, sys, jsonschema
data = json.load(sys.stdin)
v = jsonschema.Draft202012Validator(data["schema"])
for e in v.iter_errors(data["doc"]):
    print(e.message)
"#;
    let mut child = Command::new("python3")
        .args(["-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 (run the tests with scripts/test, which installs jsonschema)");
    let input =
        serde_json::json!({ "schema": serde_json::from_str::<Value>(schema).unwrap(), "doc": doc });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "jsonschema failed (run the tests with scripts/test): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect()
}

fn yaml_to_json(text: &str) -> Value {
    serde_saphyr::from_str(text).expect("YAML")
}

#[test]
fn the_schema_is_the_parsers_and_every_example_passes_it() {
    let t = Test::new();
    let schema = t.wf(&["schema"]).code(0).stdout.clone();
    let docs_copy = std::fs::read_to_string(repo().join("docs/workflow.schema.json")).unwrap();
    assert_eq!(
        docs_copy, schema,
        "docs/workflow.schema.json is stale: regenerate it with `wf schema > docs/workflow.schema.json`"
    );
    let mut examples = 0;
    for entry in std::fs::read_dir(repo().join("workflows")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        examples += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("# yaml-language-server: $schema=../docs/workflow.schema.json\n"),
            "{} has no modeline",
            path.display()
        );
        t.wf(&["validate", path.to_str().unwrap()]).code(0);
        let bad = violations(&schema, &yaml_to_json(&text));
        assert!(bad.is_empty(), "{}: {bad:?}", path.display());
    }
    assert!(examples >= 4);

    // A misspelt key fails both the schema and `wf validate`.
    let typo = "name: x\nsteps:\n  - id: a\n    run: echo\n    need: [a]\n";
    let bad = violations(&schema, &yaml_to_json(typo));
    assert!(
        bad.iter().any(|m| m.contains("need")),
        "the schema let a typo through: {bad:?}"
    );
    let path = t.write("typo.yaml", typo);
    t.wf(&["validate", path.to_str().unwrap()]).code(2);
    // So does a wrong type.
    let bad = violations(
        &schema,
        &yaml_to_json("name: x\nsteps:\n  - id: a\n    run: 5\n"),
    );
    assert!(!bad.is_empty());
}
