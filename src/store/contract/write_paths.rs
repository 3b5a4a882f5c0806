//! Every way a batch of writes reaches a database leaves the same rows:
//! one sequence of batches holding every [`Write`] is applied on SQLite
//! and, on PostgreSQL, as the engine commits it (`commit`, which makes a
//! step's batch one statement; `begin_commit`; `commit_unsynced`, whose
//! process-group record is a statement of its own), grouped (`pg/batch.rs`)
//! and each write its own statement (`pg/write.rs`). What the store reads
//! back, after each batch and at the end, must be the same: only what the
//! store stamps with its own clock (an update's time, a run's start and
//! end, an event's arrival, a lease's expiry) is set aside, once checked to
//! be within the test's time; whether a batch changed the instance's time
//! is kept.

use super::*;
use crate::store::pg::CommitPath;

/// How a batch of [`the_write_paths_leave_the_same_rows`] is committed:
/// as the engine commits it, or on PostgreSQL by one `path`.
#[derive(Debug, Clone, Copy)]
enum Via {
    Engine,
    Pg(CommitPath),
}

/// How the engine commits a batch of the sequence, or what else happens
/// between two batches.
enum Act {
    /// `Store::commit`.
    Commit,
    /// `Store::begin_commit`, then `done` (a batch that starts steps);
    /// on PostgreSQL, one statement.
    Begin,
    /// `Store::commit_unsynced` (a process group's record).
    Unsynced,
    /// Not a batch: `wf cancel` asks (`Store::request_cancel`).
    AskCancel,
}

fn span(id: &str, run: i64, name: &str, n: i64) -> SpanRow {
    SpanRow {
        trace_id: format!("{:032x}", 0xfeed_0000 + run),
        span_id: format!("{:016x}", 0xbeef_0000 + n),
        parent_span_id: (n > 1).then(|| format!("{:016x}", 0xbeef_0001_i64)),
        instance_id: id.into(),
        run,
        name: name.into(),
        kind: "internal".into(),
        start_ns: n * 1000,
        end_ns: n * 1000 + 500,
        status: "unset".into(),
        status_message: None,
        // Whole (the instance's attributes first), or slim as the engine
        // stores them.
        attributes: if n % 2 == 0 {
            json!({"workflow.name": "contract", "workflow.instance.id": id, "n": n})
        } else {
            json!({"n": n, "ok": true, "s": "x\u{0}y"})
        },
        links: json!([]),
    }
}

