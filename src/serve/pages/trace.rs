//! The trace waterfall of each run of an instance: its spans, nested under
//! their parents, each a bar placed on the run's time axis (drawn above
//! them, with its ticks) and labelled with its duration; the run's
//! critical path (the steps that made it as long as it was) marked; a run
//! that follows another says which (its span links), and a `workflow:`
//! step's span links to the child instance it made. HTML and CSS widths
//! only.

use super::list::short;
use crate::store::{InstanceView, SpanRow};
use crate::workflow::Workflow;
use maud::{Markup, html};
use std::collections::BTreeMap;

/// A span with its depth, in tree order.
fn ordered(spans: &[&SpanRow]) -> Vec<(usize, SpanRow)> {
    let ids: std::collections::HashSet<&str> = spans.iter().map(|s| s.span_id.as_str()).collect();
    let mut children: BTreeMap<&str, Vec<&SpanRow>> = BTreeMap::new();
    let mut roots = Vec::new();
    for s in spans {
        match s.parent_span_id.as_deref().filter(|p| ids.contains(p)) {
            Some(p) => children.entry(p).or_default().push(s),
            None => roots.push(*s),
        }
    }
    let by_start = |v: &mut Vec<&SpanRow>| v.sort_by_key(|s| (s.start_ns, s.span_id.clone()));
    by_start(&mut roots);
    for v in children.values_mut() {
        by_start(v);
    }
    let mut out = Vec::new();
    let mut stack: Vec<(usize, &SpanRow)> = roots.into_iter().rev().map(|s| (0, s)).collect();
    while let Some((d, s)) = stack.pop() {
        out.push((d, s.clone()));
        if let Some(kids) = children.get(s.span_id.as_str()) {
            for k in kids.iter().rev() {
                stack.push((d + 1, k));
            }
        }
        if out.len() > 20_000 {
            break;
        }
    }
    out
}

/// The run's critical path: from the step attempt that ended last, back
/// through, each time, what it waited for: the step it `needs` (in `wf`,
/// the pinned definition) that ended last in this run, else (a step `wf`
/// does not name, after an upgrade) the step attempt that ended last among
/// those started before it. Their span ids.
fn critical_path(spans: &[&SpanRow], wf: Option<&Workflow>) -> std::collections::HashSet<String> {
    let step_of = |s: &SpanRow| -> Option<String> {
        s.attributes
            .get("workflow.step.id")
            .and_then(|v| v.as_str())
            .map(|k| crate::vocab::UnitKey::parse(k).step.to_string())
    };
    let steps: Vec<(&SpanRow, String)> = spans
        .iter()
        .filter_map(|s| Some((*s, step_of(s)?)))
        .collect();
    fn latest<'a>(
        it: impl Iterator<Item = &'a (&'a SpanRow, String)>,
    ) -> Option<(&'a SpanRow, String)> {
        it.max_by_key(|(s, _)| (s.end_ns, s.start_ns))
            .map(|(s, id)| (*s, id.clone()))
    }
    let mut out = std::collections::HashSet::new();
    let mut at = latest(steps.iter());
    while let Some((s, id)) = at {
        if !out.insert(s.span_id.clone()) {
            break;
        }
        let needs: Option<Vec<&str>> = wf.and_then(|wf| {
            let step = wf.step(&id)?;
            Some(
                step.needs
                    .iter()
                    .map(|&i| wf.steps[i].id.as_str())
                    .collect(),
            )
        });
        at = match needs {
            Some(needs) => latest(
                steps
                    .iter()
                    .filter(|(p, pid)| needs.contains(&pid.as_str()) && p.start_ns < s.start_ns),
            ),
            None => latest(steps.iter().filter(|(p, _)| p.start_ns < s.start_ns)),
        };
    }
    out
}

/// A duration in the waterfall's words (`1.2s`, `340ms`).
fn took(ns: i64) -> String {
    crate::workflow::duration::human(std::time::Duration::from_nanos(ns.max(0) as u64))
}

/// The run's time axis: ticks at each quarter of its length.
fn axis(span_ns: f64) -> Markup {
    html! {
        div.name.axis-name role="cell" { "time" }
        div.lane.axis role="cell" aria-hidden="true" {
            @for q in 0..=4 {
                @let at = f64::from(q) * 25.0;
                span.tick style=(if q == 4 { "right:0".to_string() } else { format!("left:{at:.0}%") }) {
                    (took((span_ns * at / 100.0) as i64))
                }
            }
        }
    }
}

/// The most children whose spans are nested in the waterfall (the others
/// are links to their own pages).
pub const NESTED_CHILDREN: usize = 50;

