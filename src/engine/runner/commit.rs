//! The loop's commit of what it decided, and the start of the work whose
//! attempts it records. Split from the loop because the two overlap: the
//! processes are loaded while the commit is under way and held at their exec
//! until it returned (`spawn::hold`), so that a step pays for the longer of
//! the two rather than for both (docs/execution.md: nothing of an attempt runs before
//! its record is durable).
//!
//! The commit must leave wf's thread free meanwhile: it is begun
//! (`Store::begin_commit`), the processes started, and then waited for
//! (`store::PendingCommit::done`); how it proceeds meanwhile is the
//! store's business (a thread of its own on SQLite, a round trip on
//! PostgreSQL). Only as many processes
//! are held as are loaded in the time the last commit took: when many start
//! at once (200 parallel steps), the rest start after the commit, each
//! running while wf starts the next, rather than all loaded first and let
//! go at once (measured 50 ms slower for 200).

use super::*;

/// What the loop's commit of its decisions came to.
pub(super) enum Decided {
    /// Made, if anything was decided: its spans, ended, to be dropped once
    /// the work it let start has started.
    Committed(Vec<tracing::Span>),
    /// The run ends: a child run here whose last unit just ended, its
    /// decisions left for the commit that records its end.
    Ended(RunOutcome),
}

