//! `wf inspect ID --json`: an instance, its runs, its steps (with every
//! attempt, when asked), the events it received and the schedule entry that
//! started it.

use super::ShownStatus;
use crate::store::{self, AttemptRow, DeliveredEvent, FireRecord, RunRow, StepRow};
use crate::vocab::{
    ActionKind, Actor, AttemptOutcome, ErrorType, InstanceId, RunEnd, StepStatus, Timestamp,
    UnitKeyBuf,
};
use serde_json::Value;
use std::collections::HashMap;

/// An instance as `wf inspect --json` shows it (docs/commands.md).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct InstanceView<'a> {
    pub id: &'a InstanceId,
    pub workflow: &'a str,
    pub status: ShownStatus,
    pub inputs: &'a Value,
    /// Its labels (`{}` for none).
    pub labels: &'a crate::store::Labels,
    pub state: &'a Value,
    pub definition_hash: &'a str,
    /// After `wf upgrade`: each definition it ran or will run, oldest
    /// first, with the first run on it (absent for an instance never
    /// moved).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub definitions: Vec<DefinitionUse<'a>>,
    #[schema(required)]
    pub error: Option<&'a str>,
    #[schema(required)]
    pub wake_at: Option<Timestamp>,
    #[schema(required)]
    pub waiting_event: Option<&'a str>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub runs: Vec<RunView<'a>>,
    pub steps: Vec<StepView<'a>>,
    /// The schedule entry and fire time that started it, if one did.
    #[schema(required)]
    pub schedule: Option<FireView<'a>>,
    /// Every event delivered, in the order received.
    pub events: Vec<EventView<'a>>,
    /// The `workflow:` step attempt that made it, if it is a child.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentView<'a>>,
    /// The instances its `workflow:` steps made, oldest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<ChildView<'a>>,
    /// Its place under its workflow's `queue:`, if it has one (set by the
    /// caller, which reads where a queued one stands).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<super::QueueStanding<'a>>,
    /// Who started it (`null` for an instance from before actions were
    /// recorded).
    #[schema(required)]
    pub started_by: Option<&'a Actor>,
    /// Who did what to it, oldest first (SPEC §3 Actions are recorded).
    pub actions: Vec<ActionView<'a>>,
}

/// A definition an upgraded instance ran on: `{hash, from_run}` (with
/// `wf inspect --definitions`, its text, and the diff from the one before).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct DefinitionUse<'a> {
    pub hash: &'a str,
    /// The first run on it (the next run's number, for the definition an
    /// upgrade moved it onto and that has not run yet).
    pub from_run: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<&'a str>,
    /// A unified diff from the definition before it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

/// The definitions `runs` used, in order, then `current` (the instance's)
/// if the last run did not use it: empty when there was only ever one.
/// Runs from a history that did not record theirs are passed over.
pub fn definition_uses<'a>(runs: &'a [RunRow], current: &'a str) -> Vec<DefinitionUse<'a>> {
    let mut out: Vec<DefinitionUse<'a>> = crate::engine::upgrade::uses(runs, current)
        .into_iter()
        .map(|(hash, from_run)| DefinitionUse {
            hash,
            from_run,
            source: None,
            diff: None,
        })
        .collect();
    if out.len() < 2 {
        out.clear();
    }
    out
}

/// Every definition an instance's runs used, with its text and, after the
/// first, a unified diff from the one before (`wf inspect --definitions`,
/// `GET /api/v1/instances/{id}/definitions`): one entry for an instance
/// never upgraded.
pub fn definition_texts(
    texts: &[crate::engine::actions::DefinitionText],
) -> Vec<DefinitionUse<'_>> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| DefinitionUse {
            hash: &t.hash,
            from_run: t.from_run,
            source: Some(&t.source),
            diff: i.checked_sub(1).map(|p| {
                let before = &texts[p];
                similar::TextDiff::from_lines(&before.source, &t.source)
                    .unified_diff()
                    .context_radius(3)
                    .header(
                        crate::vocab::short(&before.hash),
                        crate::vocab::short(&t.hash),
                    )
                    .to_string()
            }),
        })
        .collect()
}

/// A recorded action: `{at, action, actor, detail}`.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ActionView<'a> {
    pub at: Timestamp,
    pub action: ActionKind,
    pub actor: &'a Actor,
    pub detail: &'a str,
}

impl<'a> From<&'a store::ActionRow> for ActionView<'a> {
    fn from(a: &'a store::ActionRow) -> Self {
        ActionView {
            at: a.at,
            action: a.action,
            actor: &a.actor,
            detail: &a.detail,
        }
    }
}

