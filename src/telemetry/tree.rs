//! The `wf trace` tree: per run, in order, the run's root span and the spans
//! beneath it, children by start time, each with the few attributes a person
//! looks for (SPEC §5):
//!
//! ```text
//! order-flow/workflow          run 2  link -> run 1  outcome=sleeping
//! └── order-flow/charge-card   attempt=1  outcome=retry  ERROR  error.type=user.card_declined
//! ```

use crate::store::{RunRow, SpanRow};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap, HashSet};

/// The longest status message shown on a line; the full text is in `--format json`.
const MESSAGE_MAX: usize = 80;

/// One line of the tree before the columns are aligned.
struct Line {
    /// Tree drawing and span name.
    head: String,
    /// Space-separated details.
    details: Vec<String>,
}

/// The tree of one instance: `runs` as recorded (for runs whose root span is
/// not written yet) and every stored span. Returns the lines, aligned.
pub fn render(workflow: &str, runs: &[RunRow], spans: &[SpanRow]) -> Vec<String> {
    let mut numbers: BTreeSet<i64> = runs.iter().map(|r| r.number).collect();
    numbers.extend(spans.iter().map(|s| s.run));
    let mut lines = Vec::new();
    for number in numbers {
        let in_run: Vec<&SpanRow> = spans.iter().filter(|s| s.run == number).collect();
        let run = runs.iter().find(|r| r.number == number);
        render_run(workflow, number, run, &in_run, &mut lines);
    }
    align(lines)
}

fn render_run(
    workflow: &str,
    number: i64,
    run: Option<&RunRow>,
    spans: &[&SpanRow],
    out: &mut Vec<Line>,
) {
    let ids: HashSet<&str> = spans.iter().map(|s| s.span_id.as_str()).collect();
    let mut children: HashMap<&str, Vec<&SpanRow>> = HashMap::new();
    let mut top: Vec<&SpanRow> = Vec::new();
    for s in spans {
        match s.parent_span_id.as_deref() {
            Some(p) if ids.contains(p) && p != s.span_id => children.entry(p).or_default().push(s),
            _ => top.push(s),
        }
    }
    for list in children.values_mut() {
        list.sort_by(|a, b| (a.start_ns, &a.span_id).cmp(&(b.start_ns, &b.span_id)));
    }
    top.sort_by_key(|s| (!is_root(s), s.start_ns, s.span_id.clone()));
    let has_root = top.first().is_some_and(|s| is_root(s));
    let depth = if has_root {
        0
    } else {
        // The root is written when the run ends: this run is still going (or
        // its process died and nobody resumed it yet).
        let outcome = run
            .and_then(|r| r.outcome.clone())
            .unwrap_or_else(|| "running".into());
        out.push(Line {
            head: format!("{workflow}/workflow"),
            details: vec![format!("run {number}"), format!("outcome={outcome}")],
        });
        1
    };
    let mut seen = HashSet::new();
    let count = top.len();
    for (i, s) in top.into_iter().enumerate() {
        let (prefix, rest) = if depth == 0 {
            (String::new(), String::new())
        } else {
            branch("", i + 1 == count)
        };
        walk(s, &prefix, &rest, &children, &mut seen, out);
    }
}

/// (this line's prefix, the prefix of the lines beneath it).
fn branch(indent: &str, last: bool) -> (String, String) {
    if last {
        (format!("{indent}└── "), format!("{indent}    "))
    } else {
        (format!("{indent}├── "), format!("{indent}│   "))
    }
}

fn walk<'a>(
    span: &'a SpanRow,
    prefix: &str,
    indent: &str,
    children: &HashMap<&str, Vec<&'a SpanRow>>,
    seen: &mut HashSet<&'a str>,
    out: &mut Vec<Line>,
) {
    if !seen.insert(span.span_id.as_str()) {
        return;
    }
    out.push(Line {
        head: format!("{prefix}{}", span.name),
        details: details(span),
    });
    let kids = children
        .get(span.span_id.as_str())
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for (i, kid) in kids.iter().enumerate() {
        let (p, rest) = branch(indent, i + 1 == kids.len());
        walk(kid, &p, &rest, children, seen, out);
    }
}

