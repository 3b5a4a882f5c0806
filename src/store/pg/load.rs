//! A copy's batches written with PostgreSQL's `COPY … FROM STDIN` in its
//! binary form (`wf db copy`, `store::transfer::copy`): the fastest way
//! rows go into PostgreSQL, the one the bench's baseline uses. The
//! `INSERT … SELECT FROM unnest(…) ON CONFLICT DO NOTHING` of
//! `portable_write` took 17.3 s where this takes 12.3 s for 100,000
//! instances (bench/RESULTS.md, seventeenth session); it stays for what
//! may already be there (the global rows, an archive's import), while a
//! copy's batch holds only instances the target does not (a copy into an
//! empty database, or `--resume`, which leaves out those already there),
//! so nothing in it can conflict.
//!
//! A span is written as `portable` names it taken apart as PostgreSQL
//! keeps it (`portable.rs`): its hex ids as bytes and a number, its
//! instance as that instance's sequence number, read back once the
//! batch's instances are in.

use super::PgStore;
use super::spans::span_id_bits;
use crate::store::portable::{Batch, Cell, Kind, Rows};
use crate::store::{Result, StoreError};
use bytes::BytesMut;
use std::collections::HashMap;
use std::time::Instant;
use tokio_postgres::Client;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

impl PgStore {
    /// Writes `batch`, none of whose instances this database holds, in one
    /// transaction, each table with one binary `COPY`; written again on a
    /// new connection if the one it went on is lost before its commit.
    pub async fn portable_load(&self, batch: &Batch) -> Result<()> {
        let started = Instant::now();
        loop {
            let (generation, client) = self.conn.current();
            // A data error is found before anything is sent that waits.
            let mut data = None;
            let loaded = self.timed(generation, started, async {
                match load(&client, batch).await {
                    Ok(()) => Ok(()),
                    Err(Failed::Sql(e)) => Err(e),
                    Err(Failed::Data(e)) => {
                        data = Some(e);
                        Ok(())
                    }
                }
            });
            match loaded.await {
                Ok(()) => match data {
                    None => return Ok(()),
                    Some(e) => {
                        self.rollback_on(generation, &client).await;
                        return Err(e);
                    }
                },
                Err(e) => {
                    self.rollback_on(generation, &client).await;
                    self.recover(e, generation, started).await?;
                }
            }
        }
    }
}

/// Why a load stopped: the database said no (or went away), or a row
/// cannot be written as PostgreSQL keeps it.
enum Failed {
    Sql(tokio_postgres::Error),
    Data(StoreError),
}

impl From<tokio_postgres::Error> for Failed {
    fn from(e: tokio_postgres::Error) -> Failed {
        Failed::Sql(e)
    }
}

async fn load(client: &Client, batch: &Batch) -> std::result::Result<(), Failed> {
    client.batch_execute("BEGIN").await?;
    let mut seqs: Option<HashMap<String, i64>> = None;
    for rows in &batch.tables {
        if rows.rows.is_empty() {
            continue;
        }
        if rows.table.name == "spans" && seqs.is_none() {
            let found = client
                .query(
                    "SELECT id, seq FROM instances WHERE id = ANY($1)",
                    &[&batch.ids],
                )
                .await?;
            seqs = Some(found.iter().map(|r| (r.get(0), r.get(1))).collect());
        }
        copy_rows(client, rows, seqs.as_ref()).await?;
    }
    client
        .batch_execute(
            "SELECT setval(pg_get_serial_sequence('events', 'id'), \
             GREATEST((SELECT max(id) FROM events), 1)); COMMIT",
        )
        .await?;
    Ok(())
}

/// How a portable column is written here.
#[derive(Clone, Copy)]
enum Conv {
    /// As it is.
    Same,
    /// An instance id as that instance's sequence number.
    InstanceSeq,
    /// Hex as bytes.
    Bytes,
    /// 16 hex digits as a number.
    SpanId,
}

