//! Rendering what a unit runs from the expression context: its `if`, its
//! environment, its shell command (values through variables or memory files,
//! never spliced in) and its HTTP request. Pure: the context, the run's
//! data and the attempt's span id in, a job out.

use super::attempt::Exec;
use super::*;
use crate::vocab::ErrorType;

impl Scheduler {
    pub(super) fn eval_condition(&self, cond: &Condition) -> Result<bool, String> {
        match cond {
            Condition::Literal(b) => Ok(*b),
            Condition::Template(t) => t.truthy(self.ctx.value()).map_err(|e| e.to_string()),
            Condition::Expr(e) => e.eval_truthy(self.ctx.value()).map_err(|e| e.to_string()),
        }
    }

    pub(super) fn unit_env(
        &self,
        unit: &Unit,
        exec: &Exec,
        span_id: &str,
        out: &mut Vec<(String, String)>,
    ) -> Result<(), Failure> {
        out.extend(self.env.iter().cloned());
        for (k, t) in exec.env {
            let v = t
                .render_text(self.ctx.value())
                .map_err(|e| Failure::new(ErrorType::Expression, format!("env `{k}`: {e}")))?;
            out.push((k.clone(), v));
        }
        let key = unit.key(&self.wf);
        let attempt = self.records.get(&key).map_or(1, |r| r.attempts + 1);
        out.push(("WF_INSTANCE_ID".into(), self.run.id.to_string()));
        out.push(("WF_WORKFLOW".into(), self.wf.name.clone()));
        out.push(("WF_STEP_ID".into(), self.shown(unit)));
        out.push(("WF_ATTEMPT".into(), attempt.to_string()));
        out.push(("WF_RUN".into(), self.run.number.to_string()));
        if let Some(i) = unit.item {
            out.push(("WF_ITEM_INDEX".into(), i.to_string()));
        }
        for (k, v) in self.trace_context_of(span_id) {
            out.push((k.to_ascii_uppercase(), v));
        }
        if let Some((k, _)) = out
            .iter()
            .find(|(k, v)| k.contains('\0') || v.contains('\0'))
        {
            return Err(Failure::new(
                ErrorType::Expression,
                format!("env `{k}` contains a NUL byte"),
            ));
        }
        Ok(())
    }

    pub(super) fn render_shell(
        &self,
        unit: &Unit,
        exec: &Exec,
        cmd: &RunCmd,
        span_id: &str,
    ) -> Result<shell::ShellJob, Failure> {
        let ctx = self.ctx.value();
        let expr_err =
            |e: expr::ExprError| Failure::new(ErrorType::Expression, format!("`run`: {e}"));
        let mut env = Vec::new();
        let mut files = Vec::new();
        self.unit_env(unit, exec, span_id, &mut env)?;
        let (script, argv) = match cmd {
            RunCmd::Shell(t) => (Some(posix_text(t, ctx, &mut env, &mut files)?), Vec::new()),
            // A shell wf cannot quote for: validation let in no expression.
            RunCmd::Script(s) if !s.shell.quotes_posix() => {
                (Some(s.text.render_text(ctx).map_err(expr_err)?), Vec::new())
            }
            RunCmd::Script(s) => (
                Some(posix_text(&s.text, ctx, &mut env, &mut files)?),
                Vec::new(),
            ),
            RunCmd::Argv(items) => {
                let argv = items
                    .iter()
                    .map(|t| t.render_text(ctx))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(expr_err)?;
                if argv.iter().any(|a| a.contains('\0')) {
                    return Err(Failure::new(
                        ErrorType::Expression,
                        "`run`: an argument contains a NUL byte".into(),
                    ));
                }
                (None, argv)
            }
        };
        let dir = self.work_dir(exec);
        Ok(shell::ShellJob {
            shell: script,
            interpreter: match cmd {
                RunCmd::Script(s) => Some(s.shell.clone()),
                _ => None,
            },
            argv,
            env,
            env_remove: self.wf.secrets.clone(),
            files,
            live: self.live_paths(unit),
            redactor: self.redactor.clone(),
            dir,
            timeout: exec.timeout,
            errors: exec.errors.cloned().unwrap_or_default(),
        })
    }

    /// Where `exec` runs: its `dir` under the workflow's folder, else that
    /// folder.
    pub(super) fn work_dir(&self, exec: &Exec) -> std::path::PathBuf {
        match exec.dir {
            Some(d) => self.run.base_dir.join(d),
            None => self.run.base_dir.clone(),
        }
    }

