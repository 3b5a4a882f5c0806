//! The API's reads: the data of `wf list`, `inspect`, `logs`, `trace`,
//! `result`, `queue list`, `schedule list` and `workflow list`, in their
//! `--json` shapes. Each handler parses its request, then hands a job to the
//! store's thread ([`Db::run`](super::db::Db::run)) that reads and builds
//! the document there.

use super::App;
use super::error::ApiError;
use super::params::instance_ref;
use super::query::{Flag, Query, Span, Whole};
use crate::engine::{actions, logs, registry};
use crate::vocab::Timestamp;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

/// `GET /healthz`: 200 while the database answers, 503 when it does not.
pub async fn healthz(State(app): State<App>) -> Response {
    let checked = app
        .db
        .run(|l| async move {
            let c = l.conn().await?;
            c.workflows().await?;
            // Readable by a new connection too (a file whose mode was
            // changed leaves the open ones working).
            l.location.openable().map_err(ApiError::unavailable)
        })
        .await;
    match checked {
        Ok(()) => Json(Health { status: "ok" }).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /healthz`'s answer: `{status: "ok"}`.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct Health {
    #[schema(schema_with = ok)]
    pub status: &'static str,
}

fn ok() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    crate::vocab::words("Always `ok`", &["ok"])
}

/// `GET /api/v1/instances/{id}`' parameters.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct InspectParams {
    /// With every attempt of every step (each step's `attempt_list`).
    #[serde(default)]
    #[param(inline)]
    attempts: Flag,
}

/// `GET /api/v1/instances/{id}`: `wf inspect --json` (`?attempts=1`: with
/// every attempt).
pub async fn inspect(
    State(app): State<App>,
    Path(id): Path<String>,
    Query(p): Query<InspectParams>,
) -> Result<Json<Value>, ApiError> {
    let attempts = p.attempts.0;
    inspected(&app, id, attempts, |v| document(v))
        .await
        .map(Json)
}

/// What `render` makes of instance `id` as `wf inspect [--attempts]` reads it.
async fn inspected(
    app: &App,
    id: String,
    attempts: bool,
    render: fn(&crate::views::InstanceView<'_>) -> Result<Value, ApiError>,
) -> Result<Value, ApiError> {
    let id = instance_ref(&id)?;
    app.db
        .run(move |l| async move {
            let c = l.conn().await?;
            let id = c.resolve_id(&id).await?;
            let read = crate::views::ordered(actions::inspect(&c, &id, attempts).await?);
            render(&crate::views::inspect_view(&read, attempts))
        })
        .await
}

/// `GET /api/v1/instances/{id}/attempts`: every attempt of every step, in
/// the steps' order: `wf inspect --attempts --json`'s `attempt_list`s, each
/// with its `step`.
pub async fn attempts(
    State(app): State<App>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    inspected(&app, id, true, |v| document(v.all_attempts()))
        .await
        .map(Json)
}

/// `GET /api/v1/instances/{id}/events`: the events delivered to it, in the
/// order received (`wf inspect --json`'s `events`).
pub async fn events(
    State(app): State<App>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    inspected(&app, id, false, |v| document(&v.events))
        .await
        .map(Json)
}

/// `GET /api/v1/instances/{id}/logs`: `wf logs ID --json`, every attempt.
pub async fn logs(State(app): State<App>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    logs_json(&app, id, None, None).await.map(Json)
}

async fn logs_json(
    app: &App,
    id: String,
    step: Option<String>,
    attempt: Option<i64>,
) -> Result<Value, ApiError> {
    let id = instance_ref(&id)?;
    app.db
        .run(move |l| async move {
            let c = l.conn().await?;
            let id = c.resolve_id(&id).await?;
            let step = match step {
                Some(s) => Some(logs::unit_key(&c, &id, &s).await?),
                None => None,
            };
            let logs = logs::read(&c, &id, step.as_deref(), attempt).await?;
            let view = crate::views::LogsView {
                id: &id,
                logs: logs
                    .iter()
                    .map(|l| {
                        crate::views::LogView::new(
                            &l.key, l.attempt, l.outcome, &l.stdout, &l.stderr,
                        )
                    })
                    .collect(),
            };
            document(&view)
        })
        .await
}

/// `GET /api/v1/instances/{id}/logs/{step}`' parameters.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct LogsParams {
    /// The attempt (default: the last).
    #[serde(default)]
    #[param(value_type = Option<i64>, minimum = 1)]
    attempt: Option<Whole>,
    /// Stream it as server-sent events while it runs: `attempt`, then
    /// `stdout` and `stderr` chunks, then `end` with its outcome.
    #[serde(default)]
    #[param(inline)]
    follow: Flag,
}

/// `GET /api/v1/instances/{id}/logs/{step}`: `wf logs ID STEP --json`
/// (`?attempt=N`; the last by default). `?follow=1`: server-sent events as
/// the attempt runs (`stdout` and `stderr` events, each a chunk of text,
/// then `end` with the attempt's outcome).
pub async fn step_logs(
    State(app): State<App>,
    Path((id, step)): Path<(String, String)>,
    Query(p): Query<LogsParams>,
) -> Result<Response, ApiError> {
    let attempt = p.attempt.map(|n| n.0);
    if let Some(n) = attempt.filter(|n| *n < 1) {
        return Err(ApiError::bad_request(format!(
            "`attempt` is {n}: attempts count from 1"
        )));
    }
    if p.follow.0 {
        return super::follow::stream(app, id, step, attempt).await;
    }
    logs_json(&app, id, Some(step), attempt)
        .await
        .map(|v| Json(v).into_response())
}

/// `GET /api/v1/instances/{id}/trace`: `wf trace ID --format otlp`, one
/// OTLP/JSON `ExportTraceServiceRequest` with its children's spans.
pub async fn trace(State(app): State<App>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let id = instance_ref(&id)?;
    let body = app
        .db
        .run(move |l| async move {
            let c = l.conn().await?;
            let id = c.resolve_id(&id).await?;
            c.snapshot(
                async |s: &crate::store::Store| -> Result<Vec<u8>, ApiError> {
                    let ids = actions::with_descendants(s, id.clone(), usize::MAX).await?;
                    let mut out = Vec::new();
                    actions::write_otlp(s, &ids, &mut out)
                        .await
                        .map_err(|e| ApiError::internal(e.to_string()))?;
                    Ok(out)
                },
            )
            .await
        })
        .await?;
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response())
}

/// `GET /api/v1/instances/{id}/result`' parameters.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ResultParams {
    /// Wait up to this long for the instance to end (at most 5m: a longer
    /// wait is cut to 5m, as a long poll's is).
    #[serde(default)]
    #[param(inline)]
    wait: Option<Span>,
}

/// `GET /api/v1/instances/{id}/result`: `wf result ID --json`
/// (`{id, status, outputs, error}`), whatever the status; `?wait=30s`
/// waits up to that long (at most 5 minutes) for the instance to end.
pub async fn result(
    State(app): State<App>,
    Path(id): Path<String>,
    Query(p): Query<ResultParams>,
) -> Result<Json<Value>, ApiError> {
    let wait = p.wait.map(|w| w.0).unwrap_or_default().min(super::MAX_WAIT);
    let id = instance_ref(&id)?;
    let mut stopping = app.stopping.clone();
    let deadline = tokio::time::Instant::now() + wait;
    let id = app
        .db
        .run(move |l| async move {
            let c = l.conn().await?;
            Ok(c.resolve_id(&id).await?)
        })
        .await?;
    loop {
        let id = id.clone();
        let (doc, ended) = app
            .db
            .run(move |l| async move {
                let c = l.conn().await?;
                let (inst, outputs) = actions::result(&c, &id).await?;
                let view = crate::views::ResultView::new(&inst, &outputs);
                Ok((document(&view)?, inst.status.is_ended()))
            })
            .await?;
        if ended || tokio::time::Instant::now() >= deadline || *stopping.borrow() {
            return Ok(Json(doc));
        }
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(200)) => {}
            _ = tokio::time::sleep_until(deadline) => {}
            _ = stopping.changed() => {}
        }
    }
}

/// `GET /api/v1/queues`: `wf queue list --json`.
pub async fn queues(State(app): State<App>) -> Result<Json<Value>, ApiError> {
    app.db
        .run(|l| async move {
            let c = l.conn().await?;
            let queues = c.queues().await?;
            let now = Timestamp::now();
            let views: Vec<_> = queues
                .iter()
                .map(|q| crate::views::QueueView::new(q, now))
                .collect();
            document(&views)
        })
        .await
        .map(Json)
}

/// `GET /api/v1/db/check`: `wf db check --json` (`{sound, problems}`),
/// 200 whether or not the history is sound.
pub async fn db_check(State(app): State<App>) -> Result<Json<Value>, ApiError> {
    app.db
        .run(|l| async move {
            let c = l.conn().await?;
            let found = crate::engine::db::check::check(&c).await?;
            document(crate::views::CheckView::new(&found))
        })
        .await
        .map(Json)
}

/// `GET /api/v1/schedules`: `wf schedule list --json`.
pub async fn schedules(State(app): State<App>) -> Result<Json<Value>, ApiError> {
    app.db
        .run(|l| async move {
            let c = l.conn().await?;
            let rows = c.schedules().await?;
            let last = crate::engine::fire::last_instances(&c, &rows).await?;
            let views: Vec<_> = rows
                .iter()
                .zip(&last)
                .map(|(r, l)| crate::views::ScheduleView::new(r, l.as_ref()))
                .collect();
            document(&views)
        })
        .await
        .map(Json)
}

/// `GET /api/v1/db/actions`: `wf db actions --json` (the newest 50, or
/// `?limit=`).
pub async fn db_actions(
    State(app): State<App>,
    super::query::Query(q): super::query::Query<ActionsQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = match q.limit {
        None => 50,
        Some(Whole(n)) => usize::try_from(n)
            .map_err(|_| ApiError::bad_request(format!("`limit` is {n}: 0 or more")))?,
    };
    app.db
        .run(move |l| async move {
            let c = l.conn().await?;
            let rows = crate::engine::db::actions(&c, limit).await?;
            let views: Vec<crate::views::ActionView> =
                rows.iter().map(crate::views::ActionView::from).collect();
            document(&views)
        })
        .await
        .map(Json)
}

/// `GET /api/v1/instances/{id}/definitions`: every definition the
/// instance ran or runs next, with its text and the diff from the one
/// before (`wf inspect ID --definitions --json`'s `definitions`).
pub async fn definitions(
    State(app): State<App>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = instance_ref(&id)?;
    app.db
        .run(move |l| async move {
            let c = l.conn().await?;
            let id = c.resolve_id(&id).await?;
            let texts = actions::definitions(&c, &id).await?;
            document(crate::views::definition_texts(&texts))
        })
        .await
        .map(Json)
}

/// `GET /api/v1/instances/{id}/compare`' parameters (and the page's): the
/// two runs.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct CompareParams {
    /// The first run's number.
    #[param(value_type = i64, minimum = 1)]
    pub a: Whole,
    /// The second run's number.
    #[param(value_type = i64, minimum = 1)]
    pub b: Whole,
}

/// Runs `a` and `b` of `view` side by side, or the 404 naming the run it
/// does not have.
pub(super) fn compared(
    view: &crate::store::InstanceView,
    a: i64,
    b: i64,
) -> Result<crate::views::CompareView<'_>, ApiError> {
    crate::views::compare(&view.runs, &view.attempts, a, b).ok_or_else(|| {
        ApiError::not_found(format!(
            "instance {} has no run {}",
            view.instance.id,
            if view.runs.iter().any(|r| r.number == a) {
                b
            } else {
                a
            }
        ))
    })
}

/// `GET /api/v1/instances/{id}/compare?a=A&b=B`: `wf inspect ID --compare
/// A,B --json`.
pub async fn compare(
    State(app): State<App>,
    Path(id): Path<String>,
    Query(p): Query<CompareParams>,
) -> Result<Json<Value>, ApiError> {
    let id = instance_ref(&id)?;
    let (a, b) = (p.a.0, p.b.0);
    app.db
        .run(move |l| async move {
            let c = l.conn().await?;
            let id = c.resolve_id(&id).await?;
            let view = c.view(&id, true).await?;
            document(compared(&view, a, b)?)
        })
        .await
        .map(Json)
}

/// `GET /api/v1/queues/{key}`' parameters.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct QueueParams {
    /// At most this many of each list (default 100; 1 to 1000).
    #[serde(default)]
    #[param(value_type = Option<i64>, minimum = 1, maximum = 1000)]
    limit: Option<super::query::Whole>,
}

/// The most of each of a key's lists an answer holds.
pub const QUEUE_LIMIT: usize = 100;

/// `GET /api/v1/queues/{key}[?limit=N]`: `wf queue show KEY --json`.
pub async fn queue(
    State(app): State<App>,
    Path(key): Path<String>,
    Query(p): Query<QueueParams>,
) -> Result<Json<Value>, ApiError> {
    let limit = super::query::limit(p.limit, QUEUE_LIMIT, 1000)?;
    app.db
        .run(move |l| async move {
            let c = l.conn().await?;
            let shown = crate::engine::actions::queue_show(&c, &key, limit).await?;
            document(crate::views::QueueLineView::new(
                &key,
                &shown,
                Timestamp::now(),
            ))
        })
        .await
        .map(Json)
}

/// `GET /api/v1/db/actions`' parameters.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ActionsQuery {
    /// At most this many (default 50).
    #[serde(default)]
    #[param(value_type = Option<i64>, minimum = 0)]
    limit: Option<super::query::Whole>,
}

