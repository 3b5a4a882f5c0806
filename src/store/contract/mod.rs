//! The storage contract: what every backend of [`Store`] does, written once
//! against `Store` and run on each backend (as obelisk runs one suite on
//! both of its databases). Each case runs on SQLite (a file in a temp dir)
//! and on PostgreSQL (a schema of its own, made afresh, on the tests'
//! server: `WF_TEST_PG`, which `scripts/test` sets for its PostgreSQL pass;
//! without it the PostgreSQL runs say so and pass).
//!
//! The cases: a takeover (the epoch raised, a live holder refused, the
//! history read), a fenced commit (applied, or refused as
//! [`StoreError::Fenced`] with nothing applied, begun or not), the claim of
//! due instances, events (delivered, listed, taken by a step, shown); a
//! schedule's fire, prune, pinned definitions and listings
//! (`lifecycle.rs`), queues (`queues.rs`), the registry and metrics
//! (`registry.rs`), and children opened in their parent's commit
//! (`children.rs`), an upgrade's commit (`upgrades.rs`), and the list's
//! search and counts (`finding.rs`).
//!
//! And the proof that every way a batch of writes reaches a database
//! leaves the same rows (`write_paths`).

mod cache;
mod children;
mod finding;
mod lifecycle;
mod queues;
mod registry;
mod upgrades;
mod write_paths;

use cache::*;
use children::*;
use finding::*;
use lifecycle::*;
use queues::*;
use registry::*;
use upgrades::*;

use super::pg::PgStore;
use super::*;
use serde_json::json;

/// A store of each backend for each case; `sqlite`'s tests run every case
/// on SQLite, `postgres`'s on PostgreSQL (schema `wf_contract_CASE`).
macro_rules! contract {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(#[test]
            fn $case() {
                super::on_sqlite(super::$case);
            })*
        }
        mod postgres {
            $(#[test]
            fn $case() {
                super::on_postgres(stringify!($case), super::$case);
            })*
        }
        /// The same cases through a lent store (`store::shared`).
        mod lent_sqlite {
            $(#[test]
            fn $case() {
                super::on_lent_sqlite(super::$case);
            })*
        }
        mod lent_postgres {
            $(#[test]
            fn $case() {
                super::on_lent_postgres(stringify!($case), super::$case);
            })*
        }
    };
}

contract!(
    take_over,
    fenced_commit,
    claim_due,
    events,
    schedules,
    prune,
    definition_tree,
    list_lineage,
    list_finds_and_counts,
    queue_admission,
    queue_expired_slot_refuses_writes,
    queue_arrivals,
    queue_line_in_order,
    step_locks,
    registry,
    metrics_and_heartbeats,
    children_opened_in_the_parents_commit,
    children_ended_in_the_parents_commit,
    upgrade_commit,
    upgrade_renames,
    upgrade_requeues,
    cache_entries,
);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn on_sqlite(case: impl AsyncFnOnce(&mut Store)) {
    let dir = tempfile::tempdir().expect("tempdir");
    let location = Location::Sqlite(dir.path().join("wf.db"));
    runtime().block_on(async {
        let mut store = Store::open(&location).await.expect("open");
        case(&mut store).await;
    });
}

fn on_postgres(name: &str, case: impl AsyncFnOnce(&mut Store)) {
    runtime().block_on(async {
        let Some(store) = pg_store(&format!("wf_contract_{name}")).await else {
            return;
        };
        case(&mut Store::Postgres(Box::new(store))).await;
    });
}

/// A case on a store lent by connections its calls share (two at most on
/// PostgreSQL, so that calls in turn may go on different ones).
fn on_lent_sqlite(case: impl AsyncFnOnce(&mut Store)) {
    let dir = tempfile::tempdir().expect("tempdir");
    let location = Location::Sqlite(dir.path().join("wf.db"));
    runtime().block_on(async {
        let mut store = Store::Lent(Shared::with_max(location, 1));
        case(&mut store).await;
    });
}

fn on_lent_postgres(name: &str, case: impl AsyncFnOnce(&mut Store)) {
    runtime().block_on(async {
        let Some(store) = pg_store(&format!("wf_contract_lent_{name}")).await else {
            return;
        };
        let location = Location::Postgres(Box::new(store.target().clone()));
        case(&mut Store::Lent(Shared::with_max(location, 2))).await;
    });
}

async fn pg_store(schema: &str) -> Option<PgStore> {
    let store = PgStore::for_test(schema).await;
    if store.is_none() {
        eprintln!("PostgreSQL only (WF_TEST_PG): not run");
    }
    store
}

