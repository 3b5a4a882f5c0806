//! What a step or its compensation runs: a `run` command, an `http` request or
//! a `sleep`, each checked and its expressions parsed.

use super::*;
use crate::workflow::Script;
use crate::workflow::model::{RawCompensate, RawHttp};
use crate::workflow::shell::Shell;

/// The shell a `run` string is run with, and where a step (or its
/// compensation) names its own (`None`: `defaults.run.shell`, or none).
#[derive(Clone, Copy)]
pub(super) struct ChosenShell<'a> {
    pub shell: Option<&'a Shell>,
    pub own: Option<Pos>,
}

/// What `defaults:` gives every step that does not set its own.
pub(super) struct StepDefaults<'a> {
    pub timeout: Option<Duration>,
    pub retry: &'a RawRetry,
    /// Whether `defaults.retry` was written at all.
    pub has_retry: bool,
    pub shell: Option<&'a Shell>,
    pub working_directory: Option<String>,
}

impl Checker<'_> {
    /// `shell`: the one that runs a `run` string (the step's own, or
    /// `defaults.run.shell`), and where the step names its own.
    pub(super) fn run_cmd(
        &self,
        v: &Value,
        pos: Pos,
        ctx: &ExprCtx,
        shell: ChosenShell<'_>,
    ) -> Result<RunCmd, DefinitionError> {
        match v {
            Value::String(s) if !s.trim().is_empty() => {
                let text = self.template(s, pos, ctx)?;
                let Some(shell) = shell.shell else {
                    return Ok(RunCmd::Shell(text));
                };
                if !shell.quotes_posix() && !text.is_literal() {
                    return Err(self.err(
                        pos,
                        format!(
                            "`run` holds an expression, which wf cannot quote for shell `{}`: set it in the step's `env:` and read the variable",
                            shell.name()
                        ),
                    ));
                }
                Ok(RunCmd::Script(Box::new(Script {
                    shell: shell.clone(),
                    text,
                })))
            }
            Value::Array(_) if let Some(at) = shell.own => Err(self.err(
                at,
                "`shell` applies to a `run` string: a `run` list runs its program without a shell",
            )),
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

    pub(super) fn http(
        &self,
        h: &RawHttp,
        pos: Pos,
        ctx: &ExprCtx,
    ) -> Result<HttpSpec, DefinitionError> {
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

    pub(super) fn sleep(
        &self,
        v: &Value,
        pos: Pos,
        ctx: &ExprCtx,
    ) -> Result<SleepSpec, DefinitionError> {
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

    pub(super) fn compensation(
        &self,
        c: &RawCompensate,
        pos: Pos,
        ctx: &ExprCtx,
        defaults: &StepDefaults<'_>,
    ) -> Result<Compensation, DefinitionError> {
        let own = match &c.shell {
            Some(s) => Some(Shell::parse(&s.value).map_err(|m| self.err(s.into(), m))?),
            None => None,
        };
        if own.is_some() && c.run.is_none() {
            return Err(self.err(pos, "`compensate`: `shell` only applies to `run`"));
        }
        let shell = ChosenShell {
            shell: own.as_ref().or(defaults.shell),
            own: c.shell.as_ref().map(Pos::from),
        };
        let action = match (&c.run, &c.http) {
            (Some(run), None) => Action::Run(self.run_cmd(run, pos, ctx, shell)?),
            (None, Some(http)) => Action::Http(Box::new(self.http(http, pos, ctx)?)),
            _ => return Err(self.err(pos, "`compensate` takes exactly one of `run` or `http`")),
        };
        Ok(Compensation {
            dir: match &action {
                Action::Run(_) => c.dir.clone().or_else(|| defaults.working_directory.clone()),
                _ => c.dir.clone(),
            },
            action,
            env: self.env_map(&c.env, pos, ctx.scope, ctx.inputs, ctx.secrets)?,
            timeout: match &c.timeout {
                Some(t) => Some(self.duration_at(t, pos)?),
                None => defaults.timeout,
            },
            // An undo must survive a crash of wf: compensations default to 3
            // attempts (a crashed attempt counts, docs/execution.md), not 1.
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
}
