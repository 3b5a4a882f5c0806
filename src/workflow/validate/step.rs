//! One step: its `needs`, exactly one action, `dir`, `env`, timeout, retry
//! policy, `errors`, `set_state`, `compensate`, `if` and `for_each`.

use super::actions::{ChosenShell, StepDefaults};
use super::*;
use crate::workflow::matrix;
use crate::workflow::model::{Needs, RawStep};
use crate::workflow::shell::Shell;
use crate::workflow::template;

impl Checker<'_> {
    pub(super) fn step(
        &self,
        index: usize,
        spanned: &mut Spanned<RawStep>,
        inputs: &BTreeMap<String, InputSpec>,
        secrets: &[String],
        defaults: &StepDefaults<'_>,
    ) -> Result<Step, DefinitionError> {
        // Moved, not copied, into the step: 10,000 `set_state` mappings
        // copied while the parsed file is alive cost 3 MB of the peak.
        let raw_set_state = spanned.value.set_state.take();
        let spanned = &*spanned;
        let raw = &spanned.value;
        let pos: Pos = spanned.into();
        let id = raw.id.value.clone();
        let matrix = self.matrix(&id, raw, inputs, secrets)?;
        let scope = Scope {
            output: false,
            item: raw.for_each.is_some(),
            matrix: matrix.is_some(),
        };
        let ctx = ExprCtx {
            inputs,
            secrets,
            scope,
            step: Some((index, false)),
        };

        let needs = match &raw.needs {
            None if index == 0 => vec![],
            None => vec![index - 1],
            Some(given) => {
                // One id alone (`needs: build`) is a list of one.
                let list: Vec<(&str, Pos)> = match given {
                    Needs::Many(list) => {
                        list.iter().map(|n| (n.value.as_str(), n.into())).collect()
                    }
                    Needs::One(id) => {
                        vec![(id.as_str(), self.locate(id, self.locate("needs", pos)))]
                    }
                };
                let mut out = Vec::new();
                for (n, at) in list {
                    if n == id {
                        return Err(self.err(at, format!("step `{id}` needs itself")));
                    }
                    match self.step_ids.get(n) {
                        Some(&j) if !out.contains(&j) => out.push(j),
                        Some(_) => {}
                        None => {
                            return Err(self.err(
                                at,
                                format!(
                                    "step `{id}` needs `{n}`, which is not a step of this workflow"
                                ),
                            ));
                        }
                    }
                }
                out
            }
        };

        let mut actions = Vec::new();
        if raw.run.is_some() {
            actions.push("run");
        }
        if raw.http.is_some() {
            actions.push("http");
        }
        if raw.sleep.is_some() {
            actions.push("sleep");
        }
        if raw.wait_for_event.is_some() {
            actions.push("wait_for_event");
        }
        if raw.workflow.is_some() {
            actions.push("workflow");
        }
        if actions.len() > 1 {
            return Err(self.err(
                pos,
                format!("step `{id}` has more than one action ({}): use exactly one of run, http, sleep, wait_for_event, workflow", actions.join(", ")),
            ));
        }
        if raw.workflow.is_none() {
            if let Some(with) = &raw.with {
                return Err(self.err(
                    with.into(),
                    format!(
                        "step `{id}`: `with` only applies to `workflow` steps (the child's inputs)"
                    ),
                ));
            }
            if let Some(p) = &raw.on_parent_end {
                return Err(self.err(
                    p.into(),
                    format!("step `{id}`: `on_parent_end` only applies to `workflow` steps"),
                ));
            }
        }

        let own_shell = match &raw.shell {
            Some(s) if raw.run.is_none() => {
                return Err(self.err(
                    s.into(),
                    format!("step `{id}`: `shell` only applies to `run` steps"),
                ));
            }
            Some(s) => Some(Shell::parse(&s.value).map_err(|m| self.err(s.into(), m))?),
            None => None,
        };
        let action = if let Some(run) = &raw.run {
            let shell = ChosenShell {
                shell: own_shell.as_ref().or(defaults.shell),
                own: raw.shell.as_ref().map(Pos::from),
            };
            Action::Run(self.run_cmd(&run.value, run.into(), &ctx, shell)?)
        } else if let Some(http) = &raw.http {
            Action::Http(Box::new(self.http(&http.value, http.into(), &ctx)?))
        } else if let Some(sleep) = &raw.sleep {
            Action::Sleep(self.sleep(&sleep.value, sleep.into(), &ctx)?)
        } else if let Some(wait) = &raw.wait_for_event {
            let w = &wait.value;
            if w.name.trim().is_empty() {
                return Err(self.err(wait.into(), "`wait_for_event.name` is empty"));
            }
            // An instance records the names it waits for as one
            // comma-separated list, and events are matched against it.
            // (`wf signal` cannot send a control character either.)
            if w.name.starts_with(crate::vocab::CHILD_EVENT_PREFIX) {
                return Err(self.err(
                    wait.into(),
                    format!(
                        "`wait_for_event.name` {:?} starts with `child:`, which names the end of a child instance",
                        w.name
                    ),
                ));
            }
            if w.name.contains(',') || w.name.contains(char::is_control) {
                return Err(self.err(
                    wait.into(),
                    format!(
                        "`wait_for_event.name` {:?} contains a comma or a control character",
                        w.name
                    ),
                ));
            }
            let timeout = w
                .timeout
                .as_ref()
                .map(|t| self.duration_at(t, wait.into()))
                .transpose()?;
            Action::WaitForEvent {
                name: w.name.clone(),
                timeout,
            }
        } else if let Some(path) = &raw.workflow {
            Action::Workflow(Box::new(self.child_call(&id, path, raw, &ctx)?))
        } else {
            Action::Noop
        };

        if raw.dir.is_some() && !matches!(action, Action::Run(_)) {
            return Err(self.err(
                pos,
                format!("step `{id}`: `dir` only applies to `run` steps"),
            ));
        }
        let env = self.env_map(&raw.env, pos, scope, inputs, secrets)?;
        let timeout = match &raw.timeout {
            Some(t) => Some(self.duration(t)?),
            None => defaults.timeout,
        };
        let retry_pos = raw.retry.as_ref().map(Pos::from).unwrap_or(pos);
        let has_retry = raw.retry.is_some() || defaults.has_retry;
        let retry = if has_retry {
            self.retry(
                raw.retry
                    .as_ref()
                    .map(|r| &r.value)
                    .unwrap_or(&RawRetry::default()),
                defaults.retry,
                retry_pos,
            )?
        } else {
            // No `retry:` anywhere: only a crash of wf is retried (docs/execution.md),
            // so `wf resume` after a kill -9 finishes the instance.
            RetryPolicy::crash_recovery()
        };
        let mut errors = BTreeMap::new();
        for (code, name) in &raw.errors {
            if !(1..=255).contains(code) {
                return Err(self.err(
                    pos,
                    format!("step `{id}`: `errors` key {code} is not an exit code (1-255)"),
                ));
            }
            if !is_error_name(name) {
                return Err(self.err(
                    self.locate(name, pos),
                    format!("step `{id}`: invalid error name `{name}` (use letters, digits, `_`, `-` and `.`)"),
                ));
            }
            errors.insert(*code as i32, format!("user.{name}"));
        }

        let set_state = match raw_set_state {
            None => None,
            Some(s) => {
                if !s.value.is_object() {
                    return Err(self.err(
                        (&s).into(),
                        "`set_state` must be a mapping (a JSON merge patch)",
                    ));
                }
                let set_ctx = ExprCtx {
                    scope: Scope {
                        output: true,
                        ..scope
                    },
                    ..ctx
                };
                self.tree(&s.value, (&s).into(), &set_ctx)?;
                Some(s.value)
            }
        };

        let compensate = raw
            .compensate
            .as_ref()
            .map(|c| {
                let undo = ExprCtx {
                    step: Some((index, true)),
                    ..ctx
                };
                self.compensation(&c.value, c.into(), &undo, defaults)
            })
            .transpose()?;

        let condition = match &raw.if_ {
            None => None,
            Some(c) => Some(self.condition(&c.value, c.into(), &ctx)?),
        };
        let for_each = match &raw.for_each {
            None => None,
            Some(f) => {
                let for_ctx = ExprCtx {
                    scope: PLAIN,
                    ..ctx
                };
                match &f.value {
                    Value::String(s) => {
                        self.template(s, f.into(), &for_ctx)?;
                    }
                    Value::Array(_) => self.tree(&f.value, f.into(), &for_ctx)?,
                    _ => {
                        return Err(self.err(
                            f.into(),
                            "`for_each` must be a list or an expression that gives a list",
                        ));
                    }
                }
                Some(f.value.clone())
            }
        };
        if let Some(f) = &raw.fail_fast
            && raw.matrix.is_none()
        {
            return Err(self.err(f.into(), "`fail_fast` only applies to `matrix` steps"));
        }
        let max_parallel = match &raw.max_parallel {
            None => None,
            Some(m) if raw.for_each.is_none() && raw.matrix.is_none() => {
                return Err(self.err(
                    m.into(),
                    "`max_parallel` only applies to `for_each` and `matrix` steps",
                ));
            }
            Some(m) if m.value >= 1 && m.value <= 10_000 => Some(m.value as usize),
            Some(m) => return Err(self.err(m.into(), "`max_parallel` must be between 1 and 10000")),
        };

        let lock = match &raw.lock {
            None => None,
            Some(l) => Some(Box::new(self.step_lock(
                &id,
                &l.value,
                (&**l).into(),
                &action,
                &ctx,
            )?)),
        };

        let cache = match &raw.cache {
            None => None,
            Some(c) => Some(Box::new(self.cache(
                &id,
                &c.value,
                (&**c).into(),
                (&action, raw.lock.is_some()),
                &ctx,
            )?)),
        };

        Ok(Step {
            id,
            needs,
            dir: match &action {
                Action::Run(_) => raw
                    .dir
                    .clone()
                    .or_else(|| defaults.working_directory.clone()),
                _ => raw.dir.clone(),
            },
            action,
            env,
            timeout,
            retry,
            errors,
            set_state: set_state.map(Box::new),
            compensate: compensate.map(Box::new),
            condition: condition.map(Box::new),
            for_each: for_each.map(Box::new),
            matrix: matrix.map(Box::new),
            fail_fast: raw.fail_fast.as_ref().is_none_or(|f| f.value),
            max_parallel,
            continue_on_error: raw.continue_on_error,
            lock,
            cache,
        })
    }

    pub(super) fn retry(
        &self,
        r: &RawRetry,
        base: &RawRetry,
        pos: Pos,
    ) -> Result<RetryPolicy, DefinitionError> {
        let max_attempts = r.max_attempts.or(base.max_attempts).unwrap_or(1);
        if !(1..=1000).contains(&max_attempts) {
            return Err(self.err(pos, "`retry.max_attempts` must be between 1 and 1000"));
        }
        let backoff = match r
            .backoff
            .as_ref()
            .or(base.backoff.as_ref())
            .map(String::as_str)
        {
            None | Some("exponential") => Backoff::Exponential,
            Some("fixed" | "constant") => Backoff::Fixed,
            Some(other) => {
                return Err(self.err(
                    self.locate(other, pos),
                    format!("unknown `retry.backoff` `{other}` (use fixed or exponential)"),
                ));
            }
        };
        let interval = match r.interval.as_ref().or(base.interval.as_ref()) {
            Some(t) => self.duration_at(t, pos)?,
            None => RetryPolicy::default().interval,
        };
        let multiplier = r
            .multiplier
            .or(base.multiplier)
            .unwrap_or(RetryPolicy::default().multiplier);
        if !(1.0..=100.0).contains(&multiplier) {
            return Err(self.err(pos, "`retry.multiplier` must be between 1 and 100"));
        }
        let max_interval = match r.max_interval.as_ref().or(base.max_interval.as_ref()) {
            Some(t) => self.duration_at(t, pos)?,
            None => RetryPolicy::default().max_interval,
        };
        let non_retryable = r
            .non_retryable
            .clone()
            .or_else(|| base.non_retryable.clone())
            .unwrap_or_default();
        let retryable = r
            .retryable
            .clone()
            .or_else(|| base.retryable.clone())
            .unwrap_or_default();
        for pattern in non_retryable.iter().chain(&retryable) {
            if !is_error_pattern(pattern) {
                return Err(self.err(
                    self.locate(pattern, pos),
                    format!("invalid error type `{pattern}` in `retry`"),
                ));
            }
        }
        Ok(RetryPolicy {
            max_attempts: max_attempts as u32,
            backoff,
            interval,
            multiplier,
            max_interval,
            non_retryable,
            retryable,
            crash_only: false,
        })
    }
}

