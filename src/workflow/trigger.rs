//! `on.schedule`: when a registered workflow starts by itself. A schedule is
//! a 5-field cron expression read in an IANA time zone, or a fixed interval;
//! this module turns one into its fire times. Fire times are instants (unix
//! milliseconds), so every worker computes the same ones whatever its own
//! zone: the store claims them by value.
//!
//! Cron parsing and the DST rules are croner's (Vixie cron's behaviour, as
//! the Open Cron Pattern Specification writes it down): a fixed time that a
//! spring-forward gap skips fires at the first minute after the gap, a fixed
//! time that a fall-back repeats fires once, and `*`/step fields fire on
//! every wall-clock match, in real time order.

use chrono::TimeZone;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::time::Duration;

/// What to do at a fire time while the previous scheduled instance is still
/// open (running, sleeping or waiting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// Do not start; the fire time is counted as skipped.
    Skip,
    /// Start anyway.
    Allow,
    /// Start once the previous one ends; at most one waits, later ones are skipped.
    BufferOne,
    /// Cancel the previous one (its compensations run) and start.
    CancelPrevious,
}

impl Overlap {
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::Allow => "allow",
            Overlap::BufferOne => "buffer_one",
            Overlap::CancelPrevious => "cancel_previous",
        }
    }

    pub fn parse(s: &str) -> Option<Overlap> {
        Some(match s {
            "skip" => Overlap::Skip,
            "allow" => Overlap::Allow,
            "buffer_one" => Overlap::BufferOne,
            "cancel_previous" => Overlap::CancelPrevious,
            _ => return None,
        })
    }
}

/// When a schedule fires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum When {
    /// A 5-field cron expression, read in `timezone`.
    Cron { expr: String, timezone: String },
    /// Every `ms` milliseconds, counted from the unix epoch (so `every: 1h`
    /// fires on the hour, whoever registered it and when).
    Every { ms: u64 },
}

/// One checked `on.schedule` entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Schedule {
    pub when: When,
    /// Inputs of the instances it starts, as written (checked against the
    /// workflow's `inputs`).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub inputs: Map<String, Value>,
    pub overlap: Overlap,
    /// Fire times missed while no worker ran start late if they are at most
    /// this old (beside [`GRACE`]); older ones are skipped and reported.
    #[serde(default)]
    pub catchup_ms: u64,
}

/// One checked `on.webhook`: `POST /hooks/NAME` on `wf serve`, signed with
/// the key in the server's environment variable `secret`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Webhook {
    pub name: String,
    pub secret: String,
    /// Inputs rendered from the request (`body`, `headers`, `query`): a
    /// JSON tree whose strings may hold `${{ }}`.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub inputs: Map<String, Value>,
    /// The value that makes a redelivery return the instance it started;
    /// `None`: the `Idempotency-Key` header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedupe: Option<super::template::Template>,
}

/// What a webhook's expressions may read.
pub const WEBHOOK_ROOTS: &[&str] = &["body", "headers", "query"];

/// A hook's name: what `/hooks/NAME` accepts, and what is wrong with `name`.
pub fn hook_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() || name.len() > 64 {
        return Some("must be 1 to 64 characters");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        || name.starts_with('.')
    {
        return Some("may hold only letters, digits, `_`, `-` and `.` (not first)");
    }
    None
}

/// A fire time is on time for this long whatever `catchup` says: a worker
/// that polls, restarts or was busy for a moment still starts it.
pub const GRACE: Duration = Duration::from_secs(60);

/// The shortest `every:` (a schedule is no busy loop).
pub const MIN_EVERY: Duration = Duration::from_secs(1);

/// The 5-field cron dialect: minute hour day-of-month month day-of-week,
/// no seconds, no years.
fn parser() -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
}

/// Parses a cron expression, or says what is wrong with it.
pub fn parse_cron(expr: &str) -> Result<Cron, String> {
    parser()
        .parse(expr)
        .map_err(|e| format!("invalid cron expression `{expr}`: {e}"))
}

/// Parses an IANA time zone name (`Europe/Paris`, `UTC`).
pub fn parse_zone(name: &str) -> Result<chrono_tz::Tz, String> {
    name.parse::<chrono_tz::Tz>().map_err(|_| {
        format!("unknown time zone `{name}`: use an IANA name such as `Europe/Paris` or `UTC`")
    })
}

