//! The API's upgrades (`wf upgrade`, SPEC §3 Upgrades), onto the definition
//! registered under the workflow's name (`wf workflow add` of the new
//! version): the server moves instances onto what it has, never onto a file
//! a request names. `POST /api/v1/instances/{id}/upgrade` answers the one
//! instance's plan (200), or refuses as the CLI exits: 409 `held` naming
//! its holder, 409 `conflict` for a refused plan or a status an upgrade
//! does not move. `POST /api/v1/workflows/{name}/upgrade` answers every
//! instance's outcome (200), as `wf upgrade --workflow NAME --json` prints
//! them: one held among a thousand does not undo the others. A dry run
//! writes nothing and answers the plans (200). The engine decides
//! (`engine::upgrade`); this and the inspector's form render.

use super::App;
use super::auth::Principal;
use super::body::{Body, UpgradeBody};
use super::error::ApiError;
use super::params::instance_ref;
use crate::engine::upgrade::{self, Done, Request, Targets, Verdict};
use crate::error_kind::ErrorKind;
use crate::vocab::{Actor, InstanceId};
use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::response::{IntoResponse, Response};

/// What an upgrade asks besides its instances.
#[derive(Debug, Clone, Default)]
pub struct Asked {
    pub renames: Vec<(String, String)>,
    pub allow_gaps: bool,
    pub children: bool,
    pub dry_run: bool,
}

impl Asked {
    /// The request of `targets` onto `to`, by `actor`.
    fn request<'a>(
        &'a self,
        targets: Targets<'a>,
        to: &'a upgrade::Target,
        actor: &'a Actor,
    ) -> Request<'a> {
        Request {
            targets,
            to,
            renames: &self.renames,
            allow_gaps: self.allow_gaps,
            children: self.children,
            dry_run: self.dry_run,
            actor,
        }
    }
}

impl From<UpgradeBody> for Asked {
    fn from(b: UpgradeBody) -> Asked {
        Asked {
            renames: b.map.unwrap_or_default().into_iter().collect(),
            allow_gaps: b.allow_gaps.unwrap_or(false),
            children: b.children.unwrap_or(false),
            dry_run: b.dry_run.unwrap_or(false),
        }
    }
}

/// `POST /api/v1/instances/{id}/upgrade` `{map?, allow_gaps?, dry_run?}`.
pub async fn instance(
    State(app): State<App>,
    Extension(who): Extension<Principal>,
    Path(id): Path<String>,
    Body(b): Body<UpgradeBody>,
) -> Result<Response, ApiError> {
    let id = instance_ref(&id)?;
    let asked = Asked::from(b);
    let dry_run = asked.dry_run;
    let done = app
        .db
        .run(move |l| async move { upgrade_one(&l, &id, &asked, &who.actor).await })
        .await?;
    if !dry_run {
        refusal(&done.done)?;
    }
    Ok(Json(done).into_response())
}

/// `POST /api/v1/workflows/{name}/upgrade` `{map?, allow_gaps?, dry_run?}`.
pub async fn workflow(
    State(app): State<App>,
    Extension(who): Extension<Principal>,
    Path(name): Path<String>,
    Body(b): Body<UpgradeBody>,
) -> Result<Response, ApiError> {
    let asked = Asked::from(b);
    let done = app
        .db
        .run(move |l| async move {
            let mut c = l.conn().await?;
            let to = upgrade::registered_target(&c, &name).await?;
            let req = asked.request(Targets::Workflow(&name), &to, &who.actor);
            Ok(upgrade::upgrade(&mut c, &req).await?)
        })
        .await?;
    Ok(Json(done).into_response())
}

/// Upgrades instance `id` (any unique prefix) onto its workflow's
/// registered definition: the API's route and the inspector's form.
pub(super) async fn upgrade_one(
    l: &super::db::Local,
    id: &str,
    asked: &Asked,
    by: &Actor,
) -> Result<One, ApiError> {
    let mut c = l.conn().await?;
    let id: InstanceId = c.resolve_id(id).await?;
    let workflow = c.instance(&id).await?.workflow;
    let to = upgrade::registered_target(&c, &workflow).await?;
    let ids = [id];
    let req = asked.request(Targets::Ids(&ids), &to, by);
    let mut done = upgrade::upgrade(&mut c, &req).await?.into_iter();
    let first = done
        .next()
        .ok_or_else(|| ApiError::internal("an upgrade of one instance answered none"))?;
    Ok(One {
        done: first,
        children: done.collect(),
    })
}

/// An instance's upgrade: its answer, and its children's (`children`).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct One {
    #[serde(flatten)]
    pub done: Done,
    /// Its children's answers, when they were asked for too.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Done>,
}

/// The error an instance's answer is, when it was not moved: what `wf
/// upgrade` exits with, as the API says it (5 `held`, 1 `conflict`).
pub(super) fn refusal(d: &Done) -> Result<(), ApiError> {
    let Some(why) = d.why_not_in(crate::engine::Words::Http) else {
        return Ok(());
    };
    let kind = match d.outcome {
        Verdict::Held => ErrorKind::Held,
        _ => ErrorKind::Conflict,
    };
    Err(ApiError::new(kind, why))
}
