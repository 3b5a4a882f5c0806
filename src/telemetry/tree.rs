//! The `wf trace` tree: per run, in order, the run's root span and the spans
//! beneath it, children by start time, each with the few attributes a person
//! looks for (docs/traces.md):
//!
//! ```text
//! order-flow/workflow          +0ms   1.2s ▕████████████▏  run 2  link -> run 1  outcome=sleeping  trace=4bf9…
//! └── order-flow/charge-card   +3ms  1.1s ▕ ███████████▏  attempt=1  outcome=retry  ERROR  error.type=user.card_declined
//! ```
//!
//! Each span shows its start offset in its run and its duration, and a
//! waterfall bar over the run's time, so the slow step stands out; the root
//! line carries the run's total and its trace id.
//!
//! On a terminal the lines fit its width ([`layout`]) and spans other than
//! a run's root are named relative to their workflow (`charge-card`).

use crate::store::{RunRow, SpanRow};
use crate::vocab::short;
use layout::Line;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap, HashSet};

mod layout;

/// The longest status message shown on a line; the full text is in `--format json`.
const MESSAGE_MAX: usize = 80;

/// Width of the waterfall bar, in characters.
const BAR: usize = 12;

/// A run's time span (ns) that offsets and bars are measured against.
#[derive(Clone, Copy)]
struct Window {
    start: i64,
    end: i64,
}

/// Compact duration from nanoseconds: `850µs`, `12ms`, `1.2s`.
fn dur(ns: i64) -> String {
    let ns = ns.max(0) as u64;
    if ns == 0 {
        "0ms".into()
    } else if ns < 1_000_000 {
        format!("{}µs", ns / 1_000)
    } else {
        crate::workflow::duration::human(std::time::Duration::from_nanos(ns))
    }
}

fn timing(start_ns: i64, end_ns: i64, w: Window) -> String {
    let total = (w.end - w.start).max(1) as f64;
    let from = ((start_ns - w.start).max(0) as f64 / total * BAR as f64).floor() as usize;
    let to = ((end_ns - w.start).max(0) as f64 / total * BAR as f64).ceil() as usize;
    let (from, to) = (from.min(BAR - 1), to.clamp(from.min(BAR - 1) + 1, BAR));
    let bar: String = (0..BAR)
        .map(|i| if i >= from && i < to { '█' } else { ' ' })
        .collect();
    format!(
        "{:>7} {:>6} ▕{bar}▏",
        format!("+{}", dur(start_ns - w.start)),
        dur(end_ns - start_ns)
    )
}

/// An instance's recorded runs and spans, with its children's (`wf trace
/// PARENT`): each child's runs hang under the span of the attempt that
/// made it.
pub struct Traced<'a> {
    pub id: &'a str,
    pub workflow: &'a str,
    pub runs: &'a [RunRow],
    pub spans: &'a [SpanRow],
    pub children: Vec<Child<'a>>,
}

/// A child instance, and the parent's unit key and attempt that made it.
pub struct Child<'a> {
    pub key: &'a str,
    pub attempt: i64,
    pub traced: Traced<'a>,
}

/// A line of the tree and the lines beneath it, before drawing.
struct Node {
    head: String,
    /// The span's (start, end) ns and the window it is measured against.
    timing: Option<(i64, i64, Window)>,
    details: Vec<String>,
    kids: Vec<Node>,
}

impl Node {
    /// When it starts, for ordering: a header's is its first line's.
    fn start(&self) -> i64 {
        match self.timing {
            Some((start, _, _)) => start,
            None => self.kids.first().map_or(i64::MAX, Node::start),
        }
    }
}

/// The tree of an instance and of its children, nested. `width`: the
/// terminal's, which the lines fit, the spans of each workflow named
/// relative to it (`charge-card`, not `order-flow/charge-card`; a run's
/// root keeps its whole name); None (piped, `--wide`): whole lines, whole
/// names.
pub fn render_traced(t: &Traced<'_>, width: Option<usize>) -> Vec<String> {
    let mut lines = Vec::new();
    for node in instance_nodes(t, None, false, width.is_some()) {
        draw(&node, "", "", &mut lines);
    }
    match width {
        Some(w) => layout::fit(lines, w),
        None => layout::align(lines),
    }
}