impl Schedule {
    /// The schedule as `wf schedule list` shows it: the cron expression, or
    /// `every 30s`.
    pub fn spec(&self) -> String {
        match &self.when {
            When::Cron { expr, .. } => expr.clone(),
            When::Every { ms } => format!("every {}", super::duration::format(*ms)),
        }
    }

    /// The time zone of a cron schedule (`None` for `every`).
    pub fn timezone(&self) -> Option<&str> {
        match &self.when {
            When::Cron { timezone, .. } => Some(timezone),
            When::Every { .. } => None,
        }
    }

    /// The first fire time strictly after `after_ms` (unix ms), if any.
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        self.clock()?.next_after(after_ms)
    }

    /// The expression and zone parsed once, for a walk over many fire times.
    fn clock(&self) -> Option<Clock> {
        Some(match &self.when {
            When::Every { ms } => Clock::Every((*ms as i64).max(1)),
            When::Cron { expr, timezone } => {
                Clock::Cron(Box::new(parse_cron(expr).ok()?), parse_zone(timezone).ok()?)
            }
        })
    }

    /// The fire times in `[from_ms, to_ms)`, at most `cap` of them, and
    /// whether there were more.
    pub fn between(&self, from_ms: i64, to_ms: i64, cap: usize) -> (Vec<i64>, bool) {
        let mut out = Vec::new();
        let more = self.walk(from_ms, to_ms, cap, |t| out.push(t));
        (out, more)
    }

    /// How many fire times lie in `[from_ms, to_ms)` (exact for `every`;
    /// for cron, counted up to `cap`, then `cap` and `true`).
    pub fn count_between(&self, from_ms: i64, to_ms: i64, cap: usize) -> (u64, bool) {
        if to_ms <= from_ms {
            return (0, false);
        }
        match &self.when {
            When::Every { ms } => {
                let ms = *ms as i64;
                // Multiples of `ms` in [from, to).
                let first = (from_ms + ms - 1).div_euclid(ms);
                let last = (to_ms - 1).div_euclid(ms);
                ((last - first + 1).max(0) as u64, false)
            }
            When::Cron { .. } => {
                let mut n = 0;
                let more = self.walk(from_ms, to_ms, cap, |_| n += 1);
                (n, more)
            }
        }
    }

    /// Calls `each` with the fire times in `[from_ms, to_ms)`, at most `cap`
    /// of them; whether there were more.
    fn walk(&self, from_ms: i64, to_ms: i64, cap: usize, mut each: impl FnMut(i64)) -> bool {
        let Some(clock) = self.clock() else {
            return false;
        };
        let mut seen = 0;
        let mut next = clock.next_after(from_ms - 1);
        while let Some(t) = next.filter(|&t| t < to_ms) {
            if seen == cap {
                return true;
            }
            each(t);
            seen += 1;
            next = clock.next_after(t);
        }
        false
    }
}

/// A schedule ready to step through its fire times.
enum Clock {
    Every(i64),
    Cron(Box<Cron>, chrono_tz::Tz),
}