/// 2026-01-01T00:00:00Z, and `s` seconds after it.
const BASE_MS: i64 = 1_767_225_600_000;

fn at(s: i64) -> Timestamp {
    Timestamp::from_ms(BASE_MS + s * 1000)
}

fn now_ms() -> i64 {
    Timestamp::now().ms()
}

/// An ended span of run 1 of `instance`, with `attributes`.
fn span_row(instance: &InstanceId, attributes: serde_json::Value) -> SpanRow {
    SpanRow {
        trace_id: "ab".repeat(16),
        span_id: "0123456789abcdef".into(),
        parent_span_id: None,
        instance_id: instance.clone(),
        run: 1,
        name: "contract/a".into(),
        kind: "internal".into(),
        start_ns: 1,
        end_ns: 2,
        status: "unset".into(),
        status_message: None,
        attributes,
        links: json!([]),
    }
}

/// An instance of workflow `contract`, created `at(created)`, running,
/// leased to no one.
fn instance(id: &str, created: i64) -> InstanceRow {
    InstanceRow {
        id: id.into(),
        workflow: "contract".into(),
        status: InstanceStatus::Running,
        definition: "name: contract\nsteps: []\n".into(),
        definition_hash: "h-contract".into(),
        workflow_path: "/w/contract.yaml".into(),
        base_dir: "/w".into(),
        inputs: json!({"who": "ana"}),
        state: json!({}),
        error: None,
        wake_at: None,
        waiting_event: None,
        lease_owner: None,
        lease_expires_ms: None,
        created_at: at(created),
        updated_at: at(created),
        parent: None,
        depth: 0,
        labels: Labels::new(),
        queue: None,
        started_by: None,
    }
}

/// `row`, leased to `owner` for a minute.
fn leased(mut row: InstanceRow, owner: &str) -> InstanceRow {
    row.lease_owner = Some(owner.into());
    row.lease_expires_ms = Some(now_ms() + 60_000);
    row
}

/// The definition of the instances of [`instance`].
fn contract_definition(row: &InstanceRow) -> DefinitionRow {
    DefinitionRow {
        hash: row.definition_hash.clone(),
        source: row.definition.clone(),
        step_ids: vec!["a".into(), "b".into()],
        compiled: None,
        children: Default::default(),
    }
}

async fn create(store: &mut Store, row: &InstanceRow) {
    let created = store
        .create_instance(row, &[contract_definition(row)], "", &|_| true)
        .await;
    assert!(created.expect("create"), "{} was taken", row.id);
}

/// Takes `id` over for `owner`, whoever holds it.
async fn take(store: &mut Store, id: &str, owner: &str) -> (Fence, History) {
    store
        .take_over(&id.into(), owner, 60_000, |_| false)
        .await
        .expect("take over")
        .expect("not held")
}

fn step(key: &str, status: StepStatus, attempts: i64) -> StepRow {
    let mut row = StepRow::pending(key, key.split(['[', ':']).next().unwrap_or(key));
    row.status = status;
    row.attempts = attempts;
    row
}

fn start(key: &str, attempt: i64, run: i64, s: i64) -> Write {
    Write::StartAttempt {
        key: key.into(),
        attempt,
        run,
        started_at: at(s),
        span_id: format!("{:016x}", 0xa000 + s * 16 + attempt),
        started_ns: s * 1_000_000_000,
    }
}

fn end(key: &str, attempt: i64, outcome: AttemptOutcome, s: i64) -> Write {
    Write::EndAttempt {
        key: key.into(),
        attempt,
        end: AttemptEnd {
            outcome,
            error_type: None,
            error_message: None,
            exit_code: Some(0),
            finished_at: at(s),
            stdout: format!("{key} said hello\n").into_bytes(),
            stderr: Vec::new(),
        },
    }
}

fn is_fenced(r: &Result<()>, id: &str, holder: &str) -> bool {
    matches!(r, Err(StoreError::Fenced { id: i, holder: Some(h) }) if i.as_str() == id && h == holder)
}

// ---- the cases ----