fn draw(node: &Node, prefix: &str, indent: &str, out: &mut Vec<Line>) {
    out.push(Line {
        head: format!("{prefix}{}", node.head),
        indent: indent.to_string(),
        kids: !node.kids.is_empty(),
        timing: node.timing.map(|(start, end, w)| timing(start, end, w)),
        details: node.details.clone(),
    });
    for (i, kid) in node.kids.iter().enumerate() {
        let (p, rest) = branch(indent, i + 1 == node.kids.len());
        draw(kid, &p, &rest, out);
    }
}

/// The spans under which `t`'s children hang, and the children whose
/// attempt has no span yet (it is still open). A child's first run is a
/// child of its attempt's span; children recorded before that was so are
/// placed by the attempt's key and number.
fn attachments<'a>(
    t: &'a Traced<'a>,
) -> (HashMap<&'a str, Vec<&'a Traced<'a>>>, Vec<&'a Child<'a>>) {
    let ids: HashSet<&str> = t.spans.iter().map(|s| s.span_id.as_str()).collect();
    let mut under: HashMap<&str, Vec<&Traced>> = HashMap::new();
    let mut loose = Vec::new();
    for c in &t.children {
        let by_parent = c
            .traced
            .spans
            .iter()
            .filter(|s| is_root(s))
            .min_by_key(|s| s.run)
            .and_then(|s| s.parent_span_id.as_deref())
            .filter(|p| ids.contains(p));
        let by_attempt = || {
            t.spans
                .iter()
                .find(|s| {
                    attr(s, "workflow.step.id").as_deref() == Some(c.key)
                        && s.attributes
                            .get("workflow.step.attempt")
                            .and_then(Value::as_i64)
                            == Some(c.attempt)
                })
                .map(|s| s.span_id.as_str())
        };
        match by_parent.or_else(by_attempt) {
            Some(span) => under.entry(span).or_default().push(&c.traced),
            None => loose.push(c),
        }
    }
    (under, loose)
}

/// An instance's runs, in order, each its root's node (or a header's);
/// `outer`: the trace and window of the run it is nested in, which its
/// runs in that trace are measured against; `nested`: it is a child shown
/// in its parent's tree (its runs then name it); `relative`: its spans are
/// named relative to its workflow.
fn instance_nodes(
    t: &Traced<'_>,
    outer: Option<(&str, Window)>,
    nested: bool,
    relative: bool,
) -> Vec<Node> {
    let mut numbers: BTreeSet<i64> = t.runs.iter().map(|r| r.number).collect();
    numbers.extend(t.spans.iter().map(|s| s.run));
    let (under, loose) = attachments(t);
    let mut nodes = Vec::new();
    for number in numbers {
        let in_run: Vec<&SpanRow> = t.spans.iter().filter(|s| s.run == number).collect();
        let run = t.runs.iter().find(|r| r.number == number);
        nodes.extend(run_nodes(t, number, run, &in_run, &under, outer, relative));
    }
    // Children of attempts still open: under a line for the attempt, at
    // the end of the last run.
    for c in loose {
        let kid = Node {
            head: if relative {
                c.key.to_string()
            } else {
                format!("{}/{}", t.workflow, c.key)
            },
            timing: None,
            details: vec![format!("attempt={}", c.attempt), "outcome=running".into()],
            kids: instance_nodes(&c.traced, None, true, relative),
        };
        match nodes.last_mut() {
            Some(last) => last.kids.push(kid),
            None => nodes.push(kid),
        }
    }
    if nested || !t.children.is_empty() {
        // Which instance each run is, where several are shown.
        for n in &mut nodes {
            n.details.push(format!("instance={}", short(t.id)));
        }
    }
    nodes
}

fn run_nodes(
    t: &Traced<'_>,
    number: i64,
    run: Option<&RunRow>,
    spans: &[&SpanRow],
    under: &HashMap<&str, Vec<&Traced<'_>>>,
    outer: Option<(&str, Window)>,
    relative: bool,
) -> Vec<Node> {
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
    let root = spans.iter().find(|s| is_root(s));
    let own = match root {
        Some(root) => Window {
            start: root.start_ns,
            end: root
                .end_ns
                .max(spans.iter().map(|s| s.end_ns).max().unwrap_or(0)),
        },
        None => Window {
            start: spans.iter().map(|s| s.start_ns).min().unwrap_or(0),
            end: spans.iter().map(|s| s.end_ns).max().unwrap_or(0),
        },
    };
    // A run in the trace it is nested in is measured against that run.
    let window = match (outer, root) {
        (Some((trace, w)), Some(root)) if root.trace_id == trace => w,
        _ => own,
    };
    let tree = SpanTree {
        children: &children,
        under,
        window,
        relative_to: relative.then(|| format!("{}/", t.workflow)),
    };
    let mut seen = HashSet::new();
    let nodes: Vec<Node> = top.iter().filter_map(|s| tree.node(s, &mut seen)).collect();
    if root.is_some() {
        return nodes;
    }
    // The root is written when the run ends: this run is still going (or
    // its process died and nobody resumed it yet).
    let outcome = run
        .and_then(|r| r.outcome)
        .map_or("running", |o| o.as_str());
    vec![Node {
        head: format!("{}/workflow", t.workflow),
        timing: None,
        details: vec![format!("run {number}"), format!("outcome={outcome}")],
        kids: nodes,
    }]
}

