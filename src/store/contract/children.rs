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
