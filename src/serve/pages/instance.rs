//! `GET /instances/{id}`: an instance. The header (status, inputs, state,
//! labels, outputs, what started it, parent and children), the actions,
//! the step graph, the steps with every attempt, the trace waterfall of
//! each run, and the events. While it has not ended, the part that changes
//! refreshes itself (`?fragment=live`). `GET /instances/{id}/logs/{step}`:
//! an attempt's output, streamed while it runs.

use super::super::App;
use super::super::error::ApiError;
use super::super::params::instance_ref;
use super::super::query::{PageQuery, Text};
use super::graph;
use super::list::{badge, short, when};
use super::shell::{self, Nav};
use crate::engine::{actions, logs};
use crate::store::{AttemptRow, InstanceView, SpanRow, StepRow};
use crate::views::ShownStatus;
use crate::vocab::{InstanceId, Timestamp};
use crate::workflow::{Action, Workflow};
use axum::extract::{Path, State};
use axum::response::{Html, IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;

/// Children the header names (the rest are in the list, `/?parent=ID`).
const HEADER_CHILDREN: usize = 12;

/// What the page shows, read on the server's thread.
struct Shown {
    view: InstanceView,
    standing: Option<crate::store::queue::Admission>,
    /// The pinned definition (for the graph's edges and the restart form).
    wf: Option<Workflow>,
    outputs: Value,
    spans: Vec<SpanRow>,
    /// The first children's spans, nested in the waterfall.
    children: std::collections::BTreeMap<String, Vec<SpanRow>>,
    /// The definitions its runs used, with their texts.
    definitions: Vec<actions::DefinitionText>,
}

/// What the page shows of instance `id`; `whole`: the page, else the part
/// that refreshes itself (`live`), which needs no spans and no
/// definitions' texts.
async fn read(app: &App, id: String, whole: bool) -> Result<Shown, ApiError> {
    let id = instance_ref(&id)?;
    app.db
        .run(move |l| async move {
            let c = l.conn().await?;
            let id = c.resolve_id(&id).await?;
            let read = crate::views::ordered(actions::inspect(&c, &id, true).await?);
            let wf = crate::engine::pinned::pinned_workflow(&c, &read.view.instance)
                .await
                .ok();
            let (_, outputs) = actions::result(&c, &id).await?;
            let (mut spans, mut definitions) = (Vec::new(), Vec::new());
            let mut children = std::collections::BTreeMap::new();
            if whole {
                spans = c.spans(&id).await?;
                definitions =
                    actions::definitions_of_runs(&c, &read.view.instance, &read.view.runs)
                        .await
                        .unwrap_or_default();
                for child in read
                    .view
                    .children
                    .iter()
                    .take(super::trace::NESTED_CHILDREN)
                {
                    children.insert(child.id.to_string(), c.spans(&child.id).await?);
                }
            }
            Ok(Shown {
                view: read.view,
                standing: read.standing,
                wf,
                outputs,
                spans,
                children,
                definitions,
            })
        })
        .await
}

/// The instance page; a `read` token's shows no action buttons.
pub async fn page_of(
    app: &App,
    id: String,
    notice: Option<&str>,
    scope: crate::vocab::TokenScope,
) -> Result<Markup, ApiError> {
    let shown = read(app, id, true).await?;
    let i = &shown.view.instance;
    let ended = i.status.is_ended();
    let now = Timestamp::now();
    let body = html! {
        h1 { "Instance " span.mono { (i.id) } }
        @if let Some(n) = notice { p.notice role="status" { (n) } }
        @if scope >= crate::vocab::TokenScope::Operate { (actions_bar(&shown)) }
        @if ended {
            div #live { (live(&shown, now)) }
        } @else {
            div #live data-live=(format!("/instances/{}?fragment=live", i.id)) data-every="2000" { (live(&shown, now)) }
        }
        (super::compare::form(&i.id, &shown.view.runs))
        (trace_section(&shown))
        (definition_section(&shown))
        (events(&shown.view, now))
        (started_by(&shown.view))
        (actions(&shown.view, now))
    };
    Ok(shell::page(
        &format!("{} {}", i.workflow, short(&i.id)),
        Nav::Instances,
        body,
    ))
}

/// `GET /instances/{id}`' parameters: `fragment=live` for the part that
/// refreshes itself, `notice` for what an action just did.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageParams {
    #[serde(default)]
    fragment: Option<Text>,
    #[serde(default)]
    notice: Option<Text>,
}

