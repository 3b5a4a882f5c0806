//! GitHub's own conformance data for the expression language
//! (actions/languageservices, `expressions/testdata`, vendored in
//! `tests/expressions/github` with its commit named) run through wf's
//! evaluator: every case, including the five GitHub's TypeScript runner
//! skips (wf passes those too). A case passes when wf gives the same kind and value, or
//! the same kind of error (lexing or parsing: a syntax error; evaluation:
//! an evaluation error) whose message, placed as GitHub places it
//! ("… Located at position N within expression: …"), contains GitHub's.
//! wf's known differences are listed in [`DIFFERENCES`], each with its
//! reason (and in docs/expressions.md); one that starts passing fails the
//! test, so the list stays true.

use serde_json::Value;
use std::path::Path;
use wf::workflow::expr::{self, ExprError};

/// Cases where wf answers differently on purpose: (file, expression, why).
const DIFFERENCES: &[(&str, &str, &str)] = &[];

struct Case {
    file: String,
    group: String,
    expr: String,
    contexts: Value,
    expect: Expect,
}

enum Expect {
    Value { kind: String, value: Value },
    Error { kind: String, message: String },
}

fn cases() -> Vec<Case> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/expressions/github");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/expressions/github")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    let mut skipped_by_typescript = 0;
    for path in files {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).expect("read");
        let groups: serde_json::Map<String, Value> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        for (group, list) in groups {
            for c in list.as_array().expect("a list of cases") {
                let skipped = c["options"]["skip"]
                    .as_array()
                    .is_some_and(|s| s.iter().any(|k| k == "typescript"));
                // GitHub's TypeScript runner skips five cases (four that
                // place an error in a multi-line expression by its absolute
                // position, one over the memory budget); wf passes them, so
                // they are run, and listed as skipped in the count.
                skipped_by_typescript += usize::from(skipped);
                let expect = match c.get("err") {
                    Some(e) if !e.is_null() => Expect::Error {
                        kind: e["kind"].as_str().unwrap_or_default().into(),
                        message: e["value"].as_str().unwrap_or_default().into(),
                    },
                    _ => Expect::Value {
                        kind: c["result"]["kind"].as_str().unwrap_or_default().into(),
                        value: c["result"]["value"].clone(),
                    },
                };
                out.push(Case {
                    file: file.clone(),
                    group: group.clone(),
                    expr: c["expr"].as_str().unwrap_or_default().into(),
                    contexts: match c.get("contexts") {
                        Some(v) if v.is_object() => v.clone(),
                        _ => Value::Object(Default::default()),
                    },
                    expect,
                });
            }
        }
    }
    assert_eq!(
        skipped_by_typescript, 5,
        "cases the TypeScript runner skips"
    );
    out
}

/// GitHub's message for an error: placed in the expression (1-based, in
/// UTF-16 code units from its start) when the error has a place.
fn github_text(e: &ExprError, src: &str) -> String {
    match e.pos() {
        Some(pos) => {
            let column = src.get(..pos).map_or(0, |p| p.encode_utf16().count()) + 1;
            format!(
                "{}. Located at position {column} within expression: {src}",
                e.github_message()
            )
        }
        None => format!("{}. Located within expression: {src}", e.github_message()),
    }
}

/// Numbers compare by value (`1` and `1.0` alike), the rest as JSON.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((k, p), (l, q))| k == l && same(p, q))
        }
        _ => a == b,
    }
}

/// wf's answer for `case`, or why it differs from GitHub's.
fn check(c: &Case) -> Result<(), String> {
    let names: Vec<&str> = c
        .contexts
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    // GitHub's parser takes an empty expression as null.
    let parsed = if c.expr.trim().is_empty() {
        Ok(None)
    } else {
        expr::parse_in(&c.expr, &names).map(Some)
    };
    let got = parsed.and_then(|e| match e {
        Some(e) => e.eval_for_conformance(&c.contexts),
        None => Ok(("Null", Value::Null)),
    });
    match (&c.expect, got) {
        (Expect::Value { kind, value }, Ok((k, v))) if k == kind && same(&v, value) => Ok(()),
        (Expect::Value { kind, value }, Ok((k, v))) => {
            Err(format!("gave {k} {v}, GitHub {kind} {value}"))
        }
        (Expect::Value { kind, value }, Err(e)) => Err(format!(
            "failed ({}), GitHub gives {kind} {value}",
            github_text(&e, &c.expr)
        )),
        (Expect::Error { kind, message }, Ok((k, v))) => {
            Err(format!("gave {k} {v}, GitHub fails ({kind}: {message})"))
        }
        (Expect::Error { kind, message }, Err(e)) => {
            let syntax = matches!(e, ExprError::Syntax { .. });
            let kind_ok = if kind == "evaluation" {
                !syntax
            } else {
                syntax
            };
            let text = github_text(&e, &c.expr);
            if kind_ok && text.contains(message.as_str()) {
                Ok(())
            } else {
                Err(format!(
                    "failed as `{text}` ({}), GitHub as `{message}` ({kind})",
                    if syntax { "syntax" } else { "evaluation" }
                ))
            }
        }
    }
}

#[test]
fn github_conformance_data() {
    let cases = cases();
    assert_eq!(cases.len(), 1020, "the vendored data's cases");
    let mut failures = Vec::new();
    let mut expected_differences = Vec::new();
    for c in &cases {
        let listed = DIFFERENCES
            .iter()
            .any(|(f, e, _)| *f == c.file && *e == c.expr);
        match (check(c), listed) {
            (Ok(()), false) => {}
            (Ok(()), true) => failures.push(format!(
                "{} [{}] `{}`: passes now; take it out of DIFFERENCES",
                c.file, c.group, c.expr
            )),
            (Err(_), true) => expected_differences.push(&c.expr),
            (Err(why), false) => failures.push(format!(
                "{} [{}] `{}`: {why}",
                c.file,
                c.group,
                c.expr.chars().take(200).collect::<String>()
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from GitHub:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    assert_eq!(expected_differences.len(), DIFFERENCES.len());
}