/// Where a child comes from: `{id, step, attempt}` (`step`: the unit key,
/// `deploy[2]` for an item).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ParentView<'a> {
    pub id: &'a InstanceId,
    pub step: &'a str,
    pub attempt: i64,
}

/// A child instance, as its parent's `wf inspect` lists it.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ChildView<'a> {
    pub id: &'a InstanceId,
    /// The parent's unit that made it, and the attempt.
    pub step: &'a str,
    pub attempt: i64,
    pub workflow: &'a str,
    pub status: ShownStatus,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A run of the instance.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct RunView<'a> {
    pub number: i64,
    /// None while it runs (or its runner died and no run closed it yet).
    #[schema(required)]
    pub outcome: Option<RunEnd>,
    pub started_at: Timestamp,
    #[schema(required)]
    pub finished_at: Option<Timestamp>,
    /// `wf restart --from STEP`: the step it started again from.
    #[schema(required)]
    pub restart_from: Option<&'a str>,
    /// The definition it ran (null in a history from before runs
    /// recorded it).
    #[schema(required)]
    pub definition_hash: Option<&'a str>,
}

/// A unit of the instance: a step, a `for_each` item or a compensation.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct StepView<'a> {
    /// Its key: `id`, `id[n]` or `id:compensate`.
    pub id: &'a str,
    /// How a `matrix` combination is shown: by its values,
    /// `build[os=linux,arch=arm64]` (absent for any other unit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub status: StepStatus,
    /// How many attempts it made.
    pub attempts: i64,
    /// Its last attempt's outcome.
    #[schema(required)]
    pub outcome: Option<AttemptOutcome>,
    #[schema(required)]
    pub error_type: Option<&'a ErrorType>,
    #[schema(required)]
    pub error_message: Option<&'a str>,
    #[schema(required)]
    pub started_at: Option<Timestamp>,
    #[schema(required)]
    pub finished_at: Option<Timestamp>,
    pub output: &'a Value,
    /// A step the instance's definition no longer has (`wf upgrade` removed
    /// it): its history stays (absent otherwise).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub removed: bool,
    /// When a `retrying`, `sleeping` or `waiting` unit goes on (absent
    /// otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake_at: Option<Timestamp>,
    /// Its attempts, with `--attempts` (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt_list: Option<Vec<AttemptView<'a>>>,
}

/// An attempt of a unit (`--attempts`).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct AttemptView<'a> {
    pub attempt: i64,
    pub run: i64,
    /// None while it runs.
    #[schema(required)]
    pub outcome: Option<AttemptOutcome>,
    #[schema(required)]
    pub error_type: Option<&'a ErrorType>,
    #[schema(required)]
    pub error_message: Option<&'a str>,
    #[schema(required)]
    pub exit_code: Option<i64>,
    pub started_at: Timestamp,
    #[schema(required)]
    pub finished_at: Option<Timestamp>,
    /// A `cached` attempt: the attempt whose result it took (absent
    /// otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_from: Option<&'a crate::store::CachedFrom>,
}

/// An event delivered to the instance.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct EventView<'a> {
    pub name: &'a str,
    /// Its payload (null if the stored text is not JSON).
    pub data: Value,
    pub received_at: Timestamp,
    /// The key of the unit whose `wait_for_event` took it; None while none
    /// has.
    #[schema(required)]
    pub consumed_by: Option<&'a str>,
}

/// The schedule entry and fire time that started an instance.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct FireView<'a> {
    pub workflow: &'a str,
    /// The entry's position in the workflow's `on.schedule`.
    pub index: i64,
    pub spec: &'a str,
    #[schema(required)]
    pub timezone: Option<&'a str>,
    pub fire_at: Timestamp,
}

