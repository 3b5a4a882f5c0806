//! The inspector's actions. `GET /instances/{id}/act/{action}` is the
//! confirmation: what will happen (for a restart, the steps that will run
//! again, as `wf restart` says), and a form; posting it does what the
//! API's route of the same name does (`serve::actions`), then shows the
//! instance with what happened. The form is posted with the session
//! cookie, from this site only (`auth::require` refuses it from another).

use super::super::App;
use super::super::actions as act_api;
use super::super::error::ApiError;
use super::super::params::instance_ref;
use super::super::query::{Form, PageQuery, Text};
use super::super::upgrade;
use super::Notice;
use super::list::short;
use super::shell::{Nav, page};
use crate::engine::upgrade as upgrade_engine;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;

/// The actions, and what each says before it is done.
fn describe(action: &str) -> Option<(&'static str, &'static str)> {
    Some(match action {
        "signal" => (
            "Signal",
            "Deliver an event. A step waiting for it takes it; one that is not waiting yet finds it when it gets there.",
        ),
        "cancel" => (
            "Cancel",
            "Stop the instance: nothing new starts, running steps are stopped, and the compensations of completed steps run.",
        ),
        "terminate" => (
            "Terminate",
            "Stop the instance without running any compensation (for when one is broken).",
        ),
        "resume" => (
            "Resume",
            "Continue the instance now, in this server: a timer not yet due fires at once.",
        ),
        "retry" => (
            "Retry failed",
            "Give the failed steps a fresh attempt budget and continue, in this server.",
        ),
        "restart" => (
            "Restart",
            "Run the chosen step and everything downstream of it again, in a new run; the other steps keep their results.",
        ),
        "upgrade" => (
            "Upgrade",
            "Move the instance onto the definition registered under its workflow's name (`wf workflow add` of the new version). Completed steps the new definition still has keep their results; new and changed steps run at the next resume. Nothing runs now.",
        ),
        _ => return None,
    })
}

/// `GET /instances/{id}/act/{action}`' parameters: the step a restart
/// is from, when it was chosen on the instance's page.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfirmParams {
    #[serde(default)]
    from: Option<Text>,
    /// An upgrade's renames (`OLD=NEW`, separated by commas or spaces).
    #[serde(default)]
    map: Option<Text>,
    #[serde(default)]
    allow_gaps: Option<Text>,
    #[serde(default)]
    children: Option<Text>,
}

