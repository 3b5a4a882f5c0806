//! Scheduled instances. `plan` is the deterministic core: from a schedule
//! entry's cursor, whether its previous instance is still open, and the
//! time, it decides which fire times start an instance, which are skipped
//! (missed beyond `catchup`, or refused by `overlap`) and where the cursor
//! moves. `fire_due` reads the entries, asks `plan`, and has the store apply
//! each decision atomically — or refuse it, when another worker applied its
//! own first — so a fire time starts one instance however many workers run.
//! `register` is `wf schedule add`.

use super::{EngineError, resolve_inputs};
use crate::store::{self, DefinitionRow, Fire, InstanceRow, ScheduleRow, Store};
use crate::vocab::{InstanceId, InstanceStatus, Timestamp};
use crate::workflow::Workflow;
use crate::workflow::trigger::{GRACE, Overlap, Schedule, When};
use serde_json::{Map, Value};
use std::path::Path;

/// The most fire times one decision starts (a long catch-up goes on at the
/// next poll).
const BATCH: usize = 1_000;

/// The most missed fire times counted one by one (a cron schedule's).
const COUNT_CAP: usize = 100_000;

/// How messages name a schedule entry: the workflow's name, with the
/// entry's position after the first (`nightly`, `nightly[1]`).
pub fn entry_name(workflow: &str, idx: i64) -> String {
    if idx == 0 {
        workflow.to_string()
    } else {
        format!("{workflow}[{idx}]")
    }
}

/// How old a missed fire time may be and still start: the entry's
/// `catchup`, and at least [`GRACE`] (ms).
fn catchup_window(s: &Schedule) -> i64 {
    GRACE.as_millis().max(u128::from(s.catchup_ms)) as i64
}

/// What to do with one schedule entry now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Fire times that start an instance, in order.
    pub starts: Vec<i64>,
    /// Ask the open previous instance to cancel (`cancel_previous`).
    pub cancel_previous: bool,
    pub next_fire_ms: i64,
    pub buffered_ms: Option<i64>,
    /// Fire times older than the catch-up window: skipped (`missed_more`:
    /// at least that many).
    pub missed: u64,
    pub missed_more: bool,
    /// The first fire time skipped as missed, and where the window began.
    pub missed_span: Option<(i64, i64)>,
    /// Fire times `overlap` refused.
    pub overlapped: u64,
}

/// Decides what entry `s` does at `now_ms`, given its cursor (`next_ms`,
/// `buffered_ms`) and whether the instance it last started is still open;
/// `None` when nothing is due.
pub fn plan(
    s: &Schedule,
    next_ms: i64,
    buffered_ms: Option<i64>,
    prev_open: bool,
    now_ms: i64,
) -> Option<Plan> {
    let mut open = prev_open;
    let mut p = Plan {
        starts: Vec::new(),
        cancel_previous: false,
        next_fire_ms: next_ms,
        buffered_ms,
        missed: 0,
        missed_more: false,
        missed_span: None,
        overlapped: 0,
    };
    // A buffered fire time starts once the previous instance has ended.
    if let Some(b) = p.buffered_ms
        && !open
    {
        p.starts.push(b);
        p.buffered_ms = None;
        open = true;
    }
    if next_ms > now_ms {
        return (!p.starts.is_empty()).then_some(p);
    }
    // Fire times older than the window are missed: skipped and reported.
    let window = catchup_window(s);
    let window_start = now_ms - window;
    let mut first = next_ms;
    if next_ms < window_start {
        let (n, more) = s.count_between(next_ms, window_start, COUNT_CAP);
        p.missed = n;
        p.missed_more = more;
        first = s.next_after(window_start - 1).unwrap_or(i64::MAX);
        if n > 0 {
            p.missed_span = Some((next_ms, window_start));
        }
    }
    let (due, _) = s.between(first, now_ms + 1, BATCH);
    p.next_fire_ms = match due.last() {
        Some(&t) => s.next_after(t).unwrap_or(i64::MAX),
        None => first,
    };
    if s.overlap == Overlap::CancelPrevious {
        // Each start cancels the one before: of several due at once, only
        // the newest would survive, so only it starts.
        if let Some(&last) = due.last() {
            p.cancel_previous = open;
            p.overlapped += due.len() as u64 - 1;
            p.starts.push(last);
        }
        return Some(p);
    }
    for t in due {
        match s.overlap {
            Overlap::Allow => p.starts.push(t),
            Overlap::Skip if open => p.overlapped += 1,
            Overlap::BufferOne if open => match p.buffered_ms {
                None => p.buffered_ms = Some(t),
                Some(_) => p.overlapped += 1,
            },
            _ => {
                p.starts.push(t);
                open = true;
            }
        }
    }
    Some(p)
}

