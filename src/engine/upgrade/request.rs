//! `wf upgrade` as one request, the way both interfaces ask it: the
//! instances asked for are previewed, and unless it is a dry run each one
//! whose plan is not refused is applied in its own commit (planned again
//! under its fence). The CLI prints the answers and exits by them; `wf
//! serve` answers them as JSON. Neither decides what an answer means: the
//! [`Verdict`] says.

use super::apply::{Applied, Target, apply};
use super::plan::Plan;
use super::preview::{Outcome, Preview, Targets, preview};
use crate::engine::{EngineError, registry};
use crate::store::Store;
use crate::vocab::{Actor, InstanceId};
use crate::workflow::Workflow;

/// An upgrade asked for.
pub struct Request<'a> {
    pub targets: Targets<'a>,
    pub to: &'a Target,
    /// `--map OLD=NEW` (the API's `map`).
    pub renames: &'a [(String, String)],
    pub allow_gaps: bool,
    /// `--children`: each moved instance's children that have not ended
    /// are moved too, onto the definitions the new one calls at their
    /// steps (and theirs, in turn).
    pub children: bool,
    pub dry_run: bool,
    pub actor: &'a Actor,
}

/// What became of one instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Moved onto the new definition as its plan says.
    Upgraded,
    /// A dry run: it would be moved as its plan says.
    Planned,
    /// Not moved: its plan says why.
    Refused,
    /// Not moved: it runs, held by `holder`.
    Held,
    /// Not moved: it is not in a status an upgrade moves (`status`).
    NotMovable,
    /// Not moved: it is an instance of another workflow (`workflow`).
    OtherWorkflow,
    /// Already on the new definition: nothing to do (an upgrade asked
    /// again after one was interrupted moves only the rest).
    Current,
}

/// One instance's answer (`wf upgrade --json`'s element; the API's).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct Done {
    pub id: InstanceId,
    /// For a child moved with its parent (`--children`): the parent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<InstanceId>,
    pub outcome: Verdict,
    /// Its status, when that is why it was not moved (or, in a dry run,
    /// as it is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<Plan>,
}

impl Done {
    fn new(id: InstanceId, outcome: Verdict) -> Done {
        Done {
            id,
            parent: None,
            outcome,
            status: None,
            holder: None,
            workflow: None,
            plan: None,
        }
    }
}

impl Done {
    /// Why it was not moved, in one line, in the CLI's words (none: it
    /// was, or would be).
    pub fn why_not(&self) -> Option<String> {
        self.why_not_in(crate::engine::Words::Cli)
    }

    /// [`Done::why_not`], its flags named as `words` names them.
    pub fn why_not_in(&self, words: crate::engine::Words) -> Option<String> {
        let id = &self.id;
        Some(match self.outcome {
            Verdict::Upgraded | Verdict::Planned | Verdict::Current => return None,
            Verdict::Held => format!(
                "instance {id} is running in another process ({}): not upgraded",
                self.holder.as_deref().unwrap_or("?")
            ),
            Verdict::Refused => {
                let why: Vec<String> = self
                    .plan
                    .iter()
                    .flat_map(|p| p.refusals.iter().map(|r| r.text(words)))
                    .collect();
                format!("instance {id} is not upgraded: {}", why.join("; "))
            }
            Verdict::NotMovable => format!(
                "instance {id} is {}: only an instance that is not running and has not ended is upgraded",
                self.status.unwrap_or("?")
            ),
            Verdict::OtherWorkflow => format!(
                "instance {id} is of workflow `{}`, not of the new definition's",
                self.workflow.as_deref().unwrap_or("?")
            ),
        })
    }
}

/// What the answers come to, as an exit status or an HTTP status says it:
/// one held (the command never waits) before one refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overall {
    /// Each was moved (or, in a dry run, would be).
    Moved,
    /// One or more was refused, not movable, or of another workflow.
    Refused,
    /// One or more runs in another process.
    Held,
}

/// The [`Overall`] of `done`.
pub fn overall(done: &[Done]) -> Overall {
    if done.iter().any(|d| d.outcome == Verdict::Held) {
        Overall::Held
    } else if done.iter().any(|d| {
        matches!(
            d.outcome,
            Verdict::Refused | Verdict::NotMovable | Verdict::OtherWorkflow
        )
    }) {
        Overall::Refused
    } else {
        Overall::Moved
    }
}

/// The definition registered as `name` (`wf workflow add`), as an upgrade's
/// target: what `wf upgrade` without `--to`, and the API, move onto.
pub async fn registered_target(store: &Store, name: &str) -> Result<Target, EngineError> {
    let row = registry::registered(store, name).await?;
    let wf: Workflow = registry::definition(store, &row).await?;
    Ok(Target {
        wf: std::sync::Arc::new(wf),
        workflow_path: row.workflow_path,
        base_dir: row.base_dir,
    })
}

