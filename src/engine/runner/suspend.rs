//! Durable timers and events: a `sleep` stores its wake-up time, a
//! `wait_for_event` takes a delivered event or waits (the run suspends).

use super::*;
use crate::vocab::{ErrorType, StepStatus, Timestamp};

impl<'o> Runner<'o> {
    pub(super) fn start_sleep(
        &mut self,
        unit: &Unit,
        spec: &SleepSpec,
    ) -> Result<Started, EngineError> {
        let existing = self.sched.record(unit).retry_at;
        let wake = match existing {
            Some(t) => t,
            None => {
                let wake = match spec {
                    SleepSpec::For(d) => Timestamp::now().plus(*d),
                    SleepSpec::Until(t) => {
                        let text = t.render_text(self.ctx.value()).map_err(|e| e.to_string());
                        match text.as_deref().map(Timestamp::parse) {
                            Ok(Some(t)) => t,
                            Ok(None) | Err(_) => {
                                let msg = match text {
                                    Ok(s) => format!("`sleep.until` `{s}` is not an RFC 3339 time"),
                                    Err(e) => format!("`sleep.until`: {e}"),
                                };
                                self.fail_now(unit, Failure::new(ErrorType::Expression, msg))?;
                                return Ok(Started::Settled);
                            }
                        }
                    }
                };
                let rec = self.sched.record(unit);
                rec.status = StepStatus::Sleeping;
                rec.started_at = Some(store::now());
                rec.retry_at = Some(wake);
                self.sched.put(unit);
                wake
            }
        };
        if wake <= Timestamp::now() {
            let attempt = self.begin_attempt(unit, true)?;
            let out = json!({ "slept_until": wake });
            self.settle_result(unit, attempt, ok(out), Duration::ZERO)?;
            Ok(Started::Settled)
        } else {
            Ok(Started::Blocked)
        }
    }

    pub(super) fn start_wait(
        &mut self,
        unit: &Unit,
        name: &str,
        timeout: Option<Duration>,
    ) -> Result<Started, EngineError> {
        let key = unit.key(&self.wf);
        // Delivered events are known from the run's start and each poll.
        if let Some(at) = self.events.iter().position(|e| e.name == name) {
            let store::EventRow {
                id: event_id,
                payload,
                traceparent,
                ..
            } = self.events.remove(at);
            self.sched.writes.push(Write::TakeEvent {
                event: event_id,
                key: key.clone(),
            });
            // The run an event wakes links to the context it was sent under.
            if let Some(sc) = traceparent
                .as_deref()
                .and_then(telemetry::parse_traceparent)
                .and_then(|(trace, span)| recorder::span_context(&trace, &span, true))
            {
                self.root.add_link_with_attributes(
                    sc,
                    vec![KeyValue::new("wf.event.name", name.to_string())],
                );
            }
            let attempt = self.begin_attempt(unit, true)?;
            let data = serde_json::from_str::<Value>(&payload).unwrap_or(Value::Null);
            let out = json!({ "event": name, "json": data, "body": payload });
            self.settle_result(unit, attempt, ok(out), Duration::ZERO)?;
            return Ok(Started::Settled);
        }
        let rec = self.sched.record(unit);
        if rec.status != StepStatus::Waiting {
            rec.status = StepStatus::Waiting;
            rec.started_at = Some(store::now());
            rec.retry_at = timeout.map(|t| Timestamp::now().plus(t));
            self.sched.put(unit);
            return Ok(Started::Blocked);
        }
        if let Some(deadline) = rec.retry_at
            && deadline <= Timestamp::now()
        {
            let f = Failure::new(
                ErrorType::Timeout,
                format!("no `{name}` event arrived before the timeout"),
            );
            self.fail_now(unit, f)?;
            return Ok(Started::Settled);
        }
        Ok(Started::Blocked)
    }
}