async fn take_over(store: &mut Store) {
    let id: InstanceId = "t1".into();
    create(store, &leased(instance("t1", 0), "alpha")).await;
    // Its own lease: taken, the epoch raised, the history read.
    let (f1, h) = take(store, "t1", "alpha").await;
    assert_eq!(
        f1,
        Fence {
            instance: id.clone(),
            owner: "alpha".into(),
            epoch: 1
        }
    );
    assert_eq!(h.instance.id, id);
    assert_eq!(h.instance.inputs, json!({"who": "ana"}));
    assert_eq!(h.instance.definition, "name: contract\nsteps: []\n");
    assert!(h.steps.is_empty() && h.open.is_empty() && h.events.is_empty());
    assert_eq!((h.last_run, h.cancel_requested), (0, CancelRequest::None));
    // A live holder keeps it; one that is gone does not.
    let refused = store.take_over(&id, "beta", 60_000, |h| h == "alpha").await;
    assert_eq!(refused.expect("take over").map(|_| ()), Err("alpha".into()));
    let (f2, _) = take(store, "t1", "beta").await;
    assert_eq!(f2.epoch, f1.epoch + 1);
    // The first fence is spent: its renewal and its commit are refused.
    let renewed = store.renew(&f1, 60_000).await;
    assert!(is_fenced(&renewed, "t1", "beta"), "{renewed:?}");
    let r = store.commit(&f1, &[Write::State(json!(0))]).await;
    assert!(is_fenced(&r, "t1", "beta"), "{r:?}");
    store.renew(&f2, 60_000).await.expect("renew");
    // The lease of an instance not there (yet: a child whose parent's
    // commit that makes it is under way) is not lost: the renewal fails,
    // and is tried again.
    let unmade = Fence {
        instance: "t-unmade".into(),
        owner: "beta".into(),
        epoch: 0,
    };
    let renewed = store.renew(&unmade, 60_000).await;
    assert!(
        renewed.is_err() && !matches!(renewed, Err(StoreError::Fenced { .. })),
        "{renewed:?}"
    );
    // What the history holds after a run that died with an attempt open.
    store.commit(&f2, &first_run()).await.expect("commit");
    let (f3, h) = take(store, "t1", "gamma").await;
    assert_eq!(f3.epoch, f2.epoch + 1);
    assert_eq!((h.last_run, h.abandoned_runs.clone()), (1, vec![1]));
    assert_eq!(h.instance.state, json!({"n": 1}));
    assert_eq!(h.steps.len(), 1);
    assert_eq!(
        (h.steps[0].key.as_str(), h.steps[0].status),
        ("a", StepStatus::Running)
    );
    let open: Vec<_> = h
        .open
        .iter()
        .map(|o| (o.key.as_str(), o.attempt, o.run))
        .collect();
    assert_eq!(open, [("a", 1, 1)]);
    assert_eq!(
        h.open[0].span,
        Some((format!("{:016x}", 0xa011), 1_000_000_000))
    );
    assert_eq!(h.traces[&1], ("ab".repeat(16), "cd".repeat(8), None, 7));
    // Released: free, and the last holder still named.
    store.release(&f3).await.expect("release");
    let row = store.instance(&id).await.expect("instance");
    assert_eq!(
        (row.lease_owner.as_deref(), row.lease_expires_ms),
        (Some("gamma"), None)
    );
    let missing = store.take_over(&"nope".into(), "a", 1000, |_| false).await;
    assert!(
        matches!(missing, Err(StoreError::NotFound(_))),
        "{missing:?}"
    );
}

/// Run 1 opened, with a fixed trace.
fn start_run() -> Write {
    Write::StartRun {
        run: 1,
        trace: ("ab".repeat(16), "cd".repeat(8), None, 7),
        restart_from: None,
        definition_hash: "h-contract".into(),
    }
}

/// Run 1 opened and its step `a` started, the state moved on: a history
/// whose runner died with an attempt open.
fn first_run() -> Vec<Write> {
    vec![
        start_run(),
        start("a", 1, 1, 1),
        Write::Step(Box::new(step("a", StepStatus::Running, 1))),
        Write::State(json!({"n": 1})),
    ]
}