    pub(super) fn render_http(
        &self,
        unit: &Unit,
        exec: &Exec,
        spec: &HttpSpec,
    ) -> Result<http::HttpJob, Failure> {
        let ctx = self.ctx.value();
        let text = |t: &Template, what: &str| {
            t.render_text(ctx)
                .map_err(|e| Failure::new(ErrorType::Expression, format!("`http.{what}`: {e}")))
        };
        let url = text(&spec.url, "url")?;
        let mut headers = Vec::new();
        for (k, t) in &spec.headers {
            headers.push((k.clone(), text(t, "headers")?));
        }
        if spec.idempotency_key {
            headers.push((
                "Idempotency-Key".into(),
                format!("{}/{}", self.run.id, unit.key(&self.wf)),
            ));
        }
        let mut query = Vec::new();
        for (k, t) in &spec.query {
            query.push((k.clone(), text(t, "query")?));
        }
        let body = match (&spec.json, &spec.body) {
            (Some(j), _) => {
                let v = template::render_tree(j, ctx).map_err(|e| {
                    Failure::new(ErrorType::Expression, format!("`http.json`: {e}"))
                })?;
                Some((v.to_string().into_bytes(), true))
            }
            (None, Some(b)) => Some((text(b, "body")?.into_bytes(), false)),
            (None, None) => None,
        };
        let carries_secret = self.redactor.contains(&url)
            || headers.iter().any(|(_, v)| self.redactor.contains(v))
            || query.iter().any(|(_, v)| self.redactor.contains(v))
            || body
                .as_ref()
                .is_some_and(|(b, _)| self.redactor.contains(&String::from_utf8_lossy(b)));
        Ok(http::HttpJob {
            method: spec.method.clone(),
            url,
            headers,
            query,
            body,
            expect_status: spec.expect_status.clone(),
            timeout: exec.timeout,
            follow_redirects: spec.follow_redirects,
            carries_secret,
        })
    }

    /// Where the attempt about to begin copies its output as it comes, for
    /// `wf logs --follow` (beside the database, private to its owner).
    fn live_paths(&self, unit: &Unit) -> Option<(PathBuf, PathBuf)> {
        // (The folder is made by the first copy that gets output.)
        let dir = self.run.live_dir.as_ref()?.join(&*self.run.id);
        let key = unit.key(&self.wf);
        let attempt = self.records.get(&key).map_or(1, |r| r.attempts + 1);
        Some((
            dir.join(format!("{key}.{attempt}.out")),
            dir.join(format!("{key}.{attempt}.err")),
        ))
    }

    /// `traceparent` (and `tracestate`) naming `span_id` of this run's
    /// trace, with the caller's flags and state: what an attempt's process
    /// or request is given.
    pub fn trace_context_of(&self, span_id: &str) -> Vec<(String, String)> {
        telemetry::inject(
            &self.run.trace_id,
            span_id,
            self.run.caller.0,
            &self.run.caller.1,
        )
    }

    /// What masks the workflow's secrets in what this run writes.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// The workflow's `outputs:`, rendered from the final state and step
    /// outputs, secrets masked; None when it declares none.
    pub(super) fn render_outputs(&mut self) -> Result<Option<Value>, String> {
        let Some(outputs) = self.wf.outputs.clone() else {
            return Ok(None);
        };
        if !self.ctx_state_current {
            self.ctx.set("state", self.state.clone());
            self.ctx_state_current = true;
        }
        let mut v = template::render_tree(&outputs, self.ctx.value()).map_err(|e| e.to_string())?;
        self.redactor.value(&mut v);
        Ok(Some(v))
    }
}

/// A `run` string for a POSIX shell, each expression a reference to a
/// variable (pushed onto `env`), never spliced in: a value too large for an
/// environment variable reaches the shell through a file (in memory, named
/// in `files`) that a prologue reads first.
fn posix_text(
    t: &Template,
    ctx: &Value,
    env: &mut Vec<(String, String)>,
    files: &mut Vec<(String, String)>,
) -> Result<String, Failure> {
    let mut vars = Vec::new();
    let text = t
        .render_shell(ctx, &mut vars)
        .map_err(|e| Failure::new(ErrorType::Expression, format!("`run`: {e}")))?;
    if text.contains('\0') || vars.iter().any(|(_, v)| v.contains('\0')) {
        return Err(Failure::new(
            ErrorType::Expression,
            "`run`: a value contains a NUL byte".into(),
        ));
    }
    let mut prologue = String::new();
    for (name, value) in vars {
        if value.len() > shell::LARGE_VALUE {
            prologue.push_str(&format!(
                "{name}=$(cat -- \"${{{name}_FILE}}\"; printf x); {name}=${{{name}%x}}; unset {name}_FILE\n"
            ));
            files.push((name, value));
        } else {
            env.push((name, value));
        }
    }
    Ok(prologue + &text)
}