/// The sequence: every [`Write`], in the batches a run makes, through
/// each statement each backend has for it. `events`: the ids of the two
/// delivered events.
fn batches(id: &str, events: [i64; 2]) -> Vec<(Act, Vec<Write>)> {
    use AttemptOutcome as O;
    use StepStatus as S;
    let trace = |run: i64| {
        (
            format!("{:032x}", 0xfeed_0000 + run),
            format!("{:016x}", 0xbeef_0000 + run),
            (run == 2).then(|| "00f067aa0ba902b7".to_string()),
            run * 1_000_000,
        )
    };
    let row = |key: &str, status, attempts, f: &dyn Fn(&mut StepRow)| {
        let mut r = step(key, status, attempts);
        f(&mut r);
        Write::Step(Box::new(r))
    };
    let status =
        |status, wake_at, waiting_event: Option<&str>, error: Option<&str>| Write::Status {
            status,
            wake_at,
            waiting_event: waiting_event.map(str::to_string),
            error: error.map(str::to_string),
        };
    let tag = |pgid| ProcessTag {
        host: "host/0b5e55ed".into(),
        pgid,
        start: 77 + pgid,
    };
    let failed = |key: &str, attempt, outcome, s| {
        let Write::EndAttempt { mut end, .. } = self::end(key, attempt, outcome, s) else {
            unreachable!()
        };
        end.error_type = Some(ErrorType::Exit(3));
        end.error_message = Some("killed\u{0} by \u{fffe} ☃".into());
        end.exit_code = None;
        end.stdout = b"partial".to_vec();
        end.stderr = b"\x00\xff bytes".to_vec();
        Write::EndAttempt {
            key: key.into(),
            attempt,
            end,
        }
    };
    let mut slim = span(id, 1, "contract/b", 3);
    slim.status = "error".into();
    slim.status_message = Some("boom\u{0}".into());
    let mut client = span(id, 1, "GET", 4);
    client.kind = "client".into();
    client.status = "ok".into();
    client.links =
        json!([{"trace_id": "ab".repeat(16), "span_id": "cd".repeat(8), "attributes": {}}]);
    vec![
        // The run's opening writes with its first attempt.
        (
            Act::Commit,
            vec![
                Write::StartRun {
                    run: 1,
                    trace: trace(1),
                    restart_from: None,
                    definition_hash: "h-contract".into(),
                },
                status(InstanceStatus::Running, None, None, None),
                start("a", 1, 1, 1),
                row("a", S::Running, 1, &|r| r.started_at = Some(at(1))),
                Write::State(json!({"n": 0})),
            ],
        ),
        (
            Act::Unsynced,
            vec![Write::AttemptProcess {
                key: "a".into(),
                attempt: 1,
                tag: tag(10),
            }],
        ),
        // A step's result and the next step's start: one statement on
        // PostgreSQL (the last state only).
        (
            Act::Begin,
            vec![
                end("a", 1, O::Ok, 2),
                row("a", S::Completed, 1, &|r| {
                    r.outcome = Some(O::Ok);
                    r.output = json!({"v": 1, "s": "x\u{0}y"});
                    r.started_at = Some(at(1));
                    r.finished_at = Some(at(2));
                    r.seq = Some(1);
                    r.state_patch = json!({"n": 1}).into();
                }),
                Write::Span(Box::new(span(id, 1, "contract/a", 2))),
                Write::State(json!({"n": 1})),
                start("b", 1, 1, 3),
                row("b", S::Running, 1, &|r| {
                    r.started_at = Some(at(3));
                    r.items = json!([1, "two", null]).into();
                }),
                Write::State(json!({"n": 2})),
            ],
        ),
        // An attempt ended, another started and ended within the batch, a
        // step row written twice (its patch kept), no state.
        (
            Act::Begin,
            vec![
                failed("b", 1, O::Interrupted, 4),
                row("b", S::Retrying, 1, &|r| {
                    r.outcome = Some(O::Interrupted);
                    r.error_type = Some(ErrorType::Exit(3));
                    r.error_message = Some("killed\u{0} by \u{fffe} ☃".into());
                    r.retry_at = Some(at(10));
                    r.items = json!([1, "two", null]).into();
                }),
                start("c", 1, 1, 5),
                end("c", 1, O::Ok, 6),
                row("c", S::Completed, 1, &|r| {
                    r.state_patch = json!({"c": true}).into();
                }),
                row("c", S::Completed, 1, &|r| r.output = json!("again")),
                Write::Span(Box::new(slim)),
                Write::Span(Box::new(client)),
            ],
        ),
        // An event taken; the run waits, then sleeps, and gives the lease up.
        (
            Act::Commit,
            vec![
                start("w", 1, 1, 7),
                Write::TakeEvent {
                    event: events[0],
                    key: "w".into(),
                },
                end("w", 1, O::Ok, 7),
                row("w", S::Completed, 1, &|r| r.output = json!({"ok": true})),
                status(
                    InstanceStatus::Waiting,
                    Some(at(100)),
                    Some("approved,other"),
                    None,
                ),
            ],
        ),
        (
            Act::Commit,
            vec![
                status(InstanceStatus::Sleeping, Some(at(200)), None, None),
                Write::FinishRun {
                    run: 1,
                    outcome: RunEnd::Sleeping,
                },
                Write::Release,
                Write::Outputs(json!({"early": true})),
            ],
        ),
        (Act::AskCancel, vec![]),
        // A restart from `b`, then a run that finds it dead.
        (
            Act::Commit,
            vec![
                Write::Reopen,
                Write::Upgrade(Box::new(UpgradeTo {
                    definitions: vec![DefinitionRow {
                        hash: "h-upgraded".into(),
                        source: "name: contract\nsteps:\n  - id: a\n    run: 'true'\n".into(),
                        step_ids: vec!["a".into(), "b".into()],
                        compiled: None,
                        children: Default::default(),
                    }],
                    definition_hash: "h-upgraded".into(),
                    workflow_path: "/w2/contract.yaml".into(),
                    base_dir: "/w2".into(),
                    inputs: json!({"who": "ana", "tier": "gold"}),
                    renames: Vec::new(),
                    queue: None,
                })),
                Write::StartRun {
                    run: 2,
                    trace: trace(2),
                    restart_from: Some("b".into()),
                    definition_hash: "h-upgraded".into(),
                },
                status(InstanceStatus::Running, None, None, None),
                start("b", 2, 2, 20),
                row("b", S::Running, 2, &|r| r.budget_base = 1),
            ],
        ),
        (
            Act::Commit,
            vec![
                Write::CloseAbandonedRuns,
                Write::StartRun {
                    run: 3,
                    trace: trace(3),
                    restart_from: None,
                    definition_hash: "h-upgraded".into(),
                },
                failed("b", 2, O::Crashed, 29),
                row("b", S::Failed, 2, &|r| {
                    r.outcome = Some(O::Crashed);
                    r.budget_base = 1;
                }),
                start("d", 1, 3, 30),
                row("d", S::Running, 1, &|_| {}),
                start("e", 1, 3, 31),
                end("e", 1, O::Canceled, 32),
                row("e", S::Canceled, 1, &|_| {}),
                Write::TakeEvent {
                    event: events[1],
                    key: "d".into(),
                },
            ],
        ),
        (
            Act::Unsynced,
            vec![Write::AttemptProcess {
                key: "d".into(),
                attempt: 1,
                tag: tag(20),
            }],
        ),
        (
            Act::Commit,
            vec![
                Write::Outputs(json!({"result": "ok\u{0}", "n": [1, 2.5]})),
                Write::State(json!({"n": 3, "nested": {"k": [1, 2]}})),
                status(
                    InstanceStatus::Failed,
                    None,
                    None,
                    Some("step `b` failed\u{0}"),
                ),
                Write::Span(Box::new(span(id, 1, "contract", 1))),
            ],
        ),
    ]
}

