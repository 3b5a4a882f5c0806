//! `GET /`: the instances, newest first, with `wf list`'s filters (status,
//! workflow, a label, parent, since, queue, an id prefix, words of the
//! error) in the URL, so a view can be shared, and pages that follow a
//! cursor, so a page costs the same at a million instances as at ten.
//! Above the rows, how many instances of each status the other filters
//! match, each a link to those. Children are hidden under their parents
//! (`children=1` lists them too); a parent row opens to its newest
//! children (`open=ID`, repeated). The search box (`q=`) is read into the
//! filters and redirected to (`search.rs`). The first page's counts and
//! rows refresh themselves (`?fragment=counts`, `?fragment=rows`).

use super::super::App;
use super::super::error::ApiError;
use super::super::params::instance_ref;
use super::super::query::{Many, PageQuery, Text};
use super::shell::{self, Nav};
use crate::engine::actions::{self, Counts, ListQuery};
use crate::store::InstanceRow;
use crate::views::ShownStatus;
use crate::vocab::{InstanceId, Timestamp};
use axum::extract::State;
use axum::response::{Html, IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;
use std::collections::HashMap;

pub use crate::vocab::short;

/// Instances a page shows.
const PAGE: usize = 50;

/// Children an open parent row shows (the newest).
const OPEN_CHILDREN: usize = 20;

/// `GET /`'s parameters: the filters, the parents open, the cursor of the
/// page, the search box's words, and `fragment=rows|counts` for a part.
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
    id: Text,
    #[serde(default)]
    error: Text,
    #[serde(default)]
    children: Text,
    #[serde(default)]
    open: Many,
    #[serde(default)]
    q: Option<Text>,
    #[serde(default)]
    cursor: Option<Text>,
    #[serde(default)]
    fragment: Option<Text>,
}

/// The filters as the form holds them, and the parents open.
#[derive(Debug, Default, Clone)]
pub(super) struct Filters {
    pub status: String,
    pub workflow: String,
    pub label: String,
    pub parent: String,
    pub since: String,
    pub queue: String,
    pub id: String,
    pub error: String,
    /// Children listed beside their parents.
    pub children: bool,
    pub open: Vec<String>,
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
            id: get(&p.id),
            error: get(&p.error),
            children: matches!(p.children.as_str(), "1" | "true" | "on"),
            open: p
                .open
                .0
                .iter()
                .map(|o| o.trim().to_string())
                .filter(|o| !o.is_empty())
                .collect(),
        }
    }

    /// The filters, as (parameter, value) pairs of those given.
    pub(super) fn pairs(&self) -> Vec<(&'static str, &str)> {
        let mut out: Vec<(&'static str, &str)> = [
            ("status", &self.status),
            ("workflow", &self.workflow),
            ("label", &self.label),
            ("parent", &self.parent),
            ("since", &self.since),
            ("queue", &self.queue),
            ("id", &self.id),
            ("error", &self.error),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k, v.as_str()))
        .collect();
        if self.children {
            out.push(("children", "1"));
        }
        out
    }

    /// The query string of these filters, the parents open, and `extra`.
    fn query(&self, extra: &[(&str, &str)]) -> String {
        let mut q = form_urlencoded::Serializer::new(String::new());
        for (k, v) in self.pairs() {
            q.append_pair(k, v);
        }
        for o in &self.open {
            q.append_pair("open", o);
        }
        for (k, v) in extra {
            q.append_pair(k, v);
        }
        q.finish()
    }

    /// These filters with another status (none: any).
    fn with_status(&self, status: &str) -> Filters {
        Filters {
            status: status.to_string(),
            ..self.clone()
        }
    }

    /// These filters with parent `id` opened, or closed if it was open.
    fn toggled(&self, id: &str) -> Filters {
        let mut f = self.clone();
        match f.open.iter().position(|o| o == id) {
            Some(at) => {
                f.open.remove(at);
            }
            None => f.open.push(id.to_string()),
        }
        f
    }

    /// Whether any filter is given.
    fn any(&self) -> bool {
        !self.pairs().is_empty()
    }

    /// Children are listed at the top level: asked for, or a parent's or
    /// an id prefix's list.
    fn lists_children(&self) -> bool {
        self.children || !self.parent.is_empty() || !self.id.is_empty()
    }

    pub(super) fn to_query(&self, after: Option<InstanceId>) -> Result<ListQuery, ApiError> {
        let non_empty = |s: &String| (!s.is_empty()).then(|| s.clone());
        let labels = match non_empty(&self.label) {
            None => Vec::new(),
            Some(l) => {
                vec![crate::workflow::parse_label_filter(&l).map_err(ApiError::bad_request)?]
            }
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
            roots: !self.lists_children(),
            labels,
            queue: non_empty(&self.queue),
            id_prefix: non_empty(&self.id),
            error: non_empty(&self.error),
            limit: PAGE,
            after,
            count_more: false,
        })
    }
}