fn is_error_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

fn is_error_pattern(s: &str) -> bool {
    let body = s.strip_suffix('*').unwrap_or(s);
    !body.is_empty() && is_error_name(body.trim_end_matches('.')) || s == "*"
}

impl Checker<'_> {
    /// `matrix:`: its shape and expressions; expanded here when it holds
    /// none, so that what the engine would refuse is an error at its key.
    /// Leaves the keys `matrix.KEY` may name in `matrix_keys`.
    fn matrix(
        &self,
        id: &str,
        raw: &RawStep,
        inputs: &BTreeMap<String, InputSpec>,
        secrets: &[String],
    ) -> Result<Option<Value>, DefinitionError> {
        *self.matrix_keys.borrow_mut() = None;
        let Some(m) = &raw.matrix else {
            return Ok(None);
        };
        let pos: Pos = (&**m).into();
        if raw.for_each.is_some() {
            return Err(self.err(
                pos,
                format!("step `{id}` has both `matrix` and `for_each`: use one"),
            ));
        }
        let ctx = ExprCtx {
            inputs,
            secrets,
            scope: PLAIN,
            step: None,
        };
        let keys: std::collections::BTreeSet<String> = match &m.value {
            Value::Object(map) => {
                self.tree(&m.value, pos, &ctx)?;
                let mut keys = std::collections::BTreeSet::new();
                for (k, v) in map {
                    match (k.as_str(), v) {
                        ("include", Value::Array(list)) => {
                            keys.extend(
                                list.iter()
                                    .filter_map(Value::as_object)
                                    .flat_map(|o| o.keys().cloned()),
                            );
                        }
                        ("include" | "exclude", _) => {}
                        _ => {
                            keys.insert(k.clone());
                        }
                    }
                }
                keys
            }
            Value::String(s) if template::contains_expr(s) => {
                self.template(s, pos, &ctx)?;
                return Ok(Some(m.value.clone()));
            }
            _ => {
                return Err(self.err(
                    pos,
                    "`matrix` must be a map of lists (with `include` and `exclude`), or an expression that gives one",
                ));
            }
        };
        if !template::contains_expr(&m.value.to_string()) {
            let combos = matrix::expand(&m.value).map_err(|e| {
                let at = e.key.as_ref().map_or(pos, |k| self.locate(k, pos));
                self.err(at, format!("step `{id}`: {}", e.message))
            })?;
            let all = combos.iter().flat_map(|c| c.keys().cloned()).collect();
            *self.matrix_keys.borrow_mut() = Some(all);
        } else {
            *self.matrix_keys.borrow_mut() = Some(keys);
        }
        Ok(Some(m.value.clone()))
    }
}