/// The schedule a registered entry describes.
pub fn schedule_of(row: &ScheduleRow) -> Result<Schedule, String> {
    let when = match row.spec.strip_prefix("every ") {
        Some(d) => match crate::workflow::duration::parse(d)?.as_millis() as u64 {
            0 => return Err(format!("invalid schedule `{}`", row.spec)),
            ms => When::Every { ms },
        },
        None => {
            let timezone = row.timezone.clone().unwrap_or_else(|| "UTC".into());
            crate::workflow::trigger::parse_cron(&row.spec)?;
            crate::workflow::trigger::parse_zone(&timezone)?;
            When::Cron {
                expr: row.spec.clone(),
                timezone,
            }
        }
    };
    Ok(Schedule {
        when,
        inputs: Map::new(),
        overlap: Overlap::parse(&row.overlap)
            .ok_or_else(|| format!("unknown overlap `{}`", row.overlap))?,
        catchup_ms: row.catchup_ms.max(0) as u64,
    })
}

/// How many times `register` reads the entries again when workers kept
/// firing them between its read and its write.
const REGISTER_TRIES: usize = 100;

/// Registers the `on.schedule` of `wf` (read from `path`), replacing what
/// was registered for it. An entry whose spec is unchanged keeps its
/// cursor (next fire time, buffered fire time, last instance), so
/// registering again does not skip or repeat a fire time; a changed one
/// starts after both now and its last fire time. The write happens only if
/// the entries are still as read (a worker's fire in between makes it read
/// them again), so a registration never undoes a fire.
pub async fn register(
    store: &mut Store,
    wf: &Workflow,
    path: &Path,
) -> Result<Vec<ScheduleRow>, EngineError> {
    if wf.schedules.is_empty() {
        return Err(EngineError::Input(format!(
            "{} has no `on.schedule`: nothing to register",
            path.display()
        )));
    }
    // The definitions of the workflows it calls are pinned with it.
    let defs: Vec<DefinitionRow> = super::definitions_of(wf);
    for _ in 0..REGISTER_TRIES {
        let old: Vec<ScheduleRow> = store
            .schedules()
            .await?
            .into_iter()
            .filter(|r| r.workflow == wf.name)
            .collect();
        let rows = entries(wf, path, &old)?;
        if store
            .register_schedules(&wf.name, &rows, &defs, &old)
            .await?
        {
            return Ok(rows);
        }
    }
    Err(EngineError::Input(format!(
        "the schedules of {} changed {REGISTER_TRIES} times while they were registered; try again",
        wf.name
    )))
}

/// The entries `register` writes for `wf`, given those registered (`old`).
fn entries(
    wf: &Workflow,
    path: &Path,
    old: &[ScheduleRow],
) -> Result<Vec<ScheduleRow>, EngineError> {
    let (recorded_path, base_dir) = crate::workflow::origin(path);
    let now_ms = chrono::Utc::now().timestamp_millis();
    let mut rows = Vec::new();
    for (i, s) in wf.schedules.iter().enumerate() {
        let inputs = resolve_inputs(wf, s.inputs.clone())?;
        // Rendered now, so that an entry whose labels cannot be is refused.
        super::render_labels(wf, &inputs, &[]).map_err(|e| {
            EngineError::Input(format!(
                "{}: schedule {}[{i}]: {e}",
                path.display(),
                wf.name
            ))
        })?;
        let spec = s.spec();
        let timezone = s.timezone().map(str::to_string);
        let prev = old.iter().find(|r| r.idx == i as i64);
        let same = prev.filter(|r| r.spec == spec && r.timezone == timezone);
        rows.push(ScheduleRow {
            workflow: wf.name.clone(),
            idx: i as i64,
            spec,
            timezone,
            overlap: s.overlap.as_str().into(),
            catchup_ms: s.catchup_ms as i64,
            inputs,
            state: Value::Object(wf.state.clone()),
            definition_hash: wf.hash.clone(),
            workflow_path: recorded_path.clone(),
            base_dir: base_dir.display().to_string(),
            // A new spec's first fire time is after the last one started:
            // a fire time is started once (another machine's clock may be
            // ahead of this one's).
            next_fire_ms: match same {
                Some(r) => r.next_fire_ms,
                None => {
                    let after = now_ms.max(prev.and_then(|r| r.last_fire_ms).unwrap_or(i64::MIN));
                    s.next_after(after).unwrap_or(i64::MAX)
                }
            },
            buffered_ms: same.and_then(|r| r.buffered_ms),
            last_instance: prev.and_then(|r| r.last_instance.clone()),
            last_fire_ms: prev.and_then(|r| r.last_fire_ms),
            skipped: same.map_or(0, |r| r.skipped),
            registered_at: Timestamp::now(),
        });
    }
    Ok(rows)
}

