//! The connection's requests: one statement (`query`, `exec`), a
//! pipeline, a snapshot's transaction, a rollback. Each is made within its
//! deadline (`timed`, `conn::call_deadline`), and one the connection lost
//! (or that went unanswered) is sent again on a new connection when it may
//! be (`recover`), within `WF_DB_RETRY`.

use super::{Op, Out, PgStore, Sql, Text, conn, sql_reason};
use crate::store::{Result, StoreError};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Instant;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row, Statement};

impl PgStore {
    /// After `e` on the connection of `generation`: `Ok` to send the request
    /// again on a new connection (the old one is gone, see `conn`), or the
    /// error to report. `started`: when the request was first sent;
    /// `WF_DB_RETRY` counts from then, or from when the server first left
    /// a call of this process unanswered if that was earlier.
    pub(in crate::store) async fn recover(
        &self,
        e: tokio_postgres::Error,
        generation: u64,
        started: Instant,
    ) -> Result<()> {
        if !conn::transient(&e) {
            return Err(self.fail(e));
        }
        conn::unanswered(&self.shown, started);
        let since = conn::down_since(&self.shown).map_or(started, |d| d.min(started));
        let why = self
            .conn
            .condemned(generation)
            .unwrap_or_else(|| sql_reason(&e));
        self.conn
            .reconnect(&self.target, generation, since, why)
            .await
    }

    /// `call`, made on the connection of `generation`, within its deadline
    /// ([`conn::call_deadline`], and no later than `WF_DB_RETRY` after the
    /// server first left a call unanswered, but at least a second). Past
    /// it the connection is condemned: `call` then fails as on a lost
    /// connection (its task is ended), and the caller's `recover` sends it
    /// again on a new one, or gives up.
    pub(in crate::store) async fn timed<T>(
        &self,
        generation: u64,
        started: Instant,
        call: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>,
    ) -> std::result::Result<T, tokio_postgres::Error> {
        let mut limit = conn::call_deadline();
        if let Some(down) = conn::down_since(&self.shown) {
            let left = conn::retry_window().saturating_sub(down.min(started).elapsed());
            limit = limit.min(left.max(std::time::Duration::from_secs(1)));
        }
        let mut call = std::pin::pin!(call);
        let out = match tokio::time::timeout(limit, &mut call).await {
            Ok(out) => out,
            Err(_) => {
                conn::unanswered(&self.shown, started);
                self.conn.condemn(
                    generation,
                    format!("the server did not answer within {}", conn::shown(limit)),
                );
                call.await
            }
        };
        if out.is_ok() {
            conn::answered(&self.shown);
        }
        out
    }

    /// Rolls back the transaction open on `client`, the connection of
    /// `generation` (within a call's deadline; a connection that does not
    /// answer is condemned, which ends the transaction too).
    pub(in crate::store) async fn rollback_on(&self, generation: u64, client: &Client) {
        let _ = self
            .timed(generation, Instant::now(), client.batch_execute("ROLLBACK"))
            .await;
    }

    /// [`PgStore::rollback_on`] the current connection.
    pub(in crate::store) async fn rollback(&self) {
        let (generation, client) = self.conn.current();
        self.rollback_on(generation, &client).await;
    }

    /// One query, its rows; sent again on a new connection if the one it
    /// went on is lost (every query wf sends is a read, or a write that
    /// is the same when applied twice: a claim, a renewal).
    pub(in crate::store) async fn query(
        &self,
        sql: impl Into<Text<'_>>,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>> {
        let sql = sql.into();
        let started = Instant::now();
        loop {
            let (generation, client) = self.conn.current();
            let sent = self.timed(generation, started, async {
                let stmt = self.statement(generation, &client, sql).await?;
                client.query(&stmt, params).await
            });
            match sent.await {
                Ok(rows) => return Ok(rows),
                Err(e) => self.recover(e, generation, started).await?,
            }
        }
    }