/// `GET /api/v1/tokens` (`admin`): `wf serve token list --json`.
pub async fn tokens(State(app): State<App>) -> Result<Json<Value>, ApiError> {
    app.db
        .run(|l| async move {
            let c = l.conn().await?;
            let rows = crate::engine::tokens::list(&c).await?;
            let views: Vec<crate::views::TokenView> =
                rows.iter().map(crate::views::TokenView::from).collect();
            document(&views)
        })
        .await
        .map(Json)
}

/// `GET /api/v1/workflows`: `wf workflow list --json`.
pub async fn workflows(State(app): State<App>) -> Result<Json<Value>, ApiError> {
    app.db
        .run(|l| async move {
            let c = l.conn().await?;
            let listing = registry::listing(&c).await?;
            document(crate::views::WorkflowView::all(&listing))
        })
        .await
        .map(Json)
}

/// `GET /api/v1/workflows/{name}`: one registered workflow.
pub async fn workflow(
    State(app): State<App>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    app.db
        .run(move |l| async move {
            let c = l.conn().await?;
            let row = registered(&c, &name).await?;
            let schedules = c.schedules().await?;
            let wf = registry::definition(&c, &row).await.ok();
            let stats = crate::engine::stats::stats(&c, &row.name).await?;
            let mut view = crate::views::WorkflowView::new(&row, wf.as_ref(), &schedules);
            view.stats = Some(crate::views::StatsView::new(&stats));
            document(view)
        })
        .await
        .map(Json)
}

/// The workflow registered as `name`, or a 404 naming it.
pub async fn registered(
    store: &crate::store::Store,
    name: &str,
) -> Result<crate::store::WorkflowRow, ApiError> {
    Ok(crate::engine::registry::registered(store, name).await?)
}

/// 202 for what is under way.
pub fn accepted(body: impl serde::Serialize) -> Response {
    (StatusCode::ACCEPTED, Json(body)).into_response()
}

/// A view as the JSON document a route answers with: a view that does not
/// serialize is a bug, answered as one (500), never `null`.
pub(super) fn document(view: impl serde::Serialize) -> Result<Value, ApiError> {
    serde_json::to_value(view)
        .map_err(|e| ApiError::internal(format!("a view did not serialize: {e}")))
}
