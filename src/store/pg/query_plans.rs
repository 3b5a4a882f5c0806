//! Query plans, on PostgreSQL, of the statements that must stay flat
//! however many instances the history holds (issue 16, as `sqlite/query_plans.rs`
//! for SQLite): `wf list` with each filter, a worker's scan for due work and
//! its claim, the prune batch, the resolution of an id prefix, and an
//! instance's spans (by `instances.seq` since migration 6). Each is asked
//! for its plan with `EXPLAIN (FORMAT JSON)`, on the statement text wf runs,
//! in a schema of its own holding some thousands of rows, with sequential
//! scans (and, for `wf list`, sorts) priced out: a plan that still has one
//! has no index to serve the statement. The timings themselves live in
//! `bench/scale.py`.
//!
//! These run on the PostgreSQL pass of the suite (`WF_TEST_PG`, which
//! `scripts/test` sets); without a server there is nothing to test.

use super::PgStore;
use super::history::IDS_WITH_PREFIX;
use super::lease::{CLAIM_DUE, DUE_INSTANCES};
use super::list::list_sql;
use super::prune::PRUNE_BATCH;
use super::spans::{SELECT_SPANS, UNEXPORTED_SPANS};
use crate::store::ListFilter;
use crate::vocab::{InstanceStatus, Timestamp};
use serde_json::Value;
use tokio_postgres::types::ToSql;

