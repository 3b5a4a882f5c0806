//! Spans on PostgreSQL (as `sqlite/spans.rs` on SQLite): read back by `wf
//! trace` (whole, streamed, or those not sent live yet), marked once
//! exported, and each run's trace context. They are written with the step
//! that ends them, by a commit (`batch::insert_span`): under the instance's
//! `seq`, the hex ids as `BIGINT`s and `bytea`, defaults as null (migration
//! 6).

use super::history::{get, json, p};
use super::text::{unescape, unescape_opt};
use super::{Op, PgStore};
use crate::store::rows::*;
use crate::store::{Result, StoreError};
use tokio_postgres::Row;

/// A stored span as `span_row` reads it: the hex ids and the defaults the
/// row leaves null given back (migration 6), `$1` the instance's id.
macro_rules! span_cols {
    () => {
        "encode(trace_id, 'hex'), lpad(to_hex(span_id), 16, '0'), lpad(to_hex(parent_span_id), 16, '0'), \
         $1::text, run, name, COALESCE(kind, 'internal'), start_ns, end_ns, COALESCE(status, 'unset'), \
         status_message, attributes, COALESCE(links, '[]')"
    };
}

/// The spans of instance `$1`: those of its `seq`.
macro_rules! spans_of {
    () => {
        " FROM spans WHERE instance_seq = (SELECT seq FROM instances WHERE id = $1)"
    };
}

pub(super) const SELECT_SPANS: &str = concat!(
    "SELECT ",
    span_cols!(),
    spans_of!(),
    " ORDER BY run, start_ns, span_id"
);

pub(super) const UNEXPORTED_SPANS: &str = concat!(
    "SELECT ",
    span_cols!(),
    spans_of!(),
    " AND NOT exported AND (run, start_ns, span_id) > ($2, $3, $4) \
     ORDER BY run, start_ns, span_id LIMIT $5"
);

/// A span id's 16 hex digits as the `BIGINT` the spans table holds them in
/// (the same 8 bytes; `to_hex` gives them back).
pub(super) fn span_id_bits(hex: &str) -> Result<i64> {
    match u64::from_str_radix(hex, 16) {
        Ok(v) if hex.len() == 16 && !hex.starts_with('+') => Ok(v as i64),
        _ => Err(StoreError::Corrupt(format!(
            "span id `{hex}` is not 16 hex digits"
        ))),
    }
}

pub(super) fn span_row(r: &Row) -> Result<SpanRow> {
    Ok(SpanRow {
        trace_id: get(r, 0)?,
        span_id: get(r, 1)?,
        parent_span_id: get(r, 2)?,
        instance_id: get(r, 3)?,
        run: get(r, 4)?,
        name: unescape(get(r, 5)?),
        kind: get(r, 6)?,
        start_ns: get(r, 7)?,
        end_ns: get(r, 8)?,
        status: get(r, 9)?,
        status_message: unescape_opt(get(r, 10)?),
        attributes: json(r, 11)?,
        links: json(r, 12)?,
    })
}

fn run_trace(r: &Row) -> Result<RunTrace> {
    Ok((get(r, 0)?, get(r, 1)?, get(r, 2)?, get(r, 3)?))
}

impl PgStore {
    pub async fn spans(&self, id: &str) -> Result<Vec<SpanRow>> {
        self.query(SELECT_SPANS, &[&id])
            .await?
            .iter()
            .map(span_row)
            .collect()
    }

    /// Streams the rows: however many spans there are, a few are in memory.
    pub async fn each_span<E: From<StoreError>>(
        &self,
        id: &str,
        mut f: impl FnMut(SpanRow) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        use futures_util::TryStreamExt;
        // Not sent again if the connection is lost: the rows already given
        // to `f` would be given twice.
        let (generation, client) = self.conn.current();
        let stmt = self
            .statement(generation, &client, SELECT_SPANS.into())
            .await
            .map_err(|e| self.fail(e))?;
        let rows = client
            .query_raw(&stmt, [id])
            .await
            .map_err(|e| self.fail(e))?;
        let mut rows = std::pin::pin!(rows);
        while let Some(r) = rows.try_next().await.map_err(|e| self.fail(e))? {
            f(span_row(&r)?)?;
        }
        Ok(())
    }

    /// The trace and span ids of attempt `attempt` of unit `key` (as on
    /// SQLite, `spans::attempt_span`).
    pub async fn attempt_span(
        &self,
        id: &str,
        key: &str,
        attempt: i64,
    ) -> Result<Option<(String, String)>> {
        let rows = self
            .query(
                "SELECT r.trace_id, a.span_id FROM attempts a \
                 JOIN runs r ON r.instance_id = a.instance_id AND r.number = a.run \
                 WHERE a.instance_id=$1 AND a.step_key=$2 AND a.attempt=$3 \
                 AND a.span_id IS NOT NULL AND r.trace_id IS NOT NULL",
                &[&id, &key, &attempt],
            )
            .await?;
        rows.first()
            .map(|r| Ok((get(r, 0)?, get(r, 1)?)))
            .transpose()
    }

    pub async fn run_trace(&self, id: &str, run: i64) -> Result<Option<RunTrace>> {
        let rows = self
            .query(
                "SELECT trace_id, span_id, parent_span_id, COALESCE(started_ns, 0) FROM runs \
                 WHERE instance_id=$1 AND number=$2 AND trace_id IS NOT NULL",
                &[&id, &run],
            )
            .await?;
        rows.first().map(run_trace).transpose()
    }

    pub async fn unexported_spans(
        &self,
        id: &str,
        after: Option<&SpanRow>,
        limit: usize,
    ) -> Result<Vec<SpanRow>> {
        let (run, start, span) = match after {
            Some(s) => (s.run, s.start_ns, span_id_bits(&s.span_id)?),
            None => (i64::MIN, i64::MIN, i64::MIN),
        };
        let rows = self
            .query(
                UNEXPORTED_SPANS,
                &[&id, &run, &start, &span, &(limit as i64)],
            )
            .await?;
        rows.iter().map(span_row).collect()
    }

    pub async fn mark_exported(&self, fence: &Fence, spans: &[SpanRow]) -> Result<()> {
        let ops = spans
            .iter()
            .map(|s| {
                Ok(Op::Exec(
                    "UPDATE spans SET exported=true \
                     WHERE instance_seq=(SELECT seq FROM instances WHERE id=$1) \
                     AND run=$2 AND start_ns=$3 AND span_id=$4",
                    vec![
                        p(s.instance_id.clone()),
                        p(s.run),
                        p(s.start_ns),
                        p(span_id_bits(&s.span_id)?),
                    ],
                ))
            })
            .collect::<Result<_>>()?;
        self.fenced(fence, ops).await
    }
}
