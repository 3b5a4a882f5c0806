//! Durable timers and events: a `sleep` stores its wake-up time, a
//! `wait_for_event` takes a delivered event or waits (the run suspends).
//! An event sent under a trace becomes a link of the run's root span
//! ([`Effect::LinkEvent`]).

use super::*;
use crate::vocab::{ErrorType, StepStatus, Timestamp};

impl Scheduler {
    pub(super) fn start_sleep(
        &mut self,
        unit: &Unit,
        spec: &SleepSpec,
        now: Timestamp,
        spans: &mut dyn SpanIds,
    ) -> Started {
        let existing = self.record(unit).retry_at;
        let wake = match existing {
            Some(t) => t,
            None => {
                let wake = match spec {
                    SleepSpec::For(d) => now.plus(*d),
                    SleepSpec::Until(t) => {
                        let text = t.render_text(self.ctx.value()).map_err(|e| e.to_string());
                        match text.as_deref().map(Timestamp::parse) {
                            Ok(Some(t)) => t,
                            Ok(None) | Err(_) => {
                                let msg = match text {
                                    Ok(s) => format!("`sleep.until` `{s}` is not an RFC 3339 time"),
                                    Err(e) => format!("`sleep.until`: {e}"),
                                };
                                let f = Failure::new(ErrorType::Expression, msg);
                                self.fail_now(unit, f, now, spans);
                                return Started::Settled;
                            }
                        }
                    }
                };
                let rec = self.record(unit);
                rec.status = StepStatus::Sleeping;
                rec.started_at = Some(now);
                rec.retry_at = Some(wake);
                self.put(unit);
                wake
            }
        };
        if wake <= now {
            let attempt = self.begin_attempt(unit, true, now, spans);
            let out = json!({ "slept_until": wake });
            self.settle_result(unit, attempt, ok(out), Duration::ZERO, now);
            Started::Settled
        } else {
            Started::Blocked
        }
    }

    pub(super) fn start_wait(
        &mut self,
        unit: &Unit,
        name: &str,
        timeout: Option<Duration>,
        now: Timestamp,
        spans: &mut dyn SpanIds,
    ) -> Started {
        let key = unit.key(&self.wf);
        // Delivered events are known from the run's start and each poll.
        if let Some(at) = self.events.iter().position(|e| e.name == name) {
            let EventRow {
                id: event_id,
                payload,
                traceparent,
                ..
            } = self.events.remove(at);
            self.taken_events.insert(event_id);
            self.writes.push(Write::TakeEvent {
                event: event_id,
                key: key.clone(),
            });
            // The run an event wakes links to the context it was sent under.
            if let Some(traceparent) = traceparent {
                self.effects.push(Effect::LinkEvent {
                    name: name.to_string(),
                    traceparent,
                });
            }
            let attempt = self.begin_attempt(unit, true, now, spans);
            let data = serde_json::from_str::<Value>(&payload).unwrap_or(Value::Null);
            let out = json!({ "event": name, "json": data, "body": payload });
            self.settle_result(unit, attempt, ok(out), Duration::ZERO, now);
            return Started::Settled;
        }
        let rec = self.record(unit);
        if rec.status != StepStatus::Waiting {
            rec.status = StepStatus::Waiting;
            rec.started_at = Some(now);
            rec.retry_at = timeout.map(|t| now.plus(t));
            self.put(unit);
            return Started::Blocked;
        }
        if let Some(deadline) = rec.retry_at
            && deadline <= now
        {
            let f = Failure::new(
                ErrorType::Timeout,
                format!("no `{name}` event arrived before the timeout"),
            );
            self.fail_now(unit, f, now, spans);
            return Started::Settled;
        }
        Started::Blocked
    }
}
