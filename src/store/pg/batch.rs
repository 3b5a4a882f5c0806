//! A batch of writes as few statements: what the server executes per commit
//! is what a step costs. Spans, step rows and new attempts of a batch go in
//! one statement each (`unnest` of arrays); an attempt that starts and ends
//! within the batch is inserted whole; only the last state of the instance
//! and the last row of a step are written. The result is the same rows as
//! applying the writes one by one, in order (`write_op`): 2,000 pure
//! `set_state` steps took 136 µs each as one statement per write, 65 µs so.
//! The batch of a sequential step is one statement for all of it, fence
//! included (`one_statement`), and so is the record of its process group
//! (`group_statement`): 1000 `/bin/true` steps went from 1.81x to 1.63x a
//! bash loop (server CPU and wake-ups per request, not SQL, were the cost).

use super::history::{opt_json, p};
use super::text::{escape, escape_opt};
use super::write::write_op;
use super::{Op, Param};
use crate::store::Write;
use crate::store::rows::{AttemptEnd, SpanRow, StepRow};
use crate::vocab::Timestamp;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::LazyLock;

/// What a step row written again changes.
const STEP_UPDATE: &str = "status=excluded.status, attempts=excluded.attempts, \
     budget_base=excluded.budget_base, outcome=excluded.outcome, error_type=excluded.error_type, \
     error_message=excluded.error_message, output=excluded.output, started_at=excluded.started_at, \
     finished_at=excluded.finished_at, retry_at=excluded.retry_at, seq=excluded.seq, items=excluded.items, \
     state_patch=COALESCE(excluded.state_patch, steps.state_patch)";

/// The three inserts of a batch, as statements of their own (`$1` the
/// instance, the arrays from `$2`) and as the
/// `WITH` queries of `STEP_COMMIT` (the arrays further on, each row filtered
/// on the fence): one text for both.
fn insert_attempts(first: usize, filter: &str) -> String {
    format!(
        "INSERT INTO attempts (instance_id, step_key, attempt, run, started_at, span_id, started_ns, \
         outcome, error_type, error_message, exit_code, finished_at, stdout, stderr) \
         SELECT $1, * FROM unnest({}){filter}",
        arrays(first, &ATTEMPT_TYPES)
    )
}

fn upsert_steps(first: usize, filter: &str) -> String {
    format!(
        "INSERT INTO steps (instance_id, key, step_id, status, attempts, outcome, error_type, \
         error_message, output, started_at, finished_at, retry_at, seq, budget_base, items, state_patch) \
         SELECT $1, * FROM unnest({}){filter} \
         ON CONFLICT (instance_id, key) DO UPDATE SET {STEP_UPDATE}",
        arrays(first, &STEP_TYPES)
    )
}

/// Spans go in as migration 6 keeps them: under the instance's `seq`
/// (`seq`, an expression), the hex ids as bytes, defaults as null.
fn insert_spans(first: usize, seq: &str, filter: &str) -> String {
    format!(
        "INSERT INTO spans (instance_seq, trace_id, span_id, parent_span_id, run, name, kind, \
         start_ns, end_ns, status, status_message, attributes, links) \
         SELECT {seq}, decode(u.t, 'hex'), ('x' || u.s)::bit(64)::int8, ('x' || u.p)::bit(64)::int8, \
           u.run, u.name, NULLIF(u.kind, 'internal'), u.start_ns, u.end_ns, NULLIF(u.status, 'unset'), \
           u.message, u.attributes, NULLIF(u.links, '[]') \
         FROM unnest({}) AS u(t, s, p, run, name, kind, start_ns, end_ns, status, message, attributes, links)\
         {filter}",
        arrays(first, &SPAN_TYPES)
    )
}

static INSERT_ATTEMPTS: LazyLock<String> = LazyLock::new(|| insert_attempts(2, ""));
static UPSERT_STEPS: LazyLock<String> = LazyLock::new(|| upsert_steps(2, ""));
static INSERT_SPANS: LazyLock<String> =
    LazyLock::new(|| insert_spans(2, "(SELECT seq FROM instances WHERE id = $1)", ""));