/// What the page shows, read in one job.
struct Read {
    rows: Vec<InstanceRow>,
    more: usize,
    /// None when only the rows are asked for (`fragment=rows`).
    counts: Option<Counts>,
    /// How many children each listed row has.
    kids: HashMap<InstanceId, u64>,
    /// The open parents' newest children.
    opened: HashMap<InstanceId, Vec<InstanceRow>>,
}

pub async fn page(State(app): State<App>, PageQuery(p): PageQuery<ListParams>) -> Response {
    if let Some(q) = p.q.as_ref().map(|q| q.as_str().trim().to_string())
        && !q.is_empty()
    {
        return search(&app, &q).await;
    }
    let filters = Filters::of(&p);
    let fragment = p.fragment.as_ref().map(|f| f.as_str().to_string());
    let cursor = match p
        .cursor
        .as_ref()
        .map(|c| instance_ref(c.as_str()))
        .transpose()
    {
        Ok(c) => c.map(InstanceId::from),
        Err(_) => None,
    };
    // A refresh of one part reads that part alone.
    let part = match fragment.as_deref() {
        Some("rows") => Part::Rows,
        Some("counts") => Part::Counts,
        _ => Part::All,
    };
    let read = match filters.to_query(cursor.clone()) {
        Ok(query) => read(&app, query, filters.open.clone(), part).await,
        Err(e) => Err(e),
    };
    let now = Timestamp::now();
    match fragment.as_deref() {
        Some("rows") => {
            return match read {
                Ok(r) => Html(rows_html(&r, &filters, now).into_string()).into_response(),
                Err(e) => super::error_page(&e),
            };
        }
        Some("counts") => {
            return match read {
                Ok(r) => {
                    Html(counts_html(r.counts.as_ref(), &filters).into_string()).into_response()
                }
                Err(e) => super::error_page(&e),
            };
        }
        _ => {}
    }
    let (read, error) = match read {
        Ok(r) => (Some(r), None),
        Err(e) => (None, Some(e)),
    };
    let next = read
        .as_ref()
        .filter(|r| r.more > 0)
        .and_then(|r| r.rows.last())
        .map(|i| i.id.to_string());
    let live = cursor.is_none() && error.is_none();
    let body = html! {
        h1 { "Instances" }
        (search_form())
        (filter_form(&filters))
        @if let Some(e) = &error { p.notice.error role="alert" { (e.message) } }
        @if let Some(r) = &read {
            @if live {
                div data-live=(format!("/?{}", filters.query(&[("fragment", "counts")]))) { (counts_html(r.counts.as_ref(), &filters)) }
            } @else {
                div { (counts_html(r.counts.as_ref(), &filters)) }
            }
        }
        p.muted.keys.hide-narrow { "Keys: " kbd { "/" } " search, " kbd { "j" } " " kbd { "k" } " move through the list, " kbd { "Enter" } " open." }
        (bulk_form(&filters))
        div.table-wrap {
            table.instances {
                thead { tr {
                    th.pick { span.visually-hidden { "Select" } }
                    th { "Instance" } th { "Workflow" } th { "Status" } th { "Started" } th.hide-narrow { "Duration" }
                    th.hide-narrow { "Ended" } th.hide-narrow { "Started by" } th.hide-narrow { "Labels" }
                } }
                @if let Some(r) = &read {
                    @if live {
                        tbody data-live=(format!("/?{}", filters.query(&[("fragment", "rows")]))) { (rows_html(r, &filters, now)) }
                    } @else {
                        tbody { (rows_html(r, &filters, now)) }
                    }
                }
            }
        }
        @if read.as_ref().is_some_and(|r| r.rows.is_empty()) { p.muted { "No instances match." } }
        nav.pager aria-label="pages" {
            @if cursor.is_some() { a href=(format!("/?{}", filters.query(&[]))) { "← First page" } }
            @if let Some(n) = &next { a href=(format!("/?{}", filters.query(&[("cursor", n)]))) rel="next" { "Next page →" } }
            @if live { span.muted { span.live-dot aria-hidden="true" {} "live" } }
        }
    };
    Html(shell::page("Instances", Nav::Instances, body).into_string()).into_response()
}

