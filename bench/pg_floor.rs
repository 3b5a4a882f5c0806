//! The floor of a durable shell step recorded in PostgreSQL, for
//! `bench/pg.py`: what any runner that keeps its history in PostgreSQL and
//! records an attempt durably before its command runs must do at the least,
//! over the same connection wf uses (tokio-postgres, one current-thread
//! runtime, prepared statements), and nothing else: no engine.
//!
//! Each step is one statement in a transaction of its own, committed with
//! the server's `synchronous_commit` (on: the WAL is flushed before the reply),
//! that ends the previous attempt and inserts the new one into a table shaped
//! as wf's `attempts`; then the command starts with stdin from /dev/null and
//! stdout and stderr piped, both read to their end, and is reaped. The last
//! attempt's end is committed after the loop.
//!
//! RUNG (default 0, the floor) adds, one rung on another, what wf's data
//! model and guarantees add to that statement, so that each one's cost shows:
//! 1. the step rows (the ended step's result, the started step's row);
//! 2. the three spans a `/bin/true` step ends with (its commit, its process,
//!    its attempt), as wf stores them;
//! 3. the fence (SPEC §3): the instance's row locked and its epoch checked
//!    first, and every write filtered on it;
//! 4. the command in a process group of its own;
//! 5. the process group recorded while the command runs, by a statement
//!    committed without waiting for the disk (fenced as the commit is).
//!
//! Rung 4 is the work of a short wf step on PostgreSQL (wf records a group
//! once its step has run 20 ms: rung 5 is a longer step's); what wf spends
//! above it is its engine.
//!
//! Usage: `pg_floor STEPS URL [RUNG [PROGRAM]]` (URL as `WF_DB` takes it,
//! without TLS; the tables go in a schema of their own, made afresh and
//! dropped at the end; PROGRAM defaults to `/bin/true`). Built by pg.py as a
//! cargo example (`cargo build --release --example pg_floor`).

use std::process::Stdio;
use tokio::io::AsyncReadExt;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls};

const INSTANCE: &str = "5f1d0c8e2b7a4c3d9e6f8a1b2c3d4e5f";

const SCHEMA: &str = r#"
    CREATE TABLE instances (
        id TEXT COLLATE "C" PRIMARY KEY, seq BIGINT NOT NULL, lease_epoch BIGINT NOT NULL
    );
    CREATE TABLE attempts (
        instance_id TEXT COLLATE "C" NOT NULL, step_key TEXT COLLATE "C" NOT NULL,
        attempt BIGINT NOT NULL, run BIGINT NOT NULL, outcome TEXT, exit_code BIGINT,
        started_at TEXT COLLATE "C" NOT NULL, finished_at TEXT, stdout BYTEA, stderr BYTEA,
        span_id TEXT, started_ns BIGINT, proc_host TEXT, proc_pgid BIGINT, proc_start BIGINT,
        PRIMARY KEY (instance_id, step_key, attempt)
    );
    CREATE TABLE steps (
        instance_id TEXT COLLATE "C" NOT NULL, key TEXT COLLATE "C" NOT NULL,
        step_id TEXT NOT NULL, status TEXT NOT NULL, attempts BIGINT NOT NULL,
        outcome TEXT, output TEXT, started_at TEXT, finished_at TEXT, seq BIGINT,
        PRIMARY KEY (instance_id, key)
    );
    CREATE TABLE spans (
        instance_seq BIGINT NOT NULL, run BIGINT NOT NULL, start_ns BIGINT NOT NULL,
        end_ns BIGINT NOT NULL, span_id BIGINT NOT NULL, parent_span_id BIGINT,
        trace_id BYTEA NOT NULL, exported BOOLEAN NOT NULL DEFAULT false, name TEXT NOT NULL,
        kind TEXT, status TEXT, status_message TEXT, attributes TEXT NOT NULL, links TEXT
    );
    CREATE INDEX spans_by_instance ON spans(instance_seq, run, start_ns);"#;