/// A new attempt, and its end when the same batch records it.
struct NewAttempt<'a> {
    key: &'a str,
    attempt: i64,
    run: i64,
    started_at: Timestamp,
    span_id: &'a str,
    started_ns: i64,
    end: Option<&'a AttemptEnd>,
}

/// A batch's writes, grouped by the statement that applies them.
struct Grouped<'a> {
    /// Runs started, finished or closed, in order.
    runs: Vec<&'a Write>,
    attempts: Vec<NewAttempt<'a>>,
    /// Attempts started in the batch, by key and number.
    started: HashMap<(&'a str, i64), usize>,
    /// Writes to attempts not inserted by the batch (ends, process groups).
    updates: Vec<&'a Write>,
    /// The last row of each step, and the patch each keeps.
    steps: Vec<&'a StepRow>,
    patches: Vec<&'a Value>,
    spans: Vec<&'a SpanRow>,
    /// Writes to the instance's row, by index in the batch; the state's
    /// last one only.
    instance: Vec<usize>,
    last_state: Option<&'a Value>,
}

fn group(writes: &[Write]) -> Grouped<'_> {
    let mut g = Grouped {
        runs: Vec::new(),
        attempts: Vec::new(),
        started: HashMap::new(),
        updates: Vec::new(),
        steps: Vec::new(),
        patches: Vec::new(),
        spans: Vec::new(),
        instance: Vec::new(),
        last_state: None,
    };
    let mut step_at: HashMap<&str, usize> = HashMap::new();
    let mut last_state = None;
    for (i, w) in writes.iter().enumerate() {
        match w {
            Write::StartRun { .. } | Write::FinishRun { .. } | Write::CloseAbandonedRuns => {
                g.runs.push(w);
            }
            Write::StartAttempt {
                key,
                attempt,
                run,
                started_at,
                span_id,
                started_ns,
            } => {
                g.started.insert((key.as_str(), *attempt), g.attempts.len());
                g.attempts.push(NewAttempt {
                    key,
                    attempt: *attempt,
                    run: *run,
                    started_at: *started_at,
                    span_id,
                    started_ns: *started_ns,
                    end: None,
                });
            }
            Write::EndAttempt { key, attempt, end } => {
                match g.started.get(&(key.as_str(), *attempt)) {
                    Some(&n) if g.attempts[n].end.is_none() => g.attempts[n].end = Some(end),
                    _ => g.updates.push(w),
                }
            }
            Write::AttemptProcess { .. }
            | Write::AttemptCachedFrom { .. }
            | Write::PutCache(_)
            | Write::CreateChild(_)
            | Write::Child(_)
            | Write::NotifyParent { .. }
            | Write::CompensateChild { .. }
            | Write::ReleaseLock { .. }
            | Write::ReleaseLocks
            | Write::Action(_)
            | Write::Upgrade(_) => {
                g.updates.push(w);
            }
            Write::Step(row) => match step_at.get(row.key.as_str()) {
                Some(&n) => {
                    g.steps[n] = row;
                    // A row written again without its patch keeps the one
                    // written before (`COALESCE`, as separate upserts would).
                    if !row.state_patch.is_null() {
                        g.patches[n] = &row.state_patch;
                    }
                }
                None => {
                    step_at.insert(&row.key, g.steps.len());
                    g.steps.push(row);
                    g.patches.push(&row.state_patch);
                }
            },
            Write::Span(span) => g.spans.push(span),
            Write::State(v) => {
                last_state = Some(i);
                g.last_state = Some(v);
            }
            Write::Status { .. }
            | Write::Outputs(_)
            | Write::Reopen
            | Write::TakeEvent { .. }
            | Write::TakeEventNamed { .. }
            | Write::Release => g.instance.push(i),
        }
    }
    if let Some(i) = last_state {
        g.instance.push(i);
        g.instance.sort_unstable();
    }
    g
}

