//! The PostgreSQL statements that read the history (an instance's rows, the
//! history a takeover reads) and deliver to it (new instances, events,
//! cancel requests), and the mapping of their rows to
//! [`rows`](crate::store::rows). They say what the SQLite ones say
//! (`sqlite/history.rs`), in PostgreSQL's dialect. Leases and claims are in
//! `lease`, spans in `spans`, what a runner commits in `write`, listings in
//! `list`.

use super::text::unescape_opt;
use super::{Op, Param, PgStore};
use crate::store::rows::*;
use crate::store::{QueueLimits, QueuePlace, Result, StoreError};
use crate::vocab::Timestamp;
use serde_json::Value;
use tokio_postgres::Row;

pub(super) use super::insert::{
    insert_child, insert_definition, insert_instance, instance_params, queue_params,
};

macro_rules! instance_cols {
    () => {
        concat!(
            "id, workflow, status, \
             (SELECT source FROM definitions d WHERE d.hash = instances.definition_hash), definition_hash, \
             workflow_path, base_dir, inputs, state, error, wake_at, waiting_event, lease_owner, ",
            lease_left!(),
            ", created_at, updated_at, parent_id, parent_key, parent_attempt, depth, labels, ",
            queue_cols!(),
            ", started_by"
        )
    };
}

/// An instance's columns as listings show them: its definition's source
/// left out.
macro_rules! summary_cols {
    () => {
        concat!(
            "id, workflow, status, '', definition_hash, workflow_path, base_dir, inputs, state, \
             error, wake_at, waiting_event, lease_owner, ",
            lease_left!(),
            ", created_at, updated_at, parent_id, parent_key, parent_attempt, depth, labels, ",
            queue_cols!(),
            ", started_by"
        )
    };
}

/// [`summary_cols`] as a constant, for the statements built at run time.
pub(super) const SUMMARY_COLS: &str = summary_cols!();

/// The children of an instance (`$1`), oldest first, as listings show them.
const CHILDREN: &str = concat!(
    "SELECT ",
    summary_cols!(),
    " FROM instances WHERE parent_id = $1 ORDER BY created_at, seq"
);

pub(super) const IDS_WITH_PREFIX: &str =
    "SELECT id FROM instances WHERE starts_with(id, $1) ORDER BY id = $1 DESC, id LIMIT 6";

pub(super) fn p<T: tokio_postgres::types::ToSql + Sync + Send + 'static>(v: T) -> Param {
    Box::new(v)
}

pub(super) fn get<'a, T: tokio_postgres::types::FromSql<'a>>(r: &'a Row, i: usize) -> Result<T> {
    r.try_get(i)
        .map_err(|e| StoreError::Corrupt(format!("column {i}: {e}")))
}

pub(super) fn json(r: &Row, i: usize) -> Result<Value> {
    let text: Option<String> = get(r, i)?;
    Ok(text
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null))
}

/// A lease's expiry by this process's clock, from its time left by the
/// server's ([`lease_left`]): what wf compares with its own clock (`wf list`
/// showing a dead holder's instance as interrupted, a worker's look for
/// orphans) then means what the server means.
pub(super) fn lease_expiry(left_ms: Option<i64>) -> Option<i64> {
    left_ms.map(|left| chrono::Utc::now().timestamp_millis().saturating_add(left))
}

