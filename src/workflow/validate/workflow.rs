//! The workflow-level keys (name, inputs, secrets, state, env, defaults,
//! concurrency, outputs), then its schedules, its steps and the graph checks,
//! gathered into one [`Workflow`].

use super::*;

impl Checker<'_> {
    pub(super) fn check(mut self, mut raw: RawWorkflow) -> Result<Workflow, DefinitionError> {
        let name = raw.name.value.clone();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        {
            return Err(self.err(
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
                    return Err(self.err(spanned.into(), format!("invalid input name `{key}`")));
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
                return Err(self.err(
                    s.into(),
                    format!(
                        "invalid secret name `{}`: must be an environment variable name",
                        s.value
                    ),
                ));
            }
            if secrets.contains(&s.value) {
                return Err(self.err(s.into(), format!("secret `{}` is listed twice", s.value)));
            }
            secrets.push(s.value.clone());
        }

        let state = match &raw.state {
            None => Object::new(),
            Some(s) => match &s.value {
                Value::Object(m) => m.clone(),
                Value::Null => Object::new(),
                _ => return Err(self.err(s.into(), "`state` must be a mapping (a JSON object)")),
            },
        };

        let steps_pos: Pos = (&raw.steps).into();
        if raw.steps.value.is_empty() {
            return Err(self.err(
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
                return Err(self.err(
                    id.into(),
                    format!(
                        "invalid step id `{}`: use letters, digits, `_` and `-`",
                        id.value
                    ),
                ));
            }
            if self.step_ids.insert(id.value.clone(), i).is_some() {
                return Err(self.err(id.into(), format!("duplicate step id `{}`", id.value)));
            }
        }

        let top = Pos { line: 1, col: 1 };
        let env = self.env_map(&raw.env, top, PLAIN, &inputs, &secrets)?;

        let has_default_retry = raw.defaults.as_ref().is_some_and(|d| d.retry.is_some());
        let (default_timeout, default_retry) = match &raw.defaults {
            None => (None, RawRetry::default()),
            Some(d) => (
                d.timeout.as_ref().map(|t| self.duration(t)).transpose()?,
                d.retry
                    .as_ref()
                    .map(|r| r.value.clone())
                    .unwrap_or_default(),
            ),
        };
        if let Some(r) = raw.defaults.as_ref().and_then(|d| d.retry.as_ref()) {
            self.retry(&default_retry, &RawRetry::default(), r.into())?;
        }

        let concurrency = match &raw.concurrency {
            None => 8,
            Some(c) if c.value >= 1 && c.value <= 10_000 => c.value as usize,
            Some(c) => return Err(self.err(c.into(), "`concurrency` must be between 1 and 10000")),
        };
        let timeout = raw.timeout.as_ref().map(|t| self.duration(t)).transpose()?;

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
                self.tree(&tree, o.into(), &ctx)?;
                Some(tree)
            }
        };

        let schedules = match &raw.on {
            None => Vec::new(),
            Some(on) => on
                .schedule
                .iter()
                .map(|s| self.schedule(s, &inputs))
                .collect::<Result<_, _>>()?,
        };

        let mut steps = Vec::with_capacity(raw.steps.value.len());
        for (i, spanned) in raw.steps.value.iter_mut().enumerate() {
            steps.push(self.step(
                i,
                spanned,
                &inputs,
                &secrets,
                default_timeout,
                (&default_retry, has_default_retry),
            )?);
        }
        self.check_cycles(&raw.steps.value, &steps)?;
        self.check_upstream(&steps)?;

        Ok(Workflow {
            name,
            description: raw.description,
            inputs,
            secrets,
            env,
            state,
            concurrency,
            timeout,
            trace_per_instance: raw
                .trace
                .is_some_and(|t| t.per == super::model::TracePer::Instance),
            outputs,
            schedules,
            results_read: self.results_read.borrow().clone(),
            steps,
            source: self.source.to_string(),
            hash: hash_source(self.source),
        })
    }
}
