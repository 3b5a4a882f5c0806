//! One action over many instances (`wf cancel ID… | --workflow …`,
//! `wf resume [--retry-failed] …`): `POST /api/v1/bulk/{action}`
//! (`cancel`, `retry`, `resume`) with `{ids}` or `{filter}`, answering a
//! line per instance (`views::BulkLine`); with `dry_run`, the plans alone.
//! The engine plans and takes each instance's turn
//! (`engine::actions::bulk`); the runs the turns make ready are driven in
//! the background, as the actions of one are. The inspector's bulk pages
//! (`pages/bulk.rs`) go through [`bulk_in`] too.

use super::App;
use super::auth::Principal;
use super::body::{Body, BulkBody, BulkFilter};
use super::error::ApiError;
use crate::engine::actions::bulk::{self, Bulk, Intent, Selection, Turn};
use crate::engine::actions::{self, ListQuery};
use crate::views::{BulkLine, ShownStatus};
use crate::vocab::Actor;
use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::response::{IntoResponse, Response};
use std::rc::Rc;

/// `POST /api/v1/bulk/{action}`.
pub async fn api(
    State(app): State<App>,
    Extension(who): Extension<Principal>,
    Path(action): Path<String>,
    Body(b): Body<BulkBody>,
) -> Result<Response, ApiError> {
    let action = Bulk::parse(&action)
        .ok_or_else(|| ApiError::not_found("no such bulk action (cancel, retry, resume)"))?;
    // An empty `ids` is no `ids`, as the document's `oneOf` reads it.
    let ids = b.ids.filter(|ids| !ids.is_empty());
    let sel = match (ids, b.filter) {
        (Some(ids), None) => Selection::Ids(ids),
        (None, Some(f)) => Selection::Matching(query_of(BulkFilter::of(f)?)?),
        _ => {
            return Err(ApiError::bad_request(
                "give `ids` (a non-empty array) or `filter`, one of the two",
            ));
        }
    };
    let dry_run = b.dry_run.unwrap_or(false);
    let reason = b.reason.unwrap_or_default();
    let lines = app
        .db
        .run(move |l| async move { bulk_in(&l, action, &sel, dry_run, &reason, &who.actor).await })
        .await?;
    let lines: Vec<BulkLine> = lines.into_iter().map(|d| d.line).collect();
    Ok(Json(crate::views::BulkAnswer {
        action: action.as_str(),
        instances: lines,
    })
    .into_response())
}

/// The list's query of an API filter.
fn query_of(f: BulkFilter) -> Result<ListQuery, ApiError> {
    let mut labels = Vec::new();
    for l in f.label.unwrap_or_default() {
        labels.push(crate::workflow::parse_label_filter(&l).map_err(ApiError::bad_request)?);
    }
    let since = f
        .since
        .map(|s| {
            crate::workflow::duration::parse_request(&s)
                .map_err(|e| ApiError::bad_request(format!("`filter.since`: {e}")))
        })
        .transpose()?;
    Ok(ListQuery {
        status: f.status.as_deref().map(actions::list_status).transpose()?,
        workflow: f.workflow,
        since,
        parent: f.parent,
        roots: f.roots.unwrap_or(false),
        labels,
        queue: f.queue,
        id_prefix: f.id,
        error: f.error,
        ..ListQuery::default()
    })
}

/// One instance's line, and whether its plan acts on it (rather than
/// leaving it as it is).
pub(super) struct Done {
    pub line: BulkLine,
    pub acts: bool,
}

/// Plans `action` over the instances `sel` names and, unless `dry_run`,
/// takes each one's turn, driving the runs made ready in the background:
/// a line per instance.
pub(super) async fn bulk_in(
    l: &Rc<super::db::Local>,
    action: Bulk,
    sel: &Selection,
    dry_run: bool,
    reason: &str,
    by: &Actor,
) -> Result<Vec<Done>, ApiError> {
    let mut c = l.conn().await?;
    let ids = bulk::select(&c, sel).await?;
    let plan = bulk::plan(&c, action, &ids, by).await?;
    let mut lines = Vec::with_capacity(plan.len());
    for p in &plan {
        let (outcome, detail) = match &p.intent {
            _ if dry_run => ("planned", String::new()),
            Intent::Skip(why) => ("skipped", why.clone()),
            _ => match bulk::apply(&mut c, action, &p.id, by, reason).await {
                Ok(Turn::Skipped(why)) => ("skipped", why),
                Ok(Turn::Canceled(asked)) => match asked.held_by {
                    Some(holder) => ("canceling", format!("its runner {holder} ends it")),
                    None => {
                        super::actions::drive(l, asked.run);
                        ("canceling", String::new())
                    }
                },
                Ok(Turn::Resumed(ready)) => {
                    super::actions::drive(l, ready.run);
                    ("resuming", String::new())
                }
                Err(e) => ("failed", e.to_string()),
            },
        };
        // The status it was left in; a dry run left it as the plan read it.
        let status = match dry_run {
            true => p.status,
            false => c
                .instance(&p.id)
                .await
                .map_or(p.status, |i| ShownStatus::of(&i)),
        };
        lines.push(Done {
            line: BulkLine {
                status,
                ..BulkLine::of(p, outcome, detail)
            },
            acts: !p.intent.skipped(),
        });
    }
    Ok(lines)
}