/// A portable column as written here: the column it goes to, its type,
/// and how its cells are made so.
fn column(table: &str, name: &'static str, kind: Kind) -> (&'static str, Type, Conv) {
    match (table, name) {
        ("spans", "instance_id") => ("instance_seq", Type::INT8, Conv::InstanceSeq),
        ("spans", "trace_id") => (name, Type::BYTEA, Conv::Bytes),
        ("spans", "span_id" | "parent_span_id") => (name, Type::INT8, Conv::SpanId),
        _ => (
            name,
            match kind {
                Kind::Text => Type::TEXT,
                Kind::Int => Type::INT8,
                Kind::Blob => Type::BYTEA,
                Kind::Bool => Type::BOOL,
            },
            Conv::Same,
        ),
    }
}

/// One table's rows of the batch, in one `COPY`.
async fn copy_rows(
    client: &Client,
    rows: &Rows,
    seqs: Option<&HashMap<String, i64>>,
) -> std::result::Result<(), Failed> {
    let table = rows.table;
    let mut names = Vec::new();
    let mut types = Vec::new();
    let mut convs = Vec::new();
    for (name, kind) in table.columns {
        let (name, ty, conv) = column(table.name, name, *kind);
        names.push(name);
        types.push(ty);
        convs.push(conv);
    }
    let sql = format!(
        "COPY {} ({}) FROM STDIN (FORMAT binary)",
        table.name,
        names.join(", ")
    );
    let sink = client.copy_in(sql.as_str()).await?;
    let writer = BinaryCopyInWriter::new(sink, &types);
    futures_util::pin_mut!(writer);
    let mut values = Vec::with_capacity(names.len());
    for row in &rows.rows {
        values.clear();
        for (cell, conv) in row.iter().zip(&convs) {
            values.push(value(*conv, cell, seqs).map_err(Failed::Data)?);
        }
        writer.as_mut().write_raw(values.iter()).await?;
    }
    writer.finish().await?;
    Ok(())
}

/// A cell as its column here holds it.
fn value<'a>(conv: Conv, cell: &'a Cell, seqs: Option<&HashMap<String, i64>>) -> Result<Value<'a>> {
    Ok(match (conv, cell) {
        (_, Cell::Null) => Value::Null,
        (Conv::InstanceSeq, Cell::Text(id)) => {
            Value::Int(*seqs.and_then(|s| s.get(id)).ok_or_else(|| {
                StoreError::Corrupt(format!("a span names instance {id}, not in its batch"))
            })?)
        }
        (Conv::Bytes, Cell::Text(hex)) => Value::Bytes(
            hex::decode(hex)
                .map_err(|_| StoreError::Corrupt(format!("trace id `{hex}` is not hex")))?,
        ),
        (Conv::SpanId, Cell::Text(hex)) => Value::Int(span_id_bits(hex)?),
        (_, Cell::Text(t)) => Value::Text(t),
        (_, Cell::Int(n)) => Value::Int(*n),
        (_, Cell::Blob(b)) => Value::Borrowed(b),
        (_, Cell::Bool(b)) => Value::Bool(*b),
    })
}

/// A cell on its way into a `COPY` (its type checked there against the
/// column's).
#[derive(Debug)]
enum Value<'a> {
    Null,
    Text(&'a str),
    Int(i64),
    Bool(bool),
    Bytes(Vec<u8>),
    Borrowed(&'a [u8]),
}

impl ToSql for Value<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Text(t) => t.to_sql(ty, out),
            Value::Int(n) => n.to_sql(ty, out),
            Value::Bool(b) => b.to_sql(ty, out),
            Value::Bytes(b) => b.to_sql(ty, out),
            Value::Borrowed(b) => b.to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        [Type::TEXT, Type::INT8, Type::BOOL, Type::BYTEA].contains(ty)
    }

    to_sql_checked!();
}
