//! `GET /workflows`: the registered workflows, their schedules' next fire
//! times and their webhooks; `GET /workflows/{name}/start`: a form made
//! from the workflow's `inputs:` that starts an instance (as the API's
//! start does: recorded for the workers). `GET /queues`: the queue keys;
//! `GET /queues/{key}`: one key's admitted instances and its line, in the
//! order it admits them.

use super::super::App;
use super::super::error::ApiError;
use super::super::query::{Form, Many};
use super::list::when;
use super::shell::{Nav, page};
use crate::engine::registry;
use crate::views::{QueueView, WorkflowView};
use crate::vocab::Timestamp;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use maud::html;
use serde::Deserialize;
use serde_json::{Map, Value};

pub async fn workflows(
    State(app): State<App>,
    axum::extract::Extension(who): axum::extract::Extension<super::super::auth::Principal>,
) -> Response {
    // A `read` token's page has no *Start…* buttons.
    let starts = who.scope >= crate::vocab::TokenScope::Operate;
    let read = app
        .db
        .run(|l| async move {
            let c = l.conn().await?;
            Ok(registry::listing(&c).await?)
        })
        .await;
    let now = Timestamp::now();
    super::respond(read.map(|listing| {
        let views = WorkflowView::all(&listing);
        let body = html! {
            h1 { "Workflows" }
            @if views.is_empty() {
                p.muted { "No workflow is registered: " code { "wf workflow add FILE" } " registers one." }
            } @else {
                div.table-wrap { table {
                    thead { tr { th { "Workflow" } th { "Last" } th { "7 days" } th.hide-narrow { "Schedules" } th.hide-narrow { "Webhook" } th.hide-narrow { "File" } th.hide-narrow { "" } } }
                    tbody {
                        @for w in &views {
                            @let name = w.name;
                            tr {
                                td {
                                    a href=(format!("/?workflow={name}")) { (name) }
                                    @if let Some(d) = w.description { br; span.muted { (d) } }
                                    // On a narrow screen the button is here, not in a column of its own.
                                    @if starts { div.show-narrow { a.button href=(format!("/workflows/{name}/start")) { "Start…" } } }
                                }
                                @let st = w.stats.as_ref();
                                td {
                                    @if let Some(l) = st.and_then(|s| s.last_instance.as_ref()) {
                                        a.mono href=(format!("/instances/{}", l.id)) { (super::list::short(l.id)) } " "
                                        (super::list::badge(l.status.as_str())) " " (when(l.created_at, now))
                                    } @else { span.muted { "never run" } }
                                }
                                td.stats { @if let Some(s) = st { (stats_cell(s)) } }
                                td.hide-narrow {
                                    @for s in &w.schedules {
                                        code { (s.spec) }
                                        @if let Some(tz) = s.timezone { " (" (tz) ")" }
                                        " next " (when(s.next_fire_at, now))
                                        br;
                                    }
                                }
                                td.hide-narrow { @if let Some(h) = &w.webhook { code { "POST " (h.path) } } }
                                td.mono.hide-narrow { (w.workflow_path) }
                                td.hide-narrow { @if starts { a.button href=(format!("/workflows/{name}/start")) { "Start…" } } }
                            }
                        }
                    }
                } }
            }
        };
        page("Workflows", Nav::Workflows, body)
    }))
}