/// The fill: 6,000 instances, one in `every` sleeping (until `wake`),
/// waiting (for an event that arrived) or running, the others ended, with
/// spans for each. A long-lived history is nearly all ended (as
/// `bench/scale.py`'s 100,000); a busy one has many asleep.
fn fill(every: u32, wake: &str) -> String {
    format!(
        "INSERT INTO definitions (hash, source, step_ids) VALUES ('h', '', '[]');
        INSERT INTO instances (id, workflow, status, definition_hash, workflow_path, base_dir,
            inputs, state, wake_at, waiting_event, created_at, updated_at)
        SELECT md5(i::text), 'w' || (i % 7),
            CASE i % {every} WHEN 0 THEN 'sleeping' WHEN 1 THEN 'waiting' WHEN 2 THEN 'running'
                ELSE (ARRAY['completed', 'completed', 'completed', 'failed', 'canceled'])[1 + i % 5]
            END,
            'h', '/x/w.yaml', '/x', '{{}}', '{{}}',
            CASE WHEN i % {every} IN (0, 1) THEN '{wake}' END,
            CASE WHEN i % {every} = 1 THEN 'go' END,
            to_char(timestamp '2026-01-01' + i * interval '1 second', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
            to_char(timestamp '2026-01-01' + i * interval '1 second', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')
        FROM generate_series(1, 6000) i;
        INSERT INTO spans (instance_seq, run, start_ns, end_ns, span_id, trace_id, name, attributes)
        SELECT seq, 1, seq * 10 + k, seq * 10 + k + 1, seq * 10 + k, '\\x00', 'x', '{{}}'
        FROM instances, generate_series(1, 3) k;
        INSERT INTO events (instance_id, name, payload, received_at)
        SELECT id, 'go', '{{}}', created_at FROM instances WHERE status = 'waiting';
        ANALYZE instances, spans, events;"
    )
}

/// Mostly ended, a few due.
fn ended() -> String {
    fill(300, "2026-01-02T00:00:00.000Z")
}

/// A store on a fresh schema `wf_plans_NAME` filled with `fill`, or None
/// without a server.
async fn store(name: &str, fill: &str) -> Option<PgStore> {
    let Some(store) = PgStore::for_test(&format!("wf_plans_{name}")).await else {
        eprintln!("PostgreSQL only (WF_TEST_PG): not run");
        return None;
    };
    store.client().batch_execute(fill).await.expect("fill");
    // Price out what must not be needed.
    store
        .client()
        .batch_execute("SET enable_seqscan = off")
        .await
        .expect("set");
    Some(store)
}

/// The plan of `sql` with `params`, as JSON.
async fn plan(store: &PgStore, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Value {
    let rows = store
        .client()
        .query(&format!("EXPLAIN (FORMAT JSON) {sql}"), params)
        .await
        .unwrap_or_else(|e| panic!("{e}: {sql}"));
    let Json(text) = rows[0].get(0);
    let doc: Value = serde_json::from_str(&text).expect("EXPLAIN's JSON");
    doc[0]["Plan"].clone()
}

/// A `json` value's text (its binary form is its text).
struct Json(String);

impl<'a> tokio_postgres::types::FromSql<'a> for Json {
    fn from_sql(
        _: &tokio_postgres::types::Type,
        raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Json(String::from_utf8(raw.to_vec())?))
    }

    fn accepts(ty: &tokio_postgres::types::Type) -> bool {
        *ty == tokio_postgres::types::Type::JSON
    }
}

/// The plan of a claim of 10 at `now` (one id skipped).
async fn claim_plan(store: &PgStore, now: &str) -> Value {
    let skip: Vec<String> = vec!["a".into()];
    let (now, owner) = (now.to_string(), "me".to_string());
    plan(store, CLAIM_DUE, &[&now, &owner, &1000i64, &10i64, &skip]).await
}

/// Every node of the plan, depth first.
fn nodes(plan: &Value) -> Vec<&Value> {
    let mut all = vec![plan];
    for child in plan["Plans"].as_array().into_iter().flatten() {
        all.extend(nodes(child));
    }
    all
}

/// Every read of `table` goes through an index with a condition (a range
/// of it, not all of it), or, with `ordered`, may walk an index in order
/// (a `LIMIT` above stops it early).
fn assert_indexed(what: &str, plan: &Value, table: &str, ordered: bool) {
    let reads: Vec<&Value> = nodes(plan)
        .into_iter()
        .filter(|n| n["Relation Name"] == table)
        .collect();
    assert!(!reads.is_empty(), "{what}: no read of {table}: {plan:#}");
    for n in reads {
        let kind = n["Node Type"].as_str().unwrap_or_default();
        if !kind.contains("Scan") {
            continue; // ModifyTable, LockRows: not reads
        }
        let bounded = match kind {
            "Index Scan" | "Index Only Scan" => ordered || n.get("Index Cond").is_some(),
            // Its bitmap comes from index scans with conditions (checked
            // as nodes of their own: they name the index, not the table).
            "Bitmap Heap Scan" => n.get("Recheck Cond").is_some(),
            _ => false,
        };
        assert!(
            bounded,
            "{what}: a {kind} reads every row of {table}: {plan:#}"
        );
    }
    for n in nodes(plan) {
        if n["Node Type"] == "Bitmap Index Scan" {
            assert!(n.get("Index Cond").is_some(), "{what}: {n:#}");
        }
    }
}

fn assert_no_sort(what: &str, plan: &Value) {
    assert!(
        !nodes(plan)
            .iter()
            .any(|n| n["Node Type"].as_str().is_some_and(|k| k.contains("Sort"))),
        "{what}: sorts every matching instance before LIMIT: {plan:#}"
    );
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn wf_list_reads_the_newest_instances_off_an_index() {
    runtime().block_on(async {
        let Some(store) = store("list", &ended()).await else {
            return;
        };
        store
            .client()
            .batch_execute("SET enable_sort = off")
            .await
            .expect("set");
        let some = || Some("x".to_string());
        // A status a few instances have (`waiting`: 1 in 300): walking
        // every instance newest first until LIMIT matched is what this
        // must not do. (For one a fifth of them have, `failed`, that walk
        // and the status index cost the planner the same to 0.2%, and it
        // takes either as the rows' width moves.)
        for status in [None, Some(InstanceStatus::Waiting)] {
            for workflow in [None, some()] {
                for since in [None, Some(Timestamp::from_ms(0))] {
                    let f = ListFilter {
                        status,
                        workflow: workflow.clone(),
                        since,
                        limit: Some(50),
                        ..Default::default()
                    };
                    let what = format!("wf list {f:?}");
                    let limit = Some(50i64);
                    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&limit];
                    params.extend(super::list::filter_params(&f));
                    let p = plan(
                        &store,
                        &list_sql(&f, crate::store::list_sql::Drive::Auto),
                        &params,
                    )
                    .await;
                    assert_eq!(p["Node Type"], "Limit", "{what}: {p:#}");
                    // Unfiltered, the newest are the end of an index; a
                    // filter must be a condition on one, not a walk over every
                    // instance newest first until LIMIT matched.
                    let walk = f.status.is_none() && f.workflow.is_none();
                    assert_indexed(&what, &p, "instances", walk);
                    assert_no_sort(&what, &p);
                }
            }
        }
    });
}

#[test]
fn the_scan_for_due_work_and_the_claim_reach_instances_by_status() {
    runtime().block_on(async {
        let Some(store) = store("due", &ended()).await else {
            return;
        };
        let now = "2026-06-01T00:00:00.000Z".to_string();
        let p = plan(&store, DUE_INSTANCES, &[&now]).await;
        assert_indexed("due_instances", &p, "instances", false);
        assert_indexed("due_instances", &p, "events", false);
        let p = claim_plan(&store, &now).await;
        assert_indexed("claim_due", &p, "instances", false);
    });
}

#[test]
fn an_id_prefix_a_prune_batch_and_an_instances_spans_are_index_reads() {
    runtime().block_on(async {
        let Some(store) = store("ids", &ended()).await else {
            return;
        };
        let prefix = "c4ca".to_string();
        let p = plan(&store, IDS_WITH_PREFIX, &[&prefix]).await;
        assert_indexed("id prefix", &p, "instances", false);

        let statuses: Vec<String> = vec!["completed".into()];
        let before = "2026-01-01T00:10:00.000Z".to_string();
        let p = plan(&store, PRUNE_BATCH, &[&statuses, &before, &500i64]).await;
        assert_indexed("prune batch", &p, "instances", false);
        // Not every remaining match sorted for each batch.
        assert_no_sort("prune batch", &p);

        let id = "c4ca4238a0b923820dcc509a6f75849b".to_string();
        let p = plan(&store, SELECT_SPANS, &[&id]).await;
        assert_indexed("spans", &p, "spans", false);
        assert_indexed("spans", &p, "instances", false);
        let p = plan(
            &store,
            UNEXPORTED_SPANS,
            &[&id, &i64::MIN, &i64::MIN, &i64::MIN, &512i64],
        )
        .await;
        assert_indexed("unexported spans", &p, "spans", false);
    });
}

#[test]
fn the_claim_reads_the_live_instances_only_when_many_sleep() {
    runtime().block_on(async {
        // One in seven asleep until next year: nothing due, and the
        // planner, told of many null `wake_at` (the ended ones'), expects
        // due rows to be common.
        let Some(store) = store("asleep", &fill(7, "2027-01-01T00:00:00.000Z")).await else {
            return;
        };
        let p = claim_plan(&store, "2026-06-01T00:00:00.000Z").await;
        assert_indexed("claim_due, many asleep", &p, "instances", false);
    });
}