pub(super) fn instance_row(r: &Row) -> Result<InstanceRow> {
    Ok(InstanceRow {
        id: get(r, 0)?,
        workflow: get(r, 1)?,
        status: get(r, 2)?,
        definition: get::<Option<String>>(r, 3)?.unwrap_or_default(),
        definition_hash: get(r, 4)?,
        workflow_path: get(r, 5)?,
        base_dir: get(r, 6)?,
        inputs: json(r, 7)?,
        state: json(r, 8)?,
        error: unescape_opt(get(r, 9)?),
        wake_at: get(r, 10)?,
        waiting_event: get(r, 11)?,
        lease_owner: get(r, 12)?,
        lease_expires_ms: lease_expiry(get(r, 13)?),
        created_at: get(r, 14)?,
        updated_at: get(r, 15)?,
        parent: match (get::<Option<String>>(r, 16)?, get(r, 17)?, get(r, 18)?) {
            (Some(id), Some(key), Some(attempt)) => Some(ParentRef {
                id: id.into(),
                key,
                attempt,
            }),
            _ => None,
        },
        depth: get(r, 19)?,
        labels: labels_of(get::<Option<String>>(r, 20)?.as_deref()),
        queue: match get::<Option<String>>(r, 21)? {
            None => None,
            Some(key) => Some(QueuePlace {
                key,
                priority: get(r, 22)?,
                limits: QueueLimits::of_text(&get::<Option<String>>(r, 23)?.unwrap_or_default()),
                admitted: get(r, 25)?,
            }),
        },
        started_by: get(r, 26)?,
    })
}

pub(super) fn step_row(r: &Row) -> Result<StepRow> {
    Ok(StepRow {
        key: get(r, 0)?,
        step_id: get(r, 1)?,
        status: get(r, 2)?,
        attempts: get(r, 3)?,
        budget_base: get(r, 4)?,
        outcome: get(r, 5)?,
        error_type: get(r, 6)?,
        error_message: unescape_opt(get(r, 7)?),
        output: json(r, 8)?,
        started_at: get(r, 9)?,
        finished_at: get(r, 10)?,
        retry_at: get(r, 11)?,
        seq: get(r, 12)?,
        items: json(r, 13)?.into(),
        // Only a restart needs them (`state_patches`).
        state_patch: Default::default(),
    })
}

fn run_row(r: &Row) -> Result<RunRow> {
    Ok(RunRow {
        number: get(r, 0)?,
        outcome: get(r, 1)?,
        started_at: get(r, 2)?,
        finished_at: get(r, 3)?,
        restart_from: get(r, 4)?,
        definition_hash: get(r, 5)?,
    })
}

fn attempt_row(r: &Row) -> Result<AttemptRow> {
    Ok(AttemptRow {
        step_key: get(r, 0)?,
        attempt: get(r, 1)?,
        run: get(r, 2)?,
        outcome: get(r, 3)?,
        error_type: get(r, 4)?,
        error_message: unescape_opt(get(r, 5)?),
        exit_code: get(r, 6)?,
        started_at: get(r, 7)?,
        finished_at: get(r, 8)?,
        cached_from: get::<Option<String>>(r, 9)?
            .as_deref()
            .and_then(crate::store::CachedFrom::parse),
    })
}

pub(super) fn event_row(r: &Row) -> Result<EventRow> {
    Ok(EventRow {
        id: get(r, 0)?,
        name: get(r, 1)?,
        payload: get(r, 2)?,
        traceparent: get(r, 3)?,
    })
}

pub(super) fn open_attempt(r: &Row) -> Result<OpenAttempt> {
    let span: Option<String> = get(r, 3)?;
    let host: Option<String> = get(r, 5)?;
    let pgid: Option<i64> = get(r, 6)?;
    let start: Option<i64> = get(r, 7)?;
    Ok(OpenAttempt {
        key: get(r, 0)?,
        attempt: get(r, 1)?,
        run: get(r, 2)?,
        span: match span {
            Some(s) => Some((s, get(r, 4)?)),
            None => None,
        },
        process: match (host, pgid, start) {
            (Some(host), Some(pgid), Some(start)) => Some(ProcessTag { host, pgid, start }),
            _ => None,
        },
    })
}

pub(super) fn opt_json(v: &Value) -> Option<String> {
    if v.is_null() {
        None
    } else {
        Some(v.to_string())
    }
}

pub(super) const INSTANCE: &str =
    concat!("SELECT ", instance_cols!(), " FROM instances WHERE id = $1");
pub(super) const STEPS: &str = "SELECT key, step_id, status, attempts, budget_base, outcome, error_type, error_message, \
     output, started_at, finished_at, retry_at, seq, items FROM steps WHERE instance_id=$1";