/// `children`: the spans of the instance's children, by id, nested under
/// the `workflow:` step's span that made each.
pub fn waterfall(
    view: &InstanceView,
    spans: &[SpanRow],
    children: &BTreeMap<String, Vec<SpanRow>>,
    wf: Option<&Workflow>,
) -> Markup {
    let mut runs: BTreeMap<i64, Vec<&SpanRow>> = BTreeMap::new();
    for s in spans {
        runs.entry(s.run).or_default().push(s);
    }
    if runs.is_empty() {
        return html! { p.muted { "No spans were recorded." } };
    }
    html! {
        @for (run, list) in &runs {
            @let start = list.iter().map(|s| s.start_ns).min().unwrap_or(0);
            @let end = list.iter().map(|s| s.end_ns.max(s.start_ns)).max().unwrap_or(start).max(start + 1);
            @let span_ns = (end - start) as f64;
            // A run's root links to the run before it (`workflow.run`).
            @let follows: Vec<i64> = list.iter().flat_map(|s| crate::telemetry::linked_runs(&s.links))
                .filter(|r| r != run).collect();
            details open[*run == *runs.keys().last().unwrap_or(&0)] {
                summary {
                    "Run " (run) " · " (crate::workflow::duration::human(std::time::Duration::from_nanos((end - start).max(0) as u64)))
                    @if let Some(f) = follows.first() { " · follows run " (f) }
                }
                @let crit = critical_path(list, wf);
                div.waterfall role="table" aria-label=(format!("spans of run {run}")) {
                    (axis(span_ns))
                    @for (depth, s) in ordered(list) {
                        @let left = (s.start_ns - start) as f64 / span_ns * 100.0;
                        @let width = ((s.end_ns.max(s.start_ns) - s.start_ns) as f64 / span_ns * 100.0).max(0.3);
                        @let child = child_of(view, &s);
                        @let on_path = crit.contains(&s.span_id);
                        div.name.crit[on_path] role="cell" style=(format!("padding-left:{}rem", depth.min(12) as f64 * 0.8)) title=(if on_path { format!("{} (critical path)", s.name) } else { s.name.clone() }) {
                            @if let Some(c) = &child {
                                a href=(format!("/instances/{c}")) { (s.name) " → " span.mono { (short(c)) } }
                            } @else { (s.name) }
                        }
                        (lane(&s, left, width, on_path))
                        @if let Some(kids) = child.as_ref().and_then(|c| children.get(c)) {
                            @let refs: Vec<&SpanRow> = kids.iter().collect();
                            @for (d, k) in ordered(&refs) {
                                @let kl = (k.start_ns - start) as f64 / span_ns * 100.0;
                                @let kw = ((k.end_ns.max(k.start_ns) - k.start_ns) as f64 / span_ns * 100.0).max(0.3);
                                div.name.child role="cell" style=(format!("padding-left:{}rem", (depth + 1 + d).min(12) as f64 * 0.8)) title=(k.name) {
                                    span.muted { "child run " (k.run) " · " } (k.name)
                                }
                                (lane(&k, kl.clamp(0.0, 100.0), kw.min(100.0 - kl.clamp(0.0, 100.0)).max(0.3), false))
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A span's bar on the run's axis (`left`, `width` in percent), with its
/// duration written beside it (before it, when the bar ends in the right
/// third); `crit`: on the critical path.
fn lane(s: &SpanRow, left: f64, width: f64, crit: bool) -> Markup {
    let d = took(s.end_ns - s.start_ns);
    let end = left + width;
    let label = if end < 67.0 {
        format!("left:calc({end:.2}% + 4px)")
    } else {
        format!("right:calc({:.2}% + 4px)", (100.0 - left).max(0.0))
    };
    html! {
        div.lane role="cell" {
            div class=(format!("bar {}{}", s.status, if crit { " crit" } else { "" })) style=(format!("left:{left:.2}%;width:{width:.2}%"))
                title=(format!("{}: {d}", s.name)) {}
            span.dur style=(label) { (d) }
        }
    }
}

/// The child instance a `workflow:` step's span stands for, if any: the
/// child whose parent unit and attempt are the span's (`workflow.step.id`,
/// `workflow.step.attempt`).
fn child_of(view: &InstanceView, s: &SpanRow) -> Option<String> {
    let key = s.attributes["workflow.step.id"].as_str()?;
    let attempt = s.attributes["workflow.step.attempt"].as_i64();
    view.children
        .iter()
        .find(|c| {
            c.parent
                .as_ref()
                .is_some_and(|p| p.key == key && attempt.is_none_or(|a| a == p.attempt))
        })
        .map(|c| c.id.to_string())
}
