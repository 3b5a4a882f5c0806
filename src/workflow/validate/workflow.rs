//! The workflow-level keys (name, inputs, secrets, state, env, defaults,
//! concurrency, outputs), then its schedules, its steps and the graph checks,
//! gathered into one [`Workflow`].

use super::actions::StepDefaults;
use super::*;

impl Checker<'_> {
    /// Checks every part it can, gathering one error per part (a key, an
    /// input, a secret, a step, a schedule) rather than stopping at the
    /// first; the graph checks need every step, so they run only when the
    /// rest is sound. The first error carries the others ([`gathered`]).
    pub(super) fn check(&mut self, mut raw: RawWorkflow) -> Result<Workflow, DefinitionError> {
        let mut errors: Vec<DefinitionError> = Vec::new();
        let name = raw.name.value.clone();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        {
            errors.push(self.err(
                (&raw.name).into(),
                format!(
                    "invalid workflow name `{name}`: use lowercase letters, digits, `_` and `-`"
                ),
            ));
        }

        let mut inputs = BTreeMap::new();
        if let Some(spanned) = &raw.inputs {
            for (key, input) in &spanned.value {
                if !is_ident(key) {
                    errors.push(self.err(spanned.into(), format!("invalid input name `{key}`")));
                    continue;
                }
                inputs.insert(
                    key.clone(),
                    InputSpec {
                        required: input.required,
                        default: input.default.clone(),
                        description: input.description.clone(),
                    },
                );
            }
        }

        let mut secrets = Vec::new();
        for s in &raw.secrets {
            if !is_env_name(&s.value) {
                errors.push(self.err(
                    s.into(),
                    format!(
                        "invalid secret name `{}`: must be an environment variable name",
                        s.value
                    ),
                ));
                continue;
            }
            if secrets.contains(&s.value) {
                errors.push(self.err(s.into(), format!("secret `{}` is listed twice", s.value)));
                continue;
            }
            secrets.push(s.value.clone());
        }

        let state = match &raw.state {
            None => Object::new(),
            Some(s) => match &s.value {
                Value::Object(m) => m.clone(),
                Value::Null => Object::new(),
                _ => {
                    errors.push(self.err(s.into(), "`state` must be a mapping (a JSON object)"));
                    Object::new()
                }
            },
        };

        let steps_pos: Pos = (&raw.steps).into();
        if raw.steps.value.is_empty() {
            errors.push(self.err(
                steps_pos,
                "`steps` is empty: a workflow needs at least one step",
            ));
        }
        for (i, step) in raw.steps.value.iter().enumerate() {
            let id = &step.value.id;
            if id.value.is_empty()
                || !id
                    .value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                errors.push(self.err(
                    id.into(),
                    format!(
                        "invalid step id `{}`: use ASCII letters, digits, `-` and `_`",
                        id.value
                    ),
                ));
            }
            if self.step_ids.contains_key(&id.value) {
                errors.push(self.err(id.into(), format!("duplicate step id `{}`", id.value)));
            } else if let Some(other) = self.folded_ids.get(&id.value.to_ascii_lowercase()) {
                // Expressions look names up ignoring case, as GitHub's do.
                errors.push(self.err(
                    id.into(),
                    format!(
                        "step id `{}` differs from `{other}` only in case: expressions could not tell them apart",
                        id.value
                    ),
                ));
            } else {
                self.step_ids.insert(id.value.clone(), i);
                self.folded_ids
                    .insert(id.value.to_ascii_lowercase(), id.value.clone());
            }
        }

        let top = Pos { line: 1, col: 1 };
        let env = self
            .env_map(&raw.env, top, PLAIN, &inputs, &secrets)
            .unwrap_or_else(|e| {
                errors.push(e);
                Default::default()
            });

        let labels = match &raw.labels {
            None => Vec::new(),
            Some(l) => self.labels(l, &inputs, &secrets).unwrap_or_else(|e| {
                errors.push(e);
                Vec::new()
            }),
        };

        let queue = match &raw.queue {
            None => None,
            Some(q) => self
                .queue(q, &inputs, &secrets)
                .map_err(|e| errors.push(e))
                .ok(),
        };

        let has_default_retry = raw.defaults.as_ref().is_some_and(|d| d.retry.is_some());
        let (default_timeout, default_retry) = match &raw.defaults {
            None => (None, RawRetry::default()),
            Some(d) => (
                self.optional_duration(d.timeout.as_ref(), &mut errors),
                d.retry
                    .as_ref()
                    .map(|r| r.value.clone())
                    .unwrap_or_default(),
            ),
        };
        if let Some(r) = raw.defaults.as_ref().and_then(|d| d.retry.as_ref())
            && let Err(e) = self.retry(&default_retry, &RawRetry::default(), r.into())
        {
            errors.push(e);
        }

        let concurrency = match &raw.concurrency {
            None => 8,
            Some(c) if c.value >= 1 && c.value <= 10_000 => c.value as usize,
            Some(c) => {
                errors.push(self.err(c.into(), "`concurrency` must be between 1 and 10000"));
                8
            }
        };
        let timeout = self.optional_duration(raw.timeout.as_ref(), &mut errors);

        let outputs = match &raw.outputs {
            None => None,
            Some(o) => {
                let tree = Value::Object(o.value.clone().into_iter().collect());
                let ctx = ExprCtx {
                    inputs: &inputs,
                    secrets: &secrets,
                    scope: PLAIN,
                    step: None,
                };
                match self.tree(&tree, o.into(), &ctx) {
                    Ok(_) => Some(tree),
                    Err(e) => {
                        errors.push(e);
                        None
                    }
                }
            }
        };

        let schedules = match &raw.on {
            None => Vec::new(),
            Some(on) => on
                .schedule
                .iter()
                .filter_map(|s| self.schedule(s, &inputs).map_err(|e| errors.push(e)).ok())
                .collect(),
        };

        let webhook = match raw.on.as_ref().and_then(|on| on.webhook.as_ref()) {
            None => None,
            Some(w) => self.webhook(w, &inputs).map_err(|e| errors.push(e)).ok(),
        };

        let run_defaults = raw.defaults.as_ref().and_then(|d| d.run.as_ref());
        let default_shell = match run_defaults.and_then(|r| r.shell.as_ref()) {
            None => None,
            Some(s) => crate::workflow::shell::Shell::parse(&s.value)
                .map_err(|m| errors.push(self.err(s.into(), m)))
                .ok(),
        };
        let defaults = StepDefaults {
            timeout: default_timeout,
            retry: &default_retry,
            has_retry: has_default_retry,
            shell: default_shell.as_ref(),
            working_directory: run_defaults
                .and_then(|r| r.working_directory.as_ref())
                .map(|w| w.value.clone()),
        };
        let mut steps = Vec::with_capacity(raw.steps.value.len());
        for (i, spanned) in raw.steps.value.iter_mut().enumerate() {
            match self.step(i, spanned, &inputs, &secrets, &defaults) {
                Ok(step) => steps.push(step),
                Err(e) => errors.push(e),
            }
        }
        if !errors.is_empty() {
            return Err(gathered(errors));
        }
        self.check_cycles(&raw.steps.value, &steps)?;
        self.check_upstream(&steps)?;

        Ok(Workflow {
            name,
            description: raw.description,
            inputs,
            secrets,
            env,
            labels,
            queue,
            state,
            concurrency,
            timeout,
            trace_per_instance: raw
                .trace
                .is_some_and(|t| t.per == super::model::TracePer::Instance),
            outputs,
            schedules,
            webhook,
            results_read: self.results_read.borrow().clone(),
            steps,
            source: self.source.to_string(),
            hash: hash_source(self.source),
            warnings: {
                let mut w = self.warnings.take();
                w.sort_by_key(|w| (w.line, w.col));
                w
            },
            calls: self.calls.take(),
            children: BTreeMap::new(),
        })
    }
}

