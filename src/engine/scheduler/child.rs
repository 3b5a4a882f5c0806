//! A `workflow:` unit: each attempt creates exactly one child instance, in
//! the transaction that records the attempt (`Write::CreateChild`), with an
//! id derived from the parent, the unit and the attempt, so no crash can
//! make two. The unit then waits, as a `wait_for_event` unit does, for the
//! event the child's last commit delivers to the parent
//! (`Write::NotifyParent`): whoever ends the child (this process, a `wf
//! resume CHILD`, a worker elsewhere) wakes the parent. The attempt ends
//! with the child: `ok` with its `outputs`, or `child.failed` /
//! `child.canceled`. The driver is told to run each new child
//! ([`Effect::RunChild`]), and the children a resumed run finds open.

use super::*;
use crate::store::{InstanceRow, ParentRef};
use crate::vocab::{InstanceStatus, StepStatus, child_event};
use crate::workflow::{ChildCall, OnParentEnd};

/// Children of children of ... this deep at most (docs/workflow-file.md).
pub const MAX_DEPTH: i64 = 16;

impl Scheduler {
    /// The id of the child of attempt `attempt` of unit `key`: 32 hex
    /// digits, as a random id has, derived from the parent's id, the unit
    /// key (step and item) and the attempt. (Not the parent's id with a
    /// suffix: ids are shown and typed by their first 12 characters, which
    /// would then be the parent's.)
    pub fn child_id(&self, key: &str, attempt: i64) -> InstanceId {
        let text = format!("wf child\0{}\0{key}\0{attempt}", self.run.id);
        let hash = crate::workflow::validate::hash_source(&text);
        InstanceId::from(hash[..32].to_string())
    }

    /// The event a row waits for: its `wait_for_event`'s name, or the end
    /// of the child its `workflow:` attempt made (or, its compensation, the
    /// end of that child's compensations).
    pub fn awaited_event(&self, rec: &StepRow) -> Option<String> {
        if rec.status != StepStatus::Waiting {
            return None;
        }
        if Self::compensates_child(&self.wf, rec) {
            return self.compensated_child(&rec.key).map(|c| child_event(&c));
        }
        match self.wf.step(&rec.step_id).map(|s| &s.action) {
            Some(Action::WaitForEvent { name, .. }) => Some(name.clone()),
            Some(Action::Workflow(_)) => Some(child_event(&self.child_id(&rec.key, rec.attempts))),
            _ => None,
        }
    }

    /// Whether `rec` is a unit waiting on the child its last attempt made.
    pub fn waits_on_child(wf: &Workflow, rec: &StepRow) -> bool {
        rec.status == StepStatus::Waiting
            && !rec.key.is_compensation()
            && matches!(
                wf.step(&rec.step_id).map(|s| &s.action),
                Some(Action::Workflow(_))
            )
    }

    /// Whether `rec` is the compensation of a completed `workflow:` unit
    /// without a `compensate:` of its own, waiting on its child to undo
    /// what it did.
    pub fn compensates_child(wf: &Workflow, rec: &StepRow) -> bool {
        rec.status == StepStatus::Waiting
            && rec.key.is_compensation()
            && wf.step(&rec.step_id).is_some_and(Step::undone_by_its_child)
    }

    /// The child whose compensations compensation unit `key` runs: the
    /// one its step's last (completed) attempt made.
    fn compensated_child(&self, key: &UnitKeyBuf) -> Option<InstanceId> {
        let base = UnitKeyBuf::from(UnitKey {
            compensation: false,
            ..key.parts()
        });
        let rec = self.records.get(&base)?;
        Some(self.child_id(&base, rec.attempts))
    }

