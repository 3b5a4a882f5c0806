//! Starting an attempt's work: a shell job's process (held at its exec
//! while its attempt is being committed, when it can be) or an HTTP
//! request, in a task of the run's JoinSet that reports the result back to
//! the loop, under spans that are children of the attempt's.

use super::*;

impl Runner<'_> {
    /// Starts the attempt's work, once its attempt is durable.
    pub(super) fn spawn(&mut self, unit: Unit, job: Job, attempt: i64) {
        // Not asked to hold: nothing is given back.
        let _ = self.spawn_with(unit, job, attempt, false, None);
    }

    /// Starts the attempt's work; `hold`: while its attempt is being
    /// committed, so only a process that the kernel holds at its exec starts
    /// now (released by the runner once the commit returned). Anything else
    /// is given back untouched, with the span made for it, to be started
    /// with [`Runner::spawn_deferred`] once the commit returned.
    pub(super) fn spawn_maybe_held(
        &mut self,
        unit: Unit,
        job: Job,
        attempt: i64,
        hold: bool,
    ) -> Option<Deferred> {
        if hold && matches!(job, Job::Http(_)) {
            return Some((unit, job, attempt, None));
        }
        self.spawn_with(unit, job, attempt, hold, None)
    }

    /// Starts work that [`Runner::spawn_maybe_held`] gave back.
    pub(super) fn spawn_deferred(&mut self, (unit, job, attempt, span): Deferred) {
        let _ = self.spawn_with(unit, job, attempt, false, span);
    }

    /// Starts the attempt's work (held at its exec if `hold`), in `span`
    /// when it was made already; gives it back if it cannot be held.
    fn spawn_with(
        &mut self,
        unit: Unit,
        job: Job,
        attempt: i64,
        hold: bool,
        span: Option<tracing::Span>,
    ) -> Option<Deferred> {
        // The run's word, and this attempt's own (`Effect::StopUnits`).
        let (own, own_rx) = watch::channel(false);
        self.unit_stops.insert(unit.key(&self.wf), own);
        let interrupt = crate::engine::stop::StopSignal::new(self.interrupt_tx.subscribe(), own_rx)
            .with_lease(self.lost.watch().subscribe());
        let started = Instant::now();
        // The span of what the attempt does, a child of the attempt's span.
        let attempt_span = self.spans.open_span(&unit.key(&self.wf));
        match job {
            Job::Shell(job) => {
                let span = span.unwrap_or_else(|| {
                    tracing::info_span!(
                        parent: &attempt_span,
                        "process",
                        workflow.name = self.wf.name.as_str(),
                        workflow.instance.id = self.id.as_str(),
                        process.command = job.program(),
                    )
                });
                // Started here, not in the task, so its process group is
                // known before the loop goes on (and recorded once it has
                // run `groups::RECORD_AFTER`).
                let begun = shell::start(job, span, &mut self.output_files.lock(), hold);
                let running = match begun {
                    Ok(r) => {
                        if r.held() {
                            self.held.push(r.pid());
                        }
                        if let Some(tag) = r.group() {
                            self.group_started(unit.key(&self.wf), attempt, tag);
                        }
                        Ok(r)
                    }
                    Err(shell::Unstarted::NotHeld(job, span)) => {
                        return Some((unit, Job::Shell(*job), attempt, Some(span)));
                    }
                    Err(shell::Unstarted::Failed(failed)) => Err(failed),
                };
                self.tasks.spawn(async move {
                    let (result, output_file) = match running {
                        Ok(r) => {
                            let (result, file) = shell::finish(r, interrupt).await;
                            (result, Some(file))
                        }
                        Err(failed) => (*failed, None),
                    };
                    Done {
                        unit,
                        attempt,
                        elapsed: started.elapsed(),
                        result,
                        output_file,
                    }
                });
            }
            Job::Http(mut job) => {
                let client = self.http.get_or_insert_with(http::client).clone();
                // HTTP client semantic conventions: where the request goes.
                let (host, port) = reqwest::Url::parse(&job.url)
                    .ok()
                    .map(|u| {
                        (
                            u.host_str().unwrap_or_default().to_string(),
                            u.port_or_known_default().map_or(0, i64::from),
                        )
                    })
                    .unwrap_or_default();
                let span = tracing::info_span!(
                    parent: &attempt_span,
                    "http",
                    otel.name = job.method.as_str(),
                    otel.kind = "client",
                    workflow.name = self.wf.name.as_str(),
                    workflow.instance.id = self.id.as_str(),
                    http.request.method = job.method.as_str(),
                    url.full = job.full_url(),
                    server.address = host.as_str(),
                    server.port = port,
                );
                // The server's spans become children of this call's client span.
                if !job
                    .headers
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("traceparent"))
                {
                    let (_, span_id) = recorder::ids(&span);
                    job.headers.extend(self.sched.trace_context_of(&span_id));
                }
                self.tasks.spawn(async move {
                    let result = http::run(client, job, span, interrupt).await;
                    Done {
                        unit,
                        attempt,
                        elapsed: started.elapsed(),
                        result,
                        output_file: None,
                    }
                });
            }
        }
        None
    }
}