/// The spans a `/bin/true` step of wf ends with: its commit, its process and
/// its attempt (`$10` the start of the first, in unix ns; `$11` the step's
/// number, which keeps span ids apart).
const SPANS: &str = "INSERT INTO spans (instance_seq, run, start_ns, end_ns, span_id, \
     parent_span_id, trace_id, name, attributes) \
     SELECT 1, 1, $10::int8 + n * 1000, $10::int8 + n * 1000 + 500, $11::int8 * 4 + n, 9, \
       '\\x07070707070707070707070707070707'::bytea, name, attributes \
     FROM (VALUES (0, 'wf.commit', '{}'), \
       (1, 'process', '{\"process.command\":\"/bin/true\",\"process.pid\":17629,\"process.exit.code\":0}'), \
       (2, 'bench/s', '{\"workflow.step.id\":\"s\",\"workflow.step.attempt\":1,\"workflow.step.outcome\":\"ok\"}')) \
       AS v(n, name, attributes)";

/// The step's statement at `rung`: `$1` the instance, `$2` the ended
/// attempt's step (none matches for the first step), `$3`–`$6` its end,
/// `$7` the new step, `$8` now, `$9` the new attempt's span id, `$10` now in
/// ns; from rung 1 `$11` the step's number and `$12` the ended step's output.
fn step_statement(rung: u32) -> String {
    let (fence, filter, and) = if rung >= 3 {
        (
            "f AS (SELECT lease_epoch = 1 AS held FROM instances WHERE id = $1 FOR UPDATE), ",
            " WHERE (SELECT held FROM f)",
            " AND (SELECT held FROM f)",
        )
    } else {
        ("", "", "")
    };
    let mut sql = format!(
        "WITH {fence}e AS (UPDATE attempts SET outcome = 'ok', exit_code = $3, finished_at = $4, \
           stdout = $5, stderr = $6 WHERE instance_id = $1 AND step_key = $2 AND attempt = 1{and})"
    );
    if rung >= 1 {
        sql.push_str(&format!(
            ", s AS (UPDATE steps SET status = 'completed', outcome = 'ok', output = $12, \
               finished_at = $4, seq = $11 WHERE instance_id = $1 AND key = $2{and}), \
             n AS (INSERT INTO steps (instance_id, key, step_id, status, attempts, started_at) \
               SELECT $1, $7, $7, 'running', 1, $8{filter})"
        ));
    }
    if rung >= 2 {
        sql.push_str(&format!(", p AS ({SPANS}{filter})"));
    }
    sql.push_str(&format!(
        " INSERT INTO attempts (instance_id, step_key, attempt, run, started_at, span_id, started_ns) \
         SELECT $1, $7, 1, 1, $8, $9, $10{filter}"
    ));
    sql
}

/// The process group of a started attempt, as wf records it: committed
/// without waiting for the disk, fenced.
const GROUP: &str = "WITH c AS (SELECT set_config('synchronous_commit', 'off', true)), \
     f AS (SELECT lease_epoch = 1 AS held FROM instances, c WHERE id = $1 FOR UPDATE OF instances), \
     g AS (UPDATE attempts SET proc_host = $3, proc_pgid = $4, proc_start = $5 \
       WHERE instance_id = $1 AND step_key = $2 AND attempt = 1 AND (SELECT held FROM f)) \
     SELECT held FROM f";

fn now() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

fn now_ns() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
}

type Error = Box<dyn std::error::Error>;

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: pg_floor STEPS URL [RUNG [PROGRAM]]");
        std::process::exit(2);
    }
    let steps: i64 = args[1].parse()?;
    let rung: u32 = args.get(3).map_or(Ok(0), |r| r.parse())?;
    let program = args.get(4).map_or("/bin/true", String::as_str).to_string();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(steps, &args[2], rung, &program))
}

