//! A child made and opened in its parent's commit (`Write::Child`): the
//! commit that makes a child its parent runs in its process also records
//! the child's first run and attempts, under the child's own fence; a
//! fence of the child that does not hold refuses the whole commit. And a
//! commit left for the next synced one (`Store::commit_before_sync`) is
//! applied and seen at once.

use super::*;

/// A child of `parent`'s step `c` (attempt 1), made leased to `owner`.
fn child_of(parent: &str, id: &str, owner: &str) -> InstanceRow {
    let mut row = leased(instance(id, 1), owner);
    row.parent = Some(ParentRef {
        id: parent.into(),
        key: "c".into(),
        attempt: 1,
    });
    row.depth = 1;
    row
}

/// The child's writes of its first run, under the fence `epoch`.
fn opened(child: &str, owner: &str, epoch: i64) -> Write {
    Write::Child(Box::new(ChildWrites {
        fence: Fence {
            instance: child.into(),
            owner: owner.into(),
            epoch,
        },
        writes: first_run(),
    }))
}

pub(super) async fn children_opened_in_the_parents_commit(store: &mut Store) {
    create(store, &leased(instance("p1", 0), "alpha")).await;
    let (fence, _) = take(store, "p1", "alpha").await;
    let made = |child: &str| Write::CreateChild(Box::new(child_of("p1", child, "alpha")));
    let counts = |v: &InstanceView| (v.runs.len(), v.steps.len(), v.attempts.len());

    // Made and opened in one commit, with the parent's own writes.
    let mut writes = first_run();
    writes.extend([made("c1"), opened("c1", "alpha", 0)]);
    store.commit(&fence, &writes).await.expect("commit");
    let child = store.view(&"c1".into(), true).await.expect("the child");
    assert_eq!(counts(&child), (1, 1, 1));
    assert_eq!(child.instance.state, json!({"n": 1}));
    assert_eq!(
        child.instance.parent.as_ref().map(|p| p.id.as_str()),
        Some("p1")
    );
    let parent = store.view(&"p1".into(), true).await.expect("the parent");
    assert_eq!(counts(&parent), (1, 1, 1));

    // A child's fence that does not hold refuses the whole commit: neither
    // the parent's writes nor the child are there.
    let writes = vec![start("b", 1, 1, 2), made("c2"), opened("c2", "alpha", 7)];
    let r = store.commit(&fence, &writes).await;
    assert!(matches!(r, Err(StoreError::Fenced { .. })), "{r:?}");
    assert!(store.view(&"c2".into(), true).await.is_err(), "c2 was made");
    let parent = store.view(&"p1".into(), true).await.expect("the parent");
    assert_eq!(counts(&parent), (1, 1, 1));

    // Left for the next synced commit: applied, and seen by every
    // connection, when it returned (a child run on another goes on from it).
    let writes = vec![start("b", 1, 1, 2), made("c3"), opened("c3", "alpha", 0)];
    store
        .commit_before_sync(&fence, &writes)
        .await
        .expect("before sync");
    let child = store.view(&"c3".into(), true).await.expect("the child");
    assert_eq!(counts(&child), (1, 1, 1));
    let parent = store.view(&"p1".into(), true).await.expect("the parent");
    assert_eq!(parent.attempts.len(), 2);
    // Refused as a synced one is.
    let (stale, _) = (fence.clone(), take(store, "p1", "beta").await);
    let r = store
        .commit_before_sync(&stale, &[start("d", 1, 1, 3)])
        .await;
    assert!(is_fenced(&r, "p1", "beta"), "{r:?}");
}

/// A child's last commit made by its parent's (`Write::Child`, the end its
/// run handed over), with the parent's step taking the event it delivers
/// by name (`Write::TakeEventNamed`), its id unknown until then. A
/// child's fence that does not hold refuses the whole commit, and the
/// refusal names the child (the parent's run stops, rather than taking
/// itself for lost); a parent's that does not names the parent.
pub(super) async fn children_ended_in_the_parents_commit(store: &mut Store) {
    create(store, &leased(instance("p2", 0), "alpha")).await;
    let (fence, _) = take(store, "p2", "alpha").await;
    let made = |child: &str| Write::CreateChild(Box::new(child_of("p2", child, "alpha")));
    let mut writes = first_run();
    writes.extend([
        made("c4"),
        opened("c4", "alpha", 0),
        made("c5"),
        opened("c5", "alpha", 0),
    ]);
    store.commit(&fence, &writes).await.expect("commit");
    let child_fence = |child: &str| Fence {
        instance: child.into(),
        owner: "alpha".into(),
        epoch: 0,
    };
    // The child's end, as `drive::close_run` writes it.
    let ended = |child: &str| {
        Write::Child(Box::new(ChildWrites {
            fence: child_fence(child),
            writes: vec![
                Write::NotifyParent {
                    parent: "p2".into(),
                    name: format!("child:{child}"),
                    payload: json!({"status": "completed", "outputs": {"n": 1}}),
                },
                Write::Status {
                    status: InstanceStatus::Completed,
                    wake_at: None,
                    waiting_event: None,
                    error: None,
                },
                Write::FinishRun {
                    run: 1,
                    outcome: RunEnd::Completed,
                },
                Write::Release,
            ],
        }))
    };
    let taken = |child: &str| {
        let mut done = step("c", StepStatus::Completed, 1);
        done.output = json!({"n": 1});
        [
            ended(child),
            Write::TakeEventNamed {
                name: format!("child:{child}"),
                key: "c".into(),
            },
            Write::Step(Box::new(done)),
        ]
    };

    store.commit(&fence, &taken("c4")).await.expect("commit");
    let child = store.view(&"c4".into(), true).await.expect("the child");
    assert_eq!(child.instance.status, InstanceStatus::Completed);
    assert_eq!(child.instance.lease_expires_ms, None, "its lease given up");
    let parent = store.view(&"p2".into(), true).await.expect("the parent");
    let shown: Vec<_> = parent
        .events
        .iter()
        .map(|e| (e.name.as_str(), e.consumed_by.as_deref()))
        .collect();
    assert_eq!(shown, [("child:c4", Some("c"))]);
    let (_, polled) = store.poll(&"p2".into()).await.expect("poll");
    assert!(polled.is_empty(), "taken, yet delivered: {polled:?}");

    // c5 taken over meanwhile: its end is refused, and so is the parent's
    // commit that holds it, naming c5 and its holder.
    take(store, "c5", "beta").await;
    let before = store.view(&"p2".into(), true).await.expect("the parent");
    let r = store.commit(&fence, &taken("c5")).await;
    assert!(is_fenced(&r, "c5", "beta"), "{r:?}");
    let r = store.commit_before_sync(&fence, &taken("c5")).await;
    assert!(is_fenced(&r, "c5", "beta"), "{r:?}");
    let after = store.view(&"p2".into(), true).await.expect("the parent");
    assert_eq!(after.events.len(), before.events.len());
    assert_eq!(after.steps.len(), before.steps.len());
    let child = store.view(&"c5".into(), true).await.expect("the child");
    assert_eq!(child.instance.status, InstanceStatus::Running);
    // The parent's fence holds: its commit without that end is made.
    store
        .commit(&fence, &[start("d", 1, 1, 3)])
        .await
        .expect("commit");

    // The parent taken over: the refusal names the parent.
    take(store, "p2", "gamma").await;
    let r = store.commit(&fence, &taken("c5")).await;
    assert!(is_fenced(&r, "p2", "gamma"), "{r:?}");
}