/// The parts of the page a request reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    All,
    Rows,
    Counts,
}

/// Reads the page's rows, the counts, the listed rows' children counts and
/// the open parents' children (as much of it as `part` shows).
async fn read(
    app: &App,
    query: ListQuery,
    open: Vec<String>,
    part: Part,
) -> Result<Read, ApiError> {
    app.db
        .run(move |l| async move {
            let c = l.conn().await?;
            let counts = match part {
                Part::Rows => None,
                _ => Some(actions::counts(&c, &query).await?),
            };
            if part == Part::Counts {
                return Ok(Read {
                    rows: Vec::new(),
                    more: 0,
                    counts,
                    kids: HashMap::new(),
                    opened: HashMap::new(),
                });
            }
            let (rows, more) = actions::list(&c, &query).await?;
            let kids = actions::children_counts(&c, &rows).await?;
            let mut opened = HashMap::new();
            for r in rows
                .iter()
                .filter(|r| open.iter().any(|o| *o == r.id.as_str()))
            {
                if kids.get(&r.id).copied().unwrap_or(0) == 0 {
                    continue;
                }
                let q = ListQuery {
                    parent: Some(r.id.to_string()),
                    limit: OPEN_CHILDREN,
                    ..ListQuery::default()
                };
                opened.insert(r.id.clone(), actions::list(&c, &q).await?.0);
            }
            Ok(Read {
                rows,
                more,
                counts,
                kids,
                opened,
            })
        })
        .await
}

/// `/?q=…`: the search read into filters, and a redirect to them.
async fn search(app: &App, q: &str) -> Response {
    let parsed = super::search::parse(q);
    let resolved = app
        .db
        .run(move |l| async move {
            let c = l.conn().await?;
            Ok(super::search::resolve(&c, parsed).await?)
        })
        .await;
    match resolved {
        Ok(s) => {
            let mut query = form_urlencoded::Serializer::new(String::new());
            for (k, v) in &s.pairs {
                query.append_pair(k, v);
            }
            Redirect::to(&format!("/?{}", query.finish())).into_response()
        }
        Err(e) => super::error_page(&e),
    }
}

/// The actions on many instances: those checked (`pick=ID`, the rows'
/// boxes belong to this form), or every one the filters match; each
/// button opens a confirmation that lists what it would do to each.
fn bulk_form(f: &Filters) -> Markup {
    html! {
        form #bulk .bulk method="get" action="/bulk" {
            @for (k, v) in f.pairs() { input type="hidden" name=(k) value=(v); }
            label { "Act on "
                select name="which" {
                    option value="picked" selected { "the instances checked" }
                    option value="matching" { "every instance the filters match" }
                }
            }
            button type="submit" name="action" value="cancel" { "Cancel…" }
            button type="submit" name="action" value="retry" { "Retry failed…" }
            button type="submit" name="action" value="resume" { "Resume…" }
        }
    }
}

fn search_form() -> Markup {
    html! {
        form.search method="get" action="/" role="search" {
            label for="q" { "Search" }
            input #q type="search" name="q" placeholder="id, workflow, name=value, or words of an error" autocomplete="off";
            button type="submit" { "Search" }
        }
    }
}

/// The filters, each in its field; on a narrow screen the search box
/// stands for the label, id, parent, since and queue fields (`name=value`,
/// `id:`, `parent:`, `since:`, `queue:`), which are left out.
fn filter_form(f: &Filters) -> Markup {
    html! {
        form.filters method="get" action="/" {
            label { "Status"
                select name="status" {
                    option value="" selected[f.status.is_empty()] { "any" }
                    @for s in ShownStatus::ALL { option value=(s.as_str()) selected[f.status == s.as_str()] { (s.as_str()) } }
                }
            }
            label { "Workflow" input type="text" name="workflow" value=(f.workflow) size="14"; }
            label.hide-narrow { "Label" input type="text" name="label" value=(f.label) placeholder="name=value" size="14"; }
            label.hide-narrow { "Id" input type="text" name="id" value=(f.id) placeholder="prefix" size="10"; }
            label { "Error" input type="text" name="error" value=(f.error) placeholder="words" size="14"; }
            label.hide-narrow { "Parent" input type="text" name="parent" value=(f.parent) placeholder="id prefix" size="12"; }
            label.hide-narrow { "Since" input type="text" name="since" value=(f.since) placeholder="1h, 7d" size="6"; }
            label.hide-narrow { "Queue" input type="text" name="queue" value=(f.queue) placeholder="key" size="10"; }
            label.check { input type="checkbox" name="children" value="1" checked[f.children]; "Children too" }
            button type="submit" { "Filter" }
            @if f.any() { a.button href="/" { "Clear" } }
        }
    }
}