pub(super) const EVENTS_AFTER: &str = "SELECT id, name, payload, traceparent FROM events WHERE instance_id=$1 \
     AND consumed_by IS NULL AND id > $2 ORDER BY id";
const RUNS: &str = "SELECT number, outcome, started_at, finished_at, restart_from, definition_hash FROM runs WHERE instance_id=$1 \
     ORDER BY number";
const ATTEMPTS: &str = "SELECT step_key, attempt, run, outcome, error_type, error_message, exit_code, started_at, \
     finished_at, cached_from FROM attempts WHERE instance_id=$1 ORDER BY started_at, step_key, attempt";
const DELIVERED_EVENTS: &str =
    "SELECT name, payload, received_at, consumed_by FROM events WHERE instance_id=$1 ORDER BY id";
pub(super) const CANCEL_REQUESTED: &str = "SELECT cancel_requested FROM instances WHERE id=$1";
pub(super) const NOTIFY: &str = "SELECT pg_notify('wf_' || current_schema(), '')";

impl PgStore {
    pub async fn instance(&self, id: &str) -> Result<InstanceRow> {
        match self.query(INSTANCE, &[&id]).await?.first() {
            Some(r) => instance_row(r),
            None => Err(StoreError::NotFound(id.into())),
        }
    }

    pub async fn children(&self, id: &str) -> Result<Vec<InstanceRow>> {
        let rows = self.query(CHILDREN, &[&id]).await?;
        rows.iter().map(instance_row).collect()
    }

    pub async fn runs(&self, id: &str) -> Result<Vec<RunRow>> {
        self.query(RUNS, &[&id])
            .await?
            .iter()
            .map(run_row)
            .collect()
    }

    pub async fn state_patches(&self, id: &str) -> Result<Vec<(String, Value)>> {
        self.query(
            "SELECT key, state_patch FROM steps WHERE instance_id=$1 AND state_patch IS NOT NULL",
            &[&id],
        )
        .await?
        .iter()
        .map(|r| Ok((get(r, 0)?, json(r, 1)?)))
        .collect()
    }

    pub async fn steps(&self, id: &str) -> Result<Vec<StepRow>> {
        self.query(STEPS, &[&id])
            .await?
            .iter()
            .map(step_row)
            .collect()
    }

    pub async fn attempts(&self, id: &str) -> Result<Vec<AttemptRow>> {
        self.query(ATTEMPTS, &[&id])
            .await?
            .iter()
            .map(attempt_row)
            .collect()
    }

    /// The instance, its runs, steps, events, fire time and (when
    /// `attempts`) its attempts, in one REPEATABLE READ transaction (one
    /// snapshot), sent as one pipeline (one round trip).
    pub async fn view(&self, id: &str, attempts: bool) -> Result<InstanceView> {
        let key = || p(id.to_string());
        let mut ops = vec![
            Op::Simple("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"),
            Op::Query(INSTANCE, vec![key()]),
            Op::Query(RUNS, vec![key()]),
            Op::Query(STEPS, vec![key()]),
            Op::Query(DELIVERED_EVENTS, vec![key()]),
            Op::Query(super::schedules::INSTANCE_FIRE, vec![key()]),
            Op::Query(CHILDREN, vec![key()]),
            Op::Query(super::actions::ACTIONS, vec![key()]),
        ];
        if attempts {
            ops.push(Op::Query(ATTEMPTS, vec![key()]));
        }
        ops.push(Op::Simple("COMMIT"));
        let mut outs = self
            .pipeline(ops)
            .await?
            .into_iter()
            .skip(1)
            .map(super::Out::rows);
        let mut next = || outs.next().unwrap_or_default();
        let instance = match next().first() {
            Some(r) => instance_row(r)?,
            None => return Err(StoreError::NotFound(id.into())),
        };
        let runs = next().iter().map(run_row).collect::<Result<_>>()?;
        let steps = next().iter().map(step_row).collect::<Result<_>>()?;
        let events = next()
            .iter()
            .map(|r| {
                Ok(DeliveredEvent {
                    name: get(r, 0)?,
                    payload: get(r, 1)?,
                    received_at: get(r, 2)?,
                    consumed_by: get(r, 3)?,
                })
            })
            .collect::<Result<_>>()?;
        let fire = next().first().map(super::schedules::fire_row).transpose()?;
        let children = next().iter().map(instance_row).collect::<Result<_>>()?;
        let actions = next()
            .iter()
            .map(super::actions::action_row)
            .collect::<Result<_>>()?;
        let attempts = if attempts {
            next().iter().map(attempt_row).collect::<Result<_>>()?
        } else {
            Vec::new()
        };
        Ok(InstanceView {
            actions,
            instance,
            runs,
            steps,
            attempts,
            events,
            fire,
            children,
        })
    }