impl<'a> InstanceView<'a> {
    /// What `view` shows, its steps in the order given (see
    /// [`ordered_steps`]); `with_attempts`: each step lists its attempts
    /// (read when the view was, [`Store::view`](crate::store::Store::view)).
    pub fn new(view: &'a store::InstanceView, with_attempts: bool) -> InstanceView<'a> {
        let inst = &view.instance;
        let mut by_key: HashMap<&str, Vec<&AttemptRow>> = HashMap::new();
        if with_attempts {
            for a in &view.attempts {
                by_key.entry(a.step_key.as_str()).or_default().push(a);
            }
        }
        let labels = unit_labels(&view.steps);
        let step = |s: &'a StepRow| StepView {
            label: labels.get(s.key.as_str()).cloned(),
            attempt_list: with_attempts.then(|| {
                by_key
                    .get(s.key.as_str())
                    .into_iter()
                    .flatten()
                    .map(|a| AttemptView::from(*a))
                    .collect()
            }),
            ..StepView::from(s)
        };
        InstanceView {
            id: &inst.id,
            workflow: &inst.workflow,
            status: ShownStatus::of(inst),
            inputs: &inst.inputs,
            labels: &inst.labels,
            state: &inst.state,
            definition_hash: &inst.definition_hash,
            definitions: definition_uses(&view.runs, &inst.definition_hash),
            error: inst.error.as_deref(),
            wake_at: inst.wake_at,
            waiting_event: inst.waiting_event.as_deref(),
            created_at: inst.created_at,
            updated_at: inst.updated_at,
            runs: view.runs.iter().map(RunView::from).collect(),
            steps: view.steps.iter().map(step).collect(),
            schedule: view.fire.as_ref().map(FireView::from),
            events: view.events.iter().map(EventView::from).collect(),
            parent: inst.parent.as_ref().map(|p| ParentView {
                id: &p.id,
                step: &p.key,
                attempt: p.attempt,
            }),
            children: view
                .children
                .iter()
                .filter_map(|c| {
                    let p = c.parent.as_ref()?;
                    Some(ChildView {
                        id: &c.id,
                        step: &p.key,
                        attempt: p.attempt,
                        workflow: &c.workflow,
                        status: ShownStatus::of(c),
                        created_at: c.created_at,
                        updated_at: c.updated_at,
                    })
                })
                .collect(),
            queue: inst
                .queue
                .as_ref()
                .map(|q| super::QueueStanding::new(q, None)),
            started_by: inst.started_by.as_ref(),
            actions: view.actions.iter().map(ActionView::from).collect(),
        }
    }
}

/// How the units of `steps` that are `matrix` combinations are shown, by
/// key: `build[os=linux]`, `build[os=linux]:compensate` (from the
/// combinations their step's own row pinned).
pub fn unit_labels(steps: &[StepRow]) -> HashMap<String, String> {
    let matrices: HashMap<&str, &StepRow> = steps
        .iter()
        .filter(|s| s.key.is_step() && s.items.is_object())
        .map(|s| (s.step_id.as_str(), s))
        .collect();
    if matrices.is_empty() {
        return HashMap::new();
    }
    steps
        .iter()
        .filter_map(|s| {
            let parts = s.key.parts();
            let label = matrices.get(parts.step)?.unit_label(parts)?;
            Some((s.key.to_string(), label))
        })
        .collect()
}

impl<'a> From<&'a RunRow> for RunView<'a> {
    fn from(r: &'a RunRow) -> RunView<'a> {
        RunView {
            number: r.number,
            outcome: r.outcome,
            started_at: r.started_at,
            finished_at: r.finished_at,
            restart_from: r.restart_from.as_deref(),
            definition_hash: r.definition_hash.as_deref(),
        }
    }
}

impl<'a> From<&'a StepRow> for StepView<'a> {
    /// The unit without its attempts.
    fn from(s: &'a StepRow) -> StepView<'a> {
        StepView {
            id: &s.key,
            status: s.status,
            attempts: s.attempts,
            outcome: s.outcome,
            error_type: s.error_type.as_ref(),
            error_message: s.error_message.as_deref(),
            started_at: s.started_at,
            finished_at: s.finished_at,
            output: &s.output,
            label: None,
            removed: false,
            wake_at: s.retry_at.filter(|_| s.status.is_timed()),
            attempt_list: None,
        }
    }
}

impl<'a> From<&'a AttemptRow> for AttemptView<'a> {
    fn from(a: &'a AttemptRow) -> AttemptView<'a> {
        AttemptView {
            attempt: a.attempt,
            run: a.run,
            outcome: a.outcome,
            error_type: a.error_type.as_ref(),
            error_message: a.error_message.as_deref(),
            exit_code: a.exit_code,
            started_at: a.started_at,
            finished_at: a.finished_at,
            cached_from: a.cached_from.as_ref(),
        }
    }
}

impl<'a> From<&'a DeliveredEvent> for EventView<'a> {
    fn from(e: &'a DeliveredEvent) -> EventView<'a> {
        EventView {
            name: &e.name,
            data: serde_json::from_str(&e.payload).unwrap_or(Value::Null),
            received_at: e.received_at,
            consumed_by: e.consumed_by.as_deref(),
        }
    }
}

impl<'a> From<&'a FireRecord> for FireView<'a> {
    fn from(f: &'a FireRecord) -> FireView<'a> {
        FireView {
            workflow: &f.workflow,
            index: f.index,
            spec: &f.spec,
            timezone: f.timezone.as_deref(),
            fire_at: f.fire_at,
        }
    }
}