    /// Compensates a completed `workflow:` unit without a `compensate:` of
    /// its own: its child (completed) is asked, in the commit that records
    /// this attempt, to run its own compensations, newest first, as a
    /// cancel of it would (`Write::CompensateChild`), and is run here
    /// unless another process has it; the attempt ends with the child's
    /// end: `ok` once it was undone (it ends `canceled`), `child.failed`
    /// when one of its compensations failed. One attempt: a second would
    /// find the child no longer completed.
    pub(super) fn start_child_compensation(
        &mut self,
        unit: &Unit,
        now: Timestamp,
        spans: &mut dyn SpanIds,
    ) -> Started {
        let key = unit.key(&self.wf);
        let Some(child) = self.compensated_child(&key) else {
            let attempt = self.begin_attempt(unit, true, now, spans);
            self.settle_result(unit, attempt, ok(Value::Null), Duration::ZERO, now);
            return Started::Settled;
        };
        let name = child_event(&child);
        let rec = self.record(unit);
        if rec.status == StepStatus::Waiting {
            let attempt = rec.attempts;
            let elapsed = rec.started_at.map_or(Duration::ZERO, |t| now.since(t));
            let Some(payload) = self.take_child_end(&name, &key) else {
                return Started::Blocked;
            };
            let v: Value = serde_json::from_str(&payload).unwrap_or(Value::Null);
            let result = match v.get("status").and_then(Value::as_str) {
                Some("canceled" | "completed") => ok(json!({ "compensated": child.as_str() })),
                _ => AttemptResult::failed(Failure::new(
                    ErrorType::ChildFailed,
                    format!(
                        "the compensations of child {child} failed{}",
                        v.get("error")
                            .and_then(Value::as_str)
                            .map(|e| format!(": {e}"))
                            .unwrap_or_default()
                    ),
                )),
            };
            self.settle_result(unit, attempt, result, elapsed, now);
            return Started::Settled;
        }
        let workflow = match &self.wf.steps[unit.idx].action {
            Action::Workflow(call) => self.wf.children.get(&call.path).cloned(),
            _ => None,
        };
        self.begin_attempt(unit, true, now, spans);
        self.writes.push(Write::CompensateChild {
            child: child.clone(),
            parent: self.run.id.clone(),
        });
        let rec = self.record(unit);
        rec.status = StepStatus::Waiting;
        rec.retry_at = None;
        self.put(unit);
        self.effects.push(Effect::RunChild {
            id: child,
            workflow,
            made: None,
        });
        Started::Blocked
    }

    /// The end of a child (event `name`), for unit `key`, if it came: taken
    /// from what a child run here handed over, else from the delivered
    /// events; the write that marks it taken is queued.
    fn take_child_end(&mut self, name: &str, key: &UnitKeyBuf) -> Option<String> {
        if let Some(payload) = self.ended_here.remove(name) {
            self.writes.push(Write::TakeEventNamed {
                name: name.to_string(),
                key: key.clone(),
            });
            return Some(payload);
        }
        let at = self.events.iter().position(|e| e.name == name)?;
        let event = self.events.remove(at);
        self.taken_events.insert(event.id);
        self.writes.push(Write::TakeEvent {
            event: event.id,
            key: key.clone(),
        });
        Some(event.payload)
    }