impl Clock {
    fn next_after(&self, after_ms: i64) -> Option<i64> {
        match self {
            Clock::Every(ms) => Some((after_ms.div_euclid(*ms) + 1) * ms),
            Clock::Cron(cron, tz) => {
                let start = tz.timestamp_millis_opt(after_ms).single()?;
                cron.find_next_occurrence(&start, false)
                    .ok()
                    .map(|t| t.timestamp_millis())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, Utc};

    fn cron(expr: &str, tz: &str) -> Schedule {
        Schedule {
            when: When::Cron {
                expr: expr.into(),
                timezone: tz.into(),
            },
            inputs: Map::new(),
            overlap: Overlap::Skip,
            catchup_ms: 0,
        }
    }

    fn ms(rfc3339: &str) -> i64 {
        DateTime::parse_from_rfc3339(rfc3339)
            .unwrap()
            .timestamp_millis()
    }

    fn utc(ms: i64) -> String {
        DateTime::<Utc>::from_timestamp_millis(ms)
            .unwrap()
            .format("%Y-%m-%dT%H:%M:%SZ")
            .to_string()
    }

    /// Paris springs forward on 2026-03-29: 02:00 CET becomes 03:00 CEST.
    /// A daily 02:30 falls in the gap and fires once, at the first minute
    /// after it (03:00 CEST = 01:00 UTC); the next day it is 02:30 CEST again.
    #[test]
    fn spring_forward_gap_fires_once_after_the_gap() {
        let s = cron("30 2 * * *", "Europe/Paris");
        let (times, _) = s.between(ms("2026-03-27T12:00:00Z"), ms("2026-03-31T12:00:00Z"), 10);
        let got: Vec<String> = times.into_iter().map(utc).collect();
        assert_eq!(
            got,
            [
                "2026-03-28T01:30:00Z", // 02:30 CET
                "2026-03-29T01:00:00Z", // 02:30 does not exist: 03:00 CEST
                "2026-03-30T00:30:00Z", // 02:30 CEST
                "2026-03-31T00:30:00Z",
            ]
        );
    }

    /// Paris falls back on 2026-10-25: 03:00 CEST becomes 02:00 CET, so
    /// 02:30 happens twice. A daily 02:30 fires once (the first one); an
    /// hourly `0 * * * *` fires every real hour, 02:00 twice.
    #[test]
    fn fall_back_overlap_fixed_time_once_hourly_every_real_hour() {
        let daily = cron("30 2 * * *", "Europe/Paris");
        let (times, _) = daily.between(ms("2026-10-24T12:00:00Z"), ms("2026-10-26T12:00:00Z"), 10);
        let got: Vec<String> = times.into_iter().map(utc).collect();
        assert_eq!(got, ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]);

        let hourly = cron("0 * * * *", "Europe/Paris");
        let (times, _) = hourly.between(ms("2026-10-24T23:30:00Z"), ms("2026-10-25T03:30:00Z"), 10);
        let got: Vec<String> = times.into_iter().map(utc).collect();
        // 02:00 CEST (00:00Z), 02:00 CET (01:00Z): every real hour, none twice.
        assert_eq!(
            got,
            [
                "2026-10-25T00:00:00Z",
                "2026-10-25T01:00:00Z",
                "2026-10-25T02:00:00Z",
                "2026-10-25T03:00:00Z",
            ]
        );
    }

    #[test]
    fn a_zone_shifts_fire_times() {
        let paris = cron("0 9 * * 1-5", "Europe/Paris");
        // 2026-12-03 is a Thursday; 09:00 in Paris is 08:00 UTC in winter.
        assert_eq!(
            utc(paris.next_after(ms("2026-12-03T07:00:00Z")).unwrap()),
            "2026-12-03T08:00:00Z"
        );
        // Friday's fire, then Monday's: no weekend.
        let fri = paris.next_after(ms("2026-12-03T08:00:00Z")).unwrap();
        assert_eq!(utc(fri), "2026-12-04T08:00:00Z");
        assert_eq!(utc(paris.next_after(fri).unwrap()), "2026-12-07T08:00:00Z");
    }

    #[test]
    fn every_is_anchored_to_the_epoch() {
        let s = Schedule {
            when: When::Every { ms: 30_000 },
            ..cron("* * * * *", "UTC")
        };
        assert_eq!(
            s.next_after(ms("2026-12-03T10:00:12Z")),
            Some(ms("2026-12-03T10:00:30Z"))
        );
        assert_eq!(
            s.next_after(ms("2026-12-03T10:00:30Z")),
            Some(ms("2026-12-03T10:01:00Z"))
        );
        assert_eq!(s.spec(), "every 30s");
        let (n, more) = s.count_between(ms("2026-12-03T10:00:00Z"), ms("2026-12-03T11:00:00Z"), 5);
        assert_eq!((n, more), (120, false));
        let (times, more) = s.between(ms("2026-12-03T10:00:00Z"), ms("2026-12-03T11:00:00Z"), 5);
        assert_eq!((times.len(), more), (5, true));
        assert_eq!(times[0], ms("2026-12-03T10:00:00Z"));
    }

    #[test]
    fn bad_expressions_and_zones_say_what_is_wrong() {
        assert!(parse_cron("* * * * *").is_ok());
        assert!(parse_cron("*/15 9-17 * * MON-FRI").is_ok());
        let e = parse_cron("0 0 * * * *").unwrap_err();
        assert!(e.contains("invalid cron expression `0 0 * * * *`"), "{e}");
        assert!(parse_cron("61 * * * *").is_err());
        let e = parse_zone("Mars/Olympus").unwrap_err();
        assert!(e.contains("unknown time zone `Mars/Olympus`"), "{e}");
    }
}
