//! `on.schedule` entries: a cron expression (in a known zone) or an `every`
//! interval, with inputs the workflow declares.

use super::*;
use crate::workflow::model::RawSchedule;
use crate::workflow::trigger::{self, Overlap, Schedule, When};

impl Checker<'_> {
    /// One `on.schedule` entry: exactly one of `cron` and `every`, a known
    /// zone (cron only), and inputs the workflow declares, required ones given.
    pub(super) fn schedule(
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
        self.trigger_inputs(&given, inputs, inputs_at, "schedule")?;
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
}

impl Checker<'_> {
    /// The inputs a trigger (`what`: a schedule, the webhook) gives its
    /// instances: each declared by the workflow, every required one without
    /// a default given.
    pub(super) fn trigger_inputs(
        &self,
        given: &serde_json::Map<String, Value>,
        inputs: &BTreeMap<String, InputSpec>,
        at: Pos,
        what: &str,
    ) -> Result<(), DefinitionError> {
        for key in given.keys() {
            if !inputs.contains_key(key) {
                let known: Vec<&str> = inputs.keys().map(String::as_str).collect();
                return Err(self.err(
                    self.locate(key, at),
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
                    at,
                    format!("the {what} does not give the required input `{name}`"),
                ));
            }
        }
        Ok(())
    }
}
