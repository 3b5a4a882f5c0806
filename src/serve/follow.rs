//! `GET /api/v1/instances/{id}/logs/{step}?follow=1`: an attempt's output
//! as server-sent events while it runs, as `wf logs --follow` prints it:
//! from its live copy (secrets masked as it was written), then, once the
//! attempt has an outcome, whatever the copy had not shown from the stored
//! logs. Events: `attempt` (its number, when it starts), `stdout` and
//! `stderr` (a chunk of text as a JSON string: a carriage return cannot
//! break the stream's lines), `end` (`{attempt, outcome}`), or `error`. The stream
//! ends with the attempt, or when the server stops.

use super::App;
use super::error::ApiError;
use super::params::instance_ref;
use crate::engine::logs::{self, Look};
use crate::vocab::InstanceId;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use std::convert::Infallible;
use std::path::PathBuf;
use std::time::Duration;

/// How often the stream looks for more output.
const EVERY: Duration = Duration::from_millis(100);

struct Follow {
    app: App,
    id: InstanceId,
    step: String,
    attempt: Option<i64>,
    live: PathBuf,
    current: Option<i64>,
    sent: [usize; 2],
    queue: std::collections::VecDeque<Event>,
    done: bool,
}

pub async fn stream(
    app: App,
    id: String,
    step: String,
    attempt: Option<i64>,
) -> Result<Response, ApiError> {
    let id = instance_ref(&id)?;
    let (id, step, live) = app
        .db
        .run(move |l| async move {
            let c = l.conn().await?;
            let id = c.resolve_id(&id).await?;
            // A matrix combination may be named by its values.
            let step = logs::unit_key(&c, &id, &step).await?;
            logs::check_step(&c, &id, &step).await?;
            Ok((id, step, c.live_dir()))
        })
        .await?;
    let state = Follow {
        app,
        id,
        step,
        attempt,
        live,
        current: None,
        sent: [0, 0],
        queue: Default::default(),
        done: false,
    };
    let events = futures_util::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(e) = st.queue.pop_front() {
                return Some((Ok::<Event, Infallible>(e), st));
            }
            if st.done {
                return None;
            }
            st.step_once().await;
        }
    })
    // Polled after its end (by a layer), it ends again rather than panic.
    .fuse();
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response())
}

impl Follow {
    /// One look: queues what it found, or waits a moment.
    async fn step_once(&mut self) {
        if *self.app.stopping.borrow() {
            self.done = true;
            return;
        }
        let (id, step, attempt) = (self.id.clone(), self.step.clone(), self.attempt);
        let look = self
            .app
            .db
            .run(move |l| async move {
                let c = l.conn().await?;
                Ok(logs::look(&c, &id, &step, attempt).await?)
            })
            .await;
        let look = match look {
            Ok(l) => l,
            Err(e) => {
                self.queue
                    .push_back(Event::default().event("error").data(e.body().to_string()));
                self.done = true;
                return;
            }
        };
        match look {
            Look::None(true) => {
                self.queue.push_back(
                    Event::default().event("error").data(
                        ApiError::not_found(format!(
                            "step `{}` of instance {} has no attempts",
                            self.step, self.id
                        ))
                        .body()
                        .to_string(),
                    ),
                );
                self.done = true;
            }
            Look::None(false) => self.pause().await,
            Look::Running(n) => {
                self.begin(n);
                for (i, ext) in ["out", "err"].into_iter().enumerate() {
                    if let Some(more) =
                        logs::live_since(&self.live, &self.id, &self.step, n, ext, self.sent[i])
                    {
                        self.sent[i] += more.len();
                        self.text(i, &more);
                    }
                }
                self.pause().await;
            }
            Look::Ended(n, outcome, out, err) => {
                self.begin(n);
                let out = out.get(self.sent[0]..).unwrap_or_default().to_vec();
                let err = err.get(self.sent[1]..).unwrap_or_default().to_vec();
                self.text(0, &out);
                self.text(1, &err);
                self.queue.push_back(Event::default().event("end").data(
                    serde_json::json!({ "attempt": n, "outcome": outcome.as_str() }).to_string(),
                ));
                self.done = true;
            }
        }
    }

    fn begin(&mut self, n: i64) {
        if self.current != Some(n) {
            self.current = Some(n);
            self.sent = [0, 0];
            self.queue
                .push_back(Event::default().event("attempt").data(n.to_string()));
        }
    }

    fn text(&mut self, stream: usize, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let name = if stream == 0 { "stdout" } else { "stderr" };
        self.queue.push_back(
            Event::default()
                .event(name)
                .data(serde_json::Value::from(String::from_utf8_lossy(bytes)).to_string()),
        );
    }

    async fn pause(&mut self) {
        let mut stopping = self.app.stopping.clone();
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = stopping.changed() => {}
        }
    }
}