/// Answers `req`, one instance after another, in the order asked (a
/// workflow's: newest first), each moved one's children after it when
/// they are asked for too.
pub async fn upgrade(store: &mut Store, req: &Request<'_>) -> Result<Vec<Done>, EngineError> {
    let previews = preview(store, req.targets, &req.to.wf, req.renames, req.allow_gaps).await?;
    let mut out = Vec::with_capacity(previews.len());
    for p in previews {
        let moves = matches!(&p.outcome, Outcome::Planned { plan } if !plan.is_refused());
        let done = if req.dry_run || !moves {
            from_preview(p)
        } else {
            let applied =
                apply(store, &p.id, req.to, req.renames, req.allow_gaps, req.actor).await?;
            from_applied(p.id, applied)
        };
        let moved = matches!(
            done.outcome,
            Verdict::Upgraded | Verdict::Planned | Verdict::Current
        );
        let parent = done.id.clone();
        out.push(done);
        if req.children && moved {
            for (child, to) in children(store, &parent, req.to, req.renames).await? {
                let ids = [child];
                let sub = Request {
                    targets: Targets::Ids(&ids),
                    to: &to,
                    renames: &[],
                    ..*req
                };
                for mut d in Box::pin(upgrade(store, &sub)).await? {
                    d.parent.get_or_insert_with(|| parent.clone());
                    out.push(d);
                }
            }
        }
    }
    Ok(out)
}

/// The children of `parent` that have not ended, each with the definition
/// the new one (`to`) calls at the step that made it (`renames`: the
/// parent's `--map`). A child whose step the new definition no longer has,
/// or has as another kind of step, keeps its definition.
async fn children(
    store: &Store,
    parent: &InstanceId,
    to: &Target,
    renames: &[(String, String)],
) -> Result<Vec<(InstanceId, Target)>, EngineError> {
    let rows = store
        .list_instances(&crate::store::ListFilter {
            lineage: crate::store::Lineage::ChildrenOf(parent.clone()),
            ..Default::default()
        })
        .await?;
    let mut out = Vec::new();
    for c in rows.into_iter().filter(|c| !c.status.is_ended()) {
        let Some(made_by) = &c.parent else { continue };
        let step = crate::vocab::UnitKey::parse(made_by.key.as_str()).step;
        let step = renames
            .iter()
            .find(|(o, _)| o == step)
            .map_or(step, |(_, n)| n.as_str());
        let Some(crate::workflow::Action::Workflow(call)) = to.wf.step(step).map(|s| &s.action)
        else {
            continue;
        };
        let Some(wf) = to.wf.children.get(&call.path) else {
            continue;
        };
        let file = std::path::Path::new(&to.base_dir).join(&call.path);
        let base_dir = file
            .parent()
            .map_or_else(|| to.base_dir.clone(), |d| d.display().to_string());
        out.push((
            c.id,
            Target {
                wf: wf.clone(),
                workflow_path: file.display().to_string(),
                base_dir,
            },
        ));
    }
    Ok(out)
}

fn from_preview(p: Preview) -> Done {
    let mut d = Done::new(p.id, Verdict::Planned);
    d.status = Some(p.status);
    match p.outcome {
        Outcome::Planned { plan } => {
            if plan.is_refused() {
                d.outcome = Verdict::Refused;
            }
            d.plan = Some(plan);
        }
        Outcome::NotMovable { holder: Some(h) } => {
            d.outcome = Verdict::Held;
            d.holder = Some(h);
        }
        Outcome::NotMovable { holder: None } => d.outcome = Verdict::NotMovable,
        Outcome::OtherWorkflow { workflow } => {
            d.outcome = Verdict::OtherWorkflow;
            d.workflow = Some(workflow);
        }
        Outcome::Current => d.outcome = Verdict::Current,
    }
    d
}

fn from_applied(id: InstanceId, applied: Applied) -> Done {
    let mut d = Done::new(id, Verdict::Upgraded);
    match applied {
        Applied::Upgraded(plan) => d.plan = Some(plan),
        Applied::Refused(plan) => {
            d.outcome = Verdict::Refused;
            d.plan = Some(plan);
        }
        Applied::NotMovable { status } => {
            d.outcome = Verdict::NotMovable;
            d.status = Some(status.as_str());
        }
        Applied::Held { holder } => {
            d.outcome = Verdict::Held;
            d.holder = Some(holder);
        }
        Applied::OtherWorkflow { workflow } => {
            d.outcome = Verdict::OtherWorkflow;
            d.workflow = Some(workflow);
        }
        Applied::Current => d.outcome = Verdict::Current,
    }
    d
}
