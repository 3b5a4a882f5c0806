//! Turns the raw YAML shape into a checked [`Workflow`]: every rule of SPEC §1
//! (unique ids, known `needs`, no cycles, durations, expressions, one action per
//! step) is enforced here, before anything runs or anything is written, and each
//! violation is reported with the file, line and column it comes from.

use super::duration;
use super::expr::{self, Expr};
use super::model::{Needs, RawCompensate, RawHttp, RawRetry, RawSchedule, RawStep, RawWorkflow};
use super::template::Template;
use super::trigger::{self, Overlap, Schedule, When};
use super::*;
use serde_json::Value;
use serde_saphyr::Spanned;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// Largest workflow file accepted; a bigger one is certainly not hand-written.
pub const MAX_FILE_BYTES: usize = 2 * 1024 * 1024;

/// Context names an expression may start with.
const ROOTS: &[&str] = &[
    "inputs", "env", "secrets", "state", "steps", "output", "item", "index", "instance", "run",
    "step",
];

/// Where a definition error points: 1-based line and column.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl<T> From<&Spanned<T>> for Pos {
    fn from(s: &Spanned<T>) -> Self {
        Pos {
            line: s.referenced.line() as u32,
            col: s.referenced.column() as u32,
        }
    }
}

impl<T> From<&Box<Spanned<T>>> for Pos {
    fn from(s: &Box<Spanned<T>>) -> Self {
        Pos::from(&**s)
    }
}

/// Parses and validates workflow source text. `label` names the file in errors.
pub fn parse_source(source: &str, label: &str) -> Result<Workflow, DefinitionError> {
    let err_at = |pos: Pos, message: String| DefinitionError {
        file: label.to_string(),
        line: pos.line,
        col: pos.col,
        message,
    };
    if source.len() > MAX_FILE_BYTES {
        return Err(err_at(
            Pos { line: 1, col: 1 },
            format!(
                "file is {} bytes; workflow files are limited to {} bytes",
                source.len(),
                MAX_FILE_BYTES
            ),
        ));
    }
    // Blank, or nothing but comments (and document markers): an empty document.
    if source.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#') || l == "---" || l == "..."
    }) {
        return Err(err_at(
            Pos { line: 1, col: 1 },
            "empty workflow file (expected a mapping with `name` and `steps`)".into(),
        ));
    }
    let raw: RawWorkflow =
        serde_saphyr::from_str_with_options(source, yaml_options()).map_err(|e| {
            let loc = e.location();
            let pos = loc
                .map(|l| Pos {
                    line: l.line().max(1) as u32,
                    col: l.column().max(1) as u32,
                })
                .unwrap_or(Pos { line: 1, col: 1 });
            err_at(pos, yaml_message(&e))
        })?;
    Checker {
        source,
        label,
        step_ids: HashMap::new(),
        step_refs: Default::default(),
        results_read: std::cell::RefCell::new(Some(Default::default())),
    }
    .check(raw)
}

/// YAML 1.2 rules: only `true`/`false` are booleans, so `[x, y, no]` stays a
/// list of strings (YAML 1.1 would turn `y` and `no` into booleans).
fn yaml_options() -> serde_saphyr::Options {
    let mut options = serde_saphyr::Options::default();
    options.strict_booleans = true;
    options
}

/// One line of the YAML library's error, without its snippet or location suffix.
fn yaml_message(e: &serde_saphyr::Error) -> String {
    let text = e.without_snippet().to_string();
    let first = text.lines().next().unwrap_or("invalid YAML").trim();
    // The library appends " at line X, column Y"; we print the location ourselves.
    let msg = match first.rfind(" at line ") {
        Some(i) => &first[..i],
        None => first,
    };
    // Advice addressed to the library's caller, not to the user of the file.
    let msg = msg.split(", set DuplicateKeyPolicy").next().unwrap_or(msg);
    let msg = msg.split("; use from_str_multiple").next().unwrap_or(msg);
    // A breached parser limit (an alias bomb, absurd nesting) reads
    // `budget breached: Nodes { nodes: 250001 } at line …(used at line …)`.
    if let Some(breach) = first.strip_prefix("budget breached: ") {
        let limit = breach.split(" {").next().unwrap_or(breach).to_lowercase();
        return format!(
            "the YAML is too big or too deeply nested once aliases are expanded ({limit} limit exceeded)"
        );
    }
    let msg = msg.trim_end_matches('.');
    // serde names the keys it knows: point at the one that was meant.
    if let Some(rest) = msg.strip_prefix("unknown field `")
        && let Some((typed, known)) = rest.split_once("`, expected one of ")
    {
        let known: Vec<&str> = known.split(", ").map(|k| k.trim_matches('`')).collect();
        if let Some(near) = super::nearest(typed, known.iter().copied()) {
            return format!("unknown key `{typed}`; did you mean `{near}`?");
        }
        return format!("unknown key `{typed}` (known keys: {})", known.join(", "));
    }
    msg.to_string()
}