    /// Starts a `workflow:` unit: takes its child's end if it came, else
    /// (a first attempt, or a retry) creates the attempt's child.
    pub(super) fn start_child(
        &mut self,
        unit: &Unit,
        call: &ChildCall,
        now: Timestamp,
        spans: &mut dyn SpanIds,
    ) -> Started {
        let key = unit.key(&self.wf);
        let rec = self.record(unit);
        if rec.status == StepStatus::Waiting {
            let attempt = rec.attempts;
            let elapsed = rec.started_at.map_or(Duration::ZERO, |t| now.since(t));
            let child = self.child_id(&key, attempt);
            let name = child_event(&child);
            let Some(payload) = self.take_child_end(&name, &key) else {
                return Started::Blocked;
            };
            self.open_children.remove(&key);
            let mut result = child_result(&child, &payload);
            // Canceled because this run cancels: the attempt is canceled,
            // not failed (as an attempt this run stopped is).
            if self.stop == Some(Stop::Cancel)
                && matches!(&result.outcome, Err(f) if f.error_type == ErrorType::ChildCanceled)
            {
                result.interrupted = true;
            }
            self.settle_result(unit, attempt, result, elapsed, now);
            return Started::Settled;
        }
        let Some(child) = self.wf.children.get(&call.path).cloned() else {
            let f = Failure::new(
                ErrorType::Other("definition".into()),
                format!(
                    "the definition of `{}` was not pinned with the workflow",
                    call.path
                ),
            );
            self.fail_now(unit, f, now, spans);
            return Started::Settled;
        };
        if self.run.depth >= MAX_DEPTH {
            let f = Failure::new(
                ErrorType::Expression,
                format!(
                    "workflows nest deeper than {MAX_DEPTH} levels: `{}` is not started",
                    call.path
                ),
            );
            self.fail_now(unit, f, now, spans);
            return Started::Settled;
        }
        let with = Value::Object(call.with.clone());
        let inputs = template::render_tree(&with, self.ctx.value())
            .map_err(|e| e.to_string())
            .and_then(|v| match v {
                Value::Object(given) => {
                    crate::engine::resolve_inputs(&child, given).map_err(|e| e.to_string())
                }
                _ => Err("not a mapping".into()),
            });
        let mut inputs = match inputs {
            Ok(v) => v,
            Err(e) => {
                let f = Failure::new(ErrorType::Expression, format!("`with`: {e}"));
                self.fail_now(unit, f, now, spans);
                return Started::Settled;
            }
        };
        self.redactor.value(&mut inputs);
        let labels = match crate::engine::render_labels(&child, &inputs, &[]) {
            Ok(l) => l,
            Err(e) => {
                let f = Failure::new(ErrorType::Expression, format!("`{}`: {e}", call.path));
                self.fail_now(unit, f, now, spans);
                return Started::Settled;
            }
        };
        // A child with a queue is admitted by it when it is first driven.
        let queue = match crate::engine::render_queue(&child, &inputs) {
            Ok(q) => q,
            Err(e) => {
                let f = Failure::new(ErrorType::Expression, format!("`{}`: {e}", call.path));
                self.fail_now(unit, f, now, spans);
                return Started::Settled;
            }
        };
        let attempt = self.begin_attempt(unit, true, now, spans);
        let id = self.child_id(&key, attempt);
        let file = self.run.base_dir.join(&call.path);
        let base_dir = file
            .parent()
            .map_or_else(|| self.run.base_dir.clone(), std::path::Path::to_path_buf);
        self.writes.push(Write::CreateChild(Box::new(InstanceRow {
            id: id.clone(),
            workflow: child.name.clone(),
            status: InstanceStatus::Running,
            definition: child.source.clone(),
            definition_hash: child.hash.clone(),
            workflow_path: file.display().to_string(),
            base_dir: base_dir.display().to_string(),
            inputs,
            state: Value::Object(child.state.clone()),
            error: None,
            wake_at: None,
            waiting_event: None,
            lease_owner: None,
            lease_expires_ms: None,
            created_at: now,
            updated_at: now,
            parent: Some(ParentRef {
                id: self.run.id.clone(),
                key: key.clone(),
                attempt,
            }),
            depth: self.run.depth + 1,
            labels,
            queue,
            started_by: self.run.actor.clone(),
        })));
        let rec = self.record(unit);
        rec.status = StepStatus::Waiting;
        rec.retry_at = None;
        self.put(unit);
        self.open_children.insert(key.clone());
        self.effects.push(Effect::RunChild {
            id,
            workflow: Some(child),
            made: Some(key),
        });
        Started::Blocked
    }

    /// The `on_parent_end` of the call unit `key` made.
    fn on_parent_end(&self, key: &UnitKeyBuf) -> OnParentEnd {
        match self.wf.step(key.step()).map(|s| &s.action) {
            Some(Action::Workflow(call)) => call.on_parent_end,
            _ => OnParentEnd::Abandon,
        }
    }

    /// Whether children are open that the parent, ending early, waits for
    /// (all but those it abandons).
    pub fn children_blocking(&self) -> bool {
        self.open_children
            .iter()
            .any(|k| self.on_parent_end(k) != OnParentEnd::Abandon)
    }

