//! The runner driven in unit tests on an in-memory store (`memory`), the
//! way `engine/scheduler/tests` drive the scheduler: real step processes
//! (the edge this module exists to carry), but a store the test plays the
//! other processes through (takeovers, refused commits, cancel requests,
//! events, locks held elsewhere), a heartbeat whose word the test sends,
//! and signals the test raises. Each test runs the loop
//! ([`Runner::main_loop`]) beside a script of what happens meanwhile, then
//! reads back what was committed, and how.

mod memory;
mod runs;

use super::children::{ChildRuns, OpenedChild};
use super::options::Signals;
use super::{RunOptions, RunOutcome, RunStart, Runner};
use crate::engine::EngineError;
use crate::store::{Fence, InstanceRow, Location, RunTrace, Shared};
use crate::vocab::{InstanceId, InstanceStatus};
use crate::workflow::Workflow;
use futures_util::future::LocalBoxFuture;
use memory::Memory;
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// These runs make no children (no `workflow:` step).
struct NoChildren;

static NO_CHILDREN: NoChildren = NoChildren;

impl ChildRuns for NoChildren {
    fn open(
        &self,
        _location: Location,
        _live_dir: PathBuf,
        _opts: RunOptions,
    ) -> Option<Box<dyn OpenedChild>> {
        None
    }

    fn drive(
        &self,
        _store: crate::store::Store,
        id: InstanceId,
        _opts: RunOptions,
    ) -> LocalBoxFuture<'static, Result<RunOutcome, EngineError>> {
        Box::pin(async move {
            Err(EngineError::Internal(format!(
                "child {id}: the runner's unit tests run no children"
            )))
        })
    }
}

/// One run of a workflow, on a [`Memory`] store, in a folder of its own
/// (the steps' working directory, where they leave their marks).
struct Harness {
    store: Memory,
    runner: Runner<'static>,
    signals: Signals,
    /// Raises a signal (SIGINT, SIGTERM or SIGHUP) in the run.
    signal: mpsc::UnboundedSender<()>,
    /// The run's lease: `taken` by another holder, or let lapse.
    lease: crate::engine::lapse::Watch,
    dir: tempfile::TempDir,
}

impl Harness {
    /// The first run of a new instance of `yaml` (`{dir}` in it is the
    /// folder the steps run in).
    fn of(yaml: &str) -> Harness {
        Harness::with_ttl(yaml, Duration::from_secs(3600))
    }

    /// [`Harness::of`] with a lease of `ttl` that nothing renews: it
    /// lapses `lapse::stop_after` it.
    fn with_ttl(yaml: &str, ttl: Duration) -> Harness {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let yaml = yaml.replace("{dir}", &dir.path().display().to_string());
        let wf = Arc::new(Workflow::from_pinned(&yaml, "test.yaml").expect("a valid workflow"));
        let id = InstanceId::from("r1".to_string());
        let inst = InstanceRow {
            id: id.clone(),
            definition: yaml.clone(),
            definition_hash: String::new(),
            workflow_path: "test.yaml".into(),
            base_dir: dir.path().display().to_string(),
            lease_owner: Some("test".into()),
            ..InstanceRow::for_test(&wf, "r1", InstanceStatus::Running)
        };
        let trace: RunTrace = (
            "0af7651916cd43dd8448eb211c80319c".into(),
            "00f067aa0ba902b7".into(),
            None,
            0,
        );
        let lease = crate::engine::lapse::Watch::hold(&id, ttl, std::time::Instant::now());
        let lost = lease.news();
        let (signals, signal) = Signals::fake();
        let runner = Runner::new(RunStart {
            child_runs: &NO_CHILDREN,
            wf,
            inst,
            run: 1,
            records: HashMap::new(),
            opts: RunOptions::default(),
            observer: &crate::engine::UNOBSERVED,
            trace,
            root: tracing::Span::none(),
            fence: Fence {
                instance: id,
                owner: "test".into(),
                epoch: 1,
            },
            lost,
            uncounted: HashMap::new(),
            events: Vec::new(),
            caller: (
                opentelemetry::trace::TraceFlags::SAMPLED,
                opentelemetry::trace::TraceState::default(),
            ),
            live_dir: None,
            // Never opened: these runs make no children.
            shared: Shared::new(Location::Sqlite(dir.path().join("unused.db"))),
            deadline_from: None,
            opening: Vec::new(),
            carried: HashMap::new(),
        });
        Harness {
            store: Memory::new(),
            runner,
            signals,
            signal,
            lease,
            dir,
        }
    }

    /// A file in the steps' folder.
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs the loop while `script` plays what happens meanwhile; on an
    /// error, stops what still runs, as the driver does (`abandon`).
    async fn run(&mut self, script: impl Future<Output = ()>) -> Result<RunOutcome, EngineError> {
        let outcome = self.run_alone(script).await;
        if outcome.is_err() {
            self.runner.abandon().await;
        }
        outcome
    }

    /// Runs the loop while `script` plays; then, rather than stopping what
    /// still runs, waits for each attempt's task to end by itself: whether
    /// a process ran is then seen in what it left, not hidden by a kill
    /// that came first.
    async fn run_letting_steps_end(
        &mut self,
        script: impl Future<Output = ()>,
    ) -> Result<RunOutcome, EngineError> {
        let outcome = self.run_alone(script).await;
        while self.runner.tasks.join_next().await.is_some() {}
        outcome
    }

    async fn run_alone(
        &mut self,
        script: impl Future<Output = ()>,
    ) -> Result<RunOutcome, EngineError> {
        let mut store = self.store.clone();
        let (outcome, ()) =
            tokio::join!(self.runner.main_loop(&mut store, &mut self.signals), script);
        outcome
    }

    /// Closes the run as the driver does after its loop, the lease given
    /// up in the same commit.
    async fn close(
        &mut self,
        outcome: Result<RunOutcome, EngineError>,
    ) -> Result<RunOutcome, EngineError> {
        let mut store = self.store.clone();
        crate::engine::drive::close_run(&mut store, &mut self.runner, outcome, true).await
    }
}

/// Waits until `path` exists and holds a line: a step's mark (its pid).
async fn written(path: &Path) -> String {
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text.trim().to_string();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Whether process `pid` is gone (reaped: the run waited for it).
fn gone(pid: &str) -> bool {
    let pid: i32 = pid.parse().expect("a pid");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err()
}