/// How a batch is committed: one statement with the fence inlined, or the
/// statements of a pipeline that the fence check begins.
pub(super) enum Commit {
    One(Op),
    Pipeline(Vec<Op>),
}

/// The commit of `writes` to instance `id` by the runner holding `epoch`;
/// `commit` is its id (`one_statement`; a pipeline's is in its fence).
pub(super) fn commit(id: &str, epoch: i64, commit: i64, writes: &[Write]) -> Commit {
    let g = group(writes);
    match one_statement(id, epoch, commit, writes, &g) {
        Some(op) => Commit::One(op),
        None => Commit::Pipeline(ops(id, writes, &g)),
    }
}

/// The statements that apply `writes` to instance `id`, grouped, never as
/// one statement (the contract tests compare them with the others).
#[cfg(test)]
pub(super) fn grouped(id: &str, writes: &[Write]) -> Vec<Op> {
    ops(id, writes, &group(writes))
}

/// The statements that apply `writes` (grouped as `g`) to instance `id`.
fn ops(id: &str, writes: &[Write], g: &Grouped) -> Vec<Op> {
    // Runs keep their order (closing abandoned runs comes before a new one).
    let mut ops: Vec<Op> = g.runs.iter().flat_map(|w| write_op(id, w)).collect();
    if !g.attempts.is_empty() {
        let mut params = vec![p(id.to_string())];
        params.extend(attempt_columns(&g.attempts));
        ops.push(Op::Exec(&INSERT_ATTEMPTS, params));
    }
    // (An update of an attempt started in this batch runs after its insert.)
    // (A child's writes, `Write::Child`, after the `CreateChild` that
    // made it: both are updates, in the batch's order.)
    ops.extend(g.updates.iter().flat_map(|w| write_op(id, w)));
    if !g.steps.is_empty() {
        let mut params = vec![p(id.to_string())];
        params.extend(step_columns(&g.steps, &g.patches));
        ops.push(Op::Exec(&UPSERT_STEPS, params));
    }
    if !g.spans.is_empty() {
        let mut params = vec![p(id.to_string())];
        params.extend(span_columns(&g.spans));
        ops.push(Op::Exec(&INSERT_SPANS, params));
    }
    ops.extend(g.instance.iter().flat_map(|&i| write_op(id, &writes[i])));
    ops
}

/// The whole batch as one statement run in a transaction of its own (no
/// BEGIN and COMMIT requests): the fence, the new attempts, the end of an
/// earlier one, the step rows, the spans and the state, as data-modifying
/// `WITH` queries. The fence is `check_fence`'s check inlined: the
/// instance's row locked `FOR UPDATE` (its newest version, as a takeover
/// commits it), and whether its epoch is the runner's (`held`). Every
/// write is filtered on `held` (an uncorrelated sub-query, evaluated once
/// before the rows it filters), so a refused fence writes nothing, and the
/// statement returns `held` and the holder for the caller to refuse the
/// commit (`fence_held`); the PL/pgSQL call cost the server more than the
/// check itself. This is the batch a
/// sequential step commits (the end of its attempt, its result, the next
/// attempt); `None` for a batch with anything else (runs, the instance's
/// status, the ends of several attempts), which `ops` applies.
///
/// The end is one attempt, looked up by its primary key: an `UPDATE` joined
/// to `unnest` got a generic plan that scanned every attempt of the
/// instance, which made a run of N steps O(N²).
fn one_statement(id: &str, epoch: i64, commit: i64, writes: &[Write], g: &Grouped) -> Option<Op> {
    let mut ends = g.updates.iter().map(|w| match w {
        Write::EndAttempt { key, attempt, end }
            if !g.started.contains_key(&(key.as_str(), *attempt)) =>
        {
            Some((key.as_str(), *attempt, end))
        }
        _ => None,
    });
    let end = match (ends.next(), ends.next()) {
        (None, _) => None,
        (Some(Some(end)), None) => Some(end),
        _ => return None,
    };
    // A write to the instance other than its state is not in the statement.
    let state_only = g
        .instance
        .iter()
        .all(|&i| matches!(writes[i], Write::State(_)));
    if !g.runs.is_empty() || !state_only {
        return None;
    }
    let mut params = vec![p(id.to_string()), p(epoch)];
    params.extend(attempt_columns(&g.attempts));
    params.extend(end_params(end));
    params.extend(step_columns(&g.steps, &g.patches));
    params.extend(span_columns(&g.spans));
    params.push(p(g.last_state.map(std::string::ToString::to_string)));
    params.push(p(Timestamp::now()));
    params.push(p(commit));
    Some(Op::Query(&STEP_COMMIT, params))
}