    /// One statement, its row count; sent again as [`PgStore::query`] is
    /// (the statements are idempotent: a renewal, a cancel request, a
    /// removal).
    pub(in crate::store) async fn exec(
        &self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64> {
        let started = Instant::now();
        loop {
            let (generation, client) = self.conn.current();
            let sent = self.timed(generation, started, async {
                let stmt = self.statement(generation, &client, sql.into()).await?;
                client.execute(&stmt, params).await
            });
            match sent.await {
                Ok(n) => return Ok(n),
                Err(e) => self.recover(e, generation, started).await?,
            }
        }
    }

    /// Begins a read-only REPEATABLE READ transaction on the current
    /// connection, for [`Store::snapshot`](crate::store::Store::snapshot);
    /// returns the connection's generation.
    pub(in crate::store) async fn begin_snapshot(&self) -> Result<u64> {
        let started = Instant::now();
        loop {
            let (generation, client) = self.conn.current();
            let begin = client.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
            match self.timed(generation, started, begin).await {
                Ok(()) => return Ok(generation),
                Err(e) => self.recover(e, generation, started).await?,
            }
        }
    }

    /// Ends the transaction [`PgStore::begin_snapshot`] began; false when
    /// the connection was replaced meanwhile (some reads ran outside it).
    pub(in crate::store) async fn end_snapshot(&self, generation: u64) -> bool {
        let (now, client) = self.conn.current();
        if now != generation {
            return false;
        }
        self.timed(generation, Instant::now(), client.batch_execute("COMMIT"))
            .await
            .is_ok()
    }

    /// Sends every request without waiting for the replies in between (one
    /// round trip for all), then collects the replies. The first error is
    /// returned; a transaction the pipeline began is rolled back.
    ///
    /// On a lost connection, a pipeline that is a whole transaction from
    /// its BEGIN (or one statement) is sent again on a new one: its first
    /// sending either committed whole or not at all, and wf's are
    /// idempotent (a fenced commit carries an id the server checks, see
    /// `write`). A pipeline that continues a transaction is not: that
    /// transaction is gone, and the error is reported.
    pub(in crate::store) async fn pipeline(&self, ops: Vec<Op>) -> Result<Vec<Out>> {
        let began = matches!(ops.first(), Some(Op::Simple(s)) if s.starts_with("BEGIN"));
        let whole = began || matches!(ops.as_slice(), [Op::Exec(..) | Op::Query(..)]);
        let started = Instant::now();
        loop {
            let (generation, client) = self.conn.current();
            let sent = self.timed(generation, started, async {
                let statements = self.prepare_all(generation, &client, &ops).await?;
                match send_pipeline(&client, &ops, &statements).await {
                    (outs, None) => Ok(outs),
                    (_, Some(e)) => Err(e),
                }
            });
            let e = match sent.await {
                Ok(outs) => return Ok(outs),
                Err(e) => e,
            };
            if whole && conn::transient(&e) {
                self.recover(e, generation, started).await?;
                continue;
            }
            if began {
                self.rollback_on(generation, &client).await;
            }
            if conn::transient(&e)
                && let Some(why) = self.conn.condemned(generation)
            {
                return Err(StoreError::Open {
                    path: self.shown.clone(),
                    reason: why,
                });
            }
            return Err(self.fail(e));
        }
    }

    /// Sends a pipeline that ends its own transaction (…, COMMIT) and
    /// returns once its requests are queued on the connection, before the
    /// replies: whatever is sent next on this connection runs after it. Its
    /// errors are not reported here, nor is it sent again once sent: what
    /// it records need not outlive a lost connection (a process group's
    /// record; a runner finds an unrecorded group by its processes'
    /// variables).
    pub(in crate::store) async fn pipeline_in_background(&self, ops: Vec<Op>) -> Result<()> {
        // Preparing is waited for, and made again on a new connection.
        let started = Instant::now();
        let (client, statements) = loop {
            let (generation, client) = self.conn.current();
            let prepared = self.prepare_all(generation, &client, &ops);
            match self.timed(generation, started, prepared).await {
                Ok(statements) => break (client, statements),
                Err(e) => self.recover(e, generation, started).await?,
            }
        };
        let mut sent = Box::pin(async move {
            let _ = send_pipeline(&client, &ops, &statements).await;
        });
        // The first poll queues every request, in order.
        let waker = futures_util::task::noop_waker();
        if sent
            .as_mut()
            .poll(&mut std::task::Context::from_waker(&waker))
            .is_pending()
        {
            tokio::spawn(sent);
        }
        Ok(())
    }

    /// The prepared statements `ops` use (preparing, pipelined, those this
    /// connection has not seen yet).
    pub(super) async fn prepare_all(
        &self,
        generation: u64,
        client: &Client,
        ops: &[Op],
    ) -> std::result::Result<HashMap<Sql, Statement>, tokio_postgres::Error> {
        let mut missing: Vec<Sql> = Vec::new();
        self.prepared(generation, |m| {
            for op in ops {
                if let Op::Exec(sql, _) | Op::Query(sql, _) = op
                    && !m.contains_key(&Sql(sql))
                    && !missing.contains(&Sql(sql))
                {
                    missing.push(Sql(sql));
                }
            }
            Some(())
        });
        let prepared =
            futures_util::future::join_all(missing.iter().map(|sql| client.prepare(sql.0))).await;
        let mut statements = HashMap::new();
        for (sql, s) in missing.iter().zip(prepared) {
            statements.insert(*sql, s?);
        }
        self.prepared(generation, |m| {
            for (sql, s) in &statements {
                m.insert(*sql, s.clone());
            }
            for op in ops {
                if let Op::Exec(sql, _) | Op::Query(sql, _) = op
                    && let Some(s) = m.get(&Sql(sql))
                {
                    statements.insert(Sql(sql), s.clone());
                }
            }
            Some(())
        });
        Ok(statements)
    }
}

/// Sends every request without waiting for the replies in between (one
/// round trip for all), then collects the replies and the first error.
async fn send_pipeline(
    client: &Client,
    ops: &[Op],
    statements: &HashMap<Sql, Statement>,
) -> (Vec<Out>, Option<tokio_postgres::Error>) {
    type Request<'a> =
        Pin<Box<dyn Future<Output = std::result::Result<Out, tokio_postgres::Error>> + Send + 'a>>;
    let params: Vec<(&Op, Vec<&(dyn ToSql + Sync)>)> = ops
        .iter()
        .map(|op| {
            let p = match op {
                Op::Exec(_, p) | Op::Query(_, p) => {
                    p.iter().map(|b| &**b as &(dyn ToSql + Sync)).collect()
                }
                Op::Simple(_) => Vec::new(),
            };
            (op, p)
        })
        .collect();
    let mut requests: Vec<futures_util::future::MaybeDone<Request<'_>>> = Vec::new();
    for (op, p) in &params {
        let request: Request<'_> = match op {
            Op::Simple(sql) => {
                Box::pin(async move { client.batch_execute(sql).await.map(|()| Out::Done) })
            }
            Op::Exec(sql, _) => {
                let stmt = &statements[&Sql(sql)];
                Box::pin(async move { client.execute(stmt, p).await.map(Out::Count) })
            }
            Op::Query(sql, _) => {
                let stmt = &statements[&Sql(sql)];
                Box::pin(async move { client.query(stmt, p).await.map(Out::Rows) })
            }
        };
        requests.push(futures_util::future::maybe_done(request));
    }
    // Poll each once, in order: that queues its request on the connection.
    std::future::poll_fn(|cx| {
        for r in &mut requests {
            let _ = Pin::new(r).poll(cx);
        }
        Poll::Ready(())
    })
    .await;
    let mut outs = Vec::with_capacity(requests.len());
    let mut first_error = None;
    for mut r in requests {
        (&mut r).await;
        match Pin::new(&mut r).take_output() {
            Some(Ok(out)) => outs.push(out),
            Some(Err(e)) => {
                if first_error.is_none() {
                    first_error = Some(e);
                }
                outs.push(Out::Done);
            }
            None => outs.push(Out::Done),
        }
    }
    (outs, first_error)
}