    pub async fn attempt_logs(
        &self,
        id: &str,
        key: &str,
        attempt: Option<i64>,
    ) -> Result<Option<AttemptLogs>> {
        let rows = self
            .query(
                "SELECT attempt, COALESCE(stdout, ''::bytea), COALESCE(stderr, ''::bytea) FROM attempts \
                 WHERE instance_id=$1 AND step_key=$2 AND ($3::bigint IS NULL OR attempt=$3) \
                 ORDER BY attempt DESC LIMIT 1",
                &[&id, &key, &attempt],
            )
            .await?;
        match rows.first() {
            Some(r) => Ok(Some((get(r, 0)?, get(r, 1)?, get(r, 2)?))),
            None => Ok(None),
        }
    }

    pub async fn definition_step_ids(&self, hash: &str) -> Result<Option<Vec<String>>> {
        let rows = self
            .query("SELECT step_ids FROM definitions WHERE hash=$1", &[&hash])
            .await?;
        Ok(match rows.first() {
            Some(r) => serde_json::from_str(&get::<String>(r, 0)?).ok(),
            None => None,
        })
    }

    pub async fn definition(&self, hash: &str) -> Result<Option<DefinitionRow>> {
        let rows = self
            .query(
                "SELECT source, step_ids, compiled, children FROM definitions WHERE hash=$1",
                &[&hash],
            )
            .await?;
        let Some(r) = rows.first() else {
            return Ok(None);
        };
        let children: Option<String> = get(r, 3)?;
        Ok(Some(DefinitionRow {
            hash: hash.to_string(),
            source: get(r, 0)?,
            step_ids: serde_json::from_str(&get::<String>(r, 1)?).unwrap_or_default(),
            compiled: get(r, 2)?,
            children: DefinitionRow::children_of(children.as_deref())
                .map_err(StoreError::Corrupt)?,
        }))
    }

    pub async fn outputs(&self, id: &str) -> Result<Option<Value>> {
        let rows = self
            .query("SELECT outputs FROM instances WHERE id=$1", &[&id])
            .await?;
        Ok(match rows.first() {
            Some(r) => get::<Option<String>>(r, 0)?.and_then(|t| serde_json::from_str(&t).ok()),
            None => None,
        })
    }

    /// The cancel request and the events not taken, in one round trip:
    /// each row has an event (or none), then the request.
    pub async fn poll(&self, id: &str) -> Result<(CancelRequest, Vec<EventRow>)> {
        let rows = self
            .query(
                "SELECT e.id, e.name, e.payload, e.traceparent, i.cancel_requested \
                 FROM instances i LEFT JOIN events e ON e.instance_id = i.id AND e.consumed_by IS NULL \
                 WHERE i.id = $1 ORDER BY e.id",
                &[&id],
            )
            .await?;
        let Some(first) = rows.first() else {
            return Err(StoreError::NotFound(id.into()));
        };
        let cancel = CancelRequest::from_i64(get(first, 4)?);
        let mut events = Vec::new();
        for r in &rows {
            if get::<Option<i64>>(r, 0)?.is_some() {
                events.push(event_row(r)?);
            }
        }
        Ok((cancel, events))
    }

    pub async fn events_after(&self, id: &str, after: i64) -> Result<Vec<EventRow>> {
        self.query(EVENTS_AFTER, &[&id, &after])
            .await?
            .iter()
            .map(event_row)
            .collect()
    }