/// A workflow's last 7 days: its success rate, p50/p95 duration, and a
/// small chart: per day, a bar of its completed (and, stacked, failed)
/// instances, and a line of that day's p50 duration. SVG from the server.
fn stats_cell(s: &crate::views::StatsView<'_>) -> maud::Markup {
    let took = |m: i64| {
        crate::workflow::duration::human(std::time::Duration::from_millis(m.max(0) as u64))
    };
    let (w, h, gap) = (12.0_f64, 28.0_f64, 2.0_f64);
    let most = s
        .days
        .iter()
        .map(|d| d.completed + d.failed)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let slowest = s
        .days
        .iter()
        .filter_map(|d| d.p50_ms)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let points: Vec<String> = s
        .days
        .iter()
        .enumerate()
        .filter_map(|(i, d)| {
            let x = i as f64 * (w + gap) + w / 2.0;
            d.p50_ms
                .map(|p| format!("{x:.1},{:.1}", h - (p as f64 / slowest) * (h - 2.0) - 1.0))
        })
        .collect();
    let label = format!(
        "{} completed, {} failed in 7 days{}",
        s.completed,
        s.failed,
        s.p50_ms
            .map(|p| format!("; p50 {}", took(p)))
            .unwrap_or_default()
    );
    html! {
        @if s.completed + s.failed == 0 {
            span.muted { "none ended" }
        } @else {
            span.rate { (format!("{:.0}%", s.success_rate.unwrap_or(0.0) * 100.0)) " ok" }
            " · p50 " (s.p50_ms.map(took).unwrap_or_default()) " · p95 " (s.p95_ms.map(took).unwrap_or_default())
            br;
            svg.trend role="img" aria-label=(label) width=(format!("{:.0}", s.days.len() as f64 * (w + gap))) height=(format!("{h:.0}")) viewBox=(format!("0 0 {:.0} {h:.0}", s.days.len() as f64 * (w + gap))) {
                title { (label) }
                @for (i, d) in s.days.iter().enumerate() {
                    @let x = i as f64 * (w + gap);
                    @let ok_h = d.completed as f64 / most * h;
                    @let fail_h = d.failed as f64 / most * h;
                    rect.ok x=(format!("{x:.1}")) y=(format!("{:.1}", h - ok_h)) width=(format!("{w:.0}")) height=(format!("{ok_h:.1}")) {}
                    rect.fail x=(format!("{x:.1}")) y=(format!("{:.1}", h - ok_h - fail_h)) width=(format!("{w:.0}")) height=(format!("{fail_h:.1}")) {}
                }
                @if points.len() > 1 {
                    polyline.p50 points=(points.join(" ")) {}
                }
            }
        }
    }
}

/// What the start form shows of a registered workflow: its row, its
/// definition (None: unreadable) and every schedule.
type Registered = (
    crate::store::WorkflowRow,
    Option<crate::workflow::Workflow>,
    Vec<crate::store::ScheduleRow>,
);

/// The registered workflow `name`, as the form shows it.
async fn read_registered(app: &App, name: String) -> Result<Registered, ApiError> {
    app.db
        .run(move |l| async move {
            let c = l.conn().await?;
            let row = super::super::api::registered(&c, &name).await?;
            let schedules = c.schedules().await?;
            let wf = registry::definition(&c, &row).await.ok();
            Ok((row, wf, schedules))
        })
        .await
}

fn start_page((row, wf, schedules): &Registered, error: Option<&str>) -> maud::Markup {
    let w = WorkflowView::new(row, wf.as_ref(), schedules);
    let name = w.name;
    let body = html! {
        h1 { "Start " (name) }
        @if let Some(d) = w.description { p { (d) } }
        @if let Some(e) = error { p.notice.error role="alert" { (e) } }
        p.muted { "The instance is recorded for the workers (" code { "wf worker" } ", or " code { "wf serve --worker" } "), as " code { "wf run --detach" } " records it." }
        form.stack method="post" action=(format!("/workflows/{name}/start")) {
            @for i in &w.inputs {
                @let default = match i.default { None | Some(Value::Null) => String::new(), Some(Value::String(s)) => s.clone(), Some(other) => other.to_string() };
                label {
                    span { code { (i.name) } @if i.required { " (required)" } }
                    @if let Some(d) = i.description { span.muted { (d) } }
                    input type="text" name=(format!("input.{}", i.name)) value=(default) required[i.required];
                }
            }
            label { "Labels (one name=value a line, optional)" textarea name="labels" {} }
            label { "Idempotency key (optional: the same key starts one instance)" input type="text" name="key"; }
            div.actions { button.primary type="submit" { "Start" } a.button href="/workflows" { "Back" } }
        }
    };
    page(&format!("Start {name}"), Nav::Workflows, body)
}

