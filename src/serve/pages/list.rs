//! `GET /`: the instances, newest first, with `wf list`'s filters (status,
//! workflow, a label, parent, since) and pages that follow a cursor, so a
//! page costs the same at 100,000 instances as at 10. The rows of the
//! first page refresh themselves (`?fragment=rows`).

use super::super::App;
use super::super::error::ApiError;
use super::super::params::instance_ref;
use super::super::query::{PageQuery, Text};
use super::shell::{self, Nav};
use crate::engine::actions::{self, ListQuery};
use crate::store::InstanceRow;
use crate::views::ShownStatus;
use crate::vocab::{InstanceId, Timestamp};
use axum::extract::State;
use axum::response::{Html, IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;

/// Instances a page shows.
const PAGE: usize = 50;

/// `GET /`'s parameters: the filters, the cursor of the page, and
/// `fragment=rows` for the rows alone.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
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
    cursor: Option<Text>,
    #[serde(default)]
    fragment: Option<Text>,
}

/// The filters as the form holds them.
#[derive(Debug, Default, Clone)]
struct Filters {
    status: String,
    workflow: String,
    label: String,
    parent: String,
    since: String,
    queue: String,
}

impl Filters {
    fn of(p: &ListParams) -> Filters {
        let get = |t: &Text| t.as_str().trim().to_string();
        Filters {
            status: get(&p.status),
            workflow: get(&p.workflow),
            label: get(&p.label),
            parent: get(&p.parent),
            since: get(&p.since),
            queue: get(&p.queue),
        }
    }

    /// The query string of these filters (and `extra`).
    fn query(&self, extra: &[(&str, &str)]) -> String {
        let mut q = form_urlencoded::Serializer::new(String::new());
        for (k, v) in [
            ("status", &self.status),
            ("workflow", &self.workflow),
            ("label", &self.label),
            ("parent", &self.parent),
            ("since", &self.since),
            ("queue", &self.queue),
        ] {
            if !v.is_empty() {
                q.append_pair(k, v);
            }
        }
        for (k, v) in extra {
            q.append_pair(k, v);
        }
        q.finish()
    }

    fn to_query(&self, after: Option<InstanceId>) -> Result<ListQuery, ApiError> {
        let non_empty = |s: &String| (!s.is_empty()).then(|| s.clone());
        let labels = match non_empty(&self.label) {
            None => Vec::new(),
            Some(l) => vec![crate::workflow::parse_label(&l).map_err(ApiError::bad_request)?],
        };
        let since = match non_empty(&self.since) {
            None => None,
            Some(s) => Some(
                crate::workflow::duration::parse(&s)
                    .map_err(|e| ApiError::bad_request(format!("since: {e}")))?,
            ),
        };
        Ok(ListQuery {
            status: non_empty(&self.status)
                .as_deref()
                .map(actions::list_status)
                .transpose()?,
            workflow: non_empty(&self.workflow),
            since,
            parent: non_empty(&self.parent),
            roots: false,
            labels,
            queue: non_empty(&self.queue),
            limit: PAGE,
            after,
            count_more: false,
        })
    }
}