    pub async fn create_instance(
        &self,
        i: &InstanceRow,
        defs: &[DefinitionRow],
        detail: &str,
        holder_alive: &dyn Fn(&str) -> bool,
    ) -> Result<bool> {
        if i.queue.is_some() {
            return self.create_queued(i, defs, detail, holder_alive).await;
        }
        let mut ops = vec![Op::Simple("BEGIN")];
        ops.extend(defs.iter().map(insert_definition));
        let inserted = ops.len();
        ops.extend([
            insert_instance(i, detail),
            Op::Query(NOTIFY, vec![]),
            Op::Simple("COMMIT"),
        ]);
        let outs = self.pipeline(ops).await?;
        Ok(outs[inserted].counted() == 1)
    }

    pub async fn request_cancel(
        &self,
        id: &str,
        ask: CancelRequest,
        action: Option<&crate::store::ActionRow>,
    ) -> Result<()> {
        let level = ask.as_i64();
        let ask = Op::Exec(
            "UPDATE instances SET cancel_requested=GREATEST(cancel_requested, $3), updated_at=$2 WHERE id=$1",
            vec![p(id.to_string()), p(Timestamp::now()), p(level)],
        );
        let ops = match action {
            None => vec![ask],
            Some(a) => vec![
                Op::Simple("BEGIN"),
                ask,
                super::actions::insert_action(a),
                Op::Simple("COMMIT"),
            ],
        };
        if let Err(e) = self.pipeline(ops).await {
            let _ = self.pipeline(vec![Op::Simple("ROLLBACK")]).await;
            return Err(e);
        }
        Ok(())
    }

    pub async fn deliver_event(
        &self,
        id: &str,
        name: &str,
        payload: &Value,
        traceparent: Option<&str>,
        wake: bool,
        action: &crate::store::ActionRow,
    ) -> Result<()> {
        let now = Timestamp::now();
        let mut ops = vec![
            Op::Simple("BEGIN"),
            super::actions::insert_action(action),
            Op::Exec(
                "INSERT INTO events (instance_id, name, payload, traceparent, received_at) \
                 VALUES ($1, $2, $3, $4, $5)",
                vec![
                    p(id.to_string()),
                    p(name.to_string()),
                    p(payload.to_string()),
                    p(traceparent.map(str::to_string)),
                    p(now),
                ],
            ),
        ];
        if wake {
            ops.push(Op::Exec(
                "UPDATE instances SET wake_at=$2 WHERE id=$1",
                vec![p(id.to_string()), p(now)],
            ));
            ops.push(Op::Query(NOTIFY, vec![]));
        }
        ops.push(Op::Simple("COMMIT"));
        self.pipeline(ops).await?;
        Ok(())
    }

    pub async fn ids_with_prefix(&self, prefix: &str) -> Result<Vec<String>> {
        let rows = self.query(IDS_WITH_PREFIX, &[&prefix]).await?;
        rows.iter().map(|r| get(r, 0)).collect()
    }

    pub async fn latest_instance_id(&self) -> Result<Option<String>> {
        let rows = self
            .query(
                "SELECT id FROM instances WHERE parent_id IS NULL ORDER BY created_at DESC, seq DESC LIMIT 1",
                &[],
            )
            .await?;
        rows.first().map(|r| get(r, 0)).transpose()
    }
}

