//! What `wf serve` answers for an action it accepted: a start (201, or 200
//! for the instance its key started before), and the actions it runs in
//! the background (202: cancel, terminate, resume, retry, restart). The
//! inspector's buttons redirect instead, from the same outcomes.

use super::ShownStatus;
use crate::vocab::InstanceId;

/// What an accepted action's instance is doing now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepting {
    /// Asked to cancel (or terminate): its run, or this server, ends it.
    Canceling,
    /// Restarting from a step.
    Restarting,
    /// Resumed (or retried) in the background from the status it had.
    Resuming(ShownStatus),
}

impl serde::Serialize for Accepting {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match self {
            Accepting::Canceling => "canceling",
            Accepting::Restarting => "restarting",
            Accepting::Resuming(status) => status.as_str(),
        })
    }
}

impl utoipa::PartialSchema for Accepting {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        let mut words = vec!["canceling", "restarting"];
        words.extend(ShownStatus::ALL.map(ShownStatus::as_str));
        crate::vocab::words(
            "What the instance is doing now: `canceling`, `restarting`, or (resumed in the background) the status it had",
            &words,
        )
    }
}

impl utoipa::ToSchema for Accepting {}

/// `POST …/cancel`, `…/terminate`, `…/resume`, `…/retry` (202).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct Accepted<'a> {
    pub id: &'a InstanceId,
    pub status: Accepting,
}

/// `POST …/restart` (202): the instance restarted (the original, or its
/// copy), the step it restarts from, and the steps that run again.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct RestartAccepted<'a> {
    pub id: &'a InstanceId,
    pub from: &'a str,
    pub steps: &'a [String],
    pub status: Accepting,
}

/// A start: the API's (with the exit code `wf run --detach` would give)
/// and a webhook delivery's (without).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct Started<'a> {
    pub id: &'a InstanceId,
    pub workflow: &'a str,
    pub status: ShownStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<u8>,
    /// False: the instance its key (or dedupe value) started before.
    pub created: bool,
}

/// A webhook's ping (GitHub's first delivery, `X-GitHub-Event: ping`):
/// nothing is started.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct HookPing<'a> {
    pub hook: &'a str,
    pub ping: &'static str,
}