    /// The keys of the units waiting on their children, in order.
    fn open_child_keys(&self) -> Vec<&UnitKeyBuf> {
        let mut keys: Vec<&UnitKeyBuf> = self.open_children.iter().collect();
        keys.sort();
        keys
    }

    /// The units waiting on their children, in key order.
    pub(super) fn open_child_units(&self) -> Vec<Unit> {
        self.open_child_keys()
            .into_iter()
            .filter_map(|k| {
                let key = k.parts();
                let idx = self.wf.steps.iter().position(|s| s.id == key.step)?;
                Some(Unit {
                    idx,
                    item: key.item,
                    compensation: false,
                })
            })
            .collect()
    }

    /// The parent ends early (it failed, is canceled, or timed out): its
    /// open children are canceled (terminated with `--terminate` or
    /// `on_parent_end: terminate`) before its own compensations run, but
    /// those it abandons. Each is asked once.
    pub(super) fn end_children(&mut self) {
        if !self.compensating() {
            return;
        }
        let keys: Vec<UnitKeyBuf> = self
            .open_child_keys()
            .into_iter()
            .filter(|k| !self.children_ending.contains(*k))
            .cloned()
            .collect();
        for key in keys {
            let mode = self.on_parent_end(&key);
            self.children_ending.insert(key.clone());
            if mode == OnParentEnd::Abandon {
                continue;
            }
            let Some(rec) = self.records.get(key.as_str()) else {
                continue;
            };
            let id = self.child_id(&key, rec.attempts);
            self.effects.push(Effect::EndChild {
                id,
                terminate: self.terminate || mode == OnParentEnd::Terminate,
            });
        }
    }

    /// The open children a run starts with (made by an earlier run): the
    /// driver runs them, unless they ended or another process has them.
    /// Children being compensated (asked by an earlier run) are run too.
    pub(super) fn run_open_children(&mut self) {
        let definition = |r: &StepRow| match self.wf.step(&r.step_id).map(|s| &s.action) {
            Some(Action::Workflow(call)) => self.wf.children.get(&call.path).cloned(),
            _ => None,
        };
        let mut runs: Vec<Effect> = self
            .open_child_keys()
            .into_iter()
            .filter_map(|k| self.records.get(k.as_str()))
            .map(|r| Effect::RunChild {
                id: self.child_id(&r.key, r.attempts),
                workflow: definition(r),
                made: None,
            })
            .collect();
        let mut compensating: Vec<&StepRow> = self
            .records
            .values()
            .filter(|r| Self::compensates_child(&self.wf, r))
            .collect();
        compensating.sort_by(|a, b| a.key.cmp(&b.key));
        runs.extend(compensating.into_iter().filter_map(|r| {
            Some(Effect::RunChild {
                id: self.compensated_child(&r.key)?,
                workflow: definition(r),
                made: None,
            })
        }));
        self.effects.extend(runs);
    }
}

/// A child's end as its parent's event carries it (the event named
/// [`child_event`] of the child): written with the child's final status in
/// the commit that ends it, read back by the parent's attempt.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ChildEndEvent {
    pub status: InstanceStatus,
    /// The child's `outputs:` (completed), if it has any.
    pub outputs: Option<Value>,
    pub error: Option<String>,
}

/// What a child's end means for the attempt that made it.
fn child_result(child: &InstanceId, payload: &str) -> AttemptResult {
    // A payload that does not read is a child that did not complete.
    let end = serde_json::from_str::<ChildEndEvent>(payload).ok();
    match end.as_ref().map(|e| e.status) {
        Some(InstanceStatus::Completed) => ok(end
            .and_then(|e| e.outputs)
            .filter(|o| !o.is_null())
            .unwrap_or_else(|| Value::Object(Map::new()))),
        Some(InstanceStatus::Canceled | InstanceStatus::Skipped) => {
            AttemptResult::failed(Failure::new(
                ErrorType::ChildCanceled,
                format!("child {child} was canceled"),
            ))
        }
        _ => AttemptResult::failed(Failure::new(
            ErrorType::ChildFailed,
            format!(
                "child {child} failed{}",
                end.and_then(|e| e.error)
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            ),
        )),
    }
}
