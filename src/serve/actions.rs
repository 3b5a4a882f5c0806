//! The API's actions: start a registered workflow, and signal, cancel,
//! terminate, resume, retry or restart an instance. A start records the
//! instance for the workers, as `wf run --detach` does (201; the same
//! `Idempotency-Key` again: 200 and that instance). Signal writes the event
//! (200). The others are checked and recorded here, and the run they need
//! (compensations, a resume, a restart) is driven by the server in the
//! background, as the CLI drives it in its process (202): its end shows in
//! the instance.

use super::App;
use super::api::{accepted, registered};
use super::auth::Principal;
use super::body::{Body, NoBody, RestartBody, ResumeBody, SignalBody, StartBody, TokenBody};
use super::error::ApiError;
use super::params::instance_ref;
use crate::engine::worker::WorkerObserver;
use crate::engine::{self, actions, registry};
use crate::exit::ExitStatus;
use crate::views::{Accepted, Accepting, RestartAccepted, ShownStatus, SignalView, Started};
use crate::vocab::{Actor, InstanceId, InstanceStatus};
use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use std::rc::Rc;

/// `POST /api/v1/workflows/{name}/instances` `{inputs?, labels?}`: records
/// an instance of registered workflow NAME for the workers (or queued by
/// its queue). `Idempotency-Key`: the same key gives the same instance.
pub async fn start(
    State(app): State<App>,
    Extension(who): Extension<Principal>,
    Path(name): Path<String>,
    headers: HeaderMap,
    Body(b): Body<StartBody>,
) -> Result<Response, ApiError> {
    let inputs = b.inputs.unwrap_or_default();
    let mut labels = Vec::new();
    for (k, v) in b.labels.unwrap_or_default() {
        if let Some(why) = crate::workflow::label_name_problem(&k) {
            return Err(ApiError::bad_request(format!("label `{k}`: {why}")));
        }
        labels.push((k, v));
    }
    let key = match headers.get("idempotency-key") {
        None => None,
        Some(v) => match v.to_str() {
            Ok(k) if !k.is_empty() && k.len() <= 255 => Some(k.to_string()),
            _ => {
                return Err(ApiError::bad_request(
                    "`Idempotency-Key` must be 1 to 255 visible ASCII characters",
                ));
            }
        },
    };
    let started = app
        .db
        .run(move |l| async move { start_in(&l, &name, inputs, labels, key, who.actor).await })
        .await?;
    // As `wf run --detach` exits: 4 for one its queue skipped, else 0.
    let exit = match started.instance.status {
        InstanceStatus::Skipped => ExitStatus::Canceled,
        _ => ExitStatus::Success,
    };
    Ok(started_response(&started, Some(exit.code())))
}

/// Records an instance of registered workflow `name` (the API's start, the
/// inspector's form): made now, or the one the key started before.
pub(super) async fn start_in(
    l: &super::db::Local,
    name: &str,
    inputs: Map<String, Value>,
    labels: Vec<(String, String)>,
    key: Option<String>,
    by: Actor,
) -> Result<registry::Started, ApiError> {
    let mut c = l.conn().await?;
    let row = registered(&c, name).await?;
    let wf = registry::definition(&c, &row).await?;
    let detail = key
        .as_ref()
        .map(|k| format!("idempotency key {k}"))
        .unwrap_or_default();
    let id = key.map(|k| registry::keyed_id(&format!("api {name}"), &k));
    let start = registry::Start {
        inputs,
        labels,
        id,
        by,
        detail,
    };
    Ok(registry::start(&mut c, &row, &wf, start).await?)
}

/// What a start answers (the API's, with `exit`; a webhook's): 201 and the
/// instance it made, or 200 and the one its key (or dedupe value) made
/// before.
pub(super) fn started_response(started: &registry::Started, exit: Option<u8>) -> Response {
    let i = &started.instance;
    let status = if started.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let view = Started {
        id: &i.id,
        workflow: &i.workflow,
        status: ShownStatus::of(i),
        exit_code: exit,
        created: started.created,
    };
    (status, Json(view)).into_response()
}