pub async fn confirm(
    State(app): State<App>,
    axum::extract::Extension(who): axum::extract::Extension<super::super::auth::Principal>,
    Path((id, action)): Path<(String, String)>,
    PageQuery(p): PageQuery<ConfirmParams>,
) -> Response {
    let Some((title, what)) = describe(&action) else {
        return super::error_page(&ApiError::not_found(format!(
            "no action `{}`",
            action.chars().take(32).collect::<String>()
        )));
    };
    let id = match instance_ref(&id) {
        Ok(id) => id,
        Err(e) => return super::error_page(&e),
    };
    let from = p.from.map(|t| t.0);
    let (wants_retry, wants_signal) = (action == "retry", action == "signal");
    let wants_upgrade = action == "upgrade";
    let map_text = p.map.map(|t| t.0).unwrap_or_default();
    let allow_gaps = p.allow_gaps.is_some();
    let children = p.children.is_some();
    let asked = match renames(&map_text) {
        Ok(renames) => upgrade::Asked {
            renames,
            allow_gaps,
            children,
            dry_run: true,
        },
        Err(e) => return super::error_page(&e),
    };
    let plan = {
        let from = from.clone();
        app.db
            .run(move |l| async move {
                let c = l.conn().await?;
                let id = c.resolve_id(&id).await?;
                let steps = match &from {
                    Some(f) => Some(crate::engine::actions::restart_plan(&c, &id, f).await?),
                    None => None,
                };
                let retry = if wants_retry {
                    Some(crate::engine::actions::retry_plan(&c, &id).await?)
                } else {
                    None
                };
                let events = if wants_signal {
                    crate::engine::actions::signal_events(&c, &id).await?
                } else {
                    Vec::new()
                };
                drop(c);
                let upgraded = if wants_upgrade {
                    Some(upgrade::upgrade_one(&l, &id, &asked, &who.actor).await?)
                } else {
                    None
                };
                Ok((id, steps, retry, events, upgraded))
            })
            .await
    };
    let (id, steps, retry, events, upgraded) = match plan {
        Ok(p) => p,
        Err(e) => return super::error_page(&e),
    };
    let target = format!("/instances/{id}/act/{action}");
    let body: Markup = html! {
        h1 { (title) " " span.mono { (short(&id)) } }
        p { (what) }
        form.stack method="post" action=(target) {
            @match action.as_str() {
                "signal" => {
                    (signal_fields(&events, events.first().map_or("", String::as_str), ""))
                }
                "retry" => {
                    @if let Some(plan) = &retry {
                        @if !plan.failed.is_empty() {
                            p { "Failed, given a fresh attempt budget: " @for (n, s) in plan.failed.iter().enumerate() { @if n > 0 { ", " } code { (s) } } "." }
                        }
                        @if let Some(rerun) = &plan.rerun {
                            p.notice role="status" { "This retry is " (rerun) "." }
                        }
                    }
                }
                "resume" => {
                    label { input type="checkbox" name="now" value="1" checked; " Fire a timer that is not yet due" }
                    label { input type="checkbox" name="no_cache" value="1"; " Run " code { "cache:" } " steps without taking a kept result" }
                }
                "upgrade" => {
                    @if let Some(one) = &upgraded {
                        (plan_section(&one.done))
                        @for child in &one.children {
                            h2 { "Child " span.mono { (short(&child.id)) } }
                            (plan_section(child))
                        }
                    }
                    (upgrade_fields(&map_text, allow_gaps, children))
                }
                "restart" => {
                    @if let (Some(f), Some(steps)) = (&from, &steps) {
                        input type="hidden" name="from" value=(f);
                        p.notice role="status" { "Restarting " (short(&id)) " " (crate::engine::actions::restart_words(f, steps)) "." }
                        label { "Restart a copy instead, with this id (optional)" input type="text" name="as" placeholder="new id"; }
                    } @else {
                        p.notice.error { "Choose the step to restart from on the instance page." }
                    }
                }
                _ => {}
            }
            div.actions {
                button.primary.danger[matches!(action.as_str(), "cancel" | "terminate")] type="submit" { "Confirm: " (title) }
                @if wants_upgrade {
                    // The plan again with the fields as they are now: a
                    // dry run, which writes nothing.
                    button type="submit" formmethod="get" { "Preview again" }
                }
                a.button href=(format!("/instances/{id}")) { "Back" }
            }
        }
    };
    Html(page(title, Nav::Instances, body).into_string()).into_response()
}

/// The signal form's fields: the event name, offering the events the
/// instance takes (those it waits for now first), and the payload;
/// `event` and `data` as last typed.
fn signal_fields(events: &[String], event: &str, data: &str) -> Markup {
    html! {
        label { "Event name"
            input type="text" name="event" list="events" required autofocus value=(event);
        }
        @if !events.is_empty() {
            datalist #events { @for e in events { option value=(e) {} } }
            p.muted { "It takes: " @for (n, e) in events.iter().enumerate() { @if n > 0 { ", " } code { (e) } } "." }
        }
        label { "Payload (JSON, optional)" textarea name="data" placeholder="{\"approved\": true}" { (data) } }
    }
}