pub async fn start_form(State(app): State<App>, Path(name): Path<String>) -> Response {
    super::respond(
        read_registered(&app, name)
            .await
            .map(|w| start_page(&w, None)),
    )
}

/// The start form: `input.NAME` for each input, `labels` (one
/// `NAME=VALUE` a line) and `key` (the idempotency key).
#[derive(Debug, Deserialize)]
pub struct StartForm {
    #[serde(default)]
    labels: Many,
    #[serde(default)]
    key: Many,
    /// The inputs' fields, and any other, which is refused.
    #[serde(flatten)]
    rest: Map<String, Value>,
}

pub async fn start(
    State(app): State<App>,
    axum::extract::Extension(who): axum::extract::Extension<super::super::auth::Principal>,
    Path(name): Path<String>,
    Form(form): Form<StartForm>,
) -> Response {
    let w = match read_registered(&app, name.clone()).await {
        Ok(w) => w,
        Err(e) => return super::error_page(&e),
    };
    // Every field is text, as `wf run --input` gives it: the engine reads
    // it as the input's declared type (a number, a list…) or refuses it,
    // naming the input, before anything starts.
    let mut inputs = Map::new();
    let mut labels = Vec::new();
    let mut error = None;
    for (k, v) in form.rest {
        let Some(input) = k.strip_prefix("input.") else {
            // The form's own fields only, as the API's bodies are read.
            error = Some(super::super::params::unknown_form_field(&k));
            continue;
        };
        // Given more than once: the last that is not empty.
        let given = match v {
            Value::Array(all) => all,
            one => vec![one],
        };
        if let Some(v) = given
            .into_iter()
            .rfind(|v| v.as_str().is_some_and(|s| !s.is_empty()))
        {
            inputs.insert(input.to_string(), v);
        }
    }
    for line in form
        .labels
        .0
        .iter()
        .flat_map(|v| v.lines())
        .map(str::trim)
        .filter(|l| !l.is_empty())
    {
        match crate::workflow::parse_label(line) {
            Ok(l) => labels.push(l),
            Err(e) => error = Some(e),
        }
    }
    let key = form
        .key
        .0
        .iter()
        .map(|k| k.trim())
        .rfind(|k| !k.is_empty())
        .map(str::to_string);
    if let Some(e) = error {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Html(start_page(&w, Some(&e)).into_string()),
        )
            .into_response();
    }
    let started = app
        .db
        .run(move |l| async move {
            super::super::actions::start_in(&l, &name, inputs, labels, key, who.actor).await
        })
        .await;
    match started {
        Ok(started) => {
            let id = &started.instance.id;
            let said = if started.created {
                super::Notice::Started
            } else {
                super::Notice::StartedBefore
            };
            Redirect::to(&format!("/instances/{id}?notice={}", said.code())).into_response()
        }
        Err(e) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            Html(start_page(&w, Some(&e.message)).into_string()),
        )
            .into_response(),
    }
}

