//! What an upgrade would do to one instance (`wf upgrade`, SPEC §3
//! Upgrades): the old and the new definition matched step by step, with
//! what the instance's history says of each step, into a plan (kept,
//! removed, new, changed, unchanged) and the reasons it must be refused.
//! Deterministic and free of I/O: the same inputs give the same plan, which
//! `--dry-run` prints and the apply writes, and which unit tests check
//! without a database.
//!
//! The rules. Steps match by id (`--map OLD=NEW` renames). A step that is
//! done (completed or skipped) and that the new definition still has keeps
//! its result and is not run again, unless its kind changed (a `run` that
//! became a `sleep`: its result would not be what the new step makes), which
//! is refused. A step the new definition lacks is removed (its history
//! stays). A step that is new or changed and not done runs from the new
//! definition. A new step that a done step needs (upstream of it) would have
//! run before it: refused unless gaps are allowed (`--allow-gaps`: it runs
//! at the next resume). An input the new definition requires without a
//! default that the instance lacks is refused; one it adds with a default is
//! added with it.

use crate::store::QueuePlace;
use crate::vocab::{StepStatus, UnitKey};
use crate::workflow::{Action, Step, Workflow};
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// What becomes of one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Fate {
    /// Done, and in the new definition: its result is kept.
    Kept,
    /// Not in the new definition: its history stays, marked removed.
    Removed,
    /// Only in the new definition: runs at the next resume.
    New,
    /// In both, not done, and different: runs as the new definition says.
    Changed,
    /// In both, not done, the same.
    Unchanged,
}

impl Fate {
    pub fn as_str(self) -> &'static str {
        match self {
            Fate::Kept => "kept",
            Fate::Removed => "removed",
            Fate::New => "new",
            Fate::Changed => "changed",
            Fate::Unchanged => "unchanged",
        }
    }
}

/// One step's line of a plan.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct StepPlan {
    /// Its id in the new definition (in the old one, for a removed step).
    pub step: String,
    /// Its id in the old definition, when `--map` renamed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    pub fate: Fate,
    /// Where the instance's history has it (none: never reached).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<StepStatus>,
}

/// Why an upgrade of this instance is refused.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Refusal {
    /// A new step that the done step `before` needs: it would have run
    /// before it (`--allow-gaps` runs it at the next resume).
    Gap { step: String, before: String },
    /// A done step whose kind changed: its kept result is not what the new
    /// step makes.
    KindChanged {
        step: String,
        from: &'static str,
        to: &'static str,
    },
    /// An input the new definition requires, without a default, that the
    /// instance was not given.
    MissingInput { input: String },
    /// The new definition's `queue:` does not render for this instance's
    /// inputs.
    Queue { why: String },
    /// A `--map OLD=NEW` whose OLD the old definition lacks, or whose NEW
    /// the new one lacks.
    BadMap {
        old: String,
        new: String,
        why: &'static str,
    },
}

impl Refusal {
    /// It in words, the flags named as `words` names them (the CLI's
    /// `--allow-gaps`, the API's `allow_gaps`).
    pub fn text(&self, words: crate::engine::Words) -> String {
        let http = words == crate::engine::Words::Http;
        match self {
            Refusal::Gap { step, before } => format!(
                "new step `{step}` comes before `{before}`, which is done ({} runs it at the next resume)",
                if http { "`allow_gaps`" } else { "--allow-gaps" }
            ),
            Refusal::KindChanged { step, from, to } => format!(
                "step `{step}` is done as a `{from}` step and would be a `{to}` step: its result would not be the new step's"
            ),
            Refusal::MissingInput { input } => format!(
                "the new definition requires input `{input}`, which this instance was not given"
            ),
            Refusal::BadMap { old, new, why } if http => {
                format!("`map`'s `{old}`: `{new}`: {why}")
            }
            Refusal::BadMap { old, new, why } => format!("--map {old}={new}: {why}"),
            Refusal::Queue { why } => format!("the new definition's queue: {why}"),
        }
    }
}

/// The CLI's words ([`Refusal::text`]).
impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text(crate::engine::Words::Cli))
    }
}

/// What an upgrade would do to one instance.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct Plan {
    pub from: String,
    pub to: String,
    pub steps: Vec<StepPlan>,
    /// Inputs the new definition adds with a default, and that default.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub inputs_added: Map<String, Value>,
    /// Its queue key now and under the new definition, when its `queue:`
    /// place changes (key, priority or limits): it is admitted again
    /// under the new one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueMove>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refusals: Vec<Refusal>,
}

/// A queue key before and after (none: no `queue:`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct QueueMove {
    #[schema(required)]
    pub from: Option<String>,
    #[schema(required)]
    pub to: Option<String>,
}

