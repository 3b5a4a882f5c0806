//! The ready set: the frontier of steps whose needs are met, the units due
//! now (retries past their backoff, `for_each` items within
//! `max_parallel`), handlers after a failure or a cancel, the next
//! compensation, when the run is over, and when something next becomes
//! due. Every question takes the time it is asked at (`now`): the clock is
//! the driver's.

use super::{RunOutcome, Scheduler, Stop, Unit};
use crate::vocab::{StepStatus, Timestamp};

impl Scheduler {
    /// Whether the run is winding down: compensating after a failure or cancel.
    pub fn compensating(&self) -> bool {
        self.failed.is_some() || self.stop == Some(Stop::Cancel)
    }

    /// Units that may start now, in a deterministic order.
    pub fn candidates(&mut self, now: Timestamp) -> Vec<Unit> {
        if self.compensating() {
            // Units waiting on their children are looked at (their ends
            // come, canceled: `end_children`); handlers first (`if:
            // failure()`, `always()`, `cancelled()`); the compensations once
            // the children that are to end have.
            let handlers = self.ready_handlers(now);
            let hold = !handlers.is_empty() || self.handler_running() || self.children_blocking();
            let mut ready = self.open_child_units();
            ready.extend(handlers);
            if !hold {
                ready.extend(self.next_compensation(now));
            }
            return ready;
        }
        let mut out = Vec::new();
        // Only the frontier is looked at: steps whose needs are met and that
        // have not ended. A step that ended since the last call leaves it and
        // lets in the dependents it unblocks, so a long chain costs O(1) a step.
        let wf = self.wf.clone();
        let mut queue: Vec<usize> = self.frontier.iter().copied().collect();
        let mut i = 0;
        while let Some(&idx) = queue.get(i) {
            i += 1;
            let step = &wf.steps[idx];
            let key = step.id.clone();
            let rec = self.records.get(key.as_str());
            if rec.is_some_and(|r| r.status.is_ended()) {
                self.frontier.remove(&idx);
                for &d in &self.dependents[idx] {
                    if !self.frontier.contains(&d) && self.deps_satisfied(d) && !self.ended(d) {
                        self.frontier.insert(d);
                        queue.push(d);
                    }
                }
                continue;
            }
            if step.fans_out() && rec.is_some_and(|r| !r.items.is_null()) {
                // Expanded: its items are the units.
                out.extend(self.item_units(idx, now));
            } else if !self.running.contains_key(key.as_str()) && self.unit_due(&key, now) {
                out.push(Unit::step(idx));
            }
        }
        out
    }

    /// The units of an expanded `for_each` step that may start now (within
    /// `max_parallel`), or the step itself once every item ended (it settles).
    fn item_units(&self, idx: usize, now: Timestamp) -> Vec<Unit> {
        let step = &self.wf.steps[idx];
        let rec = self.records.get(step.id.as_str());
        let n = rec.and_then(|r| r.fan()).map_or(0, Vec::len);
        let limit = step.max_parallel.unwrap_or(usize::MAX);
        let mut active = (0..n)
            .filter(|i| {
                let key = format!("{}[{i}]", step.id);
                self.running.contains_key(key.as_str()) || self.open_children.contains(key.as_str())
            })
            .count();
        let mut unfinished = 0;
        let mut out = Vec::new();
        for i in 0..n {
            let unit = Unit {
                idx,
                item: Some(i),
                compensation: false,
            };
            let k = unit.key(&self.wf);
            if !self.records.get(&k).is_some_and(|r| r.status.is_ended()) {
                unfinished += 1;
            }
            // An item waiting on its child is looked at (its end may have
            // come) without starting anything: it is active already.
            if self.open_children.contains(&k) {
                out.push(unit);
                continue;
            }
            if active >= limit || !self.unit_due(&k, now) {
                continue;
            }
            active += 1;
            out.push(unit);
        }
        if unfinished == 0 {
            out.push(Unit::step(idx));
        }
        out
    }

    /// Not terminal, not running, and any retry backoff has passed.
    pub fn unit_due(&self, key: &str, now: Timestamp) -> bool {
        if self.running.contains_key(key) {
            return false;
        }
        match self.records.get(key) {
            None => true,
            Some(r) if r.status.is_ended() => false,
            Some(r) if r.status == StepStatus::Retrying => r.retry_at.is_none_or(|t| t <= now),
            Some(_) => true,
        }
    }