/// The reads of an instance's history a takeover makes, in its transaction.
pub(super) fn history_reads(id: &str) -> Vec<Op> {
    let key = || p(id.to_string());
    vec![
        Op::Query(INSTANCE, vec![key()]),
        Op::Query(
            "SELECT COALESCE(MAX(number), 0), \
             array_remove(array_agg(CASE WHEN outcome IS NULL THEN number END ORDER BY number), NULL), \
             (array_agg(definition_hash ORDER BY number DESC))[1] \
             FROM runs WHERE instance_id=$1",
            vec![key()],
        ),
        Op::Query(STEPS, vec![key()]),
        Op::Query(
            "SELECT step_key, attempt, run, span_id, COALESCE(started_ns, 0), proc_host, proc_pgid, \
             proc_start FROM attempts WHERE instance_id=$1 AND outcome IS NULL ORDER BY step_key, attempt",
            vec![key()],
        ),
        Op::Query(
            "SELECT number, trace_id, span_id, parent_span_id, COALESCE(started_ns, 0) FROM runs \
             WHERE instance_id=$1 AND trace_id IS NOT NULL",
            vec![key()],
        ),
        Op::Query(
            "SELECT step_key, attempt FROM attempts WHERE instance_id=$1 \
             AND outcome IN ('interrupted', 'canceled')",
            vec![key()],
        ),
        Op::Query(EVENTS_AFTER, vec![key(), p(0i64)]),
        Op::Query(CANCEL_REQUESTED, vec![key()]),
        // Finished attempts of runs without an outcome whose span was
        // never stored (`UnspannedAttempt`).
        Op::Query(
            "SELECT a.step_key, a.attempt, a.run, a.span_id, COALESCE(a.started_ns, 0), a.finished_at, \
             a.outcome, a.error_type, a.error_message FROM attempts a WHERE a.instance_id=$1 \
             AND a.outcome IS NOT NULL AND a.span_id IS NOT NULL \
             AND a.run IN (SELECT number FROM runs WHERE instance_id=$1 AND outcome IS NULL) \
             AND NOT EXISTS (SELECT 1 FROM spans s WHERE \
               s.instance_seq=(SELECT seq FROM instances WHERE id=$1) AND s.run=a.run \
               AND s.span_id=('x' || a.span_id)::bit(64)::int8)",
            vec![key()],
        ),
    ]
}

/// The history read by [`history_reads`], from their results in order.
pub(super) fn history(
    id: &str,
    mut outs: impl Iterator<Item = Vec<tokio_postgres::Row>>,
) -> Result<History> {
    let instance = match outs.next().unwrap_or_default().first() {
        Some(r) => instance_row(r)?,
        None => return Err(StoreError::NotFound(id.into())),
    };
    let (last_run, abandoned_runs, last_definition) = match outs.next().unwrap_or_default().first()
    {
        Some(r) => (
            get::<i64>(r, 0)?,
            get::<Option<Vec<i64>>>(r, 1)?.unwrap_or_default(),
            get::<Option<String>>(r, 2)?,
        ),
        None => (0, Vec::new(), None),
    };
    let steps = outs
        .next()
        .unwrap_or_default()
        .iter()
        .map(step_row)
        .collect::<Result<_>>()?;
    let open = outs
        .next()
        .unwrap_or_default()
        .iter()
        .map(open_attempt)
        .collect::<Result<_>>()?;
    let traces = outs
        .next()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            Ok((
                get::<i64>(r, 0)?,
                (get(r, 1)?, get(r, 2)?, get(r, 3)?, get(r, 4)?),
            ))
        })
        .collect::<Result<_>>()?;
    let uncounted = outs
        .next()
        .unwrap_or_default()
        .iter()
        .map(|r| Ok((get(r, 0)?, get(r, 1)?)))
        .collect::<Result<_>>()?;
    let events = outs
        .next()
        .unwrap_or_default()
        .iter()
        .map(event_row)
        .collect::<Result<_>>()?;
    let cancel_requested = match outs.next().unwrap_or_default().first() {
        Some(r) => CancelRequest::from_i64(get(r, 0)?),
        None => CancelRequest::None,
    };
    let unspanned = outs
        .next()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            Ok(UnspannedAttempt {
                key: get(r, 0)?,
                attempt: get(r, 1)?,
                run: get(r, 2)?,
                span_id: get(r, 3)?,
                started_ns: get(r, 4)?,
                finished_at: get(r, 5)?,
                outcome: get(r, 6)?,
                error_type: get(r, 7)?,
                error_message: unescape_opt(get(r, 8)?),
            })
        })
        .collect::<Result<_>>()?;
    Ok(History {
        instance,
        steps,
        open,
        abandoned_runs,
        last_run,
        last_definition,
        traces,
        uncounted,
        unspanned,
        events,
        cancel_requested,
        granted: None,
    })
}
