//! An upgrade's commit ([`Write::Upgrade`], `wf upgrade`): under the fence
//! of whoever took the instance, the instance moves onto the new definition,
//! pinned with it, with the inputs the new one adds, in one commit with its
//! steps' rows; a fence another process has taken over since is refused,
//! with nothing applied.

use super::*;

fn upgrade_to(hash: &str, source: &str) -> Write {
    Write::Upgrade(Box::new(UpgradeTo {
        definitions: vec![DefinitionRow {
            hash: hash.into(),
            source: source.into(),
            step_ids: vec!["a".into(), "c".into()],
            compiled: None,
            children: Default::default(),
        }],
        definition_hash: hash.into(),
        workflow_path: "/w2/contract.yaml".into(),
        base_dir: "/w2".into(),
        inputs: json!({"who": "ana", "tier": "gold"}),
        renames: Vec::new(),
        queue: None,
    }))
}

pub(super) async fn upgrade_commit(store: &mut Store) {
    let row = instance("up1", 1);
    create(store, &row).await;
    let (fence, _) = take(store, "up1", "upgrader").await;
    let new_source =
        "name: contract\nsteps:\n  - id: a\n    run: 'true'\n  - id: c\n    run: 'true'\n";
    store
        .commit(
            &fence,
            &[
                upgrade_to("h-new", new_source),
                Write::Step(Box::new(step("c", StepStatus::Pending, 0))),
            ],
        )
        .await
        .expect("the upgrade's commit");
    let id = InstanceId::from("up1");
    let inst = store.instance(&id).await.expect("instance");
    assert_eq!(inst.definition_hash, "h-new");
    assert_eq!(
        inst.definition, new_source,
        "the pinned text is the new one"
    );
    assert_eq!(inst.workflow_path, "/w2/contract.yaml");
    assert_eq!(inst.base_dir, "/w2");
    assert_eq!(inst.inputs, json!({"who": "ana", "tier": "gold"}));
    let steps = store.steps(&id).await.expect("steps");
    assert!(steps.iter().any(|s| s.key.as_str() == "c"), "{steps:?}");
    // The old definition stays pinned: the runs before the upgrade ran it.
    assert!(
        store
            .definition("h-contract")
            .await
            .expect("read")
            .is_some()
    );

    // Taken over by another since: an upgrade under the old fence is
    // refused, nothing of it applied.
    let _ = take(store, "up1", "other").await;
    let stale = store
        .commit(&fence, &[upgrade_to("h-stale", "name: stale\nsteps: []\n")])
        .await;
    assert!(is_fenced(&stale, "up1", "other"), "{stale:?}");
    let inst = store.instance(&id).await.expect("instance");
    assert_eq!(inst.definition_hash, "h-new");
    assert!(store.definition("h-stale").await.expect("read").is_none());
}

/// `--map a=z`: every row of `a`'s units is keyed as `z`'s, and none of
/// another step's whose name starts the same way.
pub(super) async fn upgrade_renames(store: &mut Store) {
    let row = instance("up2", 1);
    create(store, &row).await;
    let (fence, _) = take(store, "up2", "upgrader").await;
    let mut item = step("a[0]", StepStatus::Completed, 1);
    item.step_id = "a".into();
    let mut comp = step("a:compensate", StepStatus::Pending, 0);
    comp.step_id = "a".into();
    store
        .commit(
            &fence,
            &[
                start_run(),
                Write::Step(Box::new(step("a", StepStatus::Completed, 1))),
                Write::Step(Box::new(item)),
                Write::Step(Box::new(comp)),
                Write::Step(Box::new(step("ab", StepStatus::Completed, 1))),
                start("a", 1, 1, 1),
                end("a", 1, AttemptOutcome::Ok, 2),
                start("a[0]", 1, 1, 1),
                end("a[0]", 1, AttemptOutcome::Ok, 2),
                start("ab", 1, 1, 1),
                end("ab", 1, AttemptOutcome::Ok, 2),
            ],
        )
        .await
        .expect("the first run");
    let Write::Upgrade(mut to) = upgrade_to("h-renamed", "name: contract\nsteps: []\n") else {
        unreachable!()
    };
    to.renames = vec![("a".into(), "z".into())];
    store
        .commit(&fence, &[Write::Upgrade(to)])
        .await
        .expect("the upgrade's commit");
    let id = InstanceId::from("up2");
    let mut keys: Vec<(String, String)> = store
        .steps(&id)
        .await
        .expect("steps")
        .into_iter()
        .map(|s| (s.key.to_string(), s.step_id))
        .collect();
    keys.sort();
    let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert_eq!(
        keys,
        pairs(&[
            ("ab", "ab"),
            ("z", "z"),
            ("z:compensate", "z"),
            ("z[0]", "z")
        ])
    );
    let mut attempts: Vec<String> = store
        .attempts(&id)
        .await
        .expect("attempts")
        .into_iter()
        .map(|a| a.step_key.to_string())
        .collect();
    attempts.sort();
    assert_eq!(attempts, ["ab", "z", "z[0]"]);
}

/// A new `queue:`: the instance's place is the new one, not admitted (a
/// queued one stays queued under the new key); no `queue:` any more: a
/// queued one is due at once.
pub(super) async fn upgrade_requeues(store: &mut Store) {
    let place = |key: &str, admitted: bool| crate::store::QueuePlace {
        key: key.into(),
        priority: 3,
        limits: crate::store::QueueLimits {
            concurrency: Some(1),
            ..Default::default()
        },
        admitted,
    };
    for (id, status, admitted) in [
        ("uq1", InstanceStatus::Queued, false),
        ("uq2", InstanceStatus::Waiting, true),
    ] {
        let mut row = instance(id, 1);
        row.status = status;
        row.queue = Some(place("old-key", admitted));
        create(store, &row).await;
    }
    for (id, to) in [
        ("uq1", Some(place("new-key", false))),
        ("uq2", Some(place("new-key", false))),
    ] {
        let (fence, _) = take(store, id, "upgrader").await;
        let Write::Upgrade(mut up) = upgrade_to("h-queued", "name: contract\nsteps: []\n") else {
            unreachable!()
        };
        up.queue = Some(to);
        store
            .commit(&fence, &[Write::Upgrade(up), Write::Release])
            .await
            .expect("the upgrade's commit");
    }
    let uq1 = store.instance(&InstanceId::from("uq1")).await.expect("uq1");
    assert_eq!(uq1.status, InstanceStatus::Queued);
    assert_eq!(uq1.queue, Some(place("new-key", false)));
    let uq2 = store.instance(&InstanceId::from("uq2")).await.expect("uq2");
    assert_eq!(uq2.status, InstanceStatus::Waiting);
    assert_eq!(
        uq2.queue,
        Some(place("new-key", false)),
        "its slot of the old key given back"
    );

    // The queue gone: a queued instance is due.
    let (fence, _) = take(store, "uq1", "upgrader").await;
    let Write::Upgrade(mut up) = upgrade_to("h-unqueued", "name: contract\nsteps: []\n") else {
        unreachable!()
    };
    up.queue = Some(None);
    store
        .commit(&fence, &[Write::Upgrade(up), Write::Release])
        .await
        .expect("the upgrade's commit");
    let uq1 = store.instance(&InstanceId::from("uq1")).await.expect("uq1");
    assert_eq!((uq1.status, uq1.queue), (InstanceStatus::Pending, None));
}
