//! The contract's cases of an instance's life beyond its runs: a
//! schedule's fire (once), prune (ended instances with their rows, the
//! counters of `/metrics` kept; a dry run only counts), a definition pinned
//! with the workflows it calls, and listings of roots or of one parent's
//! children, with their counts.

use super::*;

pub(super) async fn schedules(store: &mut Store) {
    let t = BASE_MS;
    let entry = ScheduleRow {
        workflow: "nightly".into(),
        idx: 0,
        spec: "every 60s".into(),
        timezone: None,
        overlap: "allow".into(),
        catchup_ms: 0,
        inputs: json!({"who": "ana"}),
        state: json!({}),
        definition_hash: "h-contract".into(),
        workflow_path: "/w/contract.yaml".into(),
        base_dir: "/w".into(),
        next_fire_ms: t,
        buffered_ms: None,
        last_instance: None,
        last_fire_ms: None,
        skipped: 0,
        registered_at: at(0),
    };
    let def = DefinitionRow {
        hash: "h-contract".into(),
        source: "name: contract\nsteps: []\n".into(),
        step_ids: vec!["a".into()],
        compiled: None,
        children: Default::default(),
    };
    let entries = std::slice::from_ref(&entry);
    assert!(
        store
            .register_schedules("nightly", entries, std::slice::from_ref(&def), &[])
            .await
            .expect("register")
    );
    assert_eq!(store.schedules().await.expect("schedules"), entries);
    // Registered from a stale read: refused, nothing written.
    assert!(
        !store
            .register_schedules("nightly", &[], std::slice::from_ref(&def), &[])
            .await
            .expect("register")
    );
    let fire = |starts: Vec<(InstanceRow, i64)>| Fire {
        workflow: "nightly".into(),
        idx: 0,
        definition_hash: "h-contract".into(),
        expect_next_ms: t,
        expect_buffered_ms: None,
        next_fire_ms: t + 60_000,
        buffered_ms: None,
        skipped: 2,
        starts,
        cancel: None,
    };
    let s1 = instance("s1", 10);
    let fired = store.fire_schedule(&fire(vec![(s1, t)])).await;
    assert_eq!(fired.expect("fire"), Some(vec![true]));
    // The same decision again: the entry moved on, nothing written.
    let again = store
        .fire_schedule(&fire(vec![(instance("s2", 11), t)]))
        .await;
    assert_eq!(again.expect("fire"), None);
    assert!(matches!(
        store.instance(&"s2".into()).await,
        Err(StoreError::NotFound(_))
    ));
    let now = store.schedules().await.expect("schedules");
    assert_eq!(now.len(), 1);
    assert_eq!((now[0].next_fire_ms, now[0].skipped), (t + 60_000, 2));
    assert_eq!(
        now[0].last_instance.as_ref().map(InstanceId::as_str),
        Some("s1")
    );
    assert_eq!(now[0].last_fire_ms, Some(t));
    let record = store
        .instance_fire(&"s1".into())
        .await
        .expect("fire record");
    let record = record.expect("started by the schedule");
    assert_eq!(
        (record.workflow.as_str(), record.index, record.fire_ms),
        ("nightly", 0, t)
    );
    assert_eq!(record.spec, "every 60s");
    let view = store.view(&"s1".into(), false).await.expect("view");
    assert_eq!(view.fire.map(|f| f.fire_ms), Some(t));
    // A fire time that started an instance starts none again.
    let mut moved = fire(vec![(instance("s3", 12), t)]);
    moved.expect_next_ms = t + 60_000;
    moved.next_fire_ms = t + 120_000;
    let refire = store.fire_schedule(&moved).await;
    assert_eq!(refire.expect("fire"), Some(vec![false]));
    assert!(matches!(
        store.instance(&"s3".into()).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(
        store
            .remove_schedules("nightly", None)
            .await
            .expect("remove"),
        1
    );
    assert!(store.schedules().await.expect("schedules").is_empty());
}

pub(super) async fn prune(store: &mut Store) {
    let ended = |id: &str, status, s| {
        let mut row = leased(instance(id, s), "alpha");
        row.status = status;
        row
    };
    use InstanceStatus::{Completed, Failed, Running};
    for row in [
        ended("p1", Completed, 1),
        ended("p2", Failed, 2),
        ended("p3", Running, 3),
        ended("p4", Completed, 1000),
    ] {
        create(store, &row).await;
    }
    // p1's rows, none of them changing its time.
    let (fence, _) = take(store, "p1", "alpha").await;
    let span = span_row(&InstanceId::from("p1"), json!({}));
    let writes = [
        start_run(),
        start("a", 1, 1, 1),
        end("a", 1, AttemptOutcome::Ok, 2),
        Write::Step(Box::new(step("a", StepStatus::Completed, 1))),
        Write::Span(Box::new(span)),
        Write::FinishRun {
            run: 1,
            outcome: RunEnd::Completed,
        },
        Write::Release,
    ];
    store.commit(&fence, &writes).await.expect("commit");
    store
        .deliver_event(
            &"p1".into(),
            "late",
            &json!({}),
            None,
            false,
            &super::tested_action(),
        )
        .await
        .expect("deliver");
    let cutoff = at(100);
    let all = [Completed, Failed, InstanceStatus::Canceled];
    let rows = Pruned {
        instances: 1,
        runs: 1,
        steps: 1,
        attempts: 1,
        spans: 1,
        events: 1,
    };
    let both = Pruned {
        instances: 2,
        ..rows
    };
    // Counted, not removed.
    assert_eq!(
        store
            .prune(
                cutoff,
                &all,
                100,
                true,
                None,
                &crate::vocab::Actor::Token("contract".into())
            )
            .await
            .expect("dry run"),
        both
    );
    assert!(store.instance(&"p1".into()).await.is_ok());
    let before = store.metrics().await.expect("metrics");
    // By status, then the rest, one instance a batch.
    let failed = store
        .prune(
            cutoff,
            &[Failed],
            1,
            false,
            None,
            &crate::vocab::Actor::Token("contract".into()),
        )
        .await
        .expect("prune");
    assert_eq!(
        failed,
        Pruned {
            instances: 1,
            ..Pruned::default()
        }
    );
    assert_eq!(
        store
            .prune(
                cutoff,
                &all,
                1,
                false,
                None,
                &crate::vocab::Actor::Token("contract".into())
            )
            .await
            .expect("prune"),
        rows
    );
    for (id, kept) in [("p1", false), ("p2", false), ("p3", true), ("p4", true)] {
        let found = store.instance(&id.into()).await.is_ok();
        assert_eq!(found, kept, "{id}");
    }
    let p1: InstanceId = "p1".into();
    assert!(store.attempts(&p1).await.expect("attempts").is_empty());
    assert!(store.spans(&p1).await.expect("spans").is_empty());
    assert!(store.events_after(&p1, 0).await.expect("events").is_empty());
    let nothing = store
        .prune(
            cutoff,
            &all,
            100,
            false,
            None,
            &crate::vocab::Actor::Token("contract".into()),
        )
        .await
        .expect("prune");
    assert_eq!(nothing, Pruned::default());
    // The counts of ended attempts and runs stay where they were; the
    // gauge of instances falls by what was deleted.
    let after = store.metrics().await.expect("metrics");
    assert_eq!(after.attempts, before.attempts);
    assert_eq!(after.attempts.len(), 1);
    assert_eq!(after.runs, before.runs);
    assert_eq!(after.attempt_seconds, before.attempt_seconds);
    assert_eq!(after.run_seconds, before.run_seconds);
    let total = |m: &crate::store::metrics::MetricsRows| -> u64 {
        m.instances.iter().map(|(_, _, n)| n).sum()
    };
    assert_eq!((total(&before), total(&after)), (4, 2));
}

/// An instance pins its definition and those of the workflows it calls, in
/// its creation's transaction; each reads back with the hashes of its own
/// children, and a definition pinned before is left as it was.
pub(super) async fn definition_tree(store: &mut Store) {
    let leaf = DefinitionRow {
        hash: "h-leaf".into(),
        source: "name: leaf\nsteps: [{ id: x }]\n".into(),
        step_ids: vec!["x".into()],
        compiled: Some("{}".into()),
        children: Default::default(),
    };
    let mid = DefinitionRow {
        hash: "h-mid".into(),
        source: "name: mid\nsteps: [{ id: m, workflow: leaf.yaml }]\n".into(),
        step_ids: vec!["m".into()],
        compiled: None,
        children: [("leaf.yaml".to_string(), "h-leaf".to_string())].into(),
    };
    let mut row = instance("tree-1", 0);
    row.definition =
        "name: top\nsteps: [{ id: a, workflow: ./mid.yaml }, { id: b, workflow: leaf.yaml }]\n"
            .into();
    row.definition_hash = "h-top".into();
    let top = DefinitionRow {
        hash: row.definition_hash.clone(),
        source: row.definition.clone(),
        step_ids: vec!["a".into(), "b".into()],
        compiled: None,
        children: [
            ("./mid.yaml".to_string(), "h-mid".to_string()),
            ("leaf.yaml".to_string(), "h-leaf".to_string()),
        ]
        .into(),
    };
    let defs = [top.clone(), mid.clone(), leaf.clone()];
    assert!(
        store
            .create_instance(&row, &defs, "", &|_| true)
            .await
            .expect("create")
    );
    for want in &defs {
        let got = store
            .definition(&want.hash)
            .await
            .expect("read")
            .unwrap_or_else(|| panic!("{} not pinned", want.hash));
        assert_eq!(
            (&got.source, &got.step_ids, &got.compiled, &got.children),
            (&want.source, &want.step_ids, &want.compiled, &want.children),
            "{}",
            want.hash
        );
    }
    assert!(store.definition("h-none").await.expect("read").is_none());

    // Another instance of the same tree pins nothing twice; the id taken
    // writes nothing at all.
    let mut again = row.clone();
    again.id = "tree-2".into();
    assert!(
        store
            .create_instance(&again, &defs, "", &|_| true)
            .await
            .expect("create")
    );
    assert!(
        !store
            .create_instance(&again, &defs, "", &|_| true)
            .await
            .expect("create")
    );
    let leaf_now = store
        .definition("h-leaf")
        .await
        .expect("read")
        .expect("leaf");
    assert_eq!(leaf_now.children, leaf.children);
}

/// `wf list --roots` and `--parent ID`: the instances without a parent, or
/// the direct children of one (not its grandchildren), newest first, with
/// the other filters and a limit, and the count of what the filters match.
pub(super) async fn list_lineage(store: &mut Store) {
    let child = |id: &str, parent: &str, s: i64, status| {
        let mut row = instance(id, s);
        row.workflow = "contract-child".into();
        row.status = status;
        row.parent = Some(ParentRef {
            id: parent.into(),
            key: format!("deploy[{s}]").into(),
            attempt: 1,
        });
        row.depth = 1;
        // Labels: each child its region, those of r1 its team too.
        row.labels = Labels::from([("region".to_string(), format!("r{}", s % 2))]);
        if parent == "r1" {
            row.labels.insert("team".into(), "core".into());
        }
        row
    };
    use InstanceStatus::{Completed, Failed, Running};
    let mut grandchild = child("g1", "c1", 5, Completed);
    grandchild.depth = 2;
    for row in [
        instance("r1", 1),
        child("c1", "r1", 2, Completed),
        child("c2", "r1", 3, Failed),
        instance("r2", 4),
        grandchild,
        child("c3", "r2", 6, Completed),
        child("c4", "r1", 7, Completed),
    ] {
        create(store, &row).await;
    }
    let listed = async |store: &mut Store, f: ListFilter| -> (Vec<String>, u64) {
        let rows = store.list_instances(&f).await.expect("list");
        let count = store.count_instances(&f).await.expect("count");
        (rows.iter().map(|r| r.id.to_string()).collect(), count)
    };
    let children_of = |id: &str| Lineage::ChildrenOf(id.into());
    let filter = |lineage| ListFilter {
        lineage,
        ..Default::default()
    };
    assert_eq!(
        listed(store, filter(Lineage::Roots)).await,
        (vec!["r2".into(), "r1".into()], 2)
    );
    assert_eq!(
        listed(store, filter(children_of("r1"))).await,
        (vec!["c4".into(), "c2".into(), "c1".into()], 3),
        "the direct children, newest first"
    );
    assert_eq!(
        listed(store, filter(children_of("c1"))).await,
        (vec!["g1".into()], 1)
    );
    assert_eq!(
        listed(store, filter(children_of("nobody"))).await,
        (vec![], 0)
    );
    assert_eq!(listed(store, filter(Lineage::Any)).await.1, 7);
    // Labels, read back as written, and filtered on (all of them).
    let c2 = store.instance(&"c2".into()).await.expect("c2");
    assert_eq!(
        c2.labels,
        Labels::from([
            ("region".to_string(), "r1".to_string()),
            ("team".to_string(), "core".to_string())
        ])
    );
    let labeled = |pairs: &[(&str, &str)]| ListFilter {
        labels: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    };
    assert_eq!(
        listed(store, labeled(&[("team", "core")])).await,
        (vec!["c4".into(), "c2".into(), "c1".into()], 3)
    );
    assert_eq!(
        listed(store, labeled(&[("team", "core"), ("region", "r1")])).await,
        (vec!["c4".into(), "c2".into()], 2)
    );
    assert_eq!(
        listed(store, labeled(&[("region", "r1"), ("team", "nobody")])).await,
        (vec![], 0)
    );
    // With the other filters: each given, then all at once.
    let with = |f: ListFilter| ListFilter {
        lineage: children_of("r1"),
        ..f
    };
    assert_eq!(
        listed(
            store,
            with(ListFilter {
                status: Some(Completed),
                ..Default::default()
            })
        )
        .await,
        (vec!["c4".into(), "c1".into()], 2)
    );
    assert_eq!(
        listed(
            store,
            with(ListFilter {
                since: Some(at(3)),
                ..Default::default()
            })
        )
        .await,
        (vec!["c4".into(), "c2".into()], 2)
    );
    assert_eq!(
        listed(
            store,
            ListFilter {
                status: Some(Running),
                workflow: Some("contract".into()),
                since: Some(at(2)),
                lineage: Lineage::Roots,
                labels: Vec::new(),
                queue: None,
                id_prefix: None,
                error_words: None,
                after: None,
                limit: None,
            }
        )
        .await,
        (vec!["r2".into()], 1)
    );
    assert_eq!(
        listed(
            store,
            with(ListFilter {
                status: Some(Completed),
                workflow: Some("contract-child".into()),
                since: Some(at(1)),
                ..Default::default()
            })
        )
        .await,
        (vec!["c4".into(), "c1".into()], 2)
    );
    // A limit cuts the rows, not the count.
    assert_eq!(
        listed(
            store,
            with(ListFilter {
                limit: Some(1),
                ..Default::default()
            })
        )
        .await,
        (vec!["c4".into()], 3)
    );
    assert_eq!(
        listed(
            store,
            ListFilter {
                lineage: Lineage::Roots,
                limit: Some(1),
                ..Default::default()
            }
        )
        .await,
        (vec!["r2".into()], 2)
    );
    // A page after a cursor: the rows listed after that instance, with
    // the other filters (the API's pagination); the count is of the rest.
    let page = |after: &str, limit| ListFilter {
        after: Some(after.into()),
        limit: Some(limit),
        ..Default::default()
    };
    let mut all = Vec::new();
    let mut last: Option<String> = None;
    loop {
        let f = match &last {
            None => ListFilter {
                limit: Some(2),
                ..Default::default()
            },
            Some(l) => page(l, 2),
        };
        let (rows, _) = listed(store, f).await;
        if rows.is_empty() {
            break;
        }
        last = rows.last().cloned();
        all.extend(rows);
    }
    let (everything, n) = listed(store, filter(Lineage::Any)).await;
    assert_eq!(
        all, everything,
        "pages of 2 walk the whole list once, in order"
    );
    assert_eq!(n, 7);
    assert_eq!(
        listed(
            store,
            with(ListFilter {
                after: Some("c4".into()),
                ..Default::default()
            })
        )
        .await,
        (vec!["c2".into(), "c1".into()], 2)
    );
}
