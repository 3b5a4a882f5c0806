//! A `workflow:` step as written: the file it names, the child's inputs
//! (`with:`, whose expressions may not read `secrets`: a child declares its
//! own) and `on_parent_end`. The checks that need the child itself (its
//! inputs) run once it is loaded (`workflow::children`).

use super::*;
use crate::workflow::model::RawStep;
use crate::workflow::{CallSite, ChildCall, OnParentEnd};

impl Checker<'_> {
    pub(super) fn child_call(
        &self,
        id: &str,
        path: &Spanned<String>,
        raw: &RawStep,
        ctx: &ExprCtx,
    ) -> Result<ChildCall, DefinitionError> {
        let at: Pos = path.into();
        let file = path.value.trim();
        if file.is_empty() {
            return Err(self.err(at, format!("step `{id}`: `workflow` names no file")));
        }
        if file.contains('\0') || template::contains_expr(file) {
            return Err(self.err(
                at,
                format!("step `{id}`: `workflow` must name a file, without `${{{{ }}}}` (it is read before anything runs)"),
            ));
        }
        let mut with = Object::new();
        let mut keys = Vec::new();
        if let Some(w) = &raw.with {
            let with_pos: Pos = (&**w).into();
            for (k, v) in &w.value {
                let key_at = self.locate(k, with_pos);
                if let Some(name) = secret_reference(v) {
                    return Err(self.err(
                        self.locate(&name, key_at),
                        format!("step `{id}`: `with.{k}` refers to `{name}`: a child workflow cannot be given secrets; it declares its own `secrets:`"),
                    ));
                }
                self.tree(v, key_at, ctx)?;
                with.insert(k.clone(), v.clone());
                keys.push((k.clone(), key_at));
            }
        }
        let on_parent_end = match &raw.on_parent_end {
            None => OnParentEnd::default(),
            Some(p) => OnParentEnd::parse(p.value.trim()).ok_or_else(|| {
                self.err(
                    p.into(),
                    format!(
                        "step `{id}`: `on_parent_end` is `{}`; expected cancel, terminate or abandon",
                        p.value
                    ),
                )
            })?,
        };
        self.calls.borrow_mut().push(CallSite {
            step: id.to_string(),
            path: file.to_string(),
            at,
            with: keys,
        });
        Ok(ChildCall {
            path: file.to_string(),
            with,
            on_parent_end,
        })
    }
}

/// The first `secrets.X` (or `secrets` whole) an expression in `v` reads.
fn secret_reference(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => {
            let t = Template::parse(s).ok()?;
            t.exprs().find_map(|e| {
                e.references().into_iter().find_map(|path| {
                    let root = path.first()?;
                    root.eq_ignore_ascii_case("secrets")
                        .then(|| path.iter().take(2).cloned().collect::<Vec<_>>().join("."))
                })
            })
        }
        Value::Array(items) => items.iter().find_map(secret_reference),
        Value::Object(m) => m.values().find_map(secret_reference),
        _ => None,
    }
}
