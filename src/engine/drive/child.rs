//! A child its parent runs in its process, opened before the commit that
//! makes it. The child is made leased to this process
//! (`Runner::lease_child`), so its history is its row and nothing of it
//! needs reading: its run is opened here, and its first decisions (the
//! run, its first attempts) go into that same commit ([`Write::Child`]),
//! one commit for the parent's attempt, the child and the child's first
//! attempts where there were two (a round trip and a transaction fewer a
//! child on PostgreSQL, bench/RESULTS.md). What `drive` does for an
//! instance it takes, without the store, where nothing can differ: what
//! `claim` and `admit` would refuse or wait for cannot be so for a child
//! just made (one with a queue or missing a secret is not made leased).
//!
//! [`Write::Child`]: crate::store::Write::Child

use super::{Ready, Restart, Setup, ready};
use crate::engine::lease::{self, Heartbeat};
use crate::engine::runner::{Claimed, RunOptions};
use crate::engine::{Observer, missing_secret};
use crate::store::{History, Location};
use crate::vocab::InstanceStatus;
use std::path::PathBuf;

/// The run of the child `opts.claimed` names, opened (`opts` taken, for
/// the run); `None` when it is
/// not one made here with its definition at hand (then `drive` takes it,
/// as for any instance).
pub(in crate::engine) fn open_claimed<'o>(
    location: Location,
    live_dir: PathBuf,
    mut opts: RunOptions,
    observer: &'o dyn Observer,
) -> Option<Ready<'o>> {
    let Claimed {
        fence,
        instance,
        granted,
    } = *opts.claimed.take()?;
    let wf = opts
        .workflow
        .clone()
        .filter(|wf| wf.hash == instance.definition_hash)?;
    let history = History::fresh(instance);
    if history.instance.status != InstanceStatus::Running
        || history.instance.queue.is_some()
        || history.instance.parent.is_none()
        || opts.restart.is_some()
        || opts.cancel
        || opts.retry_failed
        || missing_secret(&wf).is_some()
    {
        return None;
    }
    // Its first run is a child of the attempt that made it.
    if opts.traceparent.is_none() {
        opts.traceparent = Some(opts.parent_span.take()?);
    }
    let ttl = lease::ttl().ok()?;
    let watch = crate::engine::lapse::Watch::hold(&fence.instance, ttl, granted);
    let (heartbeat, lost) = Heartbeat::start(location.clone(), fence.clone(), ttl, &watch);
    Some(ready(Setup {
        location,
        live_dir,
        fence,
        history,
        wf,
        restart: Restart {
            plan: None,
            note: None,
        },
        opts,
        observer,
        deadline_from: None,
        heartbeat,
        lost,
    }))
}