pub async fn page(
    State(app): State<App>,
    axum::extract::Extension(who): axum::extract::Extension<super::super::auth::Principal>,
    Path(id): Path<String>,
    PageQuery(p): PageQuery<PageParams>,
) -> Response {
    if p.fragment.as_ref().is_some_and(|f| f.as_str() == "live") {
        return match read(&app, id, false).await {
            Ok(shown) => Html(live(&shown, Timestamp::now()).into_string()).into_response(),
            Err(e) => super::error_page(&e),
        };
    }
    let notice = p
        .notice
        .as_ref()
        .and_then(|n| super::Notice::of_code(n.as_str()));
    super::respond(page_of(&app, id, notice.map(super::Notice::text), who.scope).await)
}

/// The part that changes while the instance runs: header, graph, steps.
/// Once the instance has ended it carries `data-ended`, and the page's
/// script loads the whole page again: its buttons, the restart form and
/// the trace follow the instance to its end.
fn live(s: &Shown, now: Timestamp) -> Markup {
    html! {
        @if s.view.instance.status.is_ended() { span data-ended hidden {} }
        (header(s, now))
        (graph_section(s))
        (steps(s, now))
    }
}

fn json(v: &Value) -> Markup {
    html! { pre.json { (serde_json::to_string_pretty(v).unwrap_or_default()) } }
}

fn header(s: &Shown, now: Timestamp) -> Markup {
    let v = &s.view;
    let i = &v.instance;
    let status = ShownStatus::of(i);
    html! {
        div.grid2 {
            dl.facts {
                dt { "Workflow" } dd { a href="/workflows" { (i.workflow) } " " span.muted.mono { (short(&i.definition_hash)) } }
                @let uses = crate::views::definition_uses(&v.runs, &i.definition_hash);
                @if !uses.is_empty() {
                    dt { "Definitions" } dd {
                        @for (n, u) in uses.iter().enumerate() {
                            @if n > 0 { ", " }
                            span.mono { (short(u.hash)) } " from run " (u.from_run)
                        }
                    }
                }
                dt { "Status" } dd { (badge(status.as_str())) }
                @if let Some(e) = &i.error { dt { "Error" } dd { (e) } }
                @if let Some(w) = i.wake_at { dt { "Wakes" } dd { (when(w, now)) } }
                @if let Some(e) = &i.waiting_event { dt { "Waits for" } dd { code { (e) } } }
                @if let Some(q) = &i.queue {
                    dt { "Queue" } dd {
                        code { (q.key) }
                        @if q.admitted { " admitted" }
                        @if let Some(st) = &s.standing { " · " (crate::views::QueueStanding::new(q, Some(st)).waiting_for.unwrap_or_default()) }
                    }
                }
                dt { "Created" } dd { (when(i.created_at, now)) }
                dt { "Updated" } dd { (when(i.updated_at, now)) }
                dt { "File" } dd.mono { (i.workflow_path) }
                @if let Some(p) = &i.parent {
                    dt { "Parent" } dd { a.mono href=(format!("/instances/{}", p.id)) { (short(&p.id)) } " step " code { (p.key) } }
                }
                @if !i.labels.is_empty() {
                    dt { "Labels" } dd { @for (k, l) in &i.labels { code { (k) "=" (l) } " " } }
                }
                @if !v.children.is_empty() {
                    @let labels = crate::views::unit_labels(&v.steps);
                    dt { "Children" } dd {
                        // Each with the step and attempt that made it; the
                        // first few, and the rest in the list.
                        ul.children {
                            @for c in v.children.iter().take(HEADER_CHILDREN) {
                                li {
                                    @if let Some(p) = &c.parent { code { (labels.get(p.key.as_str()).map_or(p.key.as_str(), String::as_str)) } span.muted { " #" (p.attempt) " → " } }
                                    a.mono href=(format!("/instances/{}", c.id)) { (short(&c.id)) } " " (badge(ShownStatus::of(c).as_str()))
                                }
                            }
                        }
                        @if v.children.len() > HEADER_CHILDREN {
                            a href=(format!("/?parent={}&children=1", i.id)) { "All " (v.children.len()) " children in the list →" }
                        }
                    }
                }
            }
            div {
                h2 { "Inputs" } (json(&i.inputs))
                h2 { "State" } (json(&i.state))
                @if !s.outputs.is_null() { h2 { "Outputs" } (json(&s.outputs)) }
            }
        }
    }
}