/// The statements of a child's writes ([`Write::Child`]) in its parent's
/// commit: the check of its fence (with a commit id of its own), then its
/// writes, grouped as a batch of its own.
pub(super) fn child_ops(child: &crate::store::ChildWrites) -> Vec<Op> {
    let id = child.fence.instance.as_str();
    let mut all = vec![Op::Query(
        super::write::CHECK_COMMIT,
        vec![
            p(id.to_string()),
            p(child.fence.epoch),
            p(super::write::commit_id()),
        ],
    )];
    all.extend(ops(id, &child.writes, &group(&child.writes)));
    all
}

/// The process group of an attempt that just started, as one statement in
/// a transaction of its own that is committed without waiting for the disk
/// (`set_config(…, true)` is `SET LOCAL`): BEGIN, SET LOCAL, the fence, the
/// update and COMMIT were five requests, which the server ran while the
/// step's process needed the CPU. The fence is `one_statement`'s: a
/// refused one writes nothing (and, as any error of this unsynced record,
/// is reported by the next commit). `None` unless `writes` is one group.
pub(super) fn group_statement(id: &str, epoch: i64, writes: &[Write]) -> Option<Op> {
    let [Write::AttemptProcess { key, attempt, tag }] = writes else {
        return None;
    };
    Some(Op::Exec(
        RECORD_GROUP,
        vec![
            p(id.to_string()),
            p(epoch),
            p(key.clone()),
            p(*attempt),
            p(tag.host.clone()),
            p(tag.pgid),
            p(tag.start),
        ],
    ))
}

const RECORD_GROUP: &str = "WITH c AS (SELECT set_config('synchronous_commit', 'off', true)), \
     f AS (SELECT lease_epoch = $2 AS held, lease_owner FROM instances, c WHERE id = $1 \
       FOR UPDATE OF instances), \
     g AS (UPDATE attempts SET proc_host=$5, proc_pgid=$6, proc_start=$7 \
       WHERE instance_id=$1 AND step_key=$3 AND attempt=$4 AND (SELECT held FROM f)) \
     SELECT held, lease_owner FROM f";

/// `$first::t1[], $first+1::t2[], …`: the arrays `unnest` takes.
fn arrays(first: usize, types: &[&str]) -> String {
    let cols: Vec<String> = types
        .iter()
        .enumerate()
        .map(|(i, t)| format!("${}::{t}[]", first + i))
        .collect();
    cols.join(", ")
}

const ATTEMPT_TYPES: [&str; 13] = [
    "text", "int8", "int8", "text", "text", "int8", "text", "text", "text", "int8", "text",
    "bytea", "bytea",
];
/// An attempt's end: key, attempt, then `AttemptEnd`'s fields.
const END_FIELDS: usize = 9;
const STEP_TYPES: [&str; 15] = [
    "text", "text", "text", "int8", "text", "text", "text", "text", "text", "text", "text", "int8",
    "int8", "text", "text",
];
const SPAN_TYPES: [&str; 12] = [
    "text", "text", "text", "int8", "text", "text", "int8", "int8", "text", "text", "text", "text",
];

/// The filter of every write of `STEP_COMMIT`: the fence held.
const FENCED: &str = " WHERE (SELECT held FROM f)";