impl QueueMove {
    /// As a line says it: "`old` -> `new`, admitted again there".
    pub fn words(&self) -> String {
        let key = |k: &Option<String>| {
            k.as_ref()
                .map_or_else(|| "none".to_string(), |k| format!("`{k}`"))
        };
        match &self.to {
            Some(_) => format!(
                "{} -> {}, admitted again there",
                key(&self.from),
                key(&self.to)
            ),
            None => format!("{} -> none, due at once if queued", key(&self.from)),
        }
    }
}

/// The queue place the new definition gives an instance now at `current`
/// with `inputs` (the new ones added): `None` when it stays where it is
/// (the same key, priority and limits, or no queue either way), else the
/// new place (`Some(None)`: no queue), not yet admitted. `Err`: it does
/// not render.
pub fn queue_after(
    current: Option<&QueuePlace>,
    new: &Workflow,
    inputs: &Value,
) -> Result<Option<Option<QueuePlace>>, String> {
    let place = crate::engine::render_queue(new, inputs).map_err(|e| e.to_string())?;
    let same = match (current, &place) {
        (None, None) => true,
        (Some(a), Some(b)) => a.key == b.key && a.priority == b.priority && a.limits == b.limits,
        _ => false,
    };
    Ok((!same).then_some(place))
}

impl Plan {
    pub fn is_refused(&self) -> bool {
        !self.refusals.is_empty()
    }

    /// How many of its steps have this fate.
    pub fn count(&self, fate: Fate) -> usize {
        self.steps.iter().filter(|s| s.fate == fate).count()
    }
}

/// A rename as written (`--map OLD=NEW`, the inspector's field): the two
/// ids, neither empty; `None` for anything else.
pub fn parse_rename(pair: &str) -> Option<(String, String)> {
    match pair.split_once('=') {
        Some((o, n)) if !o.is_empty() && !n.is_empty() => Some((o.to_string(), n.to_string())),
        _ => None,
    }
}

/// What the plan is made from, besides the two definitions.
pub struct Instance<'a> {
    /// Every unit's row of its history: (key, status).
    pub units: &'a [(String, StepStatus)],
    /// Its pinned inputs.
    pub inputs: &'a Map<String, Value>,
    /// Its place in a queue, if it has one.
    pub queue: Option<&'a QueuePlace>,
}

/// The plan that moves an instance from `old` to `new`. `renames`: the
/// `--map OLD=NEW` pairs.
pub fn plan(
    old: &Workflow,
    new: &Workflow,
    instance: &Instance<'_>,
    renames: &[(String, String)],
    allow_gaps: bool,
) -> Plan {
    let mut refusals = Vec::new();
    for (o, n) in renames {
        let why = if old.step(o).is_none() {
            Some("the instance's definition has no such step")
        } else if new.step(n).is_none() {
            Some("the new definition has no such step")
        } else if n != o && old.step(n).is_some() {
            // Its rows would take the name of another step's rows.
            Some("the instance's definition has a step of the new name too")
        } else {
            None
        };
        if let Some(why) = why {
            refusals.push(Refusal::BadMap {
                old: o.clone(),
                new: n.clone(),
                why,
            });
        }
    }
    let renamed = |o: &str| -> String {
        renames
            .iter()
            .find(|(from, _)| from == o)
            .map_or_else(|| o.to_string(), |(_, to)| to.clone())
    };
    let status_of = |id: &str| -> Option<StepStatus> {
        instance
            .units
            .iter()
            .find(|(k, _)| {
                let k = UnitKey::parse(k);
                k.is_step() && k.step == id
            })
            .map(|(_, s)| *s)
    };

    let mut steps = Vec::new();
    let mut matched: BTreeSet<String> = BTreeSet::new();
    // Done steps of the new definition: what a new step must not precede.
    let mut done_new: Vec<usize> = Vec::new();
    for o in &old.steps {
        let n = renamed(&o.id);
        let from = (n != o.id).then(|| o.id.clone());
        let status = status_of(&o.id);
        let done = status.is_some_and(StepStatus::is_done);
        let Some((at, ns)) = new.steps.iter().enumerate().find(|(_, s)| s.id == n) else {
            steps.push(StepPlan {
                step: o.id.clone(),
                from: None,
                fate: Fate::Removed,
                status,
            });
            continue;
        };
        matched.insert(n.clone());
        let fate = if done {
            done_new.push(at);
            let (a, b) = (kind(&o.action), kind(&ns.action));
            if a != b {
                refusals.push(Refusal::KindChanged {
                    step: n.clone(),
                    from: a,
                    to: b,
                });
            }
            Fate::Kept
        } else if same(old, o, new, ns, &renamed) {
            Fate::Unchanged
        } else {
            Fate::Changed
        };
        steps.push(StepPlan {
            step: n,
            from,
            fate,
            status,
        });
    }
    let mut new_ones = BTreeSet::new();
    for s in &new.steps {
        if !matched.contains(&s.id) {
            new_ones.insert(s.id.clone());
            steps.push(StepPlan {
                step: s.id.clone(),
                from: None,
                fate: Fate::New,
                status: None,
            });
        }
    }
    if !allow_gaps {
        for &d in &done_new {
            for up in upstream(new, d) {
                let id = &new.steps[up].id;
                if new_ones.contains(id) {
                    refusals.push(Refusal::Gap {
                        step: id.clone(),
                        before: new.steps[d].id.clone(),
                    });
                }
            }
        }
    }
    let mut inputs_added = Map::new();
    for (name, spec) in &new.inputs {
        if instance.inputs.contains_key(name) {
            continue;
        }
        match &spec.default {
            Some(v) => {
                inputs_added.insert(name.clone(), v.clone());
            }
            None if spec.required => refusals.push(Refusal::MissingInput {
                input: name.clone(),
            }),
            None => {}
        }
    }
    let mut inputs = instance.inputs.clone();
    inputs.extend(inputs_added.clone());
    let queue = match queue_after(instance.queue, new, &Value::Object(inputs)) {
        Ok(None) => None,
        Ok(Some(place)) => Some(QueueMove {
            from: instance.queue.map(|q| q.key.clone()),
            to: place.map(|q| q.key),
        }),
        Err(why) => {
            refusals.push(Refusal::Queue { why });
            None
        }
    };
    Plan {
        from: old.hash.clone(),
        to: new.hash.clone(),
        steps,
        inputs_added,
        queue,
        refusals,
    }
}

