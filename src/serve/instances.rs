//! `GET /api/v1/instances` (`wf list --json`'s array, a page at a time)
//! and `GET /api/v1/instances/counts` (`wf list --counts --json`): the
//! instance list's two reads, with the same filters, read into the same
//! engine query ([`actions::ListQuery`]) the CLI and the inspector use.

use super::App;
use super::api::document;
use super::error::ApiError;
use super::params::instance_ref;
use super::query::{Flag, LabelFilters, Query, Span, Text, Whole};
use crate::engine::actions;
use crate::vocab::InstanceId;
use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

/// The most instances a page of the list holds.
pub const MAX_PAGE: usize = 1000;

/// The filters both reads take.
struct Filters {
    workflow: Option<Text>,
    label: LabelFilters,
    since: Option<Span>,
    parent: Option<Text>,
    roots: Flag,
    queue: Option<Text>,
    id: Option<Text>,
    error: Option<Text>,
}

impl Filters {
    /// The engine's query of these filters (no status, no limit).
    fn query(self) -> Result<actions::ListQuery, ApiError> {
        let mut labels = Vec::new();
        for l in &self.label.0 {
            labels.push(crate::workflow::parse_label_filter(l).map_err(ApiError::bad_request)?);
        }
        Ok(actions::ListQuery {
            workflow: self.workflow.map(|t| t.0),
            since: self.since.map(|s| s.0),
            parent: self.parent.map(|t| t.0),
            roots: self.roots.0,
            labels,
            queue: self.queue.map(|t| t.0),
            id_prefix: self.id.map(|t| t.0),
            error: self.error.map(|t| t.0),
            ..actions::ListQuery::default()
        })
    }
}

/// `GET /api/v1/instances`' parameters.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Only instances of this status.
    #[serde(default)]
    #[param(inline, value_type = Option<crate::vocab::ShownStatus>)]
    status: Option<Text>,
    /// Only this workflow.
    #[serde(default)]
    #[param(inline)]
    workflow: Option<Text>,
    /// Only instances with these labels (`NAME=VALUE`; repeat for all of
    /// several).
    #[serde(default)]
    #[param(inline, style = Form, explode)]
    label: LabelFilters,
    /// Only instances created within this long (`1h`).
    #[serde(default)]
    #[param(inline)]
    since: Option<Span>,
    /// Only the children of this instance (its id, or a unique prefix).
    #[serde(default)]
    #[param(inline)]
    parent: Option<Text>,
    /// Only instances without a parent.
    #[serde(default)]
    #[param(inline)]
    roots: Flag,
    /// Only instances of this queue key.
    #[serde(default)]
    #[param(inline)]
    queue: Option<Text>,
    /// Only instances whose id starts so.
    #[serde(default)]
    #[param(inline)]
    id: Option<Text>,
    /// Only instances whose error holds these words (each whole, or the
    /// start of one).
    #[serde(default)]
    #[param(inline)]
    error: Option<Text>,
    /// At most this many (default 50).
    #[serde(default)]
    #[param(value_type = Option<i64>, minimum = 1, maximum = 1000)]
    limit: Option<Whole>,
    /// The page after this one: the `X-Next-Cursor` of the page before.
    #[serde(default)]
    #[param(value_type = Option<String>, pattern = "^[A-Za-z0-9._-]{1,128}$")]
    cursor: Option<Text>,
}

/// `GET /api/v1/instances`: `wf list --json`'s array, newest first, with its
/// filters (`status`, `workflow`, `label=NAME=VALUE` repeated, `parent`,
/// `roots`, `since`, `queue`, `id` (a prefix), `error` (words), `limit`);
/// the next page's `cursor` is in the `Link` and `X-Next-Cursor` headers.
pub async fn list(
    State(app): State<App>,
    Query(p): Query<ListParams>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    let limit = super::query::limit(p.limit, 50, MAX_PAGE)?;
    let after = p
        .cursor
        .map(|c| instance_ref(c.as_str()).map(InstanceId::from))
        .transpose()
        .map_err(|_| ApiError::bad_request("`cursor` is not one this server gave"))?;
    let status = p
        .status
        .map(|s| actions::list_status(s.as_str()))
        .transpose()?;
    let query = actions::ListQuery {
        status,
        limit,
        after,
        count_more: false,
        ..Filters {
            workflow: p.workflow,
            label: p.label,
            since: p.since,
            parent: p.parent,
            roots: p.roots,
            queue: p.queue,
            id: p.id,
            error: p.error,
        }
        .query()?
    };
    let (body, next) = app
        .db
        .run(move |l| async move {
            let c = l.conn().await?;
            let (rows, more) = actions::list(&c, &query).await?;
            let next = (more > 0)
                .then(|| rows.last().map(|i| i.id.to_string()))
                .flatten();
            let shown: Vec<_> = rows
                .iter()
                .map(|i| crate::views::InstanceSummary::new(i, crate::views::ShownStatus::of(i)))
                .collect();
            Ok((document(&shown)?, next))
        })
        .await?;
    let mut r = Json(body).into_response();
    if let Some(next) = next {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (k, v) in form_urlencoded::parse(q.as_deref().unwrap_or_default().as_bytes()) {
            if k != "cursor" {
                query.append_pair(&k, &v);
            }
        }
        query.append_pair("cursor", &next);
        let link = format!("</api/v1/instances?{}>; rel=\"next\"", query.finish());
        if let (Ok(link), Ok(next)) = (HeaderValue::from_str(&link), HeaderValue::from_str(&next)) {
            r.headers_mut().insert(header::LINK, link);
            r.headers_mut().insert("x-next-cursor", next);
        }
    }
    Ok(r)
}

/// `GET /api/v1/instances/counts`' parameters: the list's filters but the
/// status, the limit and the cursor.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct CountParams {
    /// Only this workflow.
    #[serde(default)]
    #[param(inline)]
    workflow: Option<Text>,
    /// Only instances with these labels (`NAME=VALUE`; repeat for all of
    /// several).
    #[serde(default)]
    #[param(inline, style = Form, explode)]
    label: LabelFilters,
    /// Only instances created within this long (`1h`).
    #[serde(default)]
    #[param(inline)]
    since: Option<Span>,
    /// Only the children of this instance (its id, or a unique prefix).
    #[serde(default)]
    #[param(inline)]
    parent: Option<Text>,
    /// Only instances without a parent.
    #[serde(default)]
    #[param(inline)]
    roots: Flag,
    /// Only instances of this queue key.
    #[serde(default)]
    #[param(inline)]
    queue: Option<Text>,
    /// Only instances whose id starts so.
    #[serde(default)]
    #[param(inline)]
    id: Option<Text>,
    /// Only instances whose error holds these words (each whole, or the
    /// start of one).
    #[serde(default)]
    #[param(inline)]
    error: Option<Text>,
}

/// `GET /api/v1/instances/counts`: `wf list --counts --json`, how many
/// instances of each status the filters match.
pub async fn counts(
    State(app): State<App>,
    Query(p): Query<CountParams>,
) -> Result<Response, ApiError> {
    let query = Filters {
        workflow: p.workflow,
        label: p.label,
        since: p.since,
        parent: p.parent,
        roots: p.roots,
        queue: p.queue,
        id: p.id,
        error: p.error,
    }
    .query()?;
    let body = app
        .db
        .run(move |l| async move {
            let c = l.conn().await?;
            let counts = actions::counts(&c, &query).await?;
            document(crate::views::CountsView::from(&counts))
        })
        .await?;
    Ok(Json(body).into_response())
}
