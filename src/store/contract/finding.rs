//! The instance list's finding and counting (the inspector's search and
//! counts, `wf list --id --error --counts`): an id prefix, words of the
//! error kept in step with the error as it is written, changed and
//! pruned, counts by status capped, the kept counts of the instances
//! without a parent, and each parent's count of children.

use super::*;

/// The ids `f` lists, newest first.
async fn ids(store: &mut Store, f: ListFilter) -> Vec<String> {
    let rows = store.list_instances(&f).await.expect("list");
    rows.iter().map(|r| r.id.to_string()).collect()
}

fn erring(f: &str) -> ListFilter {
    ListFilter {
        error_words: ErrorWords::new(f),
        ..Default::default()
    }
}

pub(super) async fn list_finds_and_counts(store: &mut Store) {
    use InstanceStatus::{Completed, Failed, Running};
    let mut rows = Vec::new();
    for (id, s, status, error) in [
        (
            "ab01",
            1,
            Failed,
            Some("step `call` failed: connection refused by upstream"),
        ),
        ("ab02", 2, Failed, Some("disk full on /var/lib")),
        ("cd03", 3, Completed, None),
        ("ab04", 4, Running, None),
        (
            "cd05",
            5,
            Failed,
            Some("Connection RESET, it's \"odd\" \\ here"),
        ),
    ] {
        let mut row = leased(instance(id, s), "alpha");
        row.status = status;
        row.error = error.map(str::to_string);
        rows.push(row);
    }
    // A child of ab01, which failed.
    let mut child = instance("ab01-c", 6);
    child.status = Failed;
    child.error = Some("timeout after 30s".into());
    child.parent = Some(ParentRef {
        id: "ab01".into(),
        key: "deploy".into(),
        attempt: 1,
    });
    child.depth = 1;
    rows.push(child);
    for row in &rows {
        create(store, row).await;
    }
    // An id prefix: those ids alone, through the primary key.
    let prefixed = |p: &str| ListFilter {
        id_prefix: Some(IdPrefix::new(p)),
        ..Default::default()
    };
    assert_eq!(
        ids(store, prefixed("ab0")).await,
        ["ab01-c", "ab04", "ab02", "ab01"]
    );
    assert_eq!(ids(store, prefixed("ab01")).await, ["ab01-c", "ab01"]);
    assert_eq!(ids(store, prefixed("zz")).await, Vec::<String>::new());
    // Words of the errors: whole or the start of one, any case, all of
    // them, quotes and backslashes taken as text.
    assert_eq!(ids(store, erring("refused")).await, ["ab01"]);
    assert_eq!(ids(store, erring("CONNECT")).await, ["cd05", "ab01"]);
    assert_eq!(ids(store, erring("connection upstream")).await, ["ab01"]);
    assert_eq!(
        ids(store, erring("connection full")).await,
        Vec::<String>::new()
    );
    assert_eq!(ids(store, erring("\"odd\"")).await, ["cd05"]);
    assert_eq!(ids(store, erring("it's")).await, ["cd05"]);
    assert!(ids(store, erring("\\")).await.len() <= 1);
    assert_eq!(ids(store, erring("timeout")).await, ["ab01-c"]);
    // With other filters.
    assert_eq!(
        ids(
            store,
            ListFilter {
                lineage: Lineage::Roots,
                ..erring("timeout")
            }
        )
        .await,
        Vec::<String>::new()
    );
    // An error changed by a commit is found by its new words only; one
    // cleared is found no more.
    let (fence, _) = take(store, "ab02", "alpha").await;
    let status = |error: Option<&str>| Write::Status {
        status: Failed,
        wake_at: None,
        waiting_event: None,
        error: error.map(str::to_string),
    };
    store
        .commit(&fence, &[status(Some("quota exceeded"))])
        .await
        .expect("commit");
    assert_eq!(ids(store, erring("disk")).await, Vec::<String>::new());
    assert_eq!(ids(store, erring("quota")).await, ["ab02"]);
    store.commit(&fence, &[status(None)]).await.expect("commit");
    assert_eq!(ids(store, erring("quota")).await, Vec::<String>::new());
    store
        .commit(&fence, &[status(Some("disk full again"))])
        .await
        .expect("commit");
    assert_eq!(ids(store, erring("disk")).await, ["ab02"]);
    // Counts by status, whatever the filter's status, capped.
    let counts = |v: Vec<(InstanceStatus, u64)>| -> Vec<(InstanceStatus, u64)> {
        v.into_iter().filter(|(_, n)| *n > 0).collect()
    };
    let all = ListFilter {
        status: Some(Completed),
        ..Default::default()
    };
    assert_eq!(
        counts(store.count_by_status(&all, 100).await.expect("count")),
        [(Running, 1), (Completed, 1), (Failed, 4)]
    );
    assert_eq!(
        counts(store.count_by_status(&all, 2).await.expect("count")),
        [(Running, 1), (Completed, 1), (Failed, 2)],
        "each count stops at the cap"
    );
    assert_eq!(
        counts(
            store
                .count_by_status(
                    &ListFilter {
                        lineage: Lineage::Roots,
                        ..erring("connection")
                    },
                    100
                )
                .await
                .expect("count")
        ),
        [(Failed, 2)]
    );
    // The kept counts: of all, and of those without a parent, the same
    // read in a read-only snapshot (which a scrape's read, that folds on
    // PostgreSQL, is not), before a fold and after.
    let kept = store
        .snapshot(async |s: &Store| s.kept_instance_counts().await)
        .await
        .expect("kept counts");
    let m = store.metrics().await.expect("metrics");
    assert_eq!(
        (kept.instances.clone(), kept.roots.clone()),
        (m.instances.clone(), m.roots.clone())
    );
    let failed = |v: &[(String, String, u64)]| -> u64 {
        v.iter()
            .filter(|(_, s, _)| s == "failed")
            .map(|(_, _, n)| n)
            .sum()
    };
    assert_eq!((failed(&m.instances), failed(&m.roots)), (4, 3));
    // Children, counted per parent.
    let kids = store
        .children_counts(&["ab01".into(), "ab02".into(), "nobody".into()])
        .await
        .expect("children");
    assert_eq!(kids, vec![(InstanceId::from("ab01"), 1)]);
    assert_eq!(store.children_counts(&[]).await.expect("none"), vec![]);
    // Pruned (all but ab02, changed since the cutoff): their words go
    // with them.
    store
        .prune(
            at(100),
            &[Failed],
            10,
            false,
            None,
            &crate::vocab::Actor::Token("contract".into()),
        )
        .await
        .expect("prune");
    assert_eq!(ids(store, erring("connection")).await, Vec::<String>::new());
    assert_eq!(ids(store, erring("timeout")).await, Vec::<String>::new());
    assert_eq!(ids(store, erring("disk")).await, ["ab02"]);
    let m = store.metrics().await.expect("metrics");
    assert_eq!((failed(&m.instances), failed(&m.roots)), (1, 1));
}