/// A step's kind, as a word.
pub fn kind(action: &Action) -> &'static str {
    match action {
        Action::Run(_) => "run",
        Action::Http(_) => "http",
        Action::Sleep(_) => "sleep",
        Action::WaitForEvent { .. } => "wait_for_event",
        Action::Workflow(_) => "workflow",
        Action::Noop => "set_state",
    }
}

/// Every step `at` needs, directly or not, in `wf`.
fn upstream(wf: &Workflow, at: usize) -> BTreeSet<usize> {
    let mut seen = BTreeSet::new();
    let mut todo: Vec<usize> = wf.steps[at].needs.clone();
    while let Some(i) = todo.pop() {
        if seen.insert(i) {
            todo.extend(wf.steps[i].needs.iter().copied());
        }
    }
    seen
}

/// Whether two steps say the same: everything but their position (their
/// `needs` compared by id, through the renames), and, for a call, the
/// child's definition.
fn same(
    old: &Workflow,
    o: &Step,
    new: &Workflow,
    n: &Step,
    renamed: &dyn Fn(&str) -> String,
) -> bool {
    let needs = |wf: &Workflow, s: &Step, map: bool| -> BTreeSet<String> {
        s.needs
            .iter()
            .map(|&i| {
                let id = &wf.steps[i].id;
                if map { renamed(id) } else { id.clone() }
            })
            .collect()
    };
    if needs(old, o, true) != needs(new, n, false) {
        return false;
    }
    let body = |s: &Step| -> Value {
        let mut v = serde_json::to_value(s).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            m.remove("needs");
            m.remove("id");
        }
        v
    };
    if body(o) != body(n) {
        return false;
    }
    match (&o.action, &n.action) {
        (Action::Workflow(a), Action::Workflow(b)) => {
            let hash = |wf: &Workflow, path: &str| wf.children.get(path).map(|c| c.hash.clone());
            hash(old, &a.path) == hash(new, &b.path)
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wf(yaml: &str) -> Workflow {
        Workflow::from_pinned(yaml, "test.yaml").expect("a valid workflow")
    }

    fn units(list: &[(&str, StepStatus)]) -> Vec<(String, StepStatus)> {
        list.iter().map(|(k, s)| (k.to_string(), *s)).collect()
    }

    /// The plan with no inputs, no renames and no gaps allowed.
    fn plain(old: &Workflow, new: &Workflow, u: &[(String, StepStatus)]) -> Plan {
        let inst = Instance {
            units: u,
            inputs: &Map::new(),
            queue: None,
        };
        plan(old, new, &inst, &[], false)
    }

    fn fates(p: &Plan) -> Vec<(String, Fate)> {
        p.steps.iter().map(|s| (s.step.clone(), s.fate)).collect()
    }

    const OLD: &str = "name: w\nsteps:\n  - id: a\n    run: echo a\n  - id: nap\n    sleep: 1h\n  - id: b\n    run: exit 1\n";

    #[test]
    fn a_sleeping_instance_keeps_what_is_done_and_runs_the_fixed_and_new_steps() {
        let new = wf(
            "name: w\nsteps:\n  - id: a\n    run: echo a\n  - id: nap\n    sleep: 1h\n  - id: b\n    run: echo fixed\n  - id: c\n    run: echo new\n",
        );
        let u = units(&[("a", StepStatus::Completed), ("nap", StepStatus::Sleeping)]);
        let p = plain(&wf(OLD), &new, &u);
        assert_eq!(
            fates(&p),
            vec![
                ("a".into(), Fate::Kept),
                ("nap".into(), Fate::Unchanged),
                ("b".into(), Fate::Changed),
                ("c".into(), Fate::New),
            ]
        );
        assert!(!p.is_refused(), "{:?}", p.refusals);
        assert_ne!(p.from, p.to);
    }

    #[test]
    fn a_new_step_before_a_done_one_is_a_gap_unless_allowed() {
        let new = wf(
            "name: w\nsteps:\n  - id: first\n    run: echo first\n  - id: a\n    run: echo a\n  - id: nap\n    sleep: 1h\n  - id: b\n    run: exit 1\n",
        );
        let u = units(&[("a", StepStatus::Completed)]);
        let inst = Instance {
            units: &u,
            inputs: &Map::new(),
            queue: None,
        };
        let p = plan(&wf(OLD), &new, &inst, &[], false);
        assert_eq!(
            p.refusals,
            vec![Refusal::Gap {
                step: "first".into(),
                before: "a".into()
            }]
        );
        let allowed = plan(&wf(OLD), &new, &inst, &[], true);
        assert!(!allowed.is_refused());
        assert_eq!(allowed.count(Fate::New), 1);
    }

    #[test]
    fn a_done_step_whose_kind_changed_is_refused_and_a_removed_one_stays_named() {
        let new = wf("name: w\nsteps:\n  - id: a\n    sleep: 1s\n  - id: b\n    run: echo b\n");
        let u = units(&[("a", StepStatus::Completed), ("nap", StepStatus::Completed)]);
        let p = plain(&wf(OLD), &new, &u);
        assert_eq!(
            p.refusals,
            vec![Refusal::KindChanged {
                step: "a".into(),
                from: "run",
                to: "sleep"
            }]
        );
        assert!(p.steps.contains(&StepPlan {
            step: "nap".into(),
            from: None,
            fate: Fate::Removed,
            status: Some(StepStatus::Completed)
        }));
    }

    #[test]
    fn map_renames_a_done_step_and_a_bad_map_is_refused() {
        let new = wf(
            "name: w\nsteps:\n  - id: greet\n    run: echo a\n  - id: nap\n    sleep: 1h\n  - id: b\n    run: exit 1\n",
        );
        let u = units(&[("a", StepStatus::Completed), ("nap", StepStatus::Sleeping)]);
        let inst = Instance {
            units: &u,
            inputs: &Map::new(),
            queue: None,
        };
        let p = plan(
            &wf(OLD),
            &new,
            &inst,
            &[("a".into(), "greet".into())],
            false,
        );
        assert!(!p.is_refused(), "{:?}", p.refusals);
        assert_eq!(p.steps[0].step, "greet");
        assert_eq!(p.steps[0].from.as_deref(), Some("a"));
        assert_eq!(p.steps[0].fate, Fate::Kept);
        let bad = plan(
            &wf(OLD),
            &new,
            &inst,
            &[("zz".into(), "greet".into())],
            false,
        );
        assert!(matches!(&bad.refusals[0], Refusal::BadMap { old, .. } if old == "zz"));
    }

    #[test]
    fn inputs_the_new_definition_requires_are_refused_and_defaults_added() {
        let new = wf(
            "name: w\ninputs:\n  region: { required: true }\n  tier: { default: gold }\nsteps:\n  - id: a\n    run: echo a\n",
        );
        let old = wf("name: w\nsteps:\n  - id: a\n    run: echo a\n");
        let u = units(&[]);
        let none = Map::new();
        let p = plan(
            &old,
            &new,
            &Instance {
                units: &u,
                inputs: &none,
                queue: None,
            },
            &[],
            false,
        );
        assert_eq!(
            p.refusals,
            vec![Refusal::MissingInput {
                input: "region".into()
            }]
        );
        assert_eq!(p.inputs_added.get("tier"), Some(&Value::from("gold")));
        let mut given = Map::new();
        given.insert("region".into(), Value::from("eu"));
        let ok = plan(
            &old,
            &new,
            &Instance {
                units: &u,
                inputs: &given,
                queue: None,
            },
            &[],
            false,
        );
        assert!(!ok.is_refused());
    }

    #[test]
    fn the_same_definition_changes_nothing() {
        let u = units(&[("a", StepStatus::Completed)]);
        let p = plain(&wf(OLD), &wf(OLD), &u);
        assert_eq!(p.count(Fate::Kept), 1);
        assert_eq!(p.count(Fate::Unchanged), 2);
        assert_eq!(p.count(Fate::Changed) + p.count(Fate::New), 0);
    }
}