/// The pinned definition, highlighted; after an upgrade, each definition
/// its runs used, oldest first, with what changed from the one before (the
/// current one open).
fn definition_section(s: &Shown) -> Markup {
    let texts = crate::views::definition_texts(&s.definitions);
    let last = texts.len().saturating_sub(1);
    html! {
        @if !texts.is_empty() {
            h2 #definition { @if texts.len() > 1 { "Definitions" } @else { "Definition" } }
            @for (i, d) in texts.iter().enumerate() {
                details.definition open[i == last] {
                    summary {
                        span.mono { (short(d.hash)) }
                        @if texts.len() > 1 { " from run " (d.from_run) }
                        @if i == last { " (current)" }
                    }
                    @if let Some(diff) = &d.diff {
                        p.muted { "What changed from " span.mono { (short(texts[i - 1].hash)) } ":" }
                        (super::yaml::diff(diff))
                    }
                    (super::yaml::highlighted(d.source.unwrap_or_default()))
                }
            }
        }
    }
}

fn actions_bar(s: &Shown) -> Markup {
    let i = &s.view.instance;
    let id = &i.id;
    let status = ShownStatus::of(i);
    let open = !i.status.is_ended();
    let running = status == ShownStatus::Stored(crate::vocab::InstanceStatus::Running);
    let act = |a: &str| format!("/instances/{id}/act/{a}");
    html! {
        div.actions role="group" aria-label="actions" {
            @if open { a.button href=(act("signal")) { "Signal…" } }
            @if open { a.button.danger href=(act("cancel")) { "Cancel…" } }
            @if open { a.button.danger href=(act("terminate")) { "Terminate…" } }
            @if open && !running && i.status != crate::vocab::InstanceStatus::Failed { a.button href=(act("resume")) { "Resume…" } }
            @if i.status == crate::vocab::InstanceStatus::Failed { a.button href=(act("retry")) { "Retry failed…" } }
            @if crate::engine::upgrade::preview::movable(status) { a.button href=(act("upgrade")) { "Upgrade…" } }
            @if !open || status == ShownStatus::Interrupted {
                @if let Some(wf) = &s.wf {
                    form method="get" action=(act("restart")) {
                        label { "Restart from "
                            select name="from" {
                                @for st in &wf.steps { option value=(st.id) { (st.id) } }
                            }
                        }
                        " " button type="submit" { "Restart…" }
                    }
                }
            }
        }
    }
}

/// The graph's nodes: one per step of the definition, its status from the
/// step's row (or `pending`).
fn graph_section(s: &Shown) -> Markup {
    let Some(wf) = &s.wf else {
        return html! {};
    };
    let rows = &s.view.steps;
    let nodes: Vec<graph::Node> = wf
        .steps
        .iter()
        .map(|st| {
            let row = rows.iter().find(|r| r.key == st.id);
            let members: Vec<String> = rows
                .iter()
                .filter(|r| {
                    let k = r.key.parts();
                    r.step_id == st.id && k.item.is_some() && !k.compensation
                })
                .map(|r| r.status.as_str().to_string())
                .collect();
            let items = members.len();
            let note = match (&st.action, items) {
                (Action::Workflow(_), 0) => Some("child".to_string()),
                (Action::Workflow(_), n) => Some(format!("{n} children")),
                (_, n) if n > 0 && st.matrix.is_some() => Some(format!("{n} combinations")),
                (_, n) if n > 0 => Some(format!("{n} items")),
                _ => row
                    .filter(|r| r.attempts > 1)
                    .map(|r| format!("{} attempts", r.attempts)),
            };
            graph::Node {
                id: st.id.clone(),
                needs: st.needs.clone(),
                status: row.map_or("pending", |r| r.status.as_str()).to_string(),
                note,
                members,
            }
        })
        .collect();
    html! {
        h2 { "Graph" }
        // Both drawn; the stylesheet shows the one that fits the screen.
        div.graph-wrap.across { (maud::PreEscaped(graph::svg(&nodes, graph::Direction::Across))) }
        div.graph-wrap.down { (maud::PreEscaped(graph::svg(&nodes, graph::Direction::Down))) }
    }
}

fn duration(a: Option<Timestamp>, b: Option<Timestamp>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => crate::workflow::duration::human(std::time::Duration::from_millis(
            (b.ms() - a.ms()).max(0) as u64,
        )),
        (Some(_), None) => "…".into(),
        _ => String::new(),
    }
}