/// A count as shown: `10,000+` when it stopped at its cap.
fn count_text(n: u64, at_least: bool) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if at_least {
        out.push('+');
    }
    out
}

/// How many instances of each status the other filters match, each a link
/// to those (the status filtered on marked as the current one).
fn counts_html(c: Option<&Counts>, f: &Filters) -> Markup {
    let link = |status: &str| format!("/?{}", f.with_status(status).query(&[]));
    let Some(c) = c else {
        return html! {};
    };
    html! {
        nav.counts aria-label="counts by status" {
            a href=(link("")) aria-current=[f.status.is_empty().then_some("true")] {
                "all " span.n { (count_text(c.total, c.at_least)) }
            }
            @for s in c.statuses.iter().filter(|s| s.count > 0 || f.status == s.status.as_str()) {
                a href=(link(s.status.as_str())) data-status=(s.status.as_str())
                    aria-current=[(f.status == s.status.as_str()).then_some("true")] {
                    (badge(s.status.as_str())) " " span.n { (count_text(s.count, s.at_least)) }
                }
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

fn rows_html(r: &Read, f: &Filters, now: Timestamp) -> Markup {
    html! {
        @for i in &r.rows {
            @let kids = r.kids.get(&i.id).copied().unwrap_or(0);
            @let open = r.opened.get(&i.id);
            (row(i, kids, open.is_some(), f, now, false))
            @if let Some(children) = open {
                @for c in children { (row(c, 0, false, f, now, true)) }
                @if (children.len() as u64) < kids {
                    tr.child.more { td colspan="9" {
                        a href=(format!("/?parent={}&children=1", i.id)) { "All " (kids) " children →" }
                    } }
                }
            }
        }
    }
}

/// One instance's row: a parent's shows how many children it has, a link
/// that opens (or closes) them under it; a child's is indented, and names
/// the step that made it.
fn row(i: &InstanceRow, kids: u64, open: bool, f: &Filters, now: Timestamp, child: bool) -> Markup {
    let ended = crate::views::ended_at(i);
    let ms = ended.unwrap_or(now).ms() - i.created_at.ms();
    let took = crate::workflow::duration::human(std::time::Duration::from_millis(ms.max(0) as u64));
    html! {
        tr.child[child] {
            td.pick {
                input type="checkbox" name="pick" value=(i.id) form="bulk" aria-label=(format!("select {}", short(&i.id)));
            }
            td.id.mono {
                @if child { span.branch aria-hidden="true" { "└ " } }
                a href=(format!("/instances/{}", i.id)) { (short(&i.id)) }
                @if kids > 0 {
                    " "
                    a.kids href=(format!("/?{}", f.toggled(i.id.as_str()).query(&[])))
                        aria-expanded=(if open { "true" } else { "false" })
                        title=(format!("{kids} children")) {
                        (if open { "▾ " } else { "▸ " }) (kids)
                    }
                }
            }
            td {
                (i.workflow)
                @if child { @if let Some(p) = &i.parent { span.muted { " · step " (p.key) } } }
            }
            td { (badge(ShownStatus::of(i).as_str())) }
            td.time { (when(i.created_at, now)) }
            td.time.hide-narrow {
                @if ended.is_some() { (took) } @else { span.muted title="so far" { (took) "…" } }
            }
            td.time.hide-narrow { @if let Some(e) = ended { (when(e, now)) } }
            td.hide-narrow.actor { @if let Some(by) = &i.started_by { code { (by) } } }
            td.hide-narrow {
                @for (k, v) in &i.labels { code { (k) "=" (v) } " " }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_are_grouped_by_thousands() {
        assert_eq!(super::count_text(0, false), "0");
        assert_eq!(super::count_text(999, false), "999");
        assert_eq!(super::count_text(1000, false), "1,000");
        assert_eq!(super::count_text(10000, true), "10,000+");
        assert_eq!(super::count_text(1234567, false), "1,234,567");
    }
}