/// The units `wf inspect` shows, in its order: the steps of `step_ids` (the
/// pinned definition's, in definition order; one with no row yet as
/// `pending`), each followed by its `for_each` items, then compensations in
/// the order they ran and rows of steps the definition no longer names
/// (those not started last). Rows a restart (or a `--retry-failed` that ran
/// compensated steps again) left as placeholders are left out: the
/// compensation of a step run again, until it is needed again, and the
/// items of a `for_each` list that shrank. They only carry attempt numbers
/// (their attempts stay in `--attempts`).
/// What `engine::actions::inspect` read, its steps in [`ordered_steps`]'s
/// order: what `wf inspect` and the API show.
pub fn ordered(mut read: crate::engine::actions::Inspected) -> crate::engine::actions::Inspected {
    read.view.steps = ordered_steps(&read.step_ids, std::mem::take(&mut read.view.steps));
    read
}

/// `wf inspect --json`'s document of what `engine::actions::inspect` read
/// (and [`ordered`] put in order).
pub fn inspect_view(read: &crate::engine::actions::Inspected, attempts: bool) -> InstanceView<'_> {
    let mut shown = InstanceView::new(&read.view, attempts);
    for (v, row) in shown.steps.iter_mut().zip(&read.view.steps) {
        v.removed = removed(&read.step_ids, row);
    }
    if let Some(q) = &read.view.instance.queue {
        shown.queue = Some(super::QueueStanding::new(q, read.standing.as_ref()));
    }
    shown
}

/// Whether `row` belongs to a step that the definition of `step_ids` (in
/// file order; empty when it could not be read) no longer has.
pub fn removed(step_ids: &[String], row: &StepRow) -> bool {
    !step_ids.is_empty() && !step_ids.contains(&row.step_id)
}

/// An attempt with its unit (`GET /api/v1/instances/{id}/attempts`).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct StepAttempt<'a> {
    pub step: &'a str,
    #[serde(flatten)]
    pub attempt: &'a AttemptView<'a>,
}

impl<'a> InstanceView<'a> {
    /// Every attempt of every unit, in the units' order (`--attempts`).
    pub fn all_attempts(&'a self) -> Vec<StepAttempt<'a>> {
        self.steps
            .iter()
            .flat_map(|s| {
                s.attempt_list.iter().flatten().map(|attempt| StepAttempt {
                    step: s.id,
                    attempt,
                })
            })
            .collect()
    }
}

pub fn ordered_steps(step_ids: &[String], rows: Vec<StepRow>) -> Vec<StepRow> {
    let lists: HashMap<UnitKeyBuf, usize> = rows
        .iter()
        .filter(|r| r.key == r.step_id)
        .filter_map(|r| Some((r.key.clone(), r.fan()?.len())))
        .collect();
    let rows = rows.into_iter().filter(|r| {
        let key = r.key.parts();
        let placeholder_compensation = key.compensation && r.status == StepStatus::Pending;
        let dropped_item = !key.compensation
            && key
                .item
                .is_some_and(|i| lists.get(r.step_id.as_str()).is_some_and(|&len| i >= len));
        !placeholder_compensation && !dropped_item
    });
    // Rows by the step they belong to: the step itself, its for_each items, its compensations.
    let mut by_step: HashMap<String, Vec<StepRow>> = HashMap::new();
    for r in rows {
        by_step.entry(r.step_id.clone()).or_default().push(r);
    }
    let mut out = Vec::new();
    let mut rest = Vec::new();
    for id in step_ids {
        let group = by_step.remove(id).unwrap_or_default();
        // The step's own row first, then its items in order.
        let (mut own, others): (Vec<StepRow>, Vec<StepRow>) =
            group.into_iter().partition(|r| !r.key.is_compensation());
        own.sort_by_key(|r| r.key.parts().item.map_or(0, |i| i.saturating_add(1)));
        if own.first().is_none_or(|r| r.key != *id) {
            out.push(StepRow::pending(id, id));
        }
        out.extend(own);
        rest.extend(others);
    }
    // Compensations (in the order they ran: the reverse of their steps'),
    // and rows of steps the definition no longer names; those not started
    // last.
    rest.extend(by_step.into_values().flatten());
    rest.sort_by(|a, b| {
        (a.started_at.is_none(), &a.started_at, &a.key).cmp(&(
            b.started_at.is_none(),
            &b.started_at,
            &b.key,
        ))
    });
    out.extend(rest);
    out
}