pub async fn queues(State(app): State<App>) -> Response {
    let read = app
        .db
        .run(|l| async move {
            let c = l.conn().await?;
            Ok(c.queues().await?)
        })
        .await;
    super::respond(read.map(|queues| {
        let now = Timestamp::now();
        let views: Vec<QueueView<'_>> = queues.iter().map(|q| QueueView::new(q, now)).collect();
        let body = html! {
            h1 { "Queues" }
            @if views.is_empty() {
                p.muted { "No queue has admitted or queued instances." }
            } @else {
                div.table-wrap { table {
                    thead { tr { th { "Key" } th { "Admitted" } th { "Queued" } th { "Limit" } th { "Rate left" } th.hide-narrow { "Oldest queued" } } }
                    tbody {
                        @for q in &views {
                            tr {
                                td { a href=(queue_href(q.key)) { code { (q.key) } } }
                                @let of_key = |status: &str| {
                                    let mut u = form_urlencoded::Serializer::new(String::new());
                                    u.append_pair("queue", q.key);
                                    if !status.is_empty() { u.append_pair("status", status); }
                                    format!("/?{}", u.finish())
                                };
                                td { a href=(of_key("")) { (q.admitted) } }
                                td { a href=(of_key("queued")) { (q.queued) } }
                                td { @if let Some(l) = q.limit { (l) } @else { "-" } }
                                td { @if let (Some(r), Some(left)) = (&q.rate, q.rate_left) { (left) " of " (r) } @else { "-" } }
                                td.hide-narrow { @if let Some(t) = q.oldest_queued_at { (t) } @else { "-" } }
                            }
                        }
                    }
                } }
            }
        };
        page("Queues", Nav::Queues, body)
    }))
}

/// The address of key `key`'s page (a key may hold any character).
pub fn queue_href(key: &str) -> String {
    format!(
        "/queues/{}",
        percent_encoding::utf8_percent_encode(key, percent_encoding::NON_ALPHANUMERIC)
    )
}

/// `GET /queues/{key}`: where the key stands, the instances holding its
/// slots and those waiting, in the order they are admitted.
pub async fn queue(State(app): State<App>, Path(key): Path<String>) -> Response {
    let k = key.clone();
    let read = app
        .db
        .run(move |l| async move {
            let c = l.conn().await?;
            Ok(crate::engine::actions::queue_show(&c, &k, super::super::api::QUEUE_LIMIT).await?)
        })
        .await;
    let now = Timestamp::now();
    super::respond(read.map(|shown| {
        let v = crate::views::QueueLineView::new(&key, &shown, now);
        let table = |members: &[crate::views::MemberView<'_>], total: i64, line: bool| {
            html! {
                @if members.is_empty() {
                    p.muted { "None." }
                } @else {
                    div.table-wrap { table.line {
                        thead { tr {
                            @if line { th { "#" } }
                            th { "Instance" } th { "Workflow" } th { "Status" } th { "Priority" } th { "Age" }
                            @if line { th.hide-narrow { "Not before" } }
                        } }
                        tbody {
                            @for m in members {
                                tr {
                                    @if line { td { (m.position.unwrap_or_default()) } }
                                    td { a.mono href=(format!("/instances/{}", m.id)) { (super::list::short(m.id)) } }
                                    td { (m.workflow) }
                                    td { (super::list::badge(m.status.as_str())) }
                                    td { (m.priority) }
                                    td { (when(m.created_at, now)) }
                                    @if line { td.hide-narrow { @if let Some(t) = m.not_before { (when(t, now)) } @else { "-" } } }
                                }
                            }
                        }
                    } }
                    @if total > members.len() as i64 {
                        p.muted { "… and " (total - members.len() as i64) " more." }
                    }
                }
            }
        };
        let body = html! {
            h1 { "Queue " code { (key) } }
            dl.facts {
                dt { "Concurrency" } dd { @if let Some(l) = v.limit { (l) } @else { "no limit" } }
                @if let (Some(r), Some(left)) = (&v.rate, v.rate_left) {
                    dt { "Rate" } dd { (left) " of " (r) " left" }
                }
                dt { "Admitted" } dd { (v.admitted_total) }
                dt { "Waiting" } dd { (v.waiting_total) }
            }
            h2 { "Admitted, oldest first" }
            (table(&v.admitted, v.admitted_total, false))
            h2 { "Waiting, in the order they are admitted" }
            p.muted { "By priority (0 first), then by age." }
            (table(&v.waiting, v.waiting_total, true))
            p { a href="/queues" { "← all queues" } }
        };
        page(&format!("Queue {key}"), Nav::Queues, body)
    }))
}
