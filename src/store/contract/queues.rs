//! The queue cases of the storage contract (`queue:`): admission at
//! creation, under a fence and by a worker, in the key's order; a slot
//! freed by an end and by a dead holder (revoked, its epoch raised, its
//! writes refused); an expired lease that holds a slot refuses writes;
//! `on_full: skip` and `debounce` at creation; a rate's window.

use super::*;
use crate::store::queue::{Admission, Blocked, OnFull, QueueLimits, RateLimit};

/// An instance of key `k`, created `at(created)`, queued, priority `prio`.
fn queued(id: &str, created: i64, prio: i64, limits: &QueueLimits) -> InstanceRow {
    let mut row = instance(id, created);
    row.status = InstanceStatus::Queued;
    row.queue = Some(QueuePlace {
        key: "k".into(),
        priority: prio,
        limits: limits.clone(),
        admitted: false,
    });
    row
}

fn one_at_a_time() -> QueueLimits {
    QueueLimits {
        concurrency: Some(1),
        ..QueueLimits::default()
    }
}

async fn status(store: &Store, id: &str) -> (InstanceStatus, bool) {
    let i = store.instance(&id.into()).await.expect("instance");
    (i.status, i.queue.expect("queue").admitted)
}

pub(super) async fn queue_admission(store: &mut Store) {
    let l = one_at_a_time();
    // Made by a holder with room: admitted at once, and running.
    create(store, &leased(queued("q1", 1, 5, &l), "one")).await;
    assert_eq!(status(store, "q1").await, (InstanceStatus::Running, true));
    // The next waits (its holder asks under the fence), in line.
    create(store, &leased(queued("q2", 2, 5, &l), "two")).await;
    create(store, &queued("q3", 3, 5, &l)).await;
    create(store, &queued("q0", 4, 1, &l)).await;
    assert_eq!(status(store, "q2").await, (InstanceStatus::Queued, false));
    let (f2, _) = take(store, "q2", "two").await;
    assert_eq!(
        store.admit(&f2, &|_| true).await.expect("admit"),
        Admission::Waiting {
            key: "k".into(),
            position: 2,
            ahead: 1,
            blocked: Blocked::Full {
                admitted: 1,
                limit: 1
            }
        }
    );
    // q1 ends: its slot frees; the worker's admission takes q0 (priority 1),
    // whose place is before q2's.
    let (f1, _) = take(store, "q1", "one").await;
    store
        .commit(
            &f1,
            &[
                Write::Status {
                    status: InstanceStatus::Completed,
                    wake_at: None,
                    waiting_event: None,
                    error: None,
                },
                Write::Release,
            ],
        )
        .await
        .expect("end q1");
    assert_eq!(
        status(store, "q1").await,
        (InstanceStatus::Completed, false)
    );
    let admitted = store
        .admit_queued("worker", 60_000, 10, &|_| true)
        .await
        .expect("admit queued");
    assert_eq!(admitted, vec![InstanceId::from("q0")]);
    assert_eq!(status(store, "q0").await, (InstanceStatus::Running, true));
    // q0's worker dies: its slot goes to q2, which revokes it; what q0's
    // holder writes then is refused.
    let (f0, _) = take(store, "q0", "worker").await;
    let holder_alive = |owner: &str| owner != "worker";
    let (f2, _) = take(store, "q2", "two").await;
    assert_eq!(
        store.admit(&f2, &holder_alive).await.expect("admit"),
        Admission::Admitted
    );
    assert_eq!(status(store, "q0").await, (InstanceStatus::Queued, false));
    assert!(matches!(
        store.commit(&f0, &[Write::Reopen]).await,
        Err(StoreError::Fenced { .. })
    ));
    // q3 waits behind q0 (older) for q2's slot; nothing is admitted now.
    assert!(
        store
            .admit_queued("worker", 60_000, 10, &|_| true)
            .await
            .expect("admit queued")
            .is_empty()
    );
}

pub(super) async fn queue_expired_slot_refuses_writes(store: &mut Store) {
    let l = one_at_a_time();
    create(store, &leased(queued("x1", 1, 5, &l), "one")).await;
    let (f, _) = take(store, "x1", "one").await;
    store
        .commit(&f, &[Write::Reopen])
        .await
        .expect("live lease");
    // A lease that expired while its instance held a slot: refused, even
    // under the current epoch (the slot may be given away any moment).
    store.renew(&f, -1).await.expect("renew into the past");
    assert!(matches!(
        store.commit(&f, &[Write::Reopen]).await,
        Err(StoreError::Fenced { .. })
    ));
    // Renewed in time, it writes again.
    store.renew(&f, 60_000).await.expect("renew");
    store.commit(&f, &[Write::Reopen]).await.expect("renewed");
}

