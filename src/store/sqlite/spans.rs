//! Spans: written with the step that ends them, read back by `wf trace`,
//! marked once exported, and each run's trace context (for links across
//! runs and restarts).

use super::history::{cached, json_col};
use crate::store::rows::*;
use crate::store::{Result, StoreError};
use rusqlite::{Connection, OptionalExtension, Row, params};

pub(super) fn insert_span(c: &Connection, s: &SpanRow) -> Result<()> {
    cached(
        c,
        "INSERT INTO spans (trace_id, span_id, parent_span_id, instance_id, run, name, kind, start_ns, \
         end_ns, status, status_message, attributes, links) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)",
        params![
            s.trace_id,
            s.span_id,
            s.parent_span_id,
            s.instance_id,
            s.run,
            s.name,
            s.kind,
            s.start_ns,
            s.end_ns,
            s.status,
            s.status_message,
            s.attributes.to_string(),
            s.links.to_string()
        ],
    )?;
    Ok(())
}

const SPAN_COLS: &str = "trace_id, span_id, parent_span_id, instance_id, run, name, kind, start_ns, end_ns, \
    status, status_message, attributes, links";

fn span_from_row(r: &Row) -> rusqlite::Result<SpanRow> {
    Ok(SpanRow {
        trace_id: r.get(0)?,
        span_id: r.get(1)?,
        parent_span_id: r.get(2)?,
        instance_id: r.get(3)?,
        run: r.get(4)?,
        name: r.get(5)?,
        kind: r.get(6)?,
        start_ns: r.get(7)?,
        end_ns: r.get(8)?,
        status: r.get(9)?,
        status_message: r.get(10)?,
        attributes: json_col(r, 11)?,
        links: json_col(r, 12)?,
    })
}

/// Every stored span of an instance, by run then start time.
pub(super) fn spans(c: &Connection, instance_id: &str) -> Result<Vec<SpanRow>> {
    let mut out = Vec::new();
    each_span(c, instance_id, |row| {
        out.push(row);
        Ok::<_, StoreError>(())
    })?;
    Ok(out)
}

/// Calls `f` with each span of an instance (by run, then start), one row at
/// a time: however many there are, only one is in memory.
pub(super) fn each_span<E: From<StoreError>>(
    c: &Connection,
    instance_id: &str,
    mut f: impl FnMut(SpanRow) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let sql = format!(
        "SELECT {SPAN_COLS} FROM spans WHERE instance_id=?1 ORDER BY run, start_ns, span_id"
    );
    let mut stmt = c.prepare(&sql).map_err(StoreError::from)?;
    let rows = stmt
        .query_map([instance_id], span_from_row)
        .map_err(StoreError::from)?;
    for row in rows {
        f(row.map_err(StoreError::from)?)?;
    }
    Ok(())
}

/// Up to `limit` spans not yet sent to a live OTLP endpoint, in `spans`
/// order, starting after `after` (the last span of the previous batch).
pub(super) fn unexported_spans(
    c: &Connection,
    instance_id: &str,
    after: Option<&SpanRow>,
    limit: usize,
) -> Result<Vec<SpanRow>> {
    let (run, start, span) = after.map_or((i64::MIN, i64::MIN, ""), |s| {
        (s.run, s.start_ns, s.span_id.as_str())
    });
    let mut stmt = c.prepare_cached(&format!(
        "SELECT {SPAN_COLS} FROM spans WHERE instance_id=?1 AND exported=0 \
         AND (run, start_ns, span_id) > (?2, ?3, ?4) ORDER BY run, start_ns, span_id LIMIT ?5"
    ))?;
    let rows = stmt.query_map(
        params![instance_id, run, start, span, limit as i64],
        span_from_row,
    )?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Marks spans sent; each is found through `spans_by_instance`.
pub(super) fn mark_exported(c: &Connection, spans: &[SpanRow]) -> Result<()> {
    let mut stmt = c.prepare_cached(
        "UPDATE spans SET exported=1 \
         WHERE instance_id=?1 AND run=?2 AND start_ns=?3 AND span_id=?4",
    )?;
    for s in spans {
        stmt.execute(params![s.instance_id, s.run, s.start_ns, s.span_id])?;
    }
    Ok(())
}

/// The trace and span ids of attempt `attempt` of unit `key` of instance
/// `id` (what a child's first run is a child of).
pub(super) fn attempt_span(
    c: &Connection,
    id: &str,
    key: &str,
    attempt: i64,
) -> Result<Option<(String, String)>> {
    Ok(c.prepare_cached(ATTEMPT_SPAN)?
        .query_row(params![id, key, attempt], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?)
}

const ATTEMPT_SPAN: &str = "SELECT r.trace_id, a.span_id FROM attempts a \
     JOIN runs r ON r.instance_id = a.instance_id AND r.number = a.run \
     WHERE a.instance_id=?1 AND a.step_key=?2 AND a.attempt=?3 \
     AND a.span_id IS NOT NULL AND r.trace_id IS NOT NULL";

pub(super) fn run_trace(c: &Connection, id: &str, run: i64) -> Result<Option<RunTrace>> {
    Ok(c.query_row(
        "SELECT trace_id, span_id, parent_span_id, COALESCE(started_ns, 0) FROM runs \
             WHERE instance_id=?1 AND number=?2 AND trace_id IS NOT NULL",
        params![id, run],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
    .optional()?)
}