/// `POST /api/v1/instances/{id}/signal` `{event, data?}`: `wf signal`.
pub async fn signal(
    State(app): State<App>,
    Extension(who): Extension<Principal>,
    Path(id): Path<String>,
    Body(SignalBody { event, data }): Body<SignalBody>,
) -> Result<Response, ApiError> {
    let id = instance_ref(&id)?;
    let ev = event.clone();
    let (id, delivered) = app
        .db
        .run(move |l| async move { signal_in(&l, &id, &ev, data, &who.actor).await })
        .await?;
    let view = SignalView {
        warning: delivered.warning.as_deref(),
        ..SignalView::delivered(&id, &event)
    };
    Ok(Json(view).into_response())
}

/// Delivers `event` with `data` to instance `id` (any unique prefix).
pub(super) async fn signal_in(
    l: &super::db::Local,
    id: &str,
    event: &str,
    data: Value,
    by: &Actor,
) -> Result<(InstanceId, actions::Delivered), ApiError> {
    let mut c = l.conn().await?;
    let id = c.resolve_id(id).await?;
    let delivered = actions::signal(&mut c, &id, event, data, None, by).await?;
    Ok((id, delivered))
}

/// `POST /api/v1/instances/{id}/cancel` (no body): `wf cancel`.
pub async fn cancel(
    State(app): State<App>,
    Extension(who): Extension<Principal>,
    Path(id): Path<String>,
    Body(NoBody {}): Body<NoBody>,
) -> Result<Response, ApiError> {
    cancel_as(app, id, false, who.actor).await
}

/// `POST /api/v1/instances/{id}/terminate` (no body): `wf cancel --terminate`.
pub async fn terminate(
    State(app): State<App>,
    Extension(who): Extension<Principal>,
    Path(id): Path<String>,
    Body(NoBody {}): Body<NoBody>,
) -> Result<Response, ApiError> {
    cancel_as(app, id, true, who.actor).await
}

async fn cancel_as(app: App, id: String, terminate: bool, by: Actor) -> Result<Response, ApiError> {
    let id = instance_ref(&id)?;
    let id = app
        .db
        .run(move |l| async move { cancel_in(&l, &id, terminate, &by, "").await })
        .await?;
    Ok(accepted(Accepted {
        id: &id,
        status: Accepting::Canceling,
    }))
}

/// Asks instance `id` to cancel (`terminate`: without compensations); one
/// no live process runs is canceled here, in the background.
pub(super) async fn cancel_in(
    l: &Rc<super::db::Local>,
    id: &str,
    terminate: bool,
    by: &Actor,
    reason: &str,
) -> Result<InstanceId, ApiError> {
    let mut c = l.conn().await?;
    let id = c.resolve_id(id).await?;
    let asked = actions::cancel(&mut c, &id, terminate, by, reason).await?;
    if asked.held_by.is_none() {
        drive(l, asked.run);
    }
    Ok(id)
}

/// `POST /api/v1/instances/{id}/resume` `{now?}`: `wf resume [--now]`.
pub async fn resume(
    State(app): State<App>,
    Extension(who): Extension<Principal>,
    Path(id): Path<String>,
    Body(ResumeBody { now, no_cache }): Body<ResumeBody>,
) -> Result<Response, ApiError> {
    let how = actions::Resume {
        now: now.unwrap_or(false),
        retry: false,
        no_cache: no_cache.unwrap_or(false),
    };
    go_on(app, id, how, who.actor).await
}

/// `POST /api/v1/instances/{id}/retry` (no body): `wf resume --retry-failed`.
pub async fn retry(
    State(app): State<App>,
    Extension(who): Extension<Principal>,
    Path(id): Path<String>,
    Body(NoBody {}): Body<NoBody>,
) -> Result<Response, ApiError> {
    let how = actions::Resume {
        now: false,
        retry: true,
        no_cache: false,
    };
    go_on(app, id, how, who.actor).await
}