    pub fn ended(&self, idx: usize) -> bool {
        self.records
            .get(self.wf.steps[idx].id.as_str())
            .is_some_and(|r| r.status.is_ended())
    }

    /// Whether step `idx` is a handler (see `handlers`).
    pub fn is_handler(&self, idx: usize) -> bool {
        self.handlers.contains(&idx)
    }

    /// A need of a handler is settled once it ended, or, after a failure or
    /// on cancel, when it is a step that will not start any more.
    fn settled_for_handler(&self, d: usize) -> bool {
        if self.ended(d) {
            return true;
        }
        let id = &self.wf.steps[d].id;
        self.compensating()
            && !self.is_handler(d)
            && !self
                .running
                .keys()
                .any(|k| k == id || k.starts_with(&format!("{id}[")))
    }

    /// Handlers that may start now: not ended, not running, their needs settled.
    /// (A `for_each` handler that expanded offers its items.)
    pub fn ready_handlers(&self, now: Timestamp) -> Vec<Unit> {
        let mut out = Vec::new();
        // `wf cancel --terminate` runs nothing more of the workflow's, its
        // `cancelled()` and `always()` handlers included.
        if self.terminate {
            return out;
        }
        for &idx in &self.handlers {
            let step = &self.wf.steps[idx];
            if self.ended(idx) || !step.needs.iter().all(|&d| self.settled_for_handler(d)) {
                continue;
            }
            let expanded = step.fans_out()
                && self
                    .records
                    .get(step.id.as_str())
                    .is_some_and(|r| !r.items.is_null());
            if expanded {
                out.extend(self.item_units(idx, now));
            } else if self.unit_due(&step.id, now) {
                out.push(Unit::step(idx));
            }
        }
        out
    }

    pub fn handler_running(&self) -> bool {
        self.running.keys().any(|k| {
            let id = k.step();
            self.handlers.iter().any(|&i| self.wf.steps[i].id == id)
        })
    }

    /// Whether a step upstream of `idx` (through `needs`, transitively)
    /// failed for good (without `continue_on_error`): what `failure()` sees.
    pub fn upstream_failed(&self, idx: usize) -> bool {
        let mut seen = vec![false; self.wf.steps.len()];
        let mut stack: Vec<usize> = self.wf.steps[idx].needs.clone();
        while let Some(d) = stack.pop() {
            if std::mem::replace(&mut seen[d], true) {
                continue;
            }
            let dep = &self.wf.steps[d];
            if !dep.continue_on_error
                && self
                    .records
                    .get(dep.id.as_str())
                    .is_some_and(|r| r.status == StepStatus::Failed)
            {
                return true;
            }
            stack.extend(dep.needs.iter().copied());
        }
        false
    }

    pub fn deps_satisfied(&self, idx: usize) -> bool {
        if self.is_handler(idx) {
            return self.wf.steps[idx].needs.iter().all(|&d| self.ended(d));
        }
        self.wf.steps[idx].needs.iter().all(|&d| {
            let dep = &self.wf.steps[d];
            self.records
                .get(dep.id.as_str())
                .is_some_and(|r| match r.status {
                    StepStatus::Completed | StepStatus::Skipped => true,
                    StepStatus::Failed => dep.continue_on_error,
                    _ => false,
                })
        })
    }

    /// The next compensation to run: of the completed units with a
    /// `compensate`, the latest-completed one not yet compensated. One at a
    /// time, in reverse completion order.
    pub fn next_compensation(&self, now: Timestamp) -> Option<Unit> {
        if !self.running.is_empty() || self.terminate {
            return None;
        }
        let mut done: Vec<(i64, Unit)> = Vec::new();
        for (idx, step) in self.wf.steps.iter().enumerate() {
            if !self.wf.step_compensates(step) {
                continue;
            }
            let mut units = vec![Unit::step(idx)];
            if step.fans_out() {
                let n = self
                    .records
                    .get(step.id.as_str())
                    .and_then(|r| r.fan())
                    .map_or(0, Vec::len);
                units = (0..n)
                    .map(|i| Unit {
                        idx,
                        item: Some(i),
                        compensation: false,
                    })
                    .collect();
            }
            for u in units {
                if let Some(r) = self.records.get(&u.key(&self.wf))
                    && r.status == StepStatus::Completed
                    && let Some(seq) = r.seq
                {
                    done.push((seq, u));
                }
            }
        }
        done.sort_by_key(|(seq, _)| std::cmp::Reverse(*seq));
        for (_, u) in done {
            let comp = Unit {
                compensation: true,
                ..u
            };
            let key = comp.key(&self.wf);
            match self.records.get(&key).map(|r| r.status) {
                Some(StepStatus::Completed | StepStatus::Failed) => continue,
                _ if self.unit_due(&key, now) => return Some(comp),
                // Waiting out a retry backoff: nothing else starts before it.
                _ => return None,
            }
        }
        None
    }

