//! `cache:` entries (issue 60): kept in the commit that records the
//! attempt they came from, found by workflow, step, key and part until they
//! expire, replaced by a later one, outliving a prune of the instance they
//! came from (which removes the expired ones), and a `cached` attempt's
//! source read back with its attempts.

use super::*;

fn entry(key: &str, part: &str, attempt: i64, expires: Option<Timestamp>) -> CacheEntry {
    CacheEntry {
        workflow: "site".into(),
        step_id: "build".into(),
        key: key.into(),
        part: part.into(),
        from: CachedFrom {
            instance: "c1".into(),
            attempt,
        },
        unit_key: "build".into(),
        output: json!({"stdout": format!("built {attempt}"), "json": null}),
        state_patch: json!({"built": attempt}),
        created_at: at(1),
        expires_at: expires,
    }
}

pub(super) async fn cache_entries(store: &mut Store) {
    use InstanceStatus::Completed;
    let mut c1 = leased(instance("c1", 1), "alpha");
    c1.status = Completed;
    create(store, &c1).await;
    create(store, &leased(instance("c2", 2), "beta")).await;
    let (f1, _) = take(store, "c1", "alpha").await;
    let far = Timestamp::from_ms(now_ms() + 3_600_000);
    let writes = [
        start_run(),
        start("build", 1, 1, 1),
        end("build", 1, AttemptOutcome::Ok, 2),
        Write::PutCache(Box::new(entry("k1", "", 1, Some(far)))),
        Write::PutCache(Box::new(entry("k1", "p", 1, None))),
        Write::PutCache(Box::new(entry("old", "", 1, Some(at(5))))),
        Write::Release,
    ];
    store.commit(&f1, &writes).await.expect("commit");
    let now = Timestamp::now();
    let find = |key: &'static str, part: &'static str| ("site", "build", key, part);
    let found = store
        .cache_entry(find("k1", ""), now)
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(found, entry("k1", "", 1, Some(far)));
    assert!(
        store
            .cache_entry(find("k1", "p"), now)
            .await
            .expect("read")
            .is_some()
    );
    assert!(
        store
            .cache_entry(find("k2", ""), now)
            .await
            .expect("read")
            .is_none()
    );
    assert!(
        store
            .cache_entry(("site", "other", "k1", ""), now)
            .await
            .expect("read")
            .is_none()
    );
    // Past its time, it is not found.
    assert!(
        store
            .cache_entry(find("old", ""), now)
            .await
            .expect("read")
            .is_none()
    );

    // Another instance's hit names its source; a later completion replaces the entry.
    let (f2, _) = take(store, "c2", "beta").await;
    let writes = [
        start_run(),
        start("build", 1, 1, 3),
        end("build", 1, AttemptOutcome::Cached, 3),
        Write::AttemptCachedFrom {
            key: "build".into(),
            attempt: 1,
            from: CachedFrom {
                instance: "c1".into(),
                attempt: 1,
            },
        },
        Write::PutCache(Box::new(CacheEntry {
            from: CachedFrom {
                instance: "c2".into(),
                attempt: 7,
            },
            ..entry("k1", "p", 7, None)
        })),
    ];
    store.commit(&f2, &writes).await.expect("commit");
    let attempts = store.attempts(&"c2".into()).await.expect("attempts");
    assert_eq!(attempts[0].outcome, Some(AttemptOutcome::Cached));
    assert_eq!(
        attempts[0].cached_from,
        Some(CachedFrom {
            instance: "c1".into(),
            attempt: 1
        })
    );
    let replaced = store
        .cache_entry(find("k1", "p"), now)
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(replaced.from.instance, "c2");

    // A prune of c1 keeps what it made, and removes what expired.
    store
        .prune(
            Timestamp::from_ms(now_ms() + 1000),
            &[Completed],
            100,
            false,
            None,
            &crate::vocab::Actor::Token("contract".into()),
        )
        .await
        .expect("prune");
    assert!(store.instance(&"c1".into()).await.is_err(), "c1 pruned");
    let kept = store
        .cache_entry(find("k1", ""), now)
        .await
        .expect("read")
        .expect("kept after its instance's prune");
    assert_eq!(kept.from.instance, "c1");
    let left = store
        .portable_global(super::super::portable::table("step_cache").expect("table"))
        .await
        .expect("rows")
        .len();
    assert_eq!(left, 2, "the expired entry is gone, the others kept");
}
