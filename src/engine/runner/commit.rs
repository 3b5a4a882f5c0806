//! The loop's commit of what it decided, and the start of the work whose
//! attempts it records. Split from the loop because the two overlap: the
//! processes are loaded while the commit is under way and held at their exec
//! until it returned (`spawn::hold`), so that a step pays for the longer of
//! the two rather than for both (SPEC §3: nothing of an attempt runs before
//! its record is durable).
//!
//! Only on PostgreSQL, whose commit is a round trip that leaves wf idle: a
//! SQLite commit runs on wf's own thread, so there is nothing to overlap
//! (measured: the same time a step either way). And only as many processes
//! as are loaded in the time the commit takes (the last one's): when many
//! start at once (200 parallel steps), the rest are started after the
//! commit, each running while wf starts the next, instead of all of them
//! loaded first and then all let go at once (measured 50 ms slower for 200).

use super::*;

impl Runner<'_> {
    /// Commits `self.writes` and starts `spawns` (drained), whose attempts
    /// the commit records. Returns the commit's spans, ended, to be dropped
    /// (and made rows) once the caller is done starting work.
    pub(super) async fn commit_and_start(
        &mut self,
        store: &mut Store,
        spawns: &mut Vec<(Unit, Box<Job>, i64)>,
    ) -> Result<Vec<tracing::Span>, EngineError> {
        let postgres = store.is_postgres();
        let spans = self.commit_spans(postgres);
        let writes = std::mem::take(&mut self.writes);
        let fence = self.fence.clone();
        let mut commit = std::pin::pin!(store.commit(&fence, &writes));
        // On PostgreSQL the commit is sent first (the first poll queues it,
        // the yield lets the connection write it), so that the server works
        // on it while the processes load.
        let mut early = None;
        let sent = Instant::now();
        let mut deferred = Vec::new();
        if postgres && !spawns.is_empty() {
            if let std::task::Poll::Ready(r) = futures_util::poll!(commit.as_mut()) {
                early = Some(r);
            }
            tokio::task::yield_now().await;
            // Held at their exec; what cannot be held (HTTP calls, programs
            // that gain privileges at exec, a thread refused ptrace) and what
            // the commit would wait for wait for the commit.
            for (i, (unit, job, attempt)) in spawns.drain(..).enumerate() {
                if i == 0 || sent.elapsed() < self.commit_took {
                    deferred.extend(self.spawn_maybe_held(unit, *job, attempt, true));
                } else {
                    deferred.push((unit, *job, attempt, None));
                }
            }
            // While the server works: the last step's output file is
            // recycled now rather than after the release, when the new
            // process starts.
            self.output_files.tidy();
        }
        let committed = match early {
            Some(r) => r,
            None => commit.await,
        };
        if postgres {
            self.commit_took = sent.elapsed();
        }
        let held = std::mem::take(&mut self.held);
        if let Err(e) = committed {
            // Not durable: the held processes never run.
            for pid in held {
                // SAFETY: our own unreaped child (its task reaps it).
                unsafe { nix::libc::kill(pid as nix::libc::pid_t, nix::libc::SIGKILL) };
            }
            return Err(e.into());
        }
        for pid in held {
            // An error: the process is gone (killed while held); its task
            // reports how it ended.
            let _ = super::super::spawn::release(pid as nix::libc::pid_t);
        }
        self.opening = 0;
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
}