/// A run's root span: `<workflow>/workflow` with `workflow.run`.
pub fn is_root(s: &SpanRow) -> bool {
    s.name.ends_with("/workflow") && s.attributes.get("workflow.run").is_some()
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn attr(s: &SpanRow, key: &str) -> Option<String> {
    s.attributes.get(key).filter(|v| !v.is_null()).map(text)
}

fn one_line(message: &str) -> String {
    let flat = message.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > MESSAGE_MAX {
        let cut: String = flat.chars().take(MESSAGE_MAX - 1).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

fn details(s: &SpanRow) -> Vec<String> {
    let mut d = Vec::new();
    let error = s.status == "error";
    let message = s
        .status_message
        .as_deref()
        .filter(|m| !m.trim().is_empty())
        .map(one_line);
    if is_root(s) {
        d.push(format!(
            "run {}",
            attr(s, "workflow.run").unwrap_or_default()
        ));
        for l in s.links.as_array().map(Vec::as_slice).unwrap_or(&[]) {
            let a = &l["attributes"];
            if let Some(run) = a.get("workflow.run") {
                d.push(format!("link -> run {}", text(run)));
            } else if let Some(event) = a.get("wf.event.name") {
                d.push(format!("link -> signal {}", text(event)));
            } else {
                d.push(format!("link -> {}", l["span_id"].as_str().unwrap_or("?")));
            }
        }
        if let Some(o) = attr(s, "workflow.outcome") {
            d.push(format!("outcome={o}"));
        }
        if error {
            d.push("ERROR".into());
            d.extend(message);
        }
    } else if s.attributes.get("workflow.step.id").is_some() {
        if let Some(a) = attr(s, "workflow.step.attempt") {
            d.push(format!("attempt={a}"));
        }
        if let Some(o) = attr(s, "workflow.step.outcome") {
            d.push(format!("outcome={o}"));
        }
        if error {
            d.push("ERROR".into());
        }
        if let Some(t) = attr(s, "error.type") {
            d.push(format!("error.type={t}"));
        }
    } else if let Some(method) = attr(s, "http.request.method") {
        if method != s.name {
            d.push(method);
        }
        if let Some(url) = attr(s, "url.full") {
            d.push(url);
        }
        if let Some(status) = attr(s, "http.response.status_code") {
            d.push(status);
        }
        if error {
            d.push("ERROR".into());
            d.extend(message);
        }
    } else {
        let code = attr(s, "process.exit.code");
        if let Some(code) = &code {
            d.push(format!("exit.code={code}"));
        }
        if error {
            d.push("ERROR".into());
            if let Some(t) = attr(s, "error.type") {
                d.push(format!("error.type={t}"));
            }
            // "exited with code 3" says nothing exit.code=3 does not.
            if code.is_none() {
                d.extend(message);
            }
        }
    }
    d
}

fn align(lines: Vec<Line>) -> Vec<String> {
    let width = lines
        .iter()
        .map(|l| l.head.chars().count())
        .max()
        .unwrap_or(0)
        + 3;
    lines
        .into_iter()
        .map(|l| {
            if l.details.is_empty() {
                l.head
            } else {
                let pad = width - l.head.chars().count();
                format!("{}{}{}", l.head, " ".repeat(pad), l.details.join("  "))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn span(
        id: &str,
        parent: Option<&str>,
        run: i64,
        name: &str,
        start: i64,
        attrs: Value,
    ) -> SpanRow {
        SpanRow {
            trace_id: format!("{run:032x}"),
            span_id: id.into(),
            parent_span_id: parent.map(String::from),
            instance_id: "i".into(),
            run,
            name: name.into(),
            kind: "internal".into(),
            start_ns: start,
            end_ns: start + 10,
            status: "unset".into(),
            status_message: None,
            attributes: attrs,
            links: json!([]),
        }
    }

    #[test]
    fn renders_the_spec_example() {
        let mut root2 = span(
            "r2",
            None,
            2,
            "order-flow/workflow",
            0,
            json!({"workflow.run": 2, "workflow.outcome": "sleeping"}),
        );
        root2.links =
            json!([{"trace_id": "t", "span_id": "r1", "attributes": {"workflow.run": 1}}]);
        let mut a1 = span(
            "a1",
            Some("r2"),
            2,
            "order-flow/charge-card",
            1,
            json!({"workflow.step.id": "charge-card", "workflow.step.attempt": 1,
                   "workflow.step.outcome": "retry", "error.type": "user.card_declined"}),
        );
        a1.status = "error".into();
        a1.status_message = Some("exit code 3".into());
        let mut root3 = span(
            "r3",
            None,
            3,
            "order-flow/workflow",
            5,
            json!({"workflow.run": 3, "workflow.outcome": "completed"}),
        );
        root3.links =
            json!([{"trace_id": "t", "span_id": "r2", "attributes": {"workflow.run": 2}}]);
        let a2 = span(
            "a2",
            Some("r3"),
            3,
            "order-flow/charge-card",
            6,
            json!({"workflow.step.id": "charge-card", "workflow.step.attempt": 2,
                   "workflow.step.outcome": "ok"}),
        );
        let c = span("c", Some("a2"), 3, "wf.sqlite.commit", 8, json!({}));
        let lines = render("order-flow", &[], &[a1, root2, c, a2, root3]);
        assert_eq!(
            lines,
            [
                "order-flow/workflow          run 2  link -> run 1  outcome=sleeping",
                "└── order-flow/charge-card   attempt=1  outcome=retry  ERROR  error.type=user.card_declined",
                "order-flow/workflow          run 3  link -> run 2  outcome=completed",
                "└── order-flow/charge-card   attempt=2  outcome=ok",
                "    └── wf.sqlite.commit",
            ]
        );
    }

    #[test]
    fn children_by_start_time_and_process_http_details() {
        let root = span(
            "r",
            None,
            1,
            "f/workflow",
            0,
            json!({"workflow.run": 1, "workflow.outcome": "completed"}),
        );
        let b = span(
            "b",
            Some("r"),
            1,
            "f/b",
            20,
            json!({"workflow.step.id": "b", "workflow.step.attempt": 1, "workflow.step.outcome": "ok"}),
        );
        let a = span(
            "a",
            Some("r"),
            1,
            "f/a",
            10,
            json!({"workflow.step.id": "a", "workflow.step.attempt": 1, "workflow.step.outcome": "ok"}),
        );
        let p = span(
            "p",
            Some("a"),
            1,
            "process",
            11,
            json!({"process.command": "sh", "process.exit.code": 0}),
        );
        let h = span(
            "h",
            Some("b"),
            1,
            "GET",
            21,
            json!({"http.request.method": "GET", "url.full": "http://x/y", "http.response.status_code": 200}),
        );
        let lines = render("f", &[], &[b, h, root, p, a]);
        assert_eq!(
            lines,
            [
                "f/workflow        run 1  outcome=completed",
                "├── f/a           attempt=1  outcome=ok",
                "│   └── process   exit.code=0",
                "└── f/b           attempt=1  outcome=ok",
                "    └── GET       http://x/y  200",
            ]
        );
    }

    #[test]
    fn a_run_without_its_root_yet_gets_a_header() {
        let a = span(
            "a",
            Some("gone"),
            4,
            "f/a",
            10,
            json!({"workflow.step.id": "a", "workflow.step.attempt": 1, "workflow.step.outcome": "ok"}),
        );
        let run = RunRow {
            number: 4,
            outcome: None,
            started_at: String::new(),
            finished_at: None,
        };
        let lines = render("f", &[run], &[a]);
        assert_eq!(lines[0], "f/workflow   run 4  outcome=running");
        assert_eq!(lines[1], "└── f/a      attempt=1  outcome=ok");
    }
}