/// What the store reads back of the instance after one batch.
#[derive(Debug)]
struct After {
    instance: InstanceRow,
    /// Whether the batch changed the instance's time (`updated_at`).
    touched: bool,
    outputs: Option<serde_json::Value>,
    cancel: CancelRequest,
}

/// Everything the store reads back of the instance: after each batch, and
/// at the end.
#[derive(Debug)]
struct Read {
    trail: Vec<After>,
    view: InstanceView,
    spans: Vec<SpanRow>,
    unexported: Vec<SpanRow>,
    logs: Vec<Option<AttemptLogs>>,
    patches: Vec<(String, serde_json::Value)>,
    outputs: Option<serde_json::Value>,
    cancel: CancelRequest,
    events: Vec<EventRow>,
    traces: Vec<Option<RunTrace>>,
    history: History,
}

/// Applies the sequence to a new instance `w1` of `store`, committing as
/// `via` says; what the store then reads back, and when it began and ended.
async fn apply(store: &mut Store, via: Via) -> (Read, Timestamp, Timestamp) {
    let began = Timestamp::now();
    let id: InstanceId = "w1".into();
    create(store, &leased(instance("w1", 0), "alpha")).await;
    let (fence, _) = take(store, "w1", "alpha").await;
    for (name, payload, tp) in [
        ("approved", json!({"ok": true}), Some("00-ab-cd-01")),
        ("other", json!([]), None),
    ] {
        store
            .deliver_event(&id, name, &payload, tp, false, &super::tested_action())
            .await
            .expect("deliver");
    }
    let events = store.events_after(&id, 0).await.expect("events");
    let mut trail = Vec::new();
    let mut last = at(0);
    for (act, writes) in batches("w1", [events[0].id, events[1].id]) {
        // Apart by more than a millisecond: whether a batch changed the
        // instance's time shows.
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
        let r = match (via, act) {
            (_, Act::AskCancel) => store.request_cancel(&id, CancelRequest::Cancel, None).await,
            (Via::Pg(path), _) => match store {
                Store::Postgres(p) => p.commit_by(path, &fence, &writes).await,
                Store::Sqlite(_) | Store::Lent(_) => unreachable!("a PostgreSQL path on SQLite"),
            },
            (Via::Engine, Act::Commit) => store.commit(&fence, &writes).await,
            (Via::Engine, Act::Unsynced) => store.commit_unsynced(&fence, &writes).await,
            (Via::Engine, Act::Begin) => {
                if matches!(store, Store::Postgres(_)) {
                    assert!(
                        PgStore::one_statement(&writes),
                        "not one statement: {writes:#?}"
                    );
                }
                match store.begin_commit(&fence, writes.clone()).await {
                    Ok(pending) => pending.done().await,
                    Err(e) => Err(e),
                }
            }
        };
        r.unwrap_or_else(|e| panic!("{via:?}: {e}: {writes:#?}"));
        let instance = store.instance(&id).await.expect("instance");
        trail.push(After {
            touched: std::mem::replace(&mut last, instance.updated_at) != instance.updated_at,
            outputs: store.outputs(&id).await.expect("outputs"),
            cancel: store.poll(&id).await.expect("poll").0,
            instance,
        });
    }
    let mut logs = Vec::new();
    for (key, attempt) in [
        ("a", None),
        ("b", Some(1)),
        ("b", None),
        ("c", None),
        ("e", Some(1)),
        ("z", None),
    ] {
        logs.push(store.attempt_logs(&id, key, attempt).await.expect("logs"));
    }
    let mut patches = store.state_patches(&id).await.expect("patches");
    patches.sort_by(|a, b| a.0.cmp(&b.0));
    let mut traces = Vec::new();
    for run in 1..=4 {
        traces.push(store.run_trace(&id, run).await.expect("trace"));
    }
    let polled = store.poll(&id).await.expect("poll");
    let read = Read {
        view: store.view(&id, true).await.expect("view"),
        spans: store.spans(&id).await.expect("spans"),
        unexported: store.unexported_spans(&id, None, 100).await.expect("spans"),
        logs,
        patches,
        outputs: store.outputs(&id).await.expect("outputs"),
        cancel: polled.0,
        events: polled.1,
        traces,
        history: take(store, "w1", "reader").await.1,
        trail,
    };
    (read, began, Timestamp::now())
}

