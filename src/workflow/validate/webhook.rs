//! Checks `on.webhook`: a hook name `/hooks/NAME` can carry, the secret's
//! environment variable, inputs the workflow declares (the required ones
//! given), and expressions that read only the request (`body`, `headers`,
//! `query`): they are rendered by `wf serve` when a delivery arrives, before
//! any instance exists.

use super::*;
use crate::workflow::model::RawWebhook;
use crate::workflow::template::Template;
use crate::workflow::trigger::{self, WEBHOOK_ROOTS, Webhook};

impl Checker<'_> {
    pub(super) fn webhook(
        &self,
        spanned: &Spanned<RawWebhook>,
        inputs: &BTreeMap<String, InputSpec>,
    ) -> Result<Webhook, DefinitionError> {
        let raw = &spanned.value;
        let at: Pos = spanned.into();
        if let Some(why) = trigger::hook_name_problem(&raw.name.value) {
            return Err(self.err(
                (&raw.name).into(),
                format!("webhook name `{}` {why}", raw.name.value),
            ));
        }
        if !is_env_name(&raw.secret.value) {
            return Err(self.err(
                (&raw.secret).into(),
                format!(
                    "webhook `secret` names the server's environment variable that holds the key: `{}` is not a variable name",
                    raw.secret.value
                ),
            ));
        }
        let given = raw
            .inputs
            .as_ref()
            .map(|i| i.value.clone())
            .unwrap_or_default();
        let inputs_at: Pos = raw.inputs.as_ref().map(Pos::from).unwrap_or(at);
        self.trigger_inputs(&given, inputs, inputs_at, "webhook")?;
        for (key, value) in &given {
            self.request_tree(value, self.locate(key, inputs_at), key)?;
        }
        let dedupe = match &raw.dedupe {
            None => None,
            Some(d) => Some(self.request_template(&d.value, d.into(), "dedupe")?),
        };
        Ok(Webhook {
            name: raw.name.value.clone(),
            secret: raw.secret.value.clone(),
            inputs: given,
            dedupe,
        })
    }

    /// A value of `inputs`: its strings are templates over the request.
    fn request_tree(&self, v: &Value, pos: Pos, what: &str) -> Result<(), DefinitionError> {
        match v {
            Value::String(s) => self.request_template(s, pos, what).map(|_| ()),
            Value::Array(items) => items
                .iter()
                .try_for_each(|i| self.request_tree(i, pos, what)),
            Value::Object(m) => m.values().try_for_each(|i| self.request_tree(i, pos, what)),
            _ => Ok(()),
        }
    }

    /// A template of the webhook, whose expressions read only the request.
    fn request_template(
        &self,
        text: &str,
        pos: Pos,
        what: &str,
    ) -> Result<Template, DefinitionError> {
        let t = Template::parse(text).map_err(|e| {
            let at = self.locate(text, pos);
            let at = advance(self.source, at, text, e.offset);
            self.err(at, format!("bad expression `{text}`: {}", e.message))
        })?;
        for e in t.exprs() {
            for path in e.references() {
                let root = path.first().map(String::as_str).unwrap_or_default();
                if !WEBHOOK_ROOTS.iter().any(|r| r.eq_ignore_ascii_case(root)) {
                    return Err(self.err(
                        self.locate(text, pos),
                        format!(
                            "webhook `{what}` reads `{root}`: it is rendered from the request, which offers {}",
                            WEBHOOK_ROOTS.join(", ")
                        ),
                    ));
                }
            }
        }
        Ok(t)
    }
}
