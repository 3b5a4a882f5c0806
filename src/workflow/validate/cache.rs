//! A step's `cache:`: on a `run` or `http` step, a key that reads no
//! secret (it is stored and shown) and whose `hashFiles(…)` calls name their
//! patterns as text (the driver hashes those files before the key is
//! rendered), a `ttl`, and `wait`, which takes a lock of its own.

use super::*;
use crate::workflow::model::RawCache;
use crate::workflow::{Action, Cache};

impl Checker<'_> {
    pub(super) fn cache(
        &self,
        id: &str,
        raw: &RawCache,
        at: Pos,
        (action, has_lock): (&Action, bool),
        ctx: &ExprCtx,
    ) -> Result<Cache, DefinitionError> {
        if !matches!(action, Action::Run(_) | Action::Http(_)) {
            return Err(self.err(
                at,
                format!("step `{id}`: `cache` applies to `run` and `http` steps"),
            ));
        }
        let wait = raw.wait.unwrap_or(true);
        if wait && has_lock {
            return Err(self.err(
                at,
                format!("step `{id}`: a `cache` that waits takes a lock of its own: with `lock:`, write `cache: {{ key: …, wait: false }}`"),
            ));
        }
        let k = &raw.key;
        self.hash_files_ok.set(true);
        let key = self.template(&k.value, k.into(), ctx);
        self.hash_files_ok.set(false);
        let key = key?;
        let text_at = self.locate(&k.value, k.into());
        let mut files = Vec::new();
        for e in key.exprs() {
            if e.references()
                .iter()
                .any(|p| p.first().is_some_and(|r| r.eq_ignore_ascii_case("secrets")))
            {
                return Err(self.err(
                    text_at,
                    format!("step `{id}`: `cache.key` reads a secret: a key is stored and shown"),
                ));
            }
            for args in e.calls_of("hashFiles") {
                let patterns: Option<Vec<String>> = args
                    .iter()
                    .map(|a| match a {
                        crate::workflow::expr::Expr::Literal(
                            crate::workflow::expr::Literal::String(s),
                        ) => Some(s.clone()),
                        _ => None,
                    })
                    .collect();
                let Some(patterns) = patterns else {
                    return Err(self.err(
                        self.locate("hashFiles", text_at),
                        format!(
                            "step `{id}`: hashFiles() takes its patterns as quoted text ('src/**')"
                        ),
                    ));
                };
                files.push(patterns);
            }
        }
        if key.is_literal() && k.value.trim().is_empty() {
            return Err(self.err(k.into(), format!("step `{id}`: `cache.key` is empty")));
        }
        let ttl = match &raw.ttl {
            None => None,
            Some(t) => Some(self.duration(t)?),
        };
        Ok(Cache {
            key,
            files,
            ttl,
            wait,
        })
    }
}
