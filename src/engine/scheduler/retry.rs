//! What a failed attempt means for its unit: another attempt after a
//! backoff, or the end (failed, or timed out). A pure function of the
//! failure, the unit's policy and budget; the caller writes the result.

use crate::vocab::{AttemptOutcome, ErrorType};
use crate::workflow::RetryPolicy;
use std::time::Duration;

/// The decision on a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// `retry`, `timeout` or `failed`.
    pub outcome: AttemptOutcome,
    /// With `retry`: how long before the next attempt.
    pub retry_in: Option<Duration>,
}

/// Judges a failed attempt of type `error` under `policy`.
///
/// `http`: the unit is an HTTP request (only connection failures, 429 and
/// 5xx are retried unless `retryable` lists more). `stopped`: this run
/// stopped it (a deadline), which is never retried. `used`: the attempts
/// that count towards `max_attempts`, this one included. `retry_after`: a
/// server's `Retry-After`, which lengthens the backoff.
pub fn judge(
    error: &ErrorType,
    policy: &RetryPolicy,
    http: bool,
    stopped: bool,
    used: i64,
    retry_after: Option<Duration>,
) -> Verdict {
    let retryable = !stopped
        && *error != ErrorType::Expression
        && policy.is_retryable(error)
        && (!http
            || error.http_default_retryable()
            || policy.retryable.iter().any(|p| error.matches(p)));
    if retryable && used < i64::from(policy.max_attempts) {
        // The backoff starts again with a fresh budget: the next try's
        // place in it, not its attempt number, decides.
        let delay = policy
            .delay_before(u32::try_from(used + 1).unwrap_or(u32::MAX))
            .max(retry_after.unwrap_or_default());
        return Verdict {
            outcome: AttemptOutcome::Retry,
            retry_in: Some(delay),
        };
    }
    Verdict {
        outcome: if *error == ErrorType::Timeout {
            AttemptOutcome::Timeout
        } else {
            AttemptOutcome::Failed
        },
        retry_in: None,
    }
}