async fn go_on(
    app: App,
    id: String,
    how: actions::Resume,
    by: Actor,
) -> Result<Response, ApiError> {
    let id = instance_ref(&id)?;
    let (id, was) = app
        .db
        .run(move |l| async move { go_on_in(&l, &id, how, &by).await })
        .await?;
    Ok(accepted(Accepted {
        id: &id,
        status: Accepting::Resuming(was),
    }))
}

/// Resumes instance `id` in the background, as `how` says (`now`: firing
/// a timer not yet due; `retry`: giving failed steps a fresh attempt
/// budget; `no_cache`: `cache:` steps run without looking).
pub(super) async fn go_on_in(
    l: &Rc<super::db::Local>,
    id: &str,
    how: actions::Resume,
    by: &Actor,
) -> Result<(InstanceId, ShownStatus), ApiError> {
    let c = l.conn().await?;
    let id = c.resolve_id(id).await?;
    let ready = actions::resume(&c, &id, how, by).await?;
    let status = ready.status;
    drive(l, ready.run);
    Ok((id, status))
}

/// `POST /api/v1/instances/{id}/restart` `{from, as?}`: `wf restart`.
pub async fn restart(
    State(app): State<App>,
    Extension(who): Extension<Principal>,
    Path(id): Path<String>,
    Body(RestartBody { from, as_id }): Body<RestartBody>,
) -> Result<Response, ApiError> {
    let id = instance_ref(&id)?;
    let f = from.clone();
    let (target, steps) = app
        .db
        .run(move |l| async move { restart_in(&l, &id, &f, as_id.as_deref(), &who.actor).await })
        .await?;
    Ok(accepted(RestartAccepted {
        id: &target,
        from: &from,
        steps: &steps,
        status: Accepting::Restarting,
    }))
}

/// Restarts ended instance `id` from step `from` (with `as_id`: a copy),
/// in the background.
pub(super) async fn restart_in(
    l: &Rc<super::db::Local>,
    id: &str,
    from: &str,
    as_id: Option<&str>,
    by: &Actor,
) -> Result<(InstanceId, Vec<String>), ApiError> {
    let mut c = l.conn().await?;
    let id = c.resolve_id(id).await?;
    let r = actions::prepare_restart(&mut c, &id, from, as_id, by).await?;
    let target = r.run.id.clone();
    drive(l, r.run);
    Ok((target, r.reset_steps))
}

/// Drives `run` in the background, on the server's thread; its end (or
/// why it could not go on) is said in the server's log, as a worker's are.
pub(super) fn drive(local: &Rc<super::db::Local>, run: actions::ToRun) {
    let location = local.location.clone();
    let printer = local.printer.clone();
    local.background(async move {
        let actions::ToRun { id, opts } = run;
        let ended = async {
            let mut store = crate::store::Store::open(&location).await?;
            engine::drive::drive(&mut store, &id, opts, &engine::UNOBSERVED).await
        }
        .await;
        let log = crate::worker_log::WorkerLog {
            printer: &printer,
            json: false,
        };
        match ended {
            Ok(outcome) => log.run_ended(&id, &outcome),
            Err(e) => log.run_failed(&id, &e),
        }
    });
}

/// `POST /api/v1/tokens` `{name, scope}` (`admin`): `wf serve token add`;
/// 201 with the token, shown this once.
pub async fn add_token(
    State(app): State<App>,
    Extension(who): Extension<Principal>,
    Body(TokenBody { name, scope }): Body<TokenBody>,
) -> Result<Response, ApiError> {
    let added = app
        .db
        .run(move |l| async move {
            let mut c = l.conn().await?;
            Ok::<_, ApiError>(crate::engine::tokens::add(&mut c, &name, scope, &who.actor).await?)
        })
        .await?;
    let view = crate::views::TokenAdded {
        view: crate::views::TokenView::from(&added.row),
        token: &added.token,
    };
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

/// `DELETE /api/v1/tokens/{name}` (`admin`): `wf serve token revoke`; 204.
pub async fn revoke_token(
    State(app): State<App>,
    Extension(who): Extension<Principal>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    app.db
        .run(move |l| async move {
            let mut c = l.conn().await?;
            Ok::<_, ApiError>(crate::engine::tokens::revoke(&mut c, &name, &who.actor).await?)
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