impl Checker<'_> {
    /// `labels:`: names of letters, digits, `_`, `.` and `-` (at most 63),
    /// values that read only `inputs` (they are rendered when the instance
    /// starts, and shown: never a secret).
    fn labels(
        &self,
        l: &Spanned<BTreeMap<String, String>>,
        inputs: &BTreeMap<String, InputSpec>,
        secrets: &[String],
    ) -> Result<Vec<(String, Template)>, DefinitionError> {
        let at: Pos = l.into();
        let mut out = Vec::new();
        for (k, v) in &l.value {
            let key_at = self.locate(k, at);
            if let Some(why) = crate::workflow::label_name_problem(k) {
                return Err(self.err(key_at, format!("label `{k}`: {why}")));
            }
            let ctx = ExprCtx {
                inputs,
                secrets,
                scope: PLAIN,
                step: None,
            };
            let t = self.template(v, key_at, &ctx)?;
            for e in t.exprs() {
                for path in e.references() {
                    let root = path.first().map(String::as_str).unwrap_or_default();
                    if !root.eq_ignore_ascii_case("inputs") {
                        return Err(self.err(
                            self.locate(v, key_at),
                            format!("label `{k}` reads `{root}`: a label is rendered when the instance starts, from its `inputs` only"),
                        ));
                    }
                }
            }
            out.push((k.clone(), t));
        }
        Ok(out)
    }
}

/// Errors found in one pass as one: the first in file order, carrying the
/// others in `more`.
fn gathered(mut errors: Vec<DefinitionError>) -> DefinitionError {
    errors.sort_by_key(|e| (e.line, e.col));
    let mut first = errors.remove(0);
    first.more = errors;
    first
}