/// The spans of one run, by parent, and the children hanging under them.
struct SpanTree<'a, 'b> {
    children: &'b HashMap<&'a str, Vec<&'a SpanRow>>,
    under: &'b HashMap<&'a str, Vec<&'a Traced<'a>>>,
    window: Window,
    /// `<workflow>/`, which names of spans other than the root drop.
    relative_to: Option<String>,
}

impl<'a> SpanTree<'a, '_> {
    fn node(&self, span: &'a SpanRow, seen: &mut HashSet<&'a str>) -> Option<Node> {
        if !seen.insert(span.span_id.as_str()) {
            return None;
        }
        let mut details = details(span);
        if is_root(span) {
            details.push(format!("trace={}", span.trace_id));
        }
        let mut kids: Vec<Node> = self
            .children
            .get(span.span_id.as_str())
            .map(Vec::as_slice)
            .unwrap_or(&[])
            .iter()
            .filter_map(|kid| self.node(kid, seen))
            .collect();
        let nested = self.under.get(span.span_id.as_str());
        for child in nested.into_iter().flatten() {
            kids.extend(instance_nodes(
                child,
                Some((span.trace_id.as_str(), self.window)),
                true,
                self.relative_to.is_some(),
            ));
        }
        if nested.is_some() {
            kids.sort_by_key(Node::start);
        }
        let head = match &self.relative_to {
            Some(prefix) if !is_root(span) => span
                .name
                .strip_prefix(prefix.as_str())
                .filter(|n| !n.is_empty()),
            _ => None,
        };
        Some(Node {
            head: head.unwrap_or(&span.name).to_string(),
            timing: Some((span.start_ns, span.end_ns, self.window)),
            details,
            kids,
        })
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
        // The first run on a definition `wf upgrade` moved it onto.
        if let (Some(from), Some(to)) = (attr(s, "wf.upgrade.from"), attr(s, "wf.upgrade.to")) {
            d.push(format!(
                "upgraded {} -> {}",
                crate::vocab::short(&from),
                crate::vocab::short(&to)
            ));
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The tree of one instance without children: `runs` as recorded (for
    /// runs whose root span is not written yet) and its spans.
    fn render(workflow: &str, runs: &[RunRow], spans: &[SpanRow]) -> Vec<String> {
        render_traced(
            &Traced {
                id: "",
                workflow,
                runs,
                spans,
                children: Vec::new(),
            },
            None,
        )
    }

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
            start_ns: start * 1_000_000,
            end_ns: (start + 10) * 1_000_000,
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
        let c = span("c", Some("a2"), 3, "wf.commit", 8, json!({}));
        let lines = render("order-flow", &[], &[a1, root2, c, a2, root3]);
        assert_eq!(
            lines,
            [
                "order-flow/workflow             +0ms   10ms ▕███████████ ▏  run 2  link -> run 1  outcome=sleeping  trace=00000000000000000000000000000002",
                "└── order-flow/charge-card      +1ms   10ms ▕ ███████████▏  attempt=1  outcome=retry  ERROR  error.type=user.card_declined",
                "order-flow/workflow             +0ms   10ms ▕██████████  ▏  run 3  link -> run 2  outcome=completed  trace=00000000000000000000000000000003",
                "└── order-flow/charge-card      +1ms   10ms ▕███████████ ▏  attempt=2  outcome=ok",
                "    └── wf.commit               +3ms   10ms ▕  ██████████▏",
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
                "f/workflow           +0ms   10ms ▕████        ▏  run 1  outcome=completed  trace=00000000000000000000000000000001",
                "├── f/a             +10ms   10ms ▕   █████    ▏  attempt=1  outcome=ok",
                "│   └── process     +11ms   10ms ▕    █████   ▏  exit.code=0",
                "└── f/b             +20ms   10ms ▕       █████▏  attempt=1  outcome=ok",
                "    └── GET         +21ms   10ms ▕        ████▏  http://x/y  200",
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
            started_at: crate::vocab::Timestamp::from_ms(0),
            finished_at: None,
            restart_from: None,
            definition_hash: None,
        };
        let lines = render("f", &[run], &[a]);
        assert_eq!(
            lines[0],
            "f/workflow                                  run 4  outcome=running"
        );
        assert_eq!(
            lines[1],
            "└── f/a         +0ms   10ms ▕████████████▏  attempt=1  outcome=ok"
        );
    }

    #[test]
    fn children_hang_under_the_attempts_that_made_them() {
        let root = span(
            "r",
            None,
            1,
            "p/workflow",
            0,
            json!({"workflow.run": 1, "workflow.outcome": "waiting"}),
        );
        let call = span(
            "c",
            Some("r"),
            1,
            "p/call",
            2,
            json!({"workflow.step.id": "call", "workflow.step.attempt": 1, "workflow.step.outcome": "ok"}),
        );
        // The child's first run, in the parent's trace, under the call.
        let mut kid_root = span(
            "k",
            Some("c"),
            1,
            "kid/workflow",
            3,
            json!({"workflow.run": 1, "workflow.outcome": "completed"}),
        );
        kid_root.trace_id = root.trace_id.clone();
        let kid_step = span(
            "ks",
            Some("k"),
            1,
            "kid/x",
            4,
            json!({"workflow.step.id": "x", "workflow.step.attempt": 1, "workflow.step.outcome": "ok"}),
        );
        // A child whose attempt is still open: no span to hang under yet.
        let open_root = span(
            "o",
            Some("gone"),
            1,
            "kid/workflow",
            5,
            json!({"workflow.run": 1, "workflow.outcome": "sleeping"}),
        );
        let parent_spans = [root, call];
        let kid_spans = [kid_root, kid_step];
        let open_spans = [open_root];
        let traced = Traced {
            id: "parent000000000",
            workflow: "p",
            runs: &[],
            spans: &parent_spans,
            children: vec![
                Child {
                    key: "call",
                    attempt: 1,
                    traced: Traced {
                        id: "kid1aaaaaaaaaaa",
                        workflow: "kid",
                        runs: &[],
                        spans: &kid_spans,
                        children: Vec::new(),
                    },
                },
                Child {
                    key: "later",
                    attempt: 2,
                    traced: Traced {
                        id: "kid2bbbbbbbbbbb",
                        workflow: "kid",
                        runs: &[],
                        spans: &open_spans,
                        children: Vec::new(),
                    },
                },
            ],
        };
        let lines = render_traced(&traced, None);
        let heads = [
            "p/workflow ",
            "├── p/call ",
            "│   └── kid/workflow ",
            "│       └── kid/x ",
            "└── p/later ",
            "    └── kid/workflow ",
        ];
        assert_eq!(lines.len(), heads.len(), "{lines:#?}");
        for (line, head) in lines.iter().zip(heads) {
            assert!(
                line.starts_with(head),
                "{line:?} is not {head:?}: {lines:#?}"
            );
        }
        assert!(lines[5].contains("instance=kid2bbbbbbbb"), "{}", lines[5]);
        assert!(lines[0].contains("instance=parent000000"), "{}", lines[0]);
        assert!(lines[2].contains("instance=kid1aaaaaaaa"), "{}", lines[2]);
        // Measured against the parent's run: the child's run starts 3 ms in.
        assert!(lines[2].contains("+3ms"), "{}", lines[2]);
        assert!(
            lines[4].contains("attempt=2  outcome=running"),
            "{}",
            lines[4]
        );
        // On a terminal, each workflow's spans are named relative to it;
        // the roots keep their names, and every line fits.
        let fitted = render_traced(&traced, Some(60));
        for (name, full) in [
            ("├── call", "p/call"),
            ("│       └── x", "kid/x"),
            ("└── later", "p/later"),
        ] {
            assert!(
                fitted
                    .iter()
                    .any(|l| l == name || l.starts_with(&format!("{name} "))),
                "{name}: {fitted:#?}"
            );
            assert!(!fitted.iter().any(|l| l.contains(full)), "{fitted:#?}");
        }
        assert!(fitted[0].starts_with("p/workflow "), "{fitted:#?}");
        for l in &fitted {
            assert!(l.chars().count() <= 60, "{l}: {fitted:#?}");
        }
    }
}