struct Checker<'a> {
    source: &'a str,
    label: &'a str,
    step_ids: HashMap<String, usize>,
    /// `steps.X` references made in steps (which step, in its compensation
    /// or not, X, where), checked against `needs` once every step is read.
    step_refs: std::cell::RefCell<Vec<StepRef>>,
    /// Every step whose result some expression reads (`steps.X`, from
    /// anywhere, `outputs:` included); `None` once one reads `steps` whole
    /// or through a dynamic index.
    results_read: std::cell::RefCell<Option<std::collections::BTreeSet<String>>>,
}

struct StepRef {
    from: usize,
    compensation: bool,
    to: String,
    at: Pos,
}

/// What an expression is allowed to see, depending on where it stands.
#[derive(Clone, Copy)]
struct Scope {
    output: bool,
    item: bool,
}

const PLAIN: Scope = Scope {
    output: false,
    item: false,
};

impl Checker<'_> {
    fn err(&self, pos: Pos, message: impl Into<String>) -> DefinitionError {
        DefinitionError {
            file: self.label.to_string(),
            line: pos.line,
            col: pos.col,
            message: message.into(),
        }
    }

    /// Finds where `needle` first appears in the source at or after `from`, to point
    /// at an expression inside a value that carries no span of its own.
    fn locate(&self, needle: &str, from: Pos) -> Pos {
        let start = offset_of(self.source, from);
        let Some(hay) = self.source.get(start..).filter(|_| !needle.is_empty()) else {
            return from;
        };
        // Prefer a match that is a whole value, not a piece of a longer one
        // (`1` inside `10s` when the bad value is `interval: 1`).
        let part = |c: char| c.is_alphanumeric() || matches!(c, '_' | '.' | '-');
        let whole = hay.match_indices(needle).map(|(i, _)| i).find(|&i| {
            !hay[..i].chars().next_back().is_some_and(part)
                && !hay[i + needle.len()..].chars().next().is_some_and(part)
        });
        match whole.or_else(|| hay.find(needle)) {
            Some(i) => pos_of(self.source, start + i),
            None => from,
        }
    }

    fn check(mut self, mut raw: RawWorkflow) -> Result<Workflow, DefinitionError> {
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

    /// One `on.schedule` entry: exactly one of `cron` and `every`, a known
    /// zone (cron only), and inputs the workflow declares, required ones given.
    fn schedule(
        &self,
        spanned: &Spanned<RawSchedule>,
        inputs: &BTreeMap<String, InputSpec>,
    ) -> Result<Schedule, DefinitionError> {
        let raw = &spanned.value;
        let at: Pos = spanned.into();
        let when = match (&raw.cron, &raw.every) {
            (Some(_), Some(e)) => {
                return Err(self.err(e.into(), "a schedule has `cron` or `every`, not both"));
            }
            (None, None) => {
                return Err(self.err(
                    at,
                    "a schedule needs `cron` (with an optional `timezone`) or `every`",
                ));
            }
            (Some(c), None) => {
                trigger::parse_cron(&c.value).map_err(|m| self.err(c.into(), m))?;
                let timezone = match &raw.timezone {
                    None => "UTC".to_string(),
                    Some(z) => {
                        trigger::parse_zone(&z.value).map_err(|m| self.err(z.into(), m))?;
                        z.value.clone()
                    }
                };
                When::Cron {
                    expr: c.value.trim().to_string(),
                    timezone,
                }
            }
            (None, Some(e)) => {
                if let Some(z) = &raw.timezone {
                    return Err(self.err(
                        z.into(),
                        "`timezone` applies to `cron`; `every` counts real time",
                    ));
                }
                let d = self.duration(e)?;
                if d < trigger::MIN_EVERY {
                    return Err(self.err(e.into(), "`every` must be at least 1s"));
                }
                When::Every {
                    ms: d.as_millis() as u64,
                }
            }
        };
        let given = raw
            .inputs
            .as_ref()
            .map(|i| i.value.clone())
            .unwrap_or_default();
        let inputs_at: Pos = raw.inputs.as_ref().map(Pos::from).unwrap_or(at);
        for key in given.keys() {
            if !inputs.contains_key(key) {
                let known: Vec<&str> = inputs.keys().map(String::as_str).collect();
                return Err(self.err(
                    self.locate(key, inputs_at),
                    if known.is_empty() {
                        format!("unknown input `{key}`: the workflow declares no inputs")
                    } else {
                        format!(
                            "unknown input `{key}` (the workflow declares: {})",
                            known.join(", ")
                        )
                    },
                ));
            }
        }
        for (name, spec) in inputs {
            if spec.required && spec.default.is_none() && !given.contains_key(name) {
                return Err(self.err(
                    inputs_at,
                    format!("the schedule does not give the required input `{name}`"),
                ));
            }
        }
        let catchup_ms = match &raw.catchup {
            None => 0,
            Some(c) => self.duration(c)?.as_millis() as u64,
        };
        Ok(Schedule {
            when,
            inputs: given,
            overlap: raw.overlap.unwrap_or(Overlap::Skip),
            catchup_ms,
        })
    }

    fn duration(&self, s: &Spanned<String>) -> Result<Duration, DefinitionError> {
        duration::parse(&s.value).map_err(|m| self.err(s.into(), m))
    }

    fn duration_at(&self, text: &str, pos: Pos) -> Result<Duration, DefinitionError> {
        duration::parse(text).map_err(|m| self.err(self.locate(text, pos), m))
    }

    fn step(
        &self,
        index: usize,
        spanned: &mut Spanned<RawStep>,
        inputs: &BTreeMap<String, InputSpec>,
        secrets: &[String],
        default_timeout: Option<Duration>,
        (default_retry, has_default_retry): (&RawRetry, bool),
    ) -> Result<Step, DefinitionError> {
        // Moved, not copied, into the step: 10,000 `set_state` mappings
        // copied while the parsed file is alive cost 3 MB of the peak.
        let raw_set_state = spanned.value.set_state.take();
        let spanned = &*spanned;
        let raw = &spanned.value;
        let pos: Pos = spanned.into();
        let id = raw.id.value.clone();
        let scope = Scope {
            output: false,
            item: raw.for_each.is_some(),
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
        if actions.len() > 1 {
            return Err(self.err(
                pos,
                format!("step `{id}` has more than one action ({}): use exactly one of run, http, sleep, wait_for_event", actions.join(", ")),
            ));
        }

        let action = if let Some(run) = &raw.run {
            Action::Run(self.run_cmd(&run.value, run.into(), &ctx)?)
        } else if let Some(http) = &raw.http {
            Action::Http(Box::new(self.http(&http.value, http.into(), &ctx)?))
        } else if let Some(sleep) = &raw.sleep {
            Action::Sleep(self.sleep(&sleep.value, sleep.into(), &ctx)?)
        } else if let Some(wait) = &raw.wait_for_event {
            let w = &wait.value;
            if w.name.trim().is_empty() {
                return Err(self.err(wait.into(), "`wait_for_event.name` is empty"));
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
            None => default_timeout,
        };
        let retry_pos = raw.retry.as_ref().map(Pos::from).unwrap_or(pos);
        let has_retry = raw.retry.is_some() || has_default_retry;
        let retry = if has_retry {
            self.retry(
                raw.retry
                    .as_ref()
                    .map(|r| &r.value)
                    .unwrap_or(&RawRetry::default()),
                default_retry,
                retry_pos,
            )?
        } else {
            // No `retry:` anywhere: only a crash of wf is retried (SPEC §3),
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
                self.compensation(&c.value, c.into(), &undo, default_timeout)
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
        let max_parallel = match &raw.max_parallel {
            None => None,
            Some(m) if raw.for_each.is_none() => {
                return Err(self.err(m.into(), "`max_parallel` only applies to `for_each` steps"));
            }
            Some(m) if m.value >= 1 && m.value <= 10_000 => Some(m.value as usize),
            Some(m) => return Err(self.err(m.into(), "`max_parallel` must be between 1 and 10000")),
        };

        Ok(Step {
            id,
            needs,
            action,
            dir: raw.dir.clone(),
            env,
            timeout,
            retry,
            errors,
            set_state: set_state.map(Box::new),
            compensate: compensate.map(Box::new),
            condition: condition.map(Box::new),
            for_each: for_each.map(Box::new),
            max_parallel,
            continue_on_error: raw.continue_on_error,
        })
    }

    fn run_cmd(&self, v: &Value, pos: Pos, ctx: &ExprCtx) -> Result<RunCmd, DefinitionError> {
        match v {
            Value::String(s) if !s.trim().is_empty() => {
                Ok(RunCmd::Shell(self.template(s, pos, ctx)?))
            }
            Value::Array(items) if !items.is_empty() => {
                let mut argv = Vec::new();
                for item in items {
                    let text = match item {
                        Value::String(s) => s.clone(),
                        Value::Number(n) => n.to_string(),
                        Value::Bool(b) => b.to_string(),
                        _ => return Err(self.err(pos, "`run` list items must be strings")),
                    };
                    argv.push(self.template(&text, pos, ctx)?);
                }
                Ok(RunCmd::Argv(argv))
            }
            Value::String(_) | Value::Array(_) => Err(self.err(pos, "`run` is empty")),
            _ => Err(self.err(pos, "`run` must be a shell string or a list of arguments")),
        }
    }

    fn http(&self, h: &RawHttp, pos: Pos, ctx: &ExprCtx) -> Result<HttpSpec, DefinitionError> {
        let method = h
            .method
            .clone()
            .unwrap_or_else(|| "GET".into())
            .to_ascii_uppercase();
        if !matches!(
            method.as_str(),
            "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "HEAD" | "OPTIONS"
        ) {
            return Err(self.err(
                self.locate(&method, pos),
                format!("unsupported HTTP method `{method}`"),
            ));
        }
        if h.json.is_some() && h.body.is_some() {
            return Err(self.err(pos, "`http` takes `json` or `body`, not both"));
        }
        let url = self.template(&h.url, pos, ctx)?;
        let headers = self.env_like(&h.headers, pos, ctx, "header")?;
        let query = self.env_like(&h.query, pos, ctx, "query parameter")?;
        if let Some(j) = &h.json {
            self.tree(j, pos, ctx)?;
        }
        let body = h
            .body
            .as_ref()
            .map(|b| self.template(b, pos, ctx))
            .transpose()?;
        if let Some(codes) = &h.expect_status
            && let Some(bad) = codes.iter().find(|c| !(100..=599).contains(*c))
        {
            // Point at the bad code, in the `expect_status` list.
            let at = self.locate(&bad.to_string(), self.locate("expect_status", pos));
            return Err(self.err(
                at,
                format!("`expect_status` {bad} is not an HTTP status code"),
            ));
        }
        let follow_redirects = match &h.follow_redirects {
            None | Some(Value::Bool(true)) => Redirects::Follow,
            Some(Value::Bool(false)) => Redirects::Never,
            Some(Value::String(s)) if s == "same-origin" => Redirects::SameOrigin,
            Some(other) => {
                let shown = match other {
                    Value::String(s) => s.clone(),
                    v => v.to_string(),
                };
                return Err(self.err(
                    self.locate("follow_redirects", pos),
                    format!("`follow_redirects` `{shown}` is not one of true, false, same-origin"),
                ));
            }
        };
        Ok(HttpSpec {
            method,
            url,
            headers,
            query,
            json: h.json.clone(),
            body,
            expect_status: h.expect_status.clone(),
            idempotency_key: h.idempotency_key,
            follow_redirects,
        })
    }

    fn sleep(&self, v: &Value, pos: Pos, ctx: &ExprCtx) -> Result<SleepSpec, DefinitionError> {
        match v {
            Value::String(s) => Ok(SleepSpec::For(self.duration_at(s, pos)?)),
            Value::Object(m) if m.len() == 1 && m.contains_key("until") => {
                let Some(Value::String(until)) = m.get("until") else {
                    return Err(self.err(pos, "`sleep.until` must be an RFC 3339 time string"));
                };
                let t = self.template(until, pos, ctx)?;
                if t.is_literal() && chrono::DateTime::parse_from_rfc3339(until).is_err() {
                    return Err(self.err(
                        self.locate(until, pos),
                        format!("`sleep.until` `{until}` is not an RFC 3339 time (e.g. 2026-12-24T00:00:00Z)"),
                    ));
                }
                Ok(SleepSpec::Until(t))
            }
            _ => Err(self.err(
                pos,
                "`sleep` must be a duration (e.g. 10s) or `{ until: <RFC 3339 time> }`",
            )),
        }
    }

    fn compensation(
        &self,
        c: &RawCompensate,
        pos: Pos,
        ctx: &ExprCtx,
        default_timeout: Option<Duration>,
    ) -> Result<Compensation, DefinitionError> {
        let action = match (&c.run, &c.http) {
            (Some(run), None) => Action::Run(self.run_cmd(run, pos, ctx)?),
            (None, Some(http)) => Action::Http(Box::new(self.http(http, pos, ctx)?)),
            _ => return Err(self.err(pos, "`compensate` takes exactly one of `run` or `http`")),
        };
        Ok(Compensation {
            action,
            dir: c.dir.clone(),
            env: self.env_map(&c.env, pos, ctx.scope, ctx.inputs, ctx.secrets)?,
            timeout: match &c.timeout {
                Some(t) => Some(self.duration_at(t, pos)?),
                None => default_timeout,
            },
            // An undo must survive a crash of wf: compensations default to 3
            // attempts (a crashed attempt counts, SPEC §3), not 1.
            retry: self.retry(
                c.retry.as_ref().unwrap_or(&RawRetry::default()),
                &RawRetry {
                    max_attempts: Some(3),
                    ..RawRetry::default()
                },
                pos,
            )?,
        })
    }

    fn condition(&self, v: &Value, pos: Pos, ctx: &ExprCtx) -> Result<Condition, DefinitionError> {
        match v {
            Value::Bool(b) => Ok(Condition::Literal(*b)),
            Value::String(s) if template::contains_expr(s) => {
                Ok(Condition::Template(self.template(s, pos, ctx)?))
            }
            Value::String(s) => {
                // GitHub Actions style: a bare `if:` string is itself an expression.
                let e = expr::parse(s).map_err(|e| {
                    self.err(
                        self.locate(s, pos),
                        format!("bad expression in `if`: {}", e.message()),
                    )
                })?;
                self.references(&e, s, pos, ctx)?;
                Ok(Condition::Expr(e))
            }
            _ => Err(self.err(pos, "`if` must be an expression or a boolean")),
        }
    }

    fn retry(
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
            Some("fixed") | Some("constant") => Backoff::Fixed,
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

    fn env_map(
        &self,
        map: &BTreeMap<String, Value>,
        pos: Pos,
        scope: Scope,
        inputs: &BTreeMap<String, InputSpec>,
        secrets: &[String],
    ) -> Result<Vec<(String, Template)>, DefinitionError> {
        let ctx = ExprCtx {
            inputs,
            secrets,
            scope,
            step: None,
        };
        let mut out = Vec::new();
        for (k, v) in map {
            if !is_env_name(k) {
                return Err(self.err(
                    self.locate(k, pos),
                    format!("invalid environment variable name `{k}`"),
                ));
            }
            out.push((k.clone(), self.scalar_template(v, pos, &ctx, "env value")?));
        }
        Ok(out)
    }

    fn env_like(
        &self,
        map: &BTreeMap<String, Value>,
        pos: Pos,
        ctx: &ExprCtx,
        what: &str,
    ) -> Result<Vec<(String, Template)>, DefinitionError> {
        map.iter()
            .map(|(k, v)| Ok((k.clone(), self.scalar_template(v, pos, ctx, what)?)))
            .collect()
    }

    fn scalar_template(
        &self,
        v: &Value,
        pos: Pos,
        ctx: &ExprCtx,
        what: &str,
    ) -> Result<Template, DefinitionError> {
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Null => String::new(),
            _ => return Err(self.err(pos, format!("{what} must be a string, number or boolean"))),
        };
        self.template(&text, pos, ctx)
    }

    fn tree(&self, v: &Value, pos: Pos, ctx: &ExprCtx) -> Result<(), DefinitionError> {
        match v {
            Value::String(s) => self.template(s, pos, ctx).map(|_| ()),
            Value::Array(items) => items.iter().try_for_each(|i| self.tree(i, pos, ctx)),
            Value::Object(m) => m.values().try_for_each(|i| self.tree(i, pos, ctx)),
            _ => Ok(()),
        }
    }

    fn template(&self, s: &str, pos: Pos, ctx: &ExprCtx) -> Result<Template, DefinitionError> {
        let t = Template::parse(s).map_err(|e| {
            let at = self.locate(s, pos);
            let at = advance(self.source, at, s, e.offset);
            self.err(at, format!("bad expression `{s}`: {}", e.message))
        })?;
        for e in t.exprs() {
            self.references(e, s, pos, ctx)?;
        }
        Ok(t)
    }

    fn references(
        &self,
        e: &Expr,
        text: &str,
        pos: Pos,
        ctx: &ExprCtx,
    ) -> Result<(), DefinitionError> {
        for path in e.references() {
            let Some(root) = path.first() else { continue };
            let at = || {
                let value = self.locate(text, pos);
                // Point at the reference itself when it is spelled out within the
                // value, so an error deep in a multi-line script names its line.
                let name = path.iter().take(2).cloned().collect::<Vec<_>>().join(".");
                let found = self.locate(&name, value);
                let lines = text.lines().count().max(1) as u32;
                if found.line < value.line + lines {
                    found
                } else {
                    value
                }
            };
            if !ROOTS.contains(&root.as_str()) {
                return Err(self.err(
                    at(),
                    format!(
                        "unknown name `{root}` in expression (expected one of {})",
                        ROOTS.join(", ")
                    ),
                ));
            }
            match (root.as_str(), path.get(1)) {
                ("output", _) if !ctx.scope.output => {
                    return Err(self.err(at(), "`output` is only available in `set_state`"));
                }
                ("item" | "index", _) if !ctx.scope.item => {
                    return Err(self.err(
                        at(),
                        format!("`{root}` is only available in a `for_each` step"),
                    ));
                }
                ("steps", Some(id)) if !self.step_ids.contains_key(id) => {
                    return Err(self.err(at(), format!("expression refers to `steps.{id}`, which is not a step of this workflow")));
                }
                ("steps", None) => {
                    *self.results_read.borrow_mut() = None;
                }
                ("steps", Some(id)) => {
                    if let Some(read) = self.results_read.borrow_mut().as_mut() {
                        read.insert(id.clone());
                    }
                    if let Some((from, compensation)) = ctx.step {
                        self.step_refs.borrow_mut().push(StepRef {
                            from,
                            compensation,
                            to: id.clone(),
                            at: at(),
                        });
                    }
                }
                ("secrets", Some(name)) if !ctx.secrets.contains(name) => {
                    return Err(self.err(at(), format!("expression refers to `secrets.{name}`, which is not listed in `secrets:`")));
                }
                ("inputs", Some(name)) if !ctx.inputs.contains_key(name) => {
                    return Err(self.err(at(), format!("expression refers to `inputs.{name}`, which is not declared in `inputs:`")));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// A step sees `steps.X` only when X runs before it: X is among what
    /// it needs, directly or through the steps those need (a compensation
    /// also sees its own step). Anything else would render as nothing.
    fn check_upstream(&self, steps: &[Step]) -> Result<(), DefinitionError> {
        let refs = self.step_refs.borrow();
        let mut upstream: HashMap<usize, std::collections::HashSet<usize>> = HashMap::new();
        for r in refs.iter() {
            let Some(&to) = self.step_ids.get(&r.to) else {
                continue;
            };
            let before = upstream.entry(r.from).or_insert_with(|| {
                let mut seen = std::collections::HashSet::new();
                let mut todo: Vec<usize> = steps[r.from].needs.clone();
                while let Some(i) = todo.pop() {
                    if seen.insert(i) {
                        todo.extend(steps[i].needs.iter().copied());
                    }
                }
                seen
            });
            if before.contains(&to) || (r.compensation && to == r.from) {
                continue;
            }
            let from = &steps[r.from].id;
            let message = if to == r.from {
                format!(
                    "step `{from}` refers to its own result `steps.{}` (its result is `output`, in `set_state`)",
                    r.to
                )
            } else {
                format!(
                    "step `{from}` refers to `steps.{}`, which does not run before it: add `{}` to its `needs` (or to a step it needs)",
                    r.to, r.to
                )
            };
            return Err(self.err(r.at, message));
        }
        Ok(())
    }

    fn check_cycles(
        &self,
        raw: &[Spanned<RawStep>],
        steps: &[Step],
    ) -> Result<(), DefinitionError> {
        // Kahn's algorithm; whatever is left over sits on or behind a cycle.
        let n = steps.len();
        let mut indegree: Vec<usize> = steps.iter().map(|s| s.needs.len()).collect();
        let mut dependents = vec![Vec::new(); n];
        for (i, s) in steps.iter().enumerate() {
            for &d in &s.needs {
                dependents[d].push(i);
            }
        }
        let mut queue: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
        let mut seen = 0;
        while let Some(i) = queue.pop() {
            seen += 1;
            for &j in &dependents[i] {
                indegree[j] -= 1;
                if indegree[j] == 0 {
                    queue.push(j);
                }
            }
        }
        if seen == n {
            return Ok(());
        }
        // Walk `needs` from a leftover step until a step repeats: that is the cycle.
        let start = (0..n).find(|&i| indegree[i] > 0).unwrap_or(0);
        let mut path = vec![start];
        let mut cur = start;
        loop {
            let next = steps[cur]
                .needs
                .iter()
                .copied()
                .find(|&d| indegree[d] > 0)
                .unwrap_or(start);
            if let Some(k) = path.iter().position(|&p| p == next) {
                let cycle: Vec<&str> = path[k..]
                    .iter()
                    .chain(std::iter::once(&next))
                    .map(|&i| steps[i].id.as_str())
                    .collect();
                let first = path[k];
                return Err(self.err(
                    (&raw[first]).into(),
                    format!("cycle in `needs`: {}", cycle.join(" -> ")),
                ));
            }
            path.push(next);
            cur = next;
        }
    }
}

struct ExprCtx<'a> {
    inputs: &'a BTreeMap<String, InputSpec>,
    secrets: &'a [String],
    scope: Scope,
    /// The step the expression belongs to (and whether to its
    /// compensation), for the check that `steps.X` runs before it.
    step: Option<(usize, bool)>,
}

impl Clone for ExprCtx<'_> {
    fn clone(&self) -> Self {
        ExprCtx { ..*self }
    }
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
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

/// Byte offset of a 1-based line/column (columns count characters).
fn offset_of(source: &str, pos: Pos) -> usize {
    let mut offset = 0;
    for (i, line) in source.split_inclusive('\n').enumerate() {
        if i + 1 == pos.line as usize {
            let col_bytes: usize = line
                .chars()
                .take(pos.col.saturating_sub(1) as usize)
                .map(char::len_utf8)
                .sum();
            return offset + col_bytes;
        }
        offset += line.len();
    }
    0
}

/// 1-based line/column of a byte offset.
pub(crate) fn pos_of(source: &str, offset: usize) -> Pos {
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() as u32 + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let col = before
        .get(line_start..)
        .map(|l| l.chars().count())
        .unwrap_or(0) as u32
        + 1;
    Pos { line, col }
}

/// Moves `at` (where `text` starts in the source) forward by `offset` bytes of
/// `text`, when `text` appears verbatim on one line; otherwise leaves it.
fn advance(source: &str, at: Pos, text: &str, offset: usize) -> Pos {
    let start = offset_of(source, at);
    if source.get(start..start + text.len()) == Some(text) {
        pos_of(source, start + offset.min(text.len()))
    } else {
        at
    }
}

pub(crate) fn hash_source(source: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(source.as_bytes()))
}