/// `one_statement`'s SQL: `$1` the instance, `$2` the epoch, then the
/// columns of new attempts, attempt ends, step rows and spans, the state
/// (null: unchanged), the time it changed and the commit's id. The commit
/// is `held` when the epoch is the runner's and the id is not in the
/// instance's `last_commit` yet; it is `done` when it is (sent again after
/// its reply was lost: it writes nothing, and succeeds).
static STEP_COMMIT: LazyLock<String> = LazyLock::new(|| {
    let a = 3;
    let e = a + ATTEMPT_TYPES.len();
    let s = e + END_FIELDS;
    let sp = s + STEP_TYPES.len();
    let st = sp + SPAN_TYPES.len();
    format!(
        "WITH f AS (SELECT lease_epoch = $2 AND last_commit IS DISTINCT FROM ${c} \
           AND NOT ((admitted OR EXISTS (SELECT 1 FROM locks l WHERE l.instance_id = $1)) \
             AND lease_expires_ms <= {now_ms}) AS held, \
           lease_owner, seq, last_commit IS NOT DISTINCT FROM ${c} AS done FROM instances \
           WHERE id = $1 FOR UPDATE), \
         a AS ({attempts}), \
         e AS (UPDATE attempts SET outcome=${o}, error_type=${et}, error_message=${em}, \
           exit_code=${x}, finished_at=${fa}, stdout=${so}, stderr=${se}, \
           proc_host=NULL, proc_pgid=NULL, proc_start=NULL \
           WHERE instance_id=$1 AND step_key=${e} AND attempt=${ea} \
             AND (SELECT held FROM f)), \
         s AS ({steps}), \
         p AS ({spans}), \
         i AS (UPDATE instances SET state=COALESCE(${st}::text, state), \
           updated_at=CASE WHEN ${st}::text IS NULL THEN updated_at ELSE ${now} END, last_commit=${c} \
           WHERE id=$1 AND (SELECT held FROM f)) \
         SELECT held, lease_owner, done FROM f",
        attempts = insert_attempts(a, FENCED),
        ea = e + 1,
        o = e + 2,
        et = e + 3,
        em = e + 4,
        x = e + 5,
        fa = e + 6,
        so = e + 7,
        se = e + 8,
        steps = upsert_steps(s, FENCED),
        spans = insert_spans(sp, "(SELECT seq FROM f)", FENCED),
        now = st + 1,
        c = st + 2,
        now_ms = server_ms!(),
    )
});

/// One span's insert, as a batch of one (for `write_op`).
pub(super) fn insert_span(id: &str, span: &SpanRow) -> Op {
    let mut params = vec![p(id.to_string())];
    params.extend(span_columns(&[span]));
    Op::Exec(&INSERT_SPANS, params)
}

fn span_columns(spans: &[&SpanRow]) -> Vec<Param> {
    let col = |f: &dyn Fn(&SpanRow) -> String| spans.iter().map(|s| f(s)).collect::<Vec<_>>();
    vec![
        p(col(&|s| s.trace_id.clone())),
        p(col(&|s| s.span_id.clone())),
        p(spans
            .iter()
            .map(|s| s.parent_span_id.clone())
            .collect::<Vec<_>>()),
        p(spans.iter().map(|s| s.run).collect::<Vec<_>>()),
        p(col(&|s| escape(&s.name))),
        p(col(&|s| s.kind.clone())),
        p(spans.iter().map(|s| s.start_ns).collect::<Vec<_>>()),
        p(spans.iter().map(|s| s.end_ns).collect::<Vec<_>>()),
        p(col(&|s| s.status.clone())),
        p(spans
            .iter()
            .map(|s| escape_opt(&s.status_message))
            .collect::<Vec<_>>()),
        p(col(&|s| s.attributes.to_string())),
        p(col(&|s| s.links.to_string())),
    ]
}