async fn fenced_commit(store: &mut Store) {
    let id: InstanceId = "f1".into();
    create(store, &leased(instance("f1", 0), "alpha")).await;
    let (stale, _) = take(store, "f1", "alpha").await;
    let (fence, _) = take(store, "f1", "beta").await;
    let writes = || {
        let mut writes = first_run();
        writes.push(Write::Status {
            status: InstanceStatus::Sleeping,
            wake_at: Some(at(60)),
            waiting_event: None,
            error: None,
        });
        writes
    };
    // (A lease's expiry on PostgreSQL is the server's time left read by
    // this process's clock: it moves by a millisecond between two reads.)
    let unleased = |mut v: InstanceView| {
        v.instance.lease_expires_ms = None;
        format!("{v:?}")
    };
    let before = unleased(store.view(&id, true).await.expect("view"));
    // Refused whole, begun or not.
    let r = store.commit(&stale, &writes()).await;
    assert!(is_fenced(&r, "f1", "beta"), "{r:?}");
    let r = match store.begin_commit(&stale, writes()).await {
        Ok(pending) => pending.done().await,
        Err(e) => Err(e),
    };
    assert!(is_fenced(&r, "f1", "beta"), "{r:?}");
    let after = unleased(store.view(&id, true).await.expect("view"));
    assert_eq!(after, before);
    // The holder's commit applies.
    let pending = store.begin_commit(&fence, writes()).await.expect("begin");
    pending.done().await.expect("commit");
    let view = store.view(&id, true).await.expect("view");
    assert_eq!(view.instance.status, InstanceStatus::Sleeping);
    assert_eq!(view.instance.wake_at, Some(at(60)));
    assert_eq!(view.instance.state, json!({"n": 1}));
    assert_eq!(
        (view.runs.len(), view.steps.len(), view.attempts.len()),
        (1, 1, 1)
    );
    // The process group's record (not synced) is fenced too.
    let tag = |pgid| ProcessTag {
        host: "host/boot".into(),
        pgid,
        start: 5,
    };
    let group = |pgid| {
        vec![Write::AttemptProcess {
            key: "a".into(),
            attempt: 1,
            tag: tag(pgid),
        }]
    };
    // (PostgreSQL does not wait for it: a refusal shows in what is stored.)
    let _ = store.commit_unsynced(&stale, &group(11)).await;
    let (fence, h) = take(store, "f1", "beta").await;
    assert_eq!(h.open[0].process, None);
    store
        .commit_unsynced(&fence, &group(12))
        .await
        .expect("record");
    let (fence, h) = take(store, "f1", "beta").await;
    assert_eq!(h.open[0].process, Some(tag(12)));
    // Spans are marked exported under the fence.
    let span = span_row(&id, json!({"k": "v"}));
    let spans = vec![Write::Span(Box::new(span.clone()))];
    store.commit(&fence, &spans).await.expect("span");
    let r = store
        .mark_exported(&stale, std::slice::from_ref(&span))
        .await;
    assert!(is_fenced(&r, "f1", "beta"), "{r:?}");
    assert_eq!(
        store
            .unexported_spans(&id, None, 10)
            .await
            .expect("spans")
            .len(),
        1
    );
    store.mark_exported(&fence, &[span]).await.expect("mark");
    assert!(
        store
            .unexported_spans(&id, None, 10)
            .await
            .expect("spans")
            .is_empty()
    );
}

async fn claim_due(store: &mut Store) {
    let past = Some(at(0));
    let future = Some(Timestamp::from_ms(now_ms() + 86_400_000));
    let with = |id: &str, n, status, wake_at| {
        let mut row = instance(id, n);
        row.status = status;
        row.wake_at = wake_at;
        row
    };
    use InstanceStatus::{Completed, Running, Sleeping, Waiting};
    let mut waiting = with("c3", 3, Waiting, None);
    waiting.waiting_event = Some("go,stop".into());
    let mut unheard = with("c4", 4, Waiting, None);
    unheard.waiting_event = Some("go".into());
    let mut expired = with("c9", 9, Running, None);
    expired.lease_owner = Some("dead".into());
    expired.lease_expires_ms = Some(now_ms() - 1000);
    for row in [
        with("c1", 1, Sleeping, past),
        with("c2", 2, Sleeping, future),
        waiting,
        unheard,
        leased(with("c5", 5, Running, None), "other"),
        with("c6", 6, Sleeping, past),
        with("c7", 7, Completed, None),
        with("c8", 8, Sleeping, past),
        expired,
    ] {
        create(store, &row).await;
    }
    store
        .deliver_event(
            &"c3".into(),
            "stop",
            &json!({}),
            None,
            false,
            &tested_action(),
        )
        .await
        .expect("deliver");
    // `go` waited for by c4 in another letter case: not its event.
    store
        .deliver_event(
            &"c4".into(),
            "GO",
            &json!({}),
            None,
            false,
            &tested_action(),
        )
        .await
        .expect("deliver");
    // A fence taken before the claim is spent by it.
    let (early, _) = take(store, "c8", "early").await;
    store.release(&early).await.expect("release");
    let due: Vec<String> = store
        .due_instances()
        .await
        .expect("due")
        .into_iter()
        .map(|d| d.id.to_string())
        .collect();
    assert_eq!(due, ["c1", "c3", "c5", "c6", "c8", "c9"]);
    let claimed = store.claim_due("worker", 30_000, 10, &["c6".into()]).await;
    let ids = |v: Vec<InstanceId>| v.into_iter().map(|i| i.to_string()).collect::<Vec<_>>();
    assert_eq!(ids(claimed.expect("claim")), ["c1", "c3", "c8", "c9"]);
    for id in ["c1", "c3", "c8", "c9"] {
        let row = store.instance(&id.into()).await.expect("instance");
        assert_eq!(row.lease_owner.as_deref(), Some("worker"), "{id}");
        let left = row.lease_expires_ms.expect("leased") - now_ms();
        assert!((20_000..=31_000).contains(&left), "{id}: {left} ms left");
    }
    let r = store.commit(&early, &[Write::State(json!(1))]).await;
    assert!(is_fenced(&r, "c8", "worker"), "{r:?}");
    // Held now: claimed once; the skipped one is left for the next claim.
    let again = store.claim_due("other", 30_000, 10, &["c6".into()]).await;
    assert!(again.expect("claim").is_empty());
    let one = store.claim_due("other", 30_000, 1, &[]).await;
    assert_eq!(ids(one.expect("claim")), ["c6"]);
}

