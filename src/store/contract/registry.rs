//! The registry (`wf workflow add`) and what `/metrics` reads, on both
//! backends: a workflow registered, replaced, found by name and by hook;
//! a hook that belongs to another workflow refused with nothing written;
//! removal taking the schedules with it; counts and histograms of what the
//! store holds; workers' heartbeats.

use super::*;

fn registered(name: &str, hook: Option<&str>, hash: &str) -> WorkflowRow {
    WorkflowRow {
        name: name.into(),
        definition_hash: hash.into(),
        workflow_path: format!("/w/{name}.yaml"),
        base_dir: "/w".into(),
        hook: hook.map(str::to_string),
        registered_at: at(0),
    }
}

fn definition(hash: &str) -> DefinitionRow {
    DefinitionRow {
        hash: hash.into(),
        source: format!("name: {hash}\nsteps: []\n"),
        step_ids: vec!["a".into()],
        compiled: None,
        children: Default::default(),
    }
}

pub(super) async fn registry(store: &mut Store) {
    let a = registered("a", Some("deploy"), "h-a1");
    assert_eq!(
        store
            .register_workflow(&a, &[definition("h-a1")], &super::tested_action())
            .await
            .expect("register"),
        Ok(())
    );
    assert!(
        store
            .definition("h-a1")
            .await
            .expect("definition")
            .is_some()
    );
    assert_eq!(
        store.registered("a").await.expect("by name"),
        Some(a.clone())
    );
    assert_eq!(
        store.hook("deploy").await.expect("by hook"),
        Some(a.clone())
    );
    assert_eq!(store.hook("nope").await.expect("by hook"), None);
    // Another workflow with the same hook: refused, nothing written.
    let b = registered("b", Some("deploy"), "h-b1");
    assert_eq!(
        store
            .register_workflow(&b, &[definition("h-b1")], &super::tested_action())
            .await
            .expect("register"),
        Err(Refused::HookTaken("a".into()))
    );
    assert_eq!(store.registered("b").await.expect("by name"), None);
    assert!(
        store
            .definition("h-b1")
            .await
            .expect("definition")
            .is_none()
    );
    // Registered again: replaced (another definition, no hook now).
    let a2 = registered("a", None, "h-a2");
    assert_eq!(
        store
            .register_workflow(&a2, &[definition("h-a2")], &super::tested_action())
            .await
            .expect("register"),
        Ok(())
    );
    assert_eq!(store.hook("deploy").await.expect("by hook"), None);
    assert_eq!(
        store
            .register_workflow(&b, &[definition("h-b1")], &super::tested_action())
            .await
            .expect("register"),
        Ok(())
    );
    let names: Vec<String> = store
        .workflows()
        .await
        .expect("list")
        .into_iter()
        .map(|w| w.name)
        .collect();
    assert_eq!(names, ["a", "b"]);
    // Removal takes the workflow's schedules with it.
    let entry = ScheduleRow {
        workflow: "a".into(),
        idx: 0,
        spec: "every 60s".into(),
        timezone: None,
        overlap: "skip".into(),
        catchup_ms: 0,
        inputs: json!({}),
        state: json!({}),
        definition_hash: "h-a2".into(),
        workflow_path: "/w/a.yaml".into(),
        base_dir: "/w".into(),
        next_fire_ms: BASE_MS,
        buffered_ms: None,
        last_instance: None,
        last_fire_ms: None,
        skipped: 0,
        registered_at: at(0),
    };
    assert!(
        store
            .register_schedules("a", std::slice::from_ref(&entry), &[], &[])
            .await
            .expect("schedules")
    );
    assert!(
        store
            .remove_workflow("a", &super::tested_action())
            .await
            .expect("remove")
    );
    assert!(store.schedules().await.expect("schedules").is_empty());
    assert_eq!(store.registered("a").await.expect("by name"), None);
    assert!(
        !store
            .remove_workflow("a", &super::tested_action())
            .await
            .expect("remove again")
    );
}

pub(super) async fn metrics_and_heartbeats(store: &mut Store) {
    let empty = store.metrics().await.expect("metrics");
    assert!(empty.instances.is_empty() && empty.attempts.is_empty());
    assert!(empty.attempt_seconds.is_empty() && empty.run_seconds.is_empty());
    // Two instances; one runs an attempt that takes 3 s and one that is
    // still going.
    create(store, &instance("m1", 1)).await;
    create(store, &instance("m2", 2)).await;
    let (fence, _) = take(store, "m1", "w1").await;
    store
        .commit(
            &fence,
            &[
                start_run(),
                start("a", 1, 1, 10),
                end("a", 1, AttemptOutcome::Ok, 13),
                start("b", 1, 1, 20),
            ],
        )
        .await
        .expect("commit");
    let m = store.metrics().await.expect("metrics");
    assert_eq!(
        m.instances,
        vec![("contract".to_string(), "running".to_string(), 2)]
    );
    assert_eq!(
        m.attempts,
        vec![("contract".to_string(), "ok".to_string(), 1)]
    );
    let [(workflow, seconds)] = &m.attempt_seconds[..] else {
        panic!("one workflow's histogram: {:?}", m.attempt_seconds);
    };
    assert_eq!((workflow.as_str(), seconds.count), ("contract", 1));
    assert!((seconds.sum - 3.0).abs() < 0.01, "{}", seconds.sum);
    let le: Vec<(f64, u64)> = metrics::BUCKETS
        .iter()
        .copied()
        .zip(seconds.le.iter().copied())
        .collect();
    assert!(le.iter().all(|&(b, n)| n == u64::from(b >= 3.0)), "{le:?}");
    // Heartbeats: kept by name, the newest wins; a stopped worker is gone.
    store.heartbeat("w1", 5).await.expect("beat");
    store.heartbeat("w2", 6).await.expect("beat");
    store.heartbeat("w1", 5).await.expect("beat");
    let m = store.metrics().await.expect("metrics");
    let names: Vec<&str> = m.workers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["w1", "w2"]);
    assert!(
        m.workers
            .iter()
            .all(|(_, ms)| (now_ms() - ms).abs() < 60_000)
    );
    store.worker_gone("w1").await.expect("gone");
    let m = store.metrics().await.expect("metrics");
    assert_eq!(m.workers.len(), 1);
}