/// `read`, its order fixed where the store promises none (steps, the
/// history's uncounted and unspanned attempts), and the times the store
/// stamps with its own clock set to 0 once checked to be within `window`.
fn normalised(mut read: Read, window: (Timestamp, Timestamp)) -> Read {
    let (from, to) = (window.0.ms() - 1000, window.1.ms() + 1000);
    let stamp = |t: &mut Timestamp| {
        assert!(
            (from..=to).contains(&t.ms()),
            "{t:?} outside the test's time"
        );
        *t = Timestamp::from_ms(0);
    };
    let instances = read.trail.iter_mut().map(|a| &mut a.instance);
    for instance in instances.chain([&mut read.view.instance, &mut read.history.instance]) {
        stamp(&mut instance.updated_at);
        instance.lease_expires_ms = instance.lease_expires_ms.map(|_| 0);
    }
    for run in &mut read.view.runs {
        stamp(&mut run.started_at);
        run.finished_at.as_mut().map(stamp);
    }
    for event in &mut read.view.events {
        stamp(&mut event.received_at);
    }
    for steps in [&mut read.view.steps, &mut read.history.steps] {
        steps.sort_by(|a, b| a.key.cmp(&b.key));
    }
    read.history.uncounted.sort();
    // When the takeover set the lease: this process's clock, never the same.
    assert!(read.history.granted.is_some(), "a takeover says when");
    read.history.granted = None;
    read.history
        .unspanned
        .sort_by(|a, b| (&a.key, a.attempt).cmp(&(&b.key, b.attempt)));
    read
}

