//! What a run is asked to do ([`RunOptions`]: the flags of `wf run`,
//! `wf resume`, `wf cancel`, `wf restart`, and what a parent or a worker
//! hands a run), and the signals that interrupt it.

use super::{EndSlot, output_files};
use crate::engine::EngineError;
use crate::store::{self, Fence};
use crate::workflow::Workflow;
use std::sync::Arc;
use std::time::Duration;

/// How one run should behave.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Waits (timers, retry backoffs) up to this long happen inside the run.
    pub inline_wait: Duration,
    /// Fire timers that are not yet due (`wf resume --now`).
    pub fire_timers: bool,
    /// Give failed steps a fresh attempt budget (`wf resume --retry-failed`).
    pub retry_failed: bool,
    /// Run `cache:` steps without looking for an entry (`--no-cache`).
    pub no_cache: bool,
    /// Cancel the instance: start nothing new, run compensations (`wf cancel`).
    pub cancel: bool,
    /// With `cancel`: run no compensations (`wf cancel --terminate`).
    pub terminate: bool,
    /// The definition, when the caller has just parsed it (used if it is the pinned one).
    pub workflow: Option<Arc<Workflow>>,
    /// W3C `traceparent` this run's trace is a child of (`TRACEPARENT` of
    /// `wf run` and `wf resume`), and its `tracestate` (`TRACESTATE`).
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
    /// The lease owner to take the instance as: `wf run`'s, which created
    /// it leased to itself, or a worker's, which claimed it; either way the
    /// run takes it at once and checks it under the lease (`drive`). None:
    /// a name of this run's own, the instance checked before it is taken.
    pub owner: Option<String>,
    /// `wf restart --from STEP`: reset STEP and what depends on it first
    /// (see `engine::restart`); only an ended instance can be.
    pub restart: Option<String>,
    /// A child's first run: the span of the `workflow:` attempt that made
    /// it (W3C `traceparent`), as its parent's run knows it; without it,
    /// the first run reads it from the parent's attempt.
    pub parent_span: Option<String>,
    /// A child made leased to this run by its parent's commit: its lease
    /// and row, so the run starts without taking it over (`drive`).
    pub claimed: Option<Box<Claimed>>,
    /// A child run in its parent's process: the `$WF_OUTPUT` files its
    /// siblings share (else the run has its own).
    pub output_files: Option<output_files::SharedOutputFiles>,
    /// A child run in its parent's process: where its run, if it ends the
    /// child, leaves its last commit for the parent's run to make
    /// (`drive::close_run`; else it makes it).
    pub end_to_parent: Option<EndSlot>,
    /// Who asks for this run (`wf.actor` on its root span). A first run
    /// carries the instance's starter instead; without one, a later run
    /// carries the starter too (a child its parent runs again).
    pub actor: Option<crate::vocab::Actor>,
    /// The action this run is opened for (a resume, a retry, a restart)
    /// and its detail, recorded by `actor` in the commit that opens it. A
    /// resume that is an instance's first run is its start, recorded
    /// already: it is not recorded again.
    pub action: Option<(crate::vocab::ActionKind, String)>,
}

/// An instance made already leased to the run that will drive it: the
/// fence of that lease (epoch 0, as made) and the row as made.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub fence: Fence,
    pub instance: store::InstanceRow,
    /// When the commit that makes it was about to be sent: its lease
    /// lasts a TTL from no earlier than that (`lapse`).
    pub granted: std::time::Instant,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            inline_wait: Duration::from_secs(30),
            fire_timers: false,
            retry_failed: false,
            no_cache: false,
            cancel: false,
            terminate: false,
            workflow: None,
            traceparent: None,
            tracestate: None,
            owner: None,
            restart: None,
            parent_span: None,
            claimed: None,
            output_files: None,
            end_to_parent: None,
            actor: None,
            action: None,
        }
    }
}

/// The signals that interrupt a run: Ctrl-C, SIGTERM, SIGHUP; or, in the
/// runner's unit tests, a channel the test sends on (a real signal would
/// reach every test of the process).
pub(in crate::engine) struct Signals {
    source: Source,
}

enum Source {
    Os {
        int: tokio::signal::unix::Signal,
        term: tokio::signal::unix::Signal,
        hup: tokio::signal::unix::Signal,
    },
    #[cfg(test)]
    Fake(tokio::sync::mpsc::UnboundedReceiver<()>),
}

impl Signals {
    pub(in crate::engine) fn install() -> Result<Signals, EngineError> {
        use tokio::signal::unix::{SignalKind, signal};
        let one = |kind: SignalKind, name: &str| {
            signal(kind).map_err(|e| {
                EngineError::Internal(format!("cannot install the {name} handler: {e}"))
            })
        };
        Ok(Signals {
            source: Source::Os {
                int: one(SignalKind::interrupt(), "SIGINT")?,
                term: one(SignalKind::terminate(), "SIGTERM")?,
                hup: one(SignalKind::hangup(), "SIGHUP")?,
            },
        })
    }

    /// Signals a test sends: each `()` on the sender is one.
    #[cfg(test)]
    pub(super) fn fake() -> (Signals, tokio::sync::mpsc::UnboundedSender<()>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (
            Signals {
                source: Source::Fake(rx),
            },
            tx,
        )
    }

    pub(super) async fn recv(&mut self) {
        match &mut self.source {
            Source::Os { int, term, hup } => {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                    _ = hup.recv() => {}
                }
            }
            #[cfg(test)]
            Source::Fake(rx) => {
                if rx.recv().await.is_none() {
                    std::future::pending::<()>().await;
                }
            }
        }
    }
}
