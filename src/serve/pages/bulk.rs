//! One action over many instances in the inspector: the list's checked
//! rows, or every instance its filters match, canceled, retried or resumed
//! after one confirmation (`GET /bulk`) that lists what the action would
//! do to each (the words `wf cancel … --dry-run` prints), then done
//! (`POST /bulk`, the instances the confirmation listed, by id) and
//! reported per instance, through the same use cases as the API's
//! `/api/v1/bulk/{action}` (`serve/bulk.rs`).

use super::super::App;
use super::super::auth::Principal;
use super::super::bulk::bulk_in;
use super::super::error::ApiError;
use super::super::query::{Form, Many, PageQuery, Text};
use super::list::{Filters, badge, short};
use super::shell::{self, Nav};
use crate::engine::actions::bulk::{Bulk, MAX, Selection};
use crate::views::BulkLine;
use axum::extract::{Extension, State};
use axum::response::{Html, IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;

/// `GET /bulk`'s parameters: the action, the rows checked (`pick`) or
/// `which=matching` with the list's filters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulkParams {
    #[serde(default)]
    action: Text,
    #[serde(default)]
    which: Text,
    #[serde(default)]
    pick: Many,
    #[serde(default)]
    status: Text,
    #[serde(default)]
    workflow: Text,
    #[serde(default)]
    label: Text,
    #[serde(default)]
    parent: Text,
    #[serde(default)]
    since: Text,
    #[serde(default)]
    queue: Text,
    #[serde(default)]
    id: Text,
    #[serde(default)]
    error: Text,
    #[serde(default)]
    children: Text,
}

fn action_of(word: &str) -> Result<Bulk, ApiError> {
    Bulk::parse(word).ok_or_else(|| ApiError::bad_request("choose cancel, retry or resume"))
}

fn title(action: Bulk) -> &'static str {
    match action {
        Bulk::Cancel => "Cancel instances",
        Bulk::RetryFailed => "Retry failed instances",
        Bulk::Resume => "Resume instances",
    }
}

/// `GET /bulk`: the plan of each instance, and the form that does it.
pub async fn confirm(
    State(app): State<App>,
    Extension(who): Extension<Principal>,
    PageQuery(p): PageQuery<BulkParams>,
) -> Response {
    let action = match action_of(p.action.as_str()) {
        Ok(a) => a,
        Err(e) => return super::error_page(&e),
    };
    let sel = if p.which.as_str() == "matching" {
        let get = |t: &Text| t.as_str().trim().to_string();
        let filters = Filters {
            status: get(&p.status),
            workflow: get(&p.workflow),
            label: get(&p.label),
            parent: get(&p.parent),
            since: get(&p.since),
            queue: get(&p.queue),
            id: get(&p.id),
            error: get(&p.error),
            children: matches!(p.children.as_str(), "1" | "true" | "on"),
            open: Vec::new(),
        };
        match filters.to_query(None) {
            Ok(q) => Selection::Matching(q),
            Err(e) => return super::error_page(&e),
        }
    } else {
        let picked: Vec<String> = p.pick.0.iter().filter(|s| !s.is_empty()).cloned().collect();
        if picked.is_empty() {
            return super::error_page(&ApiError::bad_request(
                "no instance is checked: check some in the list, or act on every instance the filters match",
            ));
        }
        Selection::Ids(picked)
    };
    let planned = app
        .db
        .run(move |l| async move { bulk_in(&l, action, &sel, true, "", &who.actor).await })
        .await;
    let planned = match planned {
        Ok(l) => l,
        Err(e) => return super::error_page(&e),
    };
    let acting: Vec<&BulkLine> = planned.iter().filter(|d| d.acts).map(|d| &d.line).collect();
    let lines: Vec<BulkLine> = planned.iter().map(|d| d.line.clone()).collect();
    let body = html! {
        h1 { (title(action)) }
        p { (lines.len()) (if lines.len() == 1 { " instance; " } else { " instances; " }) (acting.len()) " would change (" (MAX) " at most at once)." }
        (table(&lines, false))
        @if acting.is_empty() {
            p.notice { "Nothing to do: every instance is left as it is." }
        } @else {
            form.stack method="post" action="/bulk" {
                input type="hidden" name="action" value=(action.as_str());
                @for l in &acting { input type="hidden" name="pick" value=(l.id); }
                @if action == Bulk::Cancel {
                    label { "Why (recorded with each cancel)" input type="text" name="reason"; }
                }
                div.actions {
                    button.danger[action == Bulk::Cancel].primary[action != Bulk::Cancel] type="submit" {
                        (title(action).split(' ').next().unwrap_or_default()) " " (acting.len())
                        (if acting.len() == 1 { " instance" } else { " instances" })
                    }
                    a.button href="/" { "Back to the list" }
                }
            }
        }
    };
    Html(shell::page(title(action), Nav::Instances, body).into_string()).into_response()
}

/// The bulk form, posted.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulkForm {
    #[serde(default)]
    action: Text,
    #[serde(default)]
    pick: Many,
    #[serde(default)]
    reason: Option<Text>,
}

/// `POST /bulk`: each instance's turn, reported.
pub async fn act(
    State(app): State<App>,
    Extension(who): Extension<Principal>,
    Form(f): Form<BulkForm>,
) -> Response {
    let action = match action_of(f.action.as_str()) {
        Ok(a) => a,
        Err(e) => return super::error_page(&e),
    };
    let picked: Vec<String> = f.pick.0.into_iter().filter(|s| !s.is_empty()).collect();
    if picked.is_empty() {
        return super::error_page(&ApiError::bad_request("no instance to act on"));
    }
    let reason = f.reason.map(|r| r.0.trim().to_string()).unwrap_or_default();
    let sel = Selection::Ids(picked);
    let done = app
        .db
        .run(move |l| async move { bulk_in(&l, action, &sel, false, &reason, &who.actor).await })
        .await;
    let lines: Vec<BulkLine> = match done {
        Ok(l) => l.into_iter().map(|d| d.line).collect(),
        Err(e) => return super::error_page(&e),
    };
    let body = html! {
        h1 { (title(action)) ": done" }
        p role="status" { (lines.iter().filter(|l| l.outcome != "skipped" && l.outcome != "failed").count()) " of " (lines.len()) " taken; the rest are said below." }
        (table(&lines, true))
        p { a href="/" { "Back to the list" } }
    };
    Html(shell::page(title(action), Nav::Instances, body).into_string()).into_response()
}

/// A row per instance: its plan, and once done its outcome.
fn table(lines: &[BulkLine], done: bool) -> Markup {
    html! {
        div.table-wrap {
            table.bulk {
                thead { tr {
                    th { "Instance" } th.hide-narrow { "Workflow" } th { "Status" } th { "Plan" }
                    @if done { th { "Outcome" } }
                } }
                tbody {
                    @for l in lines {
                        tr data-id=(l.id) {
                            td.id.mono { a href=(format!("/instances/{}", l.id)) { (short(&l.id)) } }
                            td.hide-narrow { (l.workflow) }
                            td { (badge(l.status.as_str())) }
                            td { (l.plan) }
                            @if done {
                                td.outcome { (l.outcome) @if !l.detail.is_empty() { span.muted { ": " (l.detail) } } }
                            }
                        }
                    }
                }
            }
        }
    }
}