impl Runner<'_> {
    /// Commits what the scheduler decided (`applied` and
    /// `self.sched.writes`) and starts the jobs it records, if anything was
    /// decided.
    pub(super) async fn commit_decided(
        &mut self,
        store: &mut impl RunStore,
        applied: &mut Applied,
    ) -> Result<Decided, EngineError> {
        self.flush_spans(&[]);
        // Nothing decided (a wake-up to look for a cancel request
        // while steps run, every 100 ms): no commit. Spans alone
        // (the last commit's own span) wait for the next commit
        // that records something, or the run's last one. A commit
        // of nothing was a synced transaction on PostgreSQL (the
        // fence's row lock is logged): ten a second per running
        // instance.
        let decided = !self.committing.is_empty()
            || self
                .sched
                .batch()
                .iter()
                .any(|w| !matches!(w, Write::Span(_)));
        debug_assert!(decided || applied.spawns.is_empty());
        if !decided {
            return Ok(Decided::Committed(Vec::new()));
        }
        // A child run in its parent's process whose last unit just
        // ended: what it decided commits with its end
        // (`drive::close_run`), one transaction rather than two. Its
        // attempts' spans end now, before that commit; it has no
        // `wf.commit` span of its own, as no run's closing commit has
        // (docs/traces.md).
        if store.is_lent() && self.at_rest(applied) {
            let idle = self.decide(Input::Idle);
            if let Some(outcome) = idle.end {
                self.committing.clear();
                return Ok(Decided::Ended(outcome));
            }
            applied.again |= idle.again;
        }
        let before_sync = self.defers_sync(store, applied);
        let spans = self
            .commit_and_start(store, &mut applied.spawns, before_sync)
            .await?;
        self.children_ended = false;
        Ok(Decided::Committed(spans))
    }

    /// Commits `self.sched.writes` and starts `spawns` (drained), whose attempts
    /// the commit records. Returns the commit's spans, ended, to be dropped
    /// (and made rows) once the caller is done starting work. `before_sync`
    /// (with no spawns): the commit's sync is left to the next synced
    /// commit ([`Runner::defers_sync`]).
    pub(super) async fn commit_and_start(
        &mut self,
        store: &mut impl RunStore,
        spawns: &mut Vec<(Unit, Box<Job>, i64)>,
        before_sync: bool,
    ) -> Result<Vec<tracing::Span>, EngineError> {
        let spans = self.commit_spans(store.system());
        let writes = self.sched.take_writes();
        let fence = self.fence.clone();
        let sent = Instant::now();
        let mut deferred = Vec::new();
        let committed = if spawns.is_empty() && before_sync {
            store.commit_before_sync(&fence, &writes).await
        } else if spawns.is_empty() {
            store.commit(&fence, &writes).await
        } else {
            // Under way while the processes load.
            match store.begin_commit(&fence, writes).await {
                Ok(commit) => {
                    self.start_held(spawns, sent, &mut deferred);
                    if !commit.made_here() {
                        // While the server works: the last step's output
                        // file is recycled now rather than after the
                        // release, when the new process starts. (Not while
                        // this machine makes the commit: it competed with
                        // it, bench/RESULTS.md.)
                        self.output_files.lock().tidy();
                    }
                    let r = commit.done().await;
                    self.commit_took = sent.elapsed();
                    r
                }
                Err(e) => Err(e),
            }
        };
        let held = std::mem::take(&mut self.held);
        if let Err(e) = committed {
            // Not durable: the held processes never run.
            for pid in held {
                // Our own unreaped child (its task reaps it), so the pid is
                // still its.
                let pid = nix::unistd::Pid::from_raw(pid as nix::libc::pid_t);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            }
            return Err(e.into());
        }
        for pid in held {
            // An error: the process is gone (killed while held); its task
            // reports how it ended.
            let _ = super::super::spawn::release(pid as nix::libc::pid_t);
        }
        self.sched.opening_committed();
        self.handed.clear();
        // A span ends when last exited: here. It is closed (and made a row)
        // once the steps it let start have.
        for span in &spans {
            span.in_scope(|| {});
        }
        for d in deferred {
            self.spawn_deferred(d);
        }
        for (unit, job, attempt) in spawns.drain(..) {
            self.spawn(unit, *job, attempt);
        }
        Ok(spans)
    }

    /// Whether a commit that starts nothing (`applied` holds no spawns) may
    /// leave its sync to the next synced commit (`Store::commit_before_sync`),
    /// as nothing outside the database can depend on it before one:
    /// - a child run in its parent's process (a lent store): its commits
    ///   are known outside only through its parent, whose next acknowledged
    ///   step is itself made durable first: every start of a process or
    ///   request is recorded by a synced commit, and so is the end of every
    ///   run that is not such a child (docs/execution.md, Durability);
    /// - a commit that makes children to run here at once: the next thing
    ///   it lets happen is their runs, whose first steps are recorded so
    ///   (unless this commit records them: a child opened with it,
    ///   `Runner::open_in_parent`, whose first attempts start once it
    ///   returned, makes it synced);
    /// - a commit that records the ends of children run here (their steps'
    ///   results): those ends were themselves committed so, and what this
    ///   run goes on to do is acknowledged, as by any run, only by a synced
    ///   commit.
    ///
    /// Each sync flushes every earlier commit: SQLite's WAL and
    /// PostgreSQL's are each one sequence. A sequential child so costs one
    /// sync, as a step does, not four (bench/RESULTS.md).
    pub(super) fn defers_sync(&self, store: &impl RunStore, applied: &Applied) -> bool {
        applied.spawns.is_empty()
            && !applied.children.iter().any(children::Start::starts_work)
            && (store.is_lent()
                || self.children_ended
                || applied.children.iter().any(|c| c.claimed.is_some()))
    }

    /// Starts `spawns` (drained) held at their exec, the first and then
    /// those started within the last commit's time since `sent`; the rest,
    /// and what cannot be held (HTTP calls, programs that gain privileges
    /// at exec, a thread refused ptrace), go to `deferred`, to start once
    /// the commit is durable.
    fn start_held(
        &mut self,
        spawns: &mut Vec<(Unit, Box<Job>, i64)>,
        sent: Instant,
        deferred: &mut Vec<Deferred>,
    ) {
        for (i, (unit, job, attempt)) in spawns.drain(..).enumerate() {
            if i == 0 || sent.elapsed() < self.commit_took {
                deferred.extend(self.spawn_maybe_held(unit, *job, attempt, true));
            } else {
                deferred.push((unit, *job, attempt, None));
            }
        }
    }
}