/// What firing the due schedules did, for the worker's log.
#[derive(Debug, Clone)]
pub enum Fired {
    Started {
        workflow: String,
        idx: i64,
        fire_ms: i64,
        id: InstanceId,
    },
    Missed {
        workflow: String,
        idx: i64,
        count: u64,
        more: bool,
        span: Option<(i64, i64)>,
        /// The catch-up window they were older than (ms).
        window_ms: i64,
    },
    Overlapped {
        workflow: String,
        idx: i64,
        count: u64,
        previous: Option<InstanceId>,
    },
    Buffered {
        workflow: String,
        idx: i64,
        fire_ms: i64,
        previous: Option<InstanceId>,
    },
    Canceled {
        workflow: String,
        idx: i64,
        previous: InstanceId,
    },
    /// A fire time that had already started an instance (an entry
    /// registered again after its instances were pruned, a clock behind
    /// another machine's): skipped, the cursor moved on.
    AlreadyStarted {
        workflow: String,
        idx: i64,
        fire_ms: i64,
    },
    /// An entry that cannot be read (written by a newer wf, say).
    Broken {
        workflow: String,
        idx: i64,
        error: String,
    },
}

/// Starts an instance for every due fire time of every registered entry.
/// Returns what was done, and the earliest fire time still ahead (for the
/// worker's sleep).
pub async fn fire_due(
    store: &mut Store,
    now_ms: i64,
) -> Result<(Vec<Fired>, Option<i64>), EngineError> {
    let mut out = Vec::new();
    let mut ahead: Option<i64> = None;
    for row in store.schedules().await? {
        let s = match schedule_of(&row) {
            Ok(s) => s,
            Err(error) => {
                out.push(Fired::Broken {
                    workflow: row.workflow.clone(),
                    idx: row.idx,
                    error,
                });
                continue;
            }
        };
        let due = row.next_fire_ms <= now_ms || row.buffered_ms.is_some();
        if due {
            let prev_open = match &row.last_instance {
                None => false,
                Some(id) => match store.instance(id).await {
                    Ok(i) => matches!(
                        i.status,
                        InstanceStatus::Pending
                            | InstanceStatus::Running
                            | InstanceStatus::Sleeping
                            | InstanceStatus::Waiting
                    ),
                    Err(store::StoreError::NotFound(_)) => false,
                    Err(e) => return Err(e.into()),
                },
            };
            if let Some(p) = plan(&s, row.next_fire_ms, row.buffered_ms, prev_open, now_ms) {
                apply(store, &row, &s, &p, &mut out).await?;
                ahead = min_some(ahead, Some(p.next_fire_ms));
                continue;
            }
        }
        ahead = min_some(ahead, Some(row.next_fire_ms));
    }
    Ok((out, ahead))
}

