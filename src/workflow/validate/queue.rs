//! Checks `queue:`: its limits are in range, its durations and rate parse,
//! and its `key` and `priority` read nothing but `inputs` (they are rendered
//! when an instance is made, before anything of it runs); and a step's
//! `lock:`, on a step that runs something, its key never a secret.

use super::{Checker, ExprCtx, PLAIN, Pos};
use crate::workflow::model::RawQueue;
use crate::workflow::queue::{self, Queue, Rate};
use crate::workflow::template::Template;
use crate::workflow::{DefinitionError, InputSpec};
use serde_json::Value;
use serde_saphyr::Spanned;
use std::collections::BTreeMap;

impl Checker<'_> {
    pub(super) fn queue(
        &self,
        raw: &Spanned<RawQueue>,
        inputs: &BTreeMap<String, InputSpec>,
        secrets: &[String],
    ) -> Result<Queue, DefinitionError> {
        let q = &raw.value;
        let at: Pos = raw.into();
        let ctx = ExprCtx {
            inputs,
            secrets,
            scope: PLAIN,
            step: None,
        };
        let key = match &q.key {
            None => None,
            Some(k) => {
                let t = self.template(&k.value, k.into(), &ctx)?;
                self.inputs_only(&t, "queue.key", &k.value, k.into())?;
                if t.is_literal() && k.value.trim().is_empty() {
                    return Err(self.err(k.into(), "`queue.key` is empty"));
                }
                Some(t)
            }
        };
        let concurrency = match &q.concurrency {
            None => None,
            Some(c) if (1..=100_000).contains(&c.value) => Some(c.value as u32),
            Some(c) => {
                return Err(self.err(c.into(), "`queue.concurrency` must be between 1 and 100000"));
            }
        };
        let rate = match &q.rate {
            None => None,
            Some(r) => Some(Rate::parse(&r.value).map_err(|m| self.err(r.into(), m))?),
        };
        let priority = match &q.priority {
            None => None,
            Some(p) => Some(self.priority(p, &ctx)?),
        };
        let debounce = match &q.debounce {
            None => None,
            Some(d) => Some(self.duration(d)?),
        };
        if concurrency.is_none() && rate.is_none() && debounce.is_none() {
            return Err(self.err(
                at,
                "`queue:` sets no limit: give it `concurrency`, `rate` or `debounce`",
            ));
        }
        Ok(Queue {
            key,
            concurrency,
            rate,
            priority,
            on_full: q.on_full.unwrap_or_default(),
            debounce,
            hold_while_suspended: q.hold_while_suspended,
        })
    }

    /// `priority`: a whole number from 0 to 9, or an expression over `inputs`
    /// (checked when rendered).
    fn priority(&self, p: &Spanned<Value>, ctx: &ExprCtx) -> Result<Template, DefinitionError> {
        let at: Pos = p.into();
        let range = || {
            format!(
                "`queue.priority` must be a whole number from {} to {}, or an expression",
                queue::PRIORITIES.start(),
                queue::PRIORITIES.end()
            )
        };
        let text = match &p.value {
            Value::Number(n) => match n.as_i64() {
                Some(v) if queue::PRIORITIES.contains(&v) => v.to_string(),
                _ => return Err(self.err(at, range())),
            },
            Value::String(s) => s.clone(),
            _ => return Err(self.err(at, range())),
        };
        let t = self.template(&text, at, ctx)?;
        self.inputs_only(&t, "queue.priority", &text, at)?;
        if t.is_literal() {
            match text.trim().parse::<i64>() {
                Ok(v) if queue::PRIORITIES.contains(&v) => {}
                _ => return Err(self.err(at, range())),
            }
        }
        Ok(t)
    }

    /// A step's `lock:`: on a `run` or `http` step (what an attempt holds
    /// it across), a limit from 1 to 100000, a key that reads no secret (it
    /// is stored and shown).
    pub(super) fn step_lock(
        &self,
        id: &str,
        raw: &crate::workflow::model::RawLock,
        at: Pos,
        action: &crate::workflow::Action,
        ctx: &ExprCtx,
    ) -> Result<queue::StepLock, DefinitionError> {
        if !matches!(
            action,
            crate::workflow::Action::Run(_) | crate::workflow::Action::Http(_)
        ) {
            return Err(self.err(
                at,
                format!("step `{id}`: `lock` applies to `run` and `http` steps (an attempt holds it while it runs)"),
            ));
        }
        let limit = match &raw.limit {
            None => 1,
            Some(l) if (1..=100_000).contains(&l.value) => l.value as u32,
            Some(l) => {
                return Err(self.err(
                    l.into(),
                    format!("step `{id}`: `lock.limit` must be between 1 and 100000"),
                ));
            }
        };
        let k = &raw.key;
        let key = self.template(&k.value, k.into(), ctx)?;
        for e in key.exprs() {
            for path in e.references() {
                if path
                    .first()
                    .is_some_and(|r| r.eq_ignore_ascii_case("secrets"))
                {
                    return Err(self.err(
                        self.locate(&k.value, k.into()),
                        format!("step `{id}`: `lock.key` reads a secret: a lock's key is stored and shown"),
                    ));
                }
            }
        }
        if key.is_literal() && k.value.trim().is_empty() {
            return Err(self.err(k.into(), format!("step `{id}`: `lock.key` is empty")));
        }
        Ok(queue::StepLock { key, limit })
    }

    /// Refuses an expression of `what` that reads anything but `inputs`.
    pub(super) fn inputs_only(
        &self,
        t: &Template,
        what: &str,
        text: &str,
        at: Pos,
    ) -> Result<(), DefinitionError> {
        for e in t.exprs() {
            for path in e.references() {
                let root = path.first().map(String::as_str).unwrap_or_default();
                if !root.eq_ignore_ascii_case("inputs") {
                    return Err(self.err(
                        self.locate(text, at),
                        format!("`{what}` reads `{root}`: it is rendered when the instance is made, from its `inputs` only"),
                    ));
                }
            }
        }
        Ok(())
    }
}