    pub fn compensations_pending(&self) -> bool {
        !self.terminate
            && self.wf.steps.iter().enumerate().any(|(idx, step)| {
                if !self.wf.step_compensates(step) {
                    return false;
                }
                let units: Vec<Unit> =
                    match self.records.get(step.id.as_str()).and_then(|r| r.fan()) {
                        Some(items) if step.fans_out() => (0..items.len())
                            .map(|i| Unit {
                                idx,
                                item: Some(i),
                                compensation: false,
                            })
                            .collect(),
                        _ => vec![Unit::step(idx)],
                    };
                units.into_iter().any(|u| {
                    let done = self
                        .records
                        .get(&u.key(&self.wf))
                        .is_some_and(|r| r.status == StepStatus::Completed);
                    let comp = Unit {
                        compensation: true,
                        ..u
                    };
                    let comp_ended = self.records.get(&comp.key(&self.wf)).is_some_and(|r| {
                        r.status == StepStatus::Completed || r.status == StepStatus::Failed
                    });
                    done && !comp_ended
                })
            })
    }

    /// The run's end when nothing is running and nothing more can start now.
    pub fn final_outcome(&self, now: Timestamp) -> Option<RunOutcome> {
        if self.stop == Some(Stop::Signal) {
            return Some(RunOutcome::Interrupted);
        }
        if self.compensating() {
            if self.handler_running()
                || !self.ready_handlers(now).is_empty()
                || self.compensations_pending()
                || self.children_blocking()
            {
                return None;
            }
            if self.stop == Some(Stop::Cancel) {
                return Some(RunOutcome::Canceled);
            }
            return self.failed.clone().map(RunOutcome::Failed);
        }
        let all_done = self.wf.steps.iter().all(|s| {
            self.records
                .get(s.id.as_str())
                .is_some_and(|r| r.status.is_ended())
        });
        all_done.then_some(RunOutcome::Completed)
    }

    pub fn suspend_outcome(&self, next: Option<Timestamp>, now: Timestamp) -> RunOutcome {
        let mut waiting: Vec<String> = Vec::new();
        for rec in self.records.values() {
            if let Some(name) = self.awaited_event(rec)
                && !waiting.contains(&name)
            {
                waiting.push(name);
            }
        }
        waiting.sort();
        if !waiting.is_empty() {
            RunOutcome::Waiting(waiting.join(","))
        } else {
            RunOutcome::Sleeping(next.unwrap_or(now))
        }
    }

    /// The earliest time something becomes due: a retry, a sleep, an event
    /// timeout, or the workflow's deadline.
    pub fn next_wake(&self) -> Option<Timestamp> {
        self.earliest(StepStatus::is_timed)
    }

    /// The earliest `retry_at` among the records whose status `timer`
    /// accepts, or the workflow's deadline if sooner.
    fn earliest(&self, timer: fn(StepStatus) -> bool) -> Option<Timestamp> {
        self.timed
            .iter()
            .filter_map(|k| self.records.get(k))
            .filter(|r| timer(r.status))
            .filter_map(|r| r.retry_at)
            .chain(self.deadline.filter(|_| self.stop.is_none()))
            .min()
    }

    /// Attempts that count towards `key`'s `max_attempts` since `base`
    /// (every recorded one but the interrupted and canceled; the one in
    /// flight included).
    pub fn budget_used(&self, key: &str, base: i64) -> i64 {
        let recorded = self.records.get(key).map_or(0, |r| r.attempts);
        let uncounted = self
            .uncounted
            .get(key)
            .map_or(0, |a| a.iter().filter(|&&n| n > base).count() as i64);
        recorded - base - uncounted
    }

    /// The earliest timer the run may wait for inline: a retry, a sleep, or
    /// the workflow's deadline (not an event's timeout: a run does not wait
    /// for events).
    pub fn next_timer(&self) -> Option<Timestamp> {
        self.earliest(|status| matches!(status, StepStatus::Retrying | StepStatus::Sleeping))
    }
}