fn min_some(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The labels of the instances entry `row` starts: its pinned workflow's,
/// rendered from the entry's inputs (which `register` rendered once already,
/// so they render).
async fn fire_labels(
    store: &Store,
    row: &ScheduleRow,
) -> Result<(store::Labels, Option<store::QueuePlace>), EngineError> {
    let Some(def) = store.definition(&row.definition_hash).await? else {
        return Ok((store::Labels::new(), None));
    };
    let wf = def
        .compiled
        .as_deref()
        .and_then(|c| Workflow::from_compiled(c, &def.source))
        .or_else(|| Workflow::from_pinned(&def.source, &row.workflow_path).ok());
    Ok(match wf {
        Some(wf) => (
            super::render_labels(&wf, &row.inputs, &[]).unwrap_or_default(),
            // Queued when a worker claims it: admitted then, or it waits.
            super::render_queue(&wf, &row.inputs).unwrap_or_default(),
        ),
        None => (store::Labels::new(), None),
    })
}

/// Has the store apply `p` for entry `row`; reports it if it was ours.
async fn apply(
    store: &mut Store,
    row: &ScheduleRow,
    s: &Schedule,
    p: &Plan,
    out: &mut Vec<Fired>,
) -> Result<(), EngineError> {
    let now = Timestamp::now();
    let (labels, queue) = fire_labels(store, row).await?;
    let starts: Vec<(InstanceRow, i64)> = p
        .starts
        .iter()
        .map(|&t| {
            let inst = InstanceRow {
                id: InstanceId::random(),
                workflow: row.workflow.clone(),
                // Due at once: the first worker with room claims it.
                status: InstanceStatus::Pending,
                definition: String::new(),
                definition_hash: row.definition_hash.clone(),
                workflow_path: row.workflow_path.clone(),
                base_dir: row.base_dir.clone(),
                inputs: row.inputs.clone(),
                state: row.state.clone(),
                error: None,
                wake_at: Some(Timestamp::from_ms(t)),
                waiting_event: None,
                lease_owner: None,
                lease_expires_ms: None,
                created_at: now,
                updated_at: now,
                parent: None,
                depth: 0,
                labels: labels.clone(),
                queue: queue.clone(),
                started_by: Some(crate::vocab::Actor::Schedule(row.workflow.clone())),
            };
            (inst, t)
        })
        .collect();
    let cancel = if p.cancel_previous {
        row.last_instance.clone()
    } else {
        None
    };
    let fire = Fire {
        workflow: row.workflow.clone(),
        idx: row.idx,
        definition_hash: row.definition_hash.clone(),
        expect_next_ms: row.next_fire_ms,
        expect_buffered_ms: row.buffered_ms,
        next_fire_ms: p.next_fire_ms,
        buffered_ms: p.buffered_ms,
        skipped: (p.missed + p.overlapped) as i64,
        starts,
        cancel: cancel.clone(),
    };
    let Some(started) = store.fire_schedule(&fire).await? else {
        return Ok(());
    };
    let (workflow, idx) = (row.workflow.clone(), row.idx);
    if p.missed > 0 {
        out.push(Fired::Missed {
            workflow: workflow.clone(),
            idx,
            count: p.missed,
            more: p.missed_more,
            span: p.missed_span,
            window_ms: catchup_window(s),
        });
    }
    if p.overlapped > 0 {
        out.push(Fired::Overlapped {
            workflow: workflow.clone(),
            idx,
            count: p.overlapped,
            previous: row.last_instance.clone(),
        });
    }
    if let Some(b) = p.buffered_ms
        && row.buffered_ms != Some(b)
    {
        out.push(Fired::Buffered {
            workflow: workflow.clone(),
            idx,
            fire_ms: b,
            previous: row.last_instance.clone(),
        });
    }
    if let Some(previous) = cancel {
        out.push(Fired::Canceled {
            workflow: workflow.clone(),
            idx,
            previous,
        });
    }
    for ((inst, t), new) in fire.starts.iter().zip(started) {
        out.push(match new {
            true => Fired::Started {
                workflow: workflow.clone(),
                idx,
                fire_ms: *t,
                id: inst.id.clone(),
            },
            false => Fired::AlreadyStarted {
                workflow: workflow.clone(),
                idx,
                fire_ms: *t,
            },
        });
    }
    Ok(())
}

/// The instance an entry started last (`None`: it started none, or that
/// one was pruned).
pub async fn last_instance(
    store: &Store,
    r: &ScheduleRow,
) -> Result<Option<InstanceRow>, store::StoreError> {
    let Some(id) = &r.last_instance else {
        return Ok(None);
    };
    match store.instance(id).await {
        Ok(i) => Ok(Some(i)),
        Err(store::StoreError::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The last instance of each entry, read for its status.
pub async fn last_instances(
    store: &Store,
    rows: &[ScheduleRow],
) -> Result<Vec<Option<InstanceRow>>, store::StoreError> {
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        out.push(last_instance(store, r).await?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every(secs: u64, overlap: Overlap, catchup_s: u64) -> Schedule {
        Schedule {
            when: When::Every { ms: secs * 1000 },
            inputs: Map::new(),
            overlap,
            catchup_ms: catchup_s * 1000,
        }
    }

    const S: i64 = 1000;
    const T0: i64 = 1_800_000_000_000; // a multiple of 10 s

    #[test]
    fn nothing_due_before_the_next_fire_time() {
        let s = every(10, Overlap::Skip, 0);
        assert_eq!(plan(&s, T0 + 10 * S, None, false, T0 + 9 * S), None);
    }

    #[test]
    fn a_due_fire_time_starts_once_and_moves_the_cursor() {
        let s = every(10, Overlap::Skip, 0);
        let p = plan(&s, T0, None, false, T0 + 3 * S).unwrap();
        assert_eq!(p.starts, [T0]);
        assert_eq!(p.next_fire_ms, T0 + 10 * S);
        assert_eq!((p.missed, p.overlapped), (0, 0));
    }

    #[test]
    fn skip_refuses_while_the_previous_is_open() {
        let s = every(10, Overlap::Skip, 0);
        let p = plan(&s, T0, None, true, T0).unwrap();
        assert!(p.starts.is_empty());
        assert_eq!(p.overlapped, 1);
        assert_eq!(p.next_fire_ms, T0 + 10 * S);
    }

    #[test]
    fn allow_starts_every_due_time() {
        let s = every(10, Overlap::Allow, 0);
        let p = plan(&s, T0, None, true, T0 + 25 * S).unwrap();
        assert_eq!(p.starts, [T0, T0 + 10 * S, T0 + 20 * S]);
        assert_eq!(p.next_fire_ms, T0 + 30 * S);
    }

    #[test]
    fn buffer_one_keeps_one_and_starts_it_when_the_previous_ends() {
        let s = every(10, Overlap::BufferOne, 0);
        let p = plan(&s, T0, None, true, T0 + 25 * S).unwrap();
        assert!(p.starts.is_empty());
        assert_eq!(p.buffered_ms, Some(T0));
        assert_eq!(p.overlapped, 2);
        // Still open, nothing new due: nothing to do.
        assert_eq!(plan(&s, T0 + 30 * S, Some(T0), true, T0 + 26 * S), None);
        // The previous one ended: the buffered fire time starts.
        let p = plan(&s, T0 + 30 * S, Some(T0), false, T0 + 27 * S).unwrap();
        assert_eq!(p.starts, [T0]);
        assert_eq!(p.buffered_ms, None);
        assert_eq!(p.next_fire_ms, T0 + 30 * S);
    }

    #[test]
    fn cancel_previous_starts_the_newest_and_cancels_the_open_one() {
        let s = every(10, Overlap::CancelPrevious, 0);
        let p = plan(&s, T0, None, true, T0 + 15 * S).unwrap();
        assert_eq!(p.starts, [T0 + 10 * S]);
        assert!(p.cancel_previous);
        assert_eq!(p.overlapped, 1);
        let p = plan(&s, T0, None, false, T0).unwrap();
        assert!(!p.cancel_previous);
    }

    #[test]
    fn missed_beyond_the_window_are_skipped_and_counted() {
        // Down for an hour; catch-up 2 minutes (beyond the 1-minute grace).
        let s = every(10, Overlap::Allow, 120);
        let now = T0 + 3600 * S;
        let p = plan(&s, T0, None, false, now).unwrap();
        // Fire times in the last 120 s (inclusive of now) start: 13 of them.
        assert_eq!(p.starts.len(), 13);
        assert_eq!(p.starts[0], now - 120 * S);
        assert_eq!(p.missed, 348);
        assert_eq!(p.missed_span, Some((T0, now - 120 * S)));
        assert_eq!(p.next_fire_ms, now + 10 * S);
        // Without catch-up, the grace minute still starts late ones.
        let s = every(10, Overlap::Skip, 0);
        let p = plan(&s, T0, None, false, now).unwrap();
        assert_eq!(p.starts, [now - 60 * S]);
        assert_eq!(p.overlapped, 6);
    }
}