fn steps(s: &Shown, _now: Timestamp) -> Markup {
    let v = &s.view;
    let id = &v.instance.id;
    let labels = crate::views::unit_labels(&v.steps);
    let shown = |key: &str| labels.get(key).cloned().unwrap_or_else(|| key.to_string());
    let attempts_of = |row: &StepRow| -> Vec<&AttemptRow> {
        v.attempts
            .iter()
            .filter(|a| a.step_key == row.key)
            .collect()
    };
    let child_of = |row: &StepRow, a: &AttemptRow| -> Option<&InstanceId> {
        v.children
            .iter()
            .find(|c| {
                c.parent
                    .as_ref()
                    .is_some_and(|p| p.key == row.key && p.attempt == a.attempt)
            })
            .map(|c| &c.id)
    };
    html! {
        h2 { "Steps" }
        div.table-wrap {
            table {
                thead { tr {
                    th { "Step" } th { "Status" } th { "Attempts" } th.hide-narrow { "Outcome" }
                    th { "Error" } th.hide-narrow { "Duration" }
                } }
                tbody {
                    @for row in &v.steps {
                        tr id=(format!("step-{}", row.key)) {
                            td.mono {
                                (shown(&row.key))
                                @if s.wf.as_ref().is_some_and(|wf| wf.step(&row.step_id).is_none()) {
                                    " " span.muted title="not in the instance's definition since an upgrade" { "(removed)" }
                                }
                            }
                            td { (badge(row.status.as_str())) }
                            td {
                                @let list = attempts_of(row);
                                @if list.is_empty() { (row.attempts) } @else {
                                    details {
                                        summary { (row.attempts) }
                                        ul {
                                            @for a in list {
                                                li {
                                                    // A `workflow:` step's attempt made a child: its page, not logs.
                                                    @if let Some(child) = child_of(row, a) {
                                                        a href=(format!("/instances/{child}")) { "attempt " (a.attempt) }
                                                        " → child " a.mono href=(format!("/instances/{child}")) { (short(child)) }
                                                    } @else {
                                                        a href=(format!("/instances/{id}/logs/{}?attempt={}", row.key, a.attempt)) { "attempt " (a.attempt) }
                                                    }
                                                    " (run " (a.run) "): "
                                                    (a.outcome.map_or("running", |o| o.as_str()))
                                                    @if let Some(t) = &a.error_type { " · " code { (t.to_string()) } }
                                                    @if let Some(f) = &a.cached_from {
                                                        " from " a.mono.cached-from href=(format!("/instances/{}", f.instance)) { (short(&f.instance)) } " attempt " (f.attempt)
                                                    }
                                                    @if let Some(c) = a.exit_code { " · exit " (c) }
                                                    " · " (duration(Some(a.started_at), a.finished_at))
                                                    @if let Some(m) = &a.error_message { br; span.muted { (m) } }
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                            td.hide-narrow { (row.outcome.map_or("", |o| o.as_str())) }
                            td {
                                @if let Some(t) = &row.error_type { code { (t.to_string()) } " " }
                                @if let Some(m) = &row.error_message { span.muted { (m) } }
                            }
                            td.hide-narrow { (duration(row.started_at, row.finished_at)) }
                        }
                    }
                }
            }
        }
    }
}

fn trace_section(s: &Shown) -> Markup {
    html! {
        h2 { "Trace" }
        (super::trace::waterfall(&s.view, &s.spans, &s.children, s.wf.as_ref()))
    }
}

fn events(v: &InstanceView, now: Timestamp) -> Markup {
    html! {
        h2 { "Events" }
        @if v.events.is_empty() { p.muted { "No events were delivered." } } @else {
            div.table-wrap { table {
                thead { tr { th { "Event" } th { "Received" } th { "Taken by" } th { "Payload" } } }
                tbody {
                    @for e in &v.events {
                        tr {
                            td { code { (e.name) } }
                            td.time { (when(e.received_at, now)) }
                            td { @if let Some(k) = &e.consumed_by { code { (k) } } @else { span.muted { "not yet" } } }
                            td { code { (e.payload) } }
                        }
                    }
                }
            } }
        }
    }
}

fn started_by(v: &InstanceView) -> Markup {
    let i = &v.instance;
    html! {
        h2 { "Started by" }
        p {
            @if let Some(f) = &v.fire {
                "schedule " code { (crate::engine::fire::entry_name(&f.workflow, f.index)) } " (" code { (f.spec) } "), fire time " (f.fire_at.to_string())
            } @else if let Some(hook) = i.labels.get(crate::engine::registry::HOOK_LABEL) {
                "webhook " code { "/hooks/" (hook) }
            } @else if let Some(p) = &i.parent {
                "step " code { (p.key) } " of " a.mono href=(format!("/instances/{}", p.id)) { (short(&p.id)) }
            } @else if let Some(by) = &i.started_by {
                code { (by) }
            } @else {
                "a command or an API call"
            }
            @if let (Some(by), true) = (&i.started_by, v.fire.is_some() || i.parent.is_some() || i.labels.contains_key(crate::engine::registry::HOOK_LABEL)) {
                " (" code { (by) } ")"
            }
        }
    }
}

/// Who did what to the instance, oldest first (`wf inspect`'s ACTION / BY
/// / AT / DETAIL).
fn actions(v: &InstanceView, now: Timestamp) -> Markup {
    html! {
        h2 #actions { "Actions" }
        @if v.actions.is_empty() { p.muted { "No action was recorded." } } @else {
            (actions_table(&v.actions, now))
        }
    }
}

/// Actions as a table: action, by, at, detail (the instance page's, the
/// Database page's).
pub(super) fn actions_table(actions: &[crate::store::ActionRow], now: Timestamp) -> Markup {
    html! {
        div.table-wrap { table.actions {
            thead { tr { th { "Action" } th { "By" } th { "At" } th { "Detail" } } }
            tbody {
                @for a in actions {
                    tr {
                        td { (a.action.as_str()) }
                        td { code { (a.actor) } }
                        td.time { (when(a.at, now)) }
                        td { (a.detail) }
                    }
                }
            }
        } }
    }
}

/// `GET /instances/{id}/logs/{step}`' parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogsParams {
    #[serde(default)]
    attempt: Option<Text>,
}

/// `GET /instances/{id}/logs/{step}?attempt=N`: an attempt's output; while
/// it runs, streamed (the API's server-sent events).
pub async fn logs(
    State(app): State<App>,
    Path((id, step)): Path<(String, String)>,
    PageQuery(p): PageQuery<LogsParams>,
) -> Response {
    // A number that is not one shows the last attempt, as none does.
    let attempt = p.attempt.and_then(|a| a.as_str().parse().ok());
    let id = match instance_ref(&id) {
        Ok(id) => id,
        Err(e) => return super::error_page(&e),
    };
    let read = app
        .db
        .run(move |l| async move {
            let c = l.conn().await?;
            let id: InstanceId = c.resolve_id(&id).await?;
            let step = logs::unit_key(&c, &id, &step).await?;
            let running = c
                .attempts(&id)
                .await?
                .into_iter()
                .filter(|a| a.step_key == step && attempt.is_none_or(|n| a.attempt == n))
                .max_by_key(|a| a.attempt)
                .filter(|a| a.outcome.is_none())
                .map(|a| a.attempt);
            let logged = match logs::read(&c, &id, Some(&step), attempt).await {
                Ok(l) => l,
                // Running, it has no stored output yet: the stream shows it.
                Err(_) if running.is_some() => Vec::new(),
                Err(e) => return Err(e.into()),
            };
            Ok((id, step, running, logged))
        })
        .await;
    let (id, step, running, logged) = match read {
        Ok(r) => r,
        Err(e) => return super::error_page(&e),
    };
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let body = html! {
        h1 { "Logs of " code { (step) } }
        p { a href=(format!("/instances/{id}#step-{step}")) { "← instance " span.mono { (short(&id)) } } }
        @if let Some(n) = running {
            div data-stream=(format!("/api/v1/instances/{id}/logs/{step}?follow=1&attempt={n}")) {
                p.state role="status" { "attempt " (n) ": running" }
                h2 { "stdout" } pre.log.out aria-live="polite" {}
                h2 { "stderr" } pre.log.err.err aria-live="polite" {}
            }
        } @else {
            @for l in &logged {
                p.state { "attempt " (l.attempt) ": " (l.outcome.map_or("running", |o| o.as_str())) }
                h2 { "stdout" } pre.log.out { (text(&l.stdout)) }
                h2 { "stderr" } pre.log.err { (text(&l.stderr)) }
            }
        }
    };
    Html(shell::page("Logs", Nav::Instances, body).into_string()).into_response()
}