/// An upgrade's plan: a line, a table of its steps (STEP / PLAN / NOW),
/// the inputs it adds and why it is refused, if it is.
fn plan_section(d: &upgrade_engine::Done) -> Markup {
    html! {
        @if let Some(why) = d.why_not() {
            p.notice.error role="alert" { (why) }
        }
        @if d.outcome == upgrade_engine::Verdict::Current {
            p.notice role="status" { "It is on the registered definition already: nothing to do." }
        }
        @if let Some(plan) = &d.plan {
            p {
                @if plan.is_refused() { "Would not be upgraded" } @else { "Would be upgraded" }
                " from " span.mono { (short(&plan.from)) } " to " span.mono { (short(&plan.to)) } ":"
            }
            div.table-wrap {
                table.plan {
                    thead { tr { th { "Step" } th { "Plan" } th { "Now" } } }
                    tbody {
                        @for st in &plan.steps {
                            tr {
                                td.mono { (st.step) @if let Some(f) = &st.from { " (was " (f) ")" } }
                                td { (st.fate.as_str()) }
                                td { (st.status.map_or("-", |x| x.as_str())) }
                            }
                        }
                    }
                }
            }
            @for (name, value) in &plan.inputs_added {
                p { "Input " code { (name) } " is added: " code { (value) } }
            }
            @if let Some(q) = &plan.queue {
                p { "Queue: " (q.words()) }
            }
        }
    }
}

/// An upgrade's fields: the renames and whether gaps are allowed.
fn upgrade_fields(map: &str, allow_gaps: bool, children: bool) -> Markup {
    html! {
        label { "Renamed steps (OLD=NEW, separated by commas; optional)"
            input type="text" name="map" value=(map) placeholder="fetch=download";
        }
        label { input type="checkbox" name="allow_gaps" value="1" checked[allow_gaps]; " Run a new step that comes before a completed one at the next resume, instead of refusing" }
        label { input type="checkbox" name="children" value="1" checked[children]; " Upgrade its children too, onto the definitions the new one calls" }
    }
}

/// The renames of a form's `map` field: `OLD=NEW` pairs, separated by
/// commas or spaces.
fn renames(text: &str) -> Result<Vec<(String, String)>, ApiError> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|p| !p.is_empty())
        .map(|p| {
            upgrade_engine::plan::parse_rename(p).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "renamed steps: `{}` is not OLD=NEW",
                    p.chars().take(64).collect::<String>()
                ))
            })
        })
        .collect()
}

/// The confirmation's form, each action's fields: `event` and `data`
/// (signal), `from` and `as` (restart), `now` and `no_cache` (resume), `map` and
/// `allow_gaps` (upgrade).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActForm {
    #[serde(default)]
    event: Option<Text>,
    #[serde(default)]
    data: Option<Text>,
    #[serde(default)]
    from: Option<Text>,
    #[serde(default, rename = "as")]
    as_id: Option<Text>,
    #[serde(default)]
    now: Option<Text>,
    #[serde(default)]
    no_cache: Option<Text>,
    #[serde(default)]
    map: Option<Text>,
    #[serde(default)]
    allow_gaps: Option<Text>,
    #[serde(default)]
    children: Option<Text>,
}

