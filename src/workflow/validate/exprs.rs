//! Expressions wherever they stand: `${{ }}` templates in values, bare `if:`
//! expressions, and the names each may refer to from where it stands.

use super::*;
use crate::workflow::expr::{self, Expr};
use crate::workflow::template::Template;

/// Context names an expression may start with.
const ROOTS: &[&str] = &[
    "inputs", "env", "secrets", "state", "steps", "output", "item", "index", "instance", "run",
    "step", "matrix",
];

impl Checker<'_> {
    pub(super) fn condition(
        &self,
        v: &Value,
        pos: Pos,
        ctx: &ExprCtx,
    ) -> Result<Condition, DefinitionError> {
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
                self.warn_changes(&e, false, s, pos);
                Ok(Condition::Expr(e))
            }
            _ => Err(self.err(pos, "`if` must be an expression or a boolean")),
        }
    }

    pub(super) fn env_map(
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

    pub(super) fn env_like(
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

    pub(super) fn tree(&self, v: &Value, pos: Pos, ctx: &ExprCtx) -> Result<(), DefinitionError> {
        match v {
            Value::String(s) => self.template(s, pos, ctx).map(|_| ()),
            Value::Array(items) => items.iter().try_for_each(|i| self.tree(i, pos, ctx)),
            Value::Object(m) => m.values().try_for_each(|i| self.tree(i, pos, ctx)),
            _ => Ok(()),
        }
    }

    pub(super) fn template(
        &self,
        s: &str,
        pos: Pos,
        ctx: &ExprCtx,
    ) -> Result<Template, DefinitionError> {
        let t = Template::parse(s).map_err(|e| {
            let at = self.locate(s, pos);
            let at = advance(self.source, at, s, e.offset);
            self.err(at, format!("bad expression `{s}`: {}", e.message))
        })?;
        for e in t.exprs() {
            self.references(e, s, pos, ctx)?;
            self.warn_changes(e, t.renders_as_text(), s, pos);
        }
        Ok(t)
    }

    /// Warns of what in `e` means something else than before wf followed
    /// GitHub's rules exactly (`Expr::meaning_changes`), and of a value
    /// that is likely an object or array rendered inside a string.
    fn warn_changes(&self, e: &Expr, as_text: bool, text: &str, pos: Pos) {
        let mut found = e.meaning_changes();
        if as_text && e.likely_object() {
            found.push(
                "an object or array inside a string renders as `Object` or `Array` now (as in GitHub Actions); use toJSON(…) for its JSON"
                    .into(),
            );
        }
        let at = self.locate(text, pos);
        self.warnings
            .borrow_mut()
            .extend(found.into_iter().map(|m| self.err(at, m)));
    }

    fn references(
        &self,
        e: &Expr,
        text: &str,
        pos: Pos,
        ctx: &ExprCtx,
    ) -> Result<(), DefinitionError> {
        if !self.hash_files_ok.get() && !e.calls_of("hashFiles").is_empty() {
            return Err(self.err(
                self.locate("hashFiles", self.locate(text, pos)),
                "hashFiles() is only available in `cache.key`",
            ));
        }
        for mut path in e.references() {
            // Names are looked up ignoring case, as GitHub's are: checked
            // here by their canonical spelling.
            if let Some(root) = path.first_mut()
                && let Some(known) = ROOTS.iter().find(|r| r.eq_ignore_ascii_case(root))
            {
                *root = (*known).to_string();
            }
            let root_name = path.first().cloned().unwrap_or_default();
            if let Some(name) = path.get_mut(1) {
                let canonical = match root_name.as_str() {
                    "steps" if !self.step_ids.contains_key(name.as_str()) => {
                        self.folded_ids.get(&name.to_ascii_lowercase()).cloned()
                    }
                    "inputs" if !ctx.inputs.contains_key(name.as_str()) => ctx
                        .inputs
                        .keys()
                        .find(|k| k.eq_ignore_ascii_case(name))
                        .cloned(),
                    "secrets" => ctx
                        .secrets
                        .iter()
                        .find(|k| k.eq_ignore_ascii_case(name))
                        .cloned(),
                    _ => None,
                };
                if let Some(c) = canonical {
                    *name = c;
                }
            }
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
                ("matrix", _) if !ctx.scope.matrix => {
                    return Err(self.err(at(), "`matrix` is only available in a `matrix` step"));
                }
                ("matrix", Some(key)) => {
                    if let Some(keys) = self.matrix_keys.borrow().as_ref()
                        && !keys.contains(key)
                    {
                        return Err(self.err(
                            at(),
                            format!(
                                "expression refers to `matrix.{key}`, which no combination of the matrix has (it has {})",
                                keys.iter().map(String::as_str).collect::<Vec<_>>().join(", ")
                            ),
                        ));
                    }
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
}