async fn run(steps: i64, url: &str, rung: u32, program: &str) -> Result<(), Error> {
    let schema = format!("floor_{}", std::process::id());
    let mut config: tokio_postgres::Config = url.parse()?;
    config.options(format!("-c search_path={schema}"));
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("pg_floor: connection: {e}");
        }
    });
    let client = std::sync::Arc::new(client);
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}; {SCHEMA}; \
             INSERT INTO instances VALUES ('{INSTANCE}', 1, 1);"
        ))
        .await?;
    let result = steps_loop(&client, steps, rung, program).await;
    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await?;
    result
}

async fn steps_loop(
    client: &std::sync::Arc<Client>,
    steps: i64,
    rung: u32,
    program: &str,
) -> Result<(), Error> {
    let statement = client.prepare(&step_statement(rung)).await?;
    let group = client.prepare(GROUP).await?;
    let host = "floor-host".to_string();
    let output = r#"{"stdout":"","exit_code":0,"json":null}"#.to_string();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut ended: Option<(String, i64)> = None;
    let mut pending: Option<tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>> = None;
    for step in 0..steps {
        // The previous group record's reply (wf reads it before its next
        // commit, where an error of it is reported).
        if let Some(p) = pending.take() {
            p.await??;
        }
        let key = format!("s{step}");
        let (prev, code) = ended
            .as_ref()
            .map_or((String::new(), 0), |(k, c)| (k.clone(), *c));
        let (at, ns, span) = (now(), now_ns(), format!("{:016x}", step + 1));
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![
            &INSTANCE, &prev, &code, &at, &out, &err, &key, &at, &span, &ns,
        ];
        if rung >= 1 {
            params.push(&step);
            params.push(&output);
        }
        client.execute(&statement, &params).await?;

        let mut command = tokio::process::Command::new(program);
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if rung >= 4 {
            command.process_group(0);
        }
        let mut child = command.spawn()?;
        if rung >= 5 {
            let (client, group, key, host) =
                (client.clone(), group.clone(), key.clone(), host.clone());
            let pgid = i64::from(child.id().unwrap_or(0));
            // Queued at once, its reply taken in the background while the
            // command runs (the runtime's one thread polls it).
            pending = Some(tokio::spawn(async move {
                client
                    .query(&group, &[&INSTANCE, &key, &host, &pgid, &0i64])
                    .await
                    .map(|_| ())
            }));
        }
        out.clear();
        err.clear();
        let (mut stdout, mut stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
        let (a, b) = tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err));
        a?;
        b?;
        let status = child.wait().await?;
        if !status.success() {
            return Err(format!("step {step}: {status}").into());
        }
        ended = Some((key, i64::from(status.code().unwrap_or(-1))));
    }
    if let Some(p) = pending.take() {
        p.await??;
    }
    if let Some((prev, code)) = ended {
        client
            .execute(
                "UPDATE attempts SET outcome = 'ok', exit_code = $3, finished_at = $4 \
                 WHERE instance_id = $1 AND step_key = $2 AND attempt = 1",
                &[&INSTANCE, &prev, &code, &now()],
            )
            .await?;
    }
    // What the rungs wrote, checked: a floor that skipped a write would be
    // no floor.
    let row = client
        .query_one(
            "SELECT (SELECT count(*) FROM attempts WHERE outcome = 'ok'), \
               (SELECT count(proc_pgid) FROM attempts), \
               (SELECT count(*) FROM steps WHERE status = 'completed'), \
               (SELECT count(*) FROM spans)",
            &[],
        )
        .await?;
    let got: [i64; 4] = [row.get(0), row.get(1), row.get(2), row.get(3)];
    let want = [
        steps,
        if rung >= 5 { steps } else { 0 },
        if rung >= 1 { steps - 1 } else { 0 },
        if rung >= 2 { 3 * steps } else { 0 },
    ];
    if got != want {
        return Err(format!(
            "rows written (attempts ended, groups, steps completed, spans): {got:?}, expected {want:?}"
        )
        .into());
    }
    Ok(())
}