/// What the sequence leaves, whatever the backend.
fn check(read: &Read) {
    let v = &read.view;
    assert_eq!(v.instance.status, InstanceStatus::Failed);
    assert_eq!(v.instance.error.as_deref(), Some("step `b` failed\u{0}"));
    assert_eq!(v.instance.state, json!({"n": 3, "nested": {"k": [1, 2]}}));
    assert_eq!(
        read.outputs,
        Some(json!({"result": "ok\u{0}", "n": [1, 2.5]}))
    );
    let runs: Vec<_> = v
        .runs
        .iter()
        .map(|r| (r.number, r.outcome, r.restart_from.as_deref()))
        .collect();
    assert_eq!(
        runs,
        [
            (1, Some(RunEnd::Sleeping), None),
            (2, Some(RunEnd::Crashed), Some("b")),
            (3, None, None),
        ]
    );
    let keys: Vec<_> = v.steps.iter().map(|s| (s.key.as_str(), s.status)).collect();
    assert_eq!(
        keys,
        [
            ("a", StepStatus::Completed),
            ("b", StepStatus::Failed),
            ("c", StepStatus::Completed),
            ("d", StepStatus::Running),
            ("e", StepStatus::Canceled),
            ("w", StepStatus::Completed),
        ]
    );
    assert_eq!(v.steps[2].output, json!("again"));
    assert_eq!(
        read.patches,
        [
            ("a".into(), json!({"n": 1})),
            ("c".into(), json!({"c": true}))
        ]
    );
    assert_eq!(v.attempts.len(), 7);
    assert_eq!(
        read.logs[1],
        Some((1, b"partial".to_vec(), b"\x00\xff bytes".to_vec()))
    );
    let consumed: Vec<_> = v.events.iter().map(|e| e.consumed_by.as_deref()).collect();
    assert_eq!(consumed, [Some("w"), Some("d")]);
    assert_eq!(read.spans.len(), 4);
    assert_eq!(read.spans, read.unexported);
    let h = &read.history;
    assert_eq!((h.last_run, h.abandoned_runs.as_slice()), (3, &[3][..]));
    let open: Vec<_> = h
        .open
        .iter()
        .map(|o| (o.key.as_str(), o.process.as_ref().map(|p| p.pgid)))
        .collect();
    assert_eq!(open, [("d", Some(20))]);
    let unspanned: Vec<_> = h
        .unspanned
        .iter()
        .map(|u| (u.key.as_str(), u.outcome))
        .collect();
    assert_eq!(unspanned, [("e", AttemptOutcome::Canceled)]);
    assert_eq!(h.uncounted, [("b".into(), 1), ("e".into(), 1)]);
    assert_eq!(h.traces.len(), 3);
    assert_eq!(read.cancel, CancelRequest::None);
    assert!(read.events.is_empty(), "both events taken");
    let traces: Vec<_> = read.traces.iter().map(Option::is_some).collect();
    assert_eq!(traces, [true, true, true, false]);
    // After each batch: a state written twice in one batch is its last;
    // the time changes with the instance's state or status only; outputs
    // and a cancel request are cleared by a restart.
    let states: Vec<_> = read
        .trail
        .iter()
        .map(|a| a.instance.state.clone())
        .collect();
    assert_eq!(
        &states[..3],
        [json!({"n": 0}), json!({"n": 0}), json!({"n": 2})]
    );
    let touched: Vec<_> = read.trail.iter().map(|a| a.touched).collect();
    let expected = [
        true, false, true, false, true, true, true, true, false, false, true,
    ];
    assert_eq!(touched, expected);
    let ended: Vec<_> = read
        .trail
        .iter()
        .map(|a| (a.outputs.is_some(), a.cancel))
        .collect();
    assert_eq!(
        ended[5..8],
        [
            (true, CancelRequest::None),
            (true, CancelRequest::Cancel),
            (false, CancelRequest::None),
        ]
    );
}

#[test]
fn the_write_paths_leave_the_same_rows() {
    runtime().block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let location = Location::Sqlite(dir.path().join("wf.db"));
        let mut sqlite = Store::open(&location).await.expect("open");
        let (read, began, ended) = apply(&mut sqlite, Via::Engine).await;
        let sqlite_read = normalised(read, (began, ended));
        check(&sqlite_read);
        let expected = format!("{sqlite_read:#?}");
        for (schema, via) in [
            ("wf_contract_path_engine", Via::Engine),
            ("wf_contract_path_grouped", Via::Pg(CommitPath::Grouped)),
            ("wf_contract_path_each", Via::Pg(CommitPath::EachWrite)),
        ] {
            let Some(pg) = pg_store(schema).await else {
                return;
            };
            let mut pg = Store::Postgres(Box::new(pg));
            let (read, began, ended) = apply(&mut pg, via).await;
            let read = normalised(read, (began, ended));
            check(&read);
            let got = format!("{read:#?}");
            assert!(
                got == expected,
                "{via:?} left other rows than SQLite:\n{}",
                first_difference(&expected, &got)
            );
        }
    });
}

/// Where two reads first differ, with the lines around it.
fn first_difference(sqlite: &str, postgres: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (sqlite.lines().collect(), postgres.lines().collect());
    let n = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let around = |lines: &[&str]| lines[n.saturating_sub(12)..(n + 4).min(lines.len())].join("\n");
    format!(
        "at line {n} of the read:\n--- SQLite:\n{}\n--- PostgreSQL:\n{}",
        around(&a),
        around(&b)
    )
}