pub(super) async fn queue_arrivals(store: &mut Store) {
    let skip = QueueLimits {
        on_full: OnFull::Skip,
        ..one_at_a_time()
    };
    create(store, &leased(queued("s1", 1, 5, &skip), "one")).await;
    create(store, &leased(queued("s2", 2, 5, &skip), "two")).await;
    let s2 = store.instance(&"s2".into()).await.expect("s2");
    assert_eq!(s2.status, InstanceStatus::Skipped);
    assert!(s2.error.unwrap().contains("queue `k` is full"));
    // Debounce: each newcomer skips the queued one made within the period.
    let debounce = QueueLimits {
        concurrency: None,
        debounce_ms: Some(3_600_000),
        ..QueueLimits::default()
    };
    let d = |id: &str| {
        let mut row = queued(id, 0, 5, &debounce);
        row.queue.as_mut().unwrap().key = "d".into();
        row.created_at = Timestamp::now();
        row.wake_at = Some(Timestamp::from_ms(now_ms() + 3_600_000));
        row
    };
    let (d1, d2) = (d("d1"), d("d2"));
    create(store, &d1).await;
    create(store, &d2).await;
    let d1 = store.instance(&"d1".into()).await.expect("d1");
    assert_eq!(d1.status, InstanceStatus::Skipped);
    assert!(d1.error.unwrap().contains("instance d2"));
    assert_eq!(status(store, "d2").await, (InstanceStatus::Queued, false));
    // Not before its period: a worker leaves it.
    assert!(
        store
            .admit_queued("worker", 60_000, 10, &|_| true)
            .await
            .expect("admit")
            .is_empty()
    );
    // A rate of 1 a minute: the first admitted, the second waits for the window.
    let rate = QueueLimits {
        rate: Some(RateLimit {
            count: 1,
            period_ms: 60_000,
        }),
        ..QueueLimits::default()
    };
    let r = |id: &str, n| {
        let mut row = queued(id, n, 5, &rate);
        row.queue.as_mut().unwrap().key = "r".into();
        row
    };
    create(store, &r("r1", 1)).await;
    create(store, &r("r2", 2)).await;
    let admitted = store
        .admit_queued("worker", 60_000, 10, &|_| true)
        .await
        .expect("admit");
    assert_eq!(admitted, vec![InstanceId::from("r1")]);
    let (f, _) = take(store, "r2", "two").await;
    assert!(matches!(
        store.admit(&f, &|_| true).await.expect("admit"),
        Admission::Waiting {
            blocked: Blocked::Rate { count: 1, .. },
            ..
        }
    ));
}

pub(super) async fn step_locks(store: &mut Store) {
    for id in ["l1", "l2"] {
        create(store, &leased(instance(id, 1), "one")).await;
    }
    let (f1, _) = take(store, "l1", "one").await;
    let (f2, _) = take(store, "l2", "two").await;
    let alive = |_: &str| true;
    assert!(
        store
            .take_lock(&f1, "db", 1, "m", &alive)
            .await
            .expect("take")
    );
    // Taken again by its holder: held; by another: busy, even a unit of
    // the holder's own instance.
    assert!(
        store
            .take_lock(&f1, "db", 1, "m", &alive)
            .await
            .expect("again")
    );
    assert!(
        !store
            .take_lock(&f1, "db", 1, "n", &alive)
            .await
            .expect("busy")
    );
    assert!(
        !store
            .take_lock(&f2, "db", 1, "m", &alive)
            .await
            .expect("busy")
    );
    assert!(
        store
            .take_lock(&f2, "db", 2, "m", &alive)
            .await
            .expect("room")
    );
    // Given back with the attempt's end.
    store
        .commit(&f1, &[Write::ReleaseLock { key: "m".into() }])
        .await
        .expect("release");
    store
        .commit(&f2, &[Write::ReleaseLocks])
        .await
        .expect("release all");
    assert!(
        store
            .take_lock(&f1, "db", 1, "n", &alive)
            .await
            .expect("free")
    );
    // A holder whose process is gone: its place is taken, and it is fenced.
    let dead = |owner: &str| owner != "one";
    assert!(
        store
            .take_lock(&f2, "db", 1, "m", &dead)
            .await
            .expect("taken over")
    );
    assert!(matches!(
        store.commit(&f1, &[Write::Reopen]).await,
        Err(StoreError::Fenced { .. })
    ));
    // A lease that expired while holding a lock: its writes are refused.
    store.renew(&f2, -1).await.expect("renew into the past");
    assert!(matches!(
        store.commit(&f2, &[Write::Reopen]).await,
        Err(StoreError::Fenced { .. })
    ));
    assert!(matches!(
        store.take_lock(&f2, "other", 1, "m", &alive).await,
        Err(StoreError::Fenced { .. })
    ));
}

/// A key's line as `wf queue show` reads it: the admitted ones, oldest
/// first, then the queued ones in admission order (priority, then age),
/// each cut at the limit with its total.
pub(super) async fn queue_line_in_order(store: &mut Store) {
    let unlimited = QueueLimits::default();
    let mut admitted = queued("l-in", 1, 5, &unlimited);
    admitted.status = InstanceStatus::Waiting;
    admitted.queue.as_mut().expect("queue").admitted = true;
    create(store, &admitted).await;
    for (id, created, prio) in [
        ("l-late", 4, 5),
        ("l-urgent", 5, 0),
        ("l-early", 2, 5),
        ("l-mid", 3, 5),
    ] {
        create(store, &queued(id, created, prio, &unlimited)).await;
    }
    let line = store.queue_line("k", 3).await.expect("line");
    let ids = |m: &[crate::store::queue_line::Member]| -> Vec<String> {
        m.iter().map(|m| m.id.to_string()).collect()
    };
    assert_eq!(ids(&line.admitted), ["l-in"]);
    assert_eq!(line.admitted_total, 1);
    assert_eq!(ids(&line.waiting), ["l-urgent", "l-early", "l-mid"]);
    assert_eq!(line.waiting_total, 4);
    assert_eq!(line.waiting[0].priority, 0);
    assert_eq!(line.waiting[0].status, InstanceStatus::Queued);
    assert_eq!(
        store.queue_line("nope", 3).await.expect("line"),
        crate::store::queue_line::QueueLine::default()
    );
}
