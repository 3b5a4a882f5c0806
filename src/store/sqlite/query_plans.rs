//! Query plans of the statements that must stay flat however many instances
//! the history holds (issue 16: `wf list --limit 50` and a worker's scan for
//! due work at 100,000 ended instances; the prune batch; the resolution of an
//! id prefix, which every command taking an id makes). Each is asked for its plan with
//! `EXPLAIN QUERY PLAN`, on the statement text wf runs (not a copy), and must
//! reach `instances` through an index. The timings themselves live in
//! `bench/scale.py`; this test fails when a change to the SQL or the schema
//! turns one of them into a walk over every instance.

use super::lease::{CLAIM_DUE_SQL, DUE_INSTANCES_SQL};
use super::list::list_sql;
use super::prune::chosen_batch;
use super::{IDS_WITH_PREFIX_SQL, SqliteStore, prefix_end};
use crate::store::ListFilter;
use crate::vocab::{InstanceStatus, Timestamp};

fn store() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(&dir.path().join("wf.db")).expect("open");
    (dir, store)
}

/// The plan's lines (the `detail` column), `SCAN TABLE x` spelled `SCAN x`
/// as SQLite before 3.36 did.
fn plan(store: &SqliteStore, sql: &str) -> Vec<String> {
    let mut stmt = store
        .conn
        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .unwrap_or_else(|e| panic!("{e}: {sql}"));
    // The values do not change the plan: every parameter is NULL.
    let nulls = std::iter::repeat_n(rusqlite::types::Null, stmt.parameter_count());
    stmt.query_map(rusqlite::params_from_iter(nulls), |r| r.get::<_, String>(3))
        .expect("plan")
        .map(|l| l.expect("plan line").replace("SCAN TABLE ", "SCAN "))
        .collect()
}

/// Every line that reads `instances` reads it through an index.
fn assert_indexed(what: &str, lines: &[String]) {
    let reads: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("SCAN instances") || l.starts_with("SEARCH instances"))
        .collect();
    assert!(
        !reads.is_empty(),
        "{what}: no read of instances in {lines:#?}"
    );
    for l in reads {
        assert!(
            l.contains(" USING INDEX ") || l.contains(" USING COVERING INDEX "),
            "{what}: `{l}` reads every instance; plan: {lines:#?}"
        );
    }
}

/// The rows come out of the index newest first: LIMIT stops the read early.
fn assert_no_sort(what: &str, lines: &[String]) {
    assert!(
        !lines.iter().any(|l| l.contains("TEMP B-TREE FOR ORDER BY")),
        "{what}: sorts every matching instance before LIMIT; plan: {lines:#?}"
    );
}

#[test]
fn wf_list_reads_the_newest_instances_off_an_index() {
    let (_dir, store) = store();
    let some = || Some("x".to_string());
    let status = Some(InstanceStatus::Failed);
    let filters = [
        ("wf list", ListFilter::default()),
        (
            "wf list --status",
            ListFilter {
                status,
                ..Default::default()
            },
        ),
        (
            "wf list --workflow",
            ListFilter {
                workflow: some(),
                ..Default::default()
            },
        ),
        (
            "wf list --status --workflow",
            ListFilter {
                status,
                workflow: some(),
                ..Default::default()
            },
        ),
        (
            "wf list --since",
            ListFilter {
                since: Some(Timestamp::from_ms(0)),
                ..Default::default()
            },
        ),
        (
            "wf list --status --since",
            ListFilter {
                status,
                since: Some(Timestamp::from_ms(0)),
                ..Default::default()
            },
        ),
    ];
    for (what, f) in filters {
        let lines = plan(&store, &list_sql(&f, crate::store::list_sql::Drive::Auto));
        assert_indexed(what, &lines);
        assert_no_sort(what, &lines);
        // A filter is a search of an index on it, not a walk over every
        // instance newest first until LIMIT rows match.
        for (given, column) in [
            (f.status.is_some(), "status=?"),
            (f.workflow.is_some(), "workflow=?"),
        ] {
            if given && f.status.is_some() != f.workflow.is_some() {
                assert!(
                    lines
                        .iter()
                        .any(|l| l.starts_with("SEARCH instances") && l.contains(column)),
                    "{what}: the filter is not an index search; plan: {lines:#?}"
                );
            }
        }
    }
}

#[test]
fn the_scan_for_due_work_searches_by_status() {
    let (_dir, store) = store();
    for (what, sql) in [
        ("due_instances", DUE_INSTANCES_SQL),
        ("claim_due", CLAIM_DUE_SQL),
    ] {
        let lines = plan(&store, sql);
        assert_indexed(what, &lines);
        // Ended instances are never visited: each due status is a search.
        let searches = lines
            .iter()
            .filter(|l| l.starts_with("SEARCH instances") && l.contains("(status=?"))
            .count();
        assert!(
            searches >= 3,
            "{what}: expected a status search per due status; plan: {lines:#?}"
        );
    }
}

#[test]
fn the_prune_selection_searches_by_status() {
    let (_dir, store) = store();
    let lines = plan(&store, &chosen_batch());
    assert_indexed("prune", &lines);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("SEARCH instances") && l.contains("(status=?")),
        "prune: not a search by status; plan: {lines:#?}"
    );
}

#[test]
fn an_id_prefix_is_a_range_of_the_primary_key() {
    let (_dir, store) = store();
    let lines = plan(&store, IDS_WITH_PREFIX_SQL);
    assert_indexed("ids_with_prefix", &lines);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("SEARCH instances") && l.contains("(id>? AND id<?)")),
        "ids_with_prefix: not a range of the primary key; plan: {lines:#?}"
    );
}

#[test]
fn the_end_of_a_prefix_is_above_every_id_that_starts_with_it() {
    assert_eq!(prefix_end("3f").as_deref(), Some("3g"));
    assert_eq!(prefix_end("a\u{D7FF}").as_deref(), Some("a\u{E000}"));
    assert_eq!(prefix_end("a\u{10FFFF}").as_deref(), Some("b"));
    assert_eq!(prefix_end("\u{10FFFF}"), None);
    let (_dir, mut store) = store();
    let ids = [
        "3f",
        "3f0",
        "3fz",
        "3f\u{10FFFF}x",
        "3g",
        "3e\u{10FFFF}",
        "\u{10FFFF}\u{10FFFF}",
    ];
    let tx = store.write().expect("write");
    for id in ids {
        tx.execute(
            "INSERT INTO definitions (hash, source, step_ids) VALUES ('h', '', '[]') ON CONFLICT DO NOTHING",
            [],
        )
        .expect("definition");
        tx.execute(
            "INSERT INTO instances (id, workflow, status, definition_hash, workflow_path, base_dir, \
             inputs, state, created_at, updated_at) VALUES (?1, 'w', 'completed', 'h', '', '', '{}', '{}', '', '')",
            [id],
        )
        .expect("instance");
    }
    tx.commit().expect("commit");
    assert_eq!(
        store.ids_with_prefix("3f").expect("prefix"),
        ["3f", "3f0", "3fz", "3f\u{10FFFF}x"]
    );
    assert_eq!(store.ids_with_prefix("3f0").expect("prefix"), ["3f0"]);
    assert_eq!(
        store.ids_with_prefix("3e\u{10FFFF}").expect("prefix"),
        ["3e\u{10FFFF}"]
    );
    assert_eq!(
        store.ids_with_prefix("\u{10FFFF}").expect("prefix"),
        ["\u{10FFFF}\u{10FFFF}"]
    );
}