async fn events(store: &mut Store) {
    let id: InstanceId = "e1".into();
    let mut row = leased(instance("e1", 0), "alpha");
    row.status = InstanceStatus::Waiting;
    row.waiting_event = Some("approved".into());
    create(store, &row).await;
    let (fence, _) = take(store, "e1", "alpha").await;
    let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let payload = json!({"ok": true, "by": "ana"});
    store
        .deliver_event(&id, "approved", &payload, Some(tp), true, &tested_action())
        .await
        .expect("deliver");
    store
        .deliver_event(&id, "other", &json!({}), None, false, &tested_action())
        .await
        .expect("deliver");
    let missing = store
        .deliver_event(
            &"nope".into(),
            "x",
            &json!({}),
            None,
            false,
            &tested_action(),
        )
        .await;
    assert!(missing.is_err(), "an event for no instance: {missing:?}");
    let listed = store.events_after(&id, 0).await.expect("events");
    let names: Vec<_> = listed.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["approved", "other"]);
    assert!(listed[0].id < listed[1].id);
    let got: serde_json::Value = serde_json::from_str(&listed[0].payload).expect("JSON");
    assert_eq!(got, payload);
    assert_eq!(listed[0].traceparent.as_deref(), Some(tp));
    assert_eq!(listed[1].traceparent, None);
    // What a run polls: the same events, and no cancel request.
    let (cancel, polled) = store.poll(&id).await.expect("poll");
    assert_eq!(cancel, CancelRequest::None);
    assert_eq!(
        polled
            .iter()
            .map(|e| (e.id, &e.name, &e.payload, &e.traceparent))
            .collect::<Vec<_>>(),
        listed
            .iter()
            .map(|e| (e.id, &e.name, &e.payload, &e.traceparent))
            .collect::<Vec<_>>()
    );
    let after = store.events_after(&id, listed[0].id).await.expect("events");
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].name, "other");
    // `wake`: made due at once.
    let view = store.view(&id, false).await.expect("view");
    assert!(view.instance.wake_at.is_some());
    assert!(view.events.iter().all(|e| e.consumed_by.is_none()));
    // Taken by a waiting step, in the commit of its result.
    let mut done = step("wait", StepStatus::Completed, 1);
    done.output = payload.clone();
    let writes = [
        Write::TakeEvent {
            event: listed[0].id,
            key: "wait".into(),
        },
        Write::Step(Box::new(done)),
    ];
    store.commit(&fence, &writes).await.expect("commit");
    let left = store.events_after(&id, 0).await.expect("events");
    let names: Vec<_> = left.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["other"]);
    let view = store.view(&id, false).await.expect("view");
    let shown: Vec<_> = view
        .events
        .iter()
        .map(|e| (e.name.as_str(), e.consumed_by.as_deref()))
        .collect();
    assert_eq!(shown, [("approved", Some("wait")), ("other", None)]);
    let (_, h) = take(store, "e1", "beta").await;
    let names: Vec<_> = h.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["other"]);
}

/// An action the contract's writes record (a signal by a test).
fn tested_action() -> crate::store::ActionRow {
    crate::store::ActionRow::global(
        crate::vocab::ActionKind::Signal,
        &crate::vocab::Actor::Token("contract".into()),
        "",
    )
}