pub async fn act(
    State(app): State<App>,
    axum::extract::Extension(who): axum::extract::Extension<super::super::auth::Principal>,
    Path((id, action)): Path<(String, String)>,
    Form(form): Form<ActForm>,
) -> Response {
    if describe(&action).is_none() {
        return super::error_page(&ApiError::not_found("no such action"));
    }
    let id = match instance_ref(&id) {
        Ok(id) => id,
        Err(e) => return super::error_page(&e),
    };
    // A field left empty is one not given.
    let field = |t: Option<Text>| t.map(|t| t.0.trim().to_string()).filter(|v| !v.is_empty());
    let (event, data, from, as_id) = (
        field(form.event),
        field(form.data),
        field(form.from),
        field(form.as_id),
    );
    let resume = crate::engine::actions::Resume {
        now: field(form.now).is_some(),
        retry: false,
        no_cache: field(form.no_cache).is_some(),
    };
    let upgrade_asked = match renames(&field(form.map).unwrap_or_default()) {
        Ok(renames) => upgrade::Asked {
            renames,
            allow_gaps: field(form.allow_gaps).is_some(),
            children: field(form.children).is_some(),
            dry_run: false,
        },
        Err(e) => return super::error_page(&e),
    };
    let signaled = action == "signal";
    let typed = (event.clone(), data.clone());
    let id2 = id.clone();
    let done = app
        .db
        .run(move |l| async move {
            let by = &who.actor;
            // Where the page goes next: the instance acted on (a restart's
            // copy), with what was done.
            let done: (crate::vocab::InstanceId, Notice) = match action.as_str() {
                "signal" => {
                    let event =
                        event.ok_or_else(|| ApiError::bad_request("an event name is required"))?;
                    let data = match data {
                        None => Value::Null,
                        Some(t) => serde_json::from_str(&t).map_err(|e| {
                            ApiError::bad_request(format!("the payload is not JSON: {e}"))
                        })?,
                    };
                    let (id, delivered) = act_api::signal_in(&l, &id2, &event, data, by).await?;
                    match delivered.warning {
                        Some(_) => (id, Notice::SignaledUnawaited),
                        None => (id, Notice::Signaled),
                    }
                }
                "cancel" => (
                    act_api::cancel_in(&l, &id2, false, by, "").await?,
                    Notice::Canceling,
                ),
                "terminate" => (
                    act_api::cancel_in(&l, &id2, true, by, "").await?,
                    Notice::Canceling,
                ),
                "resume" => (
                    act_api::go_on_in(&l, &id2, resume, by).await?.0,
                    Notice::Resuming,
                ),
                "retry" => (
                    act_api::go_on_in(
                        &l,
                        &id2,
                        crate::engine::actions::Resume {
                            now: false,
                            retry: true,
                            no_cache: false,
                        },
                        by,
                    )
                    .await?
                    .0,
                    Notice::Resuming,
                ),
                "restart" => {
                    let from = from.ok_or_else(|| ApiError::bad_request("a step is required"))?;
                    let (target, _) =
                        act_api::restart_in(&l, &id2, &from, as_id.as_deref(), by).await?;
                    (target, Notice::Restarting)
                }
                "upgrade" => {
                    let one = upgrade::upgrade_one(&l, &id2, &upgrade_asked, by).await?;
                    upgrade::refusal(&one.done)?;
                    (one.done.id, Notice::Upgraded)
                }
                _ => return Err(ApiError::not_found("no such action")),
            };
            Ok(done)
        })
        .await;
    match done {
        Ok((target, said)) => {
            Redirect::to(&format!("/instances/{target}?notice={}", said.code())).into_response()
        }
        Err(e) => {
            let status = if e.status().is_server_error() {
                e.status()
            } else {
                StatusCode::UNPROCESSABLE_ENTITY
            };
            if signaled && !e.status().is_server_error() {
                // The form again, with what was typed and what was wrong.
                let events = {
                    let id = id.clone();
                    app.db
                        .run(move |l| async move {
                            let c = l.conn().await?;
                            let id = c.resolve_id(&id).await?;
                            Ok(crate::engine::actions::signal_events(&c, &id).await?)
                        })
                        .await
                        .unwrap_or_default()
                };
                let body = html! {
                    h1 { "Signal " span.mono { (short(&id)) } }
                    p.notice.error role="alert" { (e.message) }
                    form.stack method="post" action=(format!("/instances/{id}/act/signal")) {
                        (signal_fields(&events, typed.0.as_deref().unwrap_or_default(), typed.1.as_deref().unwrap_or_default()))
                        div.actions {
                            button.primary type="submit" { "Confirm: Signal" }
                            a.button href=(format!("/instances/{id}")) { "Back" }
                        }
                    }
                };
                return (
                    status,
                    Html(page("Signal", Nav::Instances, body).into_string()),
                )
                    .into_response();
            }
            let body = html! {
                h1 { "Not done" }
                p.notice.error role="alert" { (e.message) }
                p { a href=(format!("/instances/{id}")) { "← back to the instance" } }
            };
            (
                status,
                Html(page("Not done", Nav::Instances, body).into_string()),
            )
                .into_response()
        }
    }
}