fn step_columns(steps: &[&StepRow], patches: &[&Value]) -> Vec<Param> {
    let text = |f: &dyn Fn(&StepRow) -> Option<String>| {
        steps.iter().map(|s| f(s)).collect::<Vec<Option<String>>>()
    };
    vec![
        p(steps.iter().map(|s| s.key.clone()).collect::<Vec<_>>()),
        p(steps.iter().map(|s| s.step_id.clone()).collect::<Vec<_>>()),
        p(steps.iter().map(|s| s.status.as_str()).collect::<Vec<_>>()),
        p(steps.iter().map(|s| s.attempts).collect::<Vec<_>>()),
        p(text(&|s| s.outcome.map(|o| o.as_str().to_string()))),
        p(text(&|s| s.error_type.as_ref().map(ToString::to_string))),
        p(text(&|s| escape_opt(&s.error_message))),
        p(text(&|s| opt_json(&s.output))),
        p(text(&|s| s.started_at.map(Timestamp::text))),
        p(text(&|s| s.finished_at.map(Timestamp::text))),
        p(text(&|s| s.retry_at.map(Timestamp::text))),
        p(steps.iter().map(|s| s.seq).collect::<Vec<_>>()),
        p(steps.iter().map(|s| s.budget_base).collect::<Vec<_>>()),
        p(text(&|s| opt_json(&s.items))),
        p(patches.iter().map(|v| opt_json(v)).collect::<Vec<_>>()),
    ]
}

fn attempt_columns(attempts: &[NewAttempt]) -> Vec<Param> {
    let end = |f: &dyn Fn(&AttemptEnd) -> Option<String>| {
        attempts
            .iter()
            .map(|a| a.end.and_then(f))
            .collect::<Vec<Option<String>>>()
    };
    vec![
        p(attempts
            .iter()
            .map(|a| a.key.to_string())
            .collect::<Vec<_>>()),
        p(attempts.iter().map(|a| a.attempt).collect::<Vec<_>>()),
        p(attempts.iter().map(|a| a.run).collect::<Vec<_>>()),
        p(attempts
            .iter()
            .map(|a| a.started_at.to_string())
            .collect::<Vec<_>>()),
        p(attempts
            .iter()
            .map(|a| a.span_id.to_string())
            .collect::<Vec<_>>()),
        p(attempts.iter().map(|a| a.started_ns).collect::<Vec<_>>()),
        p(end(&|e| Some(e.outcome.as_str().to_string()))),
        p(end(&|e| e.error_type.as_ref().map(ToString::to_string))),
        p(end(&|e| escape_opt(&e.error_message))),
        p(attempts
            .iter()
            .map(|a| a.end.and_then(|e| e.exit_code))
            .collect::<Vec<_>>()),
        p(end(&|e| Some(e.finished_at.text()))),
        p(attempts
            .iter()
            .map(|a| a.end.map(|e| e.stdout.clone()))
            .collect::<Vec<_>>()),
        p(attempts
            .iter()
            .map(|a| a.end.map(|e| e.stderr.clone()))
            .collect::<Vec<_>>()),
    ]
}

/// The end of an attempt inserted by an earlier batch, if any
/// (`END_FIELDS`): null matches no row.
fn end_params(end: Option<(&str, i64, &AttemptEnd)>) -> Vec<Param> {
    let text = |f: &dyn Fn(&AttemptEnd) -> Option<String>| p(end.and_then(|(_, _, e)| f(e)));
    let bytes = |f: &dyn Fn(&AttemptEnd) -> Vec<u8>| p(end.map(|(_, _, e)| f(e)));
    vec![
        p(end.map(|(key, _, _)| key.to_string())),
        p(end.map(|(_, attempt, _)| attempt)),
        text(&|e| Some(e.outcome.as_str().to_string())),
        text(&|e| e.error_type.as_ref().map(ToString::to_string)),
        text(&|e| escape_opt(&e.error_message)),
        p(end.and_then(|(_, _, e)| e.exit_code)),
        text(&|e| Some(e.finished_at.text())),
        bytes(&|e| e.stdout.clone()),
        bytes(&|e| e.stderr.clone()),
    ]
}