pub async fn page(State(app): State<App>, PageQuery(p): PageQuery<ListParams>) -> Response {
    let filters = Filters::of(&p);
    let fragment = p.fragment.as_ref().is_some_and(|f| f.as_str() == "rows");
    let cursor = match p
        .cursor
        .as_ref()
        .map(|c| instance_ref(c.as_str()))
        .transpose()
    {
        Ok(c) => c.map(InstanceId::from),
        Err(_) => None,
    };
    let query = filters.to_query(cursor.clone());
    let read = match query {
        Ok(query) => {
            app.db
                .run(move |l| async move {
                    let c = l.conn().await?;
                    Ok(actions::list(&c, &query).await?)
                })
                .await
        }
        Err(e) => Err(e),
    };
    let now = Timestamp::now();
    if fragment {
        return match read {
            Ok((rows, _)) => Html(rows_html(&rows, now).into_string()).into_response(),
            Err(e) => super::error_page(&e),
        };
    }
    let (rows, more, error) = match read {
        Ok((rows, more)) => (rows, more, None),
        Err(e) => (Vec::new(), 0, Some(e)),
    };
    let next = (more > 0)
        .then(|| rows.last().map(|i| i.id.to_string()))
        .flatten();
    let live = cursor.is_none() && error.is_none();
    let body = html! {
        h1 { "Instances" }
        (filter_form(&filters))
        @if let Some(e) = &error { p.notice.error role="alert" { (e.message) } }
        p.muted.keys { "Keys: " kbd { "/" } " filter, " kbd { "j" } " " kbd { "k" } " move through the list, " kbd { "Enter" } " open." }
        div.table-wrap {
            table.instances {
                thead { tr {
                    th { "Instance" } th { "Workflow" } th { "Status" } th { "Created" }
                    th.hide-narrow { "Updated" } th.hide-narrow { "Started by" } th.hide-narrow { "Parent" } th.hide-narrow { "Labels" }
                } }
                @if live {
                    tbody data-live=(format!("/?{}", filters.query(&[("fragment", "rows")]))) { (rows_html(&rows, now)) }
                } @else {
                    tbody { (rows_html(&rows, now)) }
                }
            }
        }
        @if rows.is_empty() && error.is_none() { p.muted { "No instances match." } }
        nav.pager aria-label="pages" {
            @if cursor.is_some() { a href=(format!("/?{}", filters.query(&[]))) { "← First page" } }
            @if let Some(n) = &next { a href=(format!("/?{}", filters.query(&[("cursor", n)]))) rel="next" { "Next page →" } }
            @if live { span.muted { span.live-dot aria-hidden="true" {} "live" } }
        }
    };
    Html(shell::page("Instances", Nav::Instances, body).into_string()).into_response()
}

fn filter_form(f: &Filters) -> Markup {
    html! {
        form.filters method="get" action="/" role="search" {
            label { "Status"
                select name="status" {
                    option value="" selected[f.status.is_empty()] { "any" }
                    @for s in ShownStatus::ALL { option value=(s.as_str()) selected[f.status == s.as_str()] { (s.as_str()) } }
                }
            }
            label { "Workflow" input type="text" name="workflow" value=(f.workflow) size="14"; }
            label { "Label" input type="text" name="label" value=(f.label) placeholder="name=value" size="14"; }
            label { "Parent" input type="text" name="parent" value=(f.parent) placeholder="id prefix" size="12"; }
            label { "Since" input type="text" name="since" value=(f.since) placeholder="1h, 7d" size="6"; }
            label { "Queue" input type="text" name="queue" value=(f.queue) placeholder="key" size="10"; }
            button type="submit" { "Filter" }
            @if !(f.status.is_empty() && f.workflow.is_empty() && f.label.is_empty() && f.parent.is_empty() && f.since.is_empty() && f.queue.is_empty()) {
                a.button href="/" { "Clear" }
            }
        }
    }
}

/// A status as a badge.
pub fn badge(status: &str) -> Markup {
    html! { span class=(format!("status s-{status}")) { (status) } }
}

/// A time as the tables show it: relative, the exact time on hover.
pub fn when(t: Timestamp, now: Timestamp) -> Markup {
    let ms = now.ms() - t.ms();
    let rel = if ms < 0 {
        format!(
            "in {}",
            crate::workflow::duration::human(std::time::Duration::from_millis((-ms) as u64))
        )
    } else {
        format!(
            "{} ago",
            crate::workflow::duration::human(std::time::Duration::from_millis(ms as u64))
        )
    };
    html! { time datetime=(t.to_string()) title=(t.to_string()) { (rel) } }
}

fn rows_html(rows: &[InstanceRow], now: Timestamp) -> Markup {
    html! {
        @for i in rows {
            tr {
                td.id.mono { a href=(format!("/instances/{}", i.id)) { (short(&i.id)) } }
                td { (i.workflow) }
                td { (badge(ShownStatus::of(i).as_str())) }
                td.time { (when(i.created_at, now)) }
                td.time.hide-narrow { (when(i.updated_at, now)) }
                td.hide-narrow.actor { @if let Some(by) = &i.started_by { code { (by) } } }
                td.id.mono.hide-narrow {
                    @if let Some(p) = &i.parent { a href=(format!("/instances/{}", p.id)) { (short(&p.id)) } }
                }
                td.hide-narrow {
                    @for (k, v) in &i.labels { code { (k) "=" (v) } " " }
                }
            }
        }
    }
}

pub use crate::vocab::short;
