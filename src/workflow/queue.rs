//! `queue:` as a checked workflow holds it: the admission limits every
//! instance of the workflow is started under (docs/flow-control.md), and a
//! step's `lock:`. Kept apart from the model because the engine renders
//! them (`key`, `priority`) and the store applies them, and neither needs
//! the rest.

use super::template::Template;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A checked `queue:` block.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Queue {
    /// `key`: rendered from the inputs at start; `None`: the workflow's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<Template>,
    /// `concurrency`: admitted instances per key at once; `None`: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// `rate`: admissions per key within any window of its period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// `priority`: 0 (first) .. 9, rendered at start; `None`: 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Template>,
    #[serde(default)]
    pub on_full: OnFull,
    /// `debounce`: a newer instance of the key skips the queued ones made
    /// within this period before it, and is admitted no sooner than this
    /// period after it was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debounce: Option<Duration>,
    /// `hold_while_suspended`: a sleeping or waiting instance keeps its slot.
    #[serde(default)]
    pub hold_while_suspended: bool,
}

/// A step's `lock: { key, limit }`: at most `limit` attempts, of any
/// instance on any host, hold the semaphore `key` (rendered for each
/// attempt) at once.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepLock {
    pub key: Template,
    pub limit: u32,
}

/// `rate: N/period`: at most `count` admissions in any window of `period`
/// (a sliding window: each admission counts for `period` after it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rate {
    pub count: u32,
    pub period: Duration,
}

impl Rate {
    /// Parses `N/period` (`10/1m`, `1/30s`, `100/1h`).
    pub fn parse(text: &str) -> Result<Rate, String> {
        let bad = || {
            format!(
                "`rate` must be `N/period`, a count of admissions per period (e.g. 10/1m), not `{text}`"
            )
        };
        let (n, period) = text.split_once('/').ok_or_else(bad)?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || count > 1_000_000 {
            return Err(format!(
                "`rate` allows 1 to 1000000 admissions per period, not {count}"
            ));
        }
        let period = super::duration::parse(period.trim())?;
        if period < Duration::from_millis(1) {
            return Err("`rate`'s period must be at least 1ms".into());
        }
        Ok(Rate { count, period })
    }
}

/// `on_full`: what a new instance does while its key cannot admit it.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum OnFull {
    /// Wait in the queue (`queued`) until a slot frees.
    #[default]
    Queue,
    /// End `skipped` at once.
    Skip,
    /// Cancel the oldest admitted instance of the key (its compensations
    /// run), then wait for its slot.
    CancelPrevious,
}

impl OnFull {
    pub fn as_str(self) -> &'static str {
        match self {
            OnFull::Queue => "queue",
            OnFull::Skip => "skip",
            OnFull::CancelPrevious => "cancel_previous",
        }
    }
}

/// The priorities allowed (the default, 5, is the store's:
/// `store::queue::DEFAULT_PRIORITY`).
pub const PRIORITIES: std::ops::RangeInclusive<i64> = 0..=9;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_is_a_count_per_period() {
        assert_eq!(
            Rate::parse("10/1m").unwrap(),
            Rate {
                count: 10,
                period: Duration::from_secs(60)
            }
        );
        assert_eq!(
            Rate::parse(" 1 / 250ms ").unwrap().period,
            Duration::from_millis(250)
        );
        for bad in ["10", "x/1m", "0/1m", "10/", "10/1y", "-1/1s"] {
            assert!(Rate::parse(bad).is_err(), "{bad}");
        }
    }
}
