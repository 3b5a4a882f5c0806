//! Every view built from fixed rows and snapshotted (`snapshots/`): the
//! JSON `wf` prints and `wf serve` will serve. A snapshot that changes is a
//! change of that contract (docs/commands.md: fields may be added, none
//! renamed); review it as such (`cargo insta review`, or
//! `INSTA_UPDATE=always` and `git diff`).

use super::*;
use crate::engine::{EngineError, RunOutcome};
use crate::store::{
    self, AttemptRow, DeliveredEvent, FireRecord, InstanceRow, Pruned, RunRow, ScheduleRow,
    SpanRow, StepRow,
};
use crate::vocab::{
    AttemptOutcome, ErrorType, InstanceId, InstanceStatus, RunEnd, StepStatus, Timestamp,
};
use crate::workflow::{DefinitionError, Workflow};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// 2026-12-03T06:21:04.908Z, and `s` seconds after it.
fn at(s: i64) -> Timestamp {
    Timestamp::from_ms(1_796_278_864_908 + s * 1000)
}

mod order;

const ID: &str = "1c756200337049caadbed8982185a344";
const HASH: &str = "207ea911707d4c8e9f0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6a";

fn instance(status: InstanceStatus) -> InstanceRow {
    InstanceRow {
        id: InstanceId::from(ID),
        workflow: "saga".into(),
        status,
        definition: "name: saga\n".into(),
        definition_hash: HASH.into(),
        workflow_path: "workflows/saga.yaml".into(),
        base_dir: "/srv/workflows".into(),
        inputs: json!({"order": "A-1001", "items": ["book", "lamp"]}),
        state: json!({"reserved": true}),
        error: None,
        wake_at: None,
        waiting_event: None,
        lease_owner: None,
        lease_expires_ms: None,
        created_at: at(0),
        updated_at: at(9),
        parent: None,
        depth: 0,
        labels: [("team".to_string(), "core".to_string())].into(),
        queue: None,
        started_by: None,
    }
}

fn failed() -> InstanceRow {
    InstanceRow {
        error: Some(
            "step `ship[1]` failed (exit.4: exited with code 4: carrier rejected lamp)".into(),
        ),
        ..instance(InstanceStatus::Failed)
    }
}

fn step(key: &str, status: StepStatus) -> StepRow {
    let mut row = StepRow::pending(key, crate::vocab::UnitKey::parse(key).step);
    row.status = status;
    row
}

fn ran(key: &str, attempts: i64, outcome: AttemptOutcome, from: i64, to: i64) -> StepRow {
    StepRow {
        attempts,
        outcome: Some(outcome),
        started_at: Some(at(from)),
        finished_at: Some(at(to)),
        ..step(
            key,
            match outcome {
                AttemptOutcome::Ok => StepStatus::Completed,
                _ => StepStatus::Failed,
            },
        )
    }
}

fn attempt(key: &str, n: i64, outcome: Option<AttemptOutcome>, from: i64) -> AttemptRow {
    AttemptRow {
        step_key: key.into(),
        attempt: n,
        run: 1,
        outcome,
        error_type: None,
        error_message: None,
        exit_code: outcome.map(|_| 0),
        started_at: at(from),
        finished_at: outcome.map(|_| at(from + 1)),
        cached_from: None,
    }
}

/// A saga that failed shipping its second item and compensated: every
/// kind of unit, run, event and the schedule entry that started it.
fn saga() -> store::InstanceView {
    let ship_failed = StepRow {
        error_type: Some(ErrorType::parse("exit.4")),
        error_message: Some("exited with code 4: carrier rejected lamp".into()),
        ..ran("ship[1]", 1, AttemptOutcome::Failed, 3, 4)
    };
    let steps = vec![
        StepRow {
            output: json!({"exit_code": 0, "stdout": "reserved A-1001\n"}),
            ..ran("reserve", 1, AttemptOutcome::Ok, 1, 2)
        },
        StepRow {
            error_type: Some(ErrorType::parse("exit.4")),
            error_message: Some("step `ship[1]` failed".into()),
            items: json!(["book", "lamp"]).into(),
            ..ran("ship", 2, AttemptOutcome::Failed, 2, 4)
        },
        StepRow {
            output: json!({"exit_code": 0}),
            ..ran("ship[0]", 1, AttemptOutcome::Ok, 2, 3)
        },
        ship_failed,
        StepRow {
            retry_at: Some(at(60)),
            attempts: 1,
            outcome: Some(AttemptOutcome::Retry),
            error_type: Some(ErrorType::parse("http.503")),
            error_message: Some("HTTP 503 Service Unavailable".into()),
            started_at: Some(at(4)),
            ..step("notify", StepStatus::Retrying)
        },
        StepRow {
            retry_at: Some(at(60)),
            ..step("archive", StepStatus::Pending)
        },
        ran("reserve:compensate", 1, AttemptOutcome::Ok, 5, 6),
    ];
    let mut attempts = vec![
        attempt("reserve", 1, Some(AttemptOutcome::Ok), 1),
        attempt("ship[0]", 1, Some(AttemptOutcome::Ok), 2),
        AttemptRow {
            error_type: Some(ErrorType::parse("exit.4")),
            error_message: Some("exited with code 4: carrier rejected lamp".into()),
            exit_code: Some(4),
            ..attempt("ship[1]", 1, Some(AttemptOutcome::Failed), 3)
        },
        AttemptRow {
            error_type: Some(ErrorType::parse("http.503")),
            error_message: Some("HTTP 503 Service Unavailable".into()),
            exit_code: None,
            ..attempt("notify", 1, Some(AttemptOutcome::Retry), 4)
        },
        attempt("reserve:compensate", 1, Some(AttemptOutcome::Ok), 5),
    ];
    attempts.push(AttemptRow {
        run: 2,
        ..attempt("notify", 2, None, 30)
    });
    store::InstanceView {
        instance: failed(),
        runs: vec![
            RunRow {
                number: 1,
                outcome: Some(RunEnd::Failed),
                started_at: at(0),
                finished_at: Some(at(7)),
                restart_from: None,
                definition_hash: None,
            },
            RunRow {
                number: 2,
                outcome: None,
                started_at: at(30),
                finished_at: None,
                restart_from: Some("ship".into()),
                definition_hash: None,
            },
        ],
        steps,
        attempts,
        events: vec![
            DeliveredEvent {
                name: "approved".into(),
                payload: r#"{"ok": true, "by": "ana"}"#.into(),
                received_at: at(1),
                consumed_by: Some("approval".into()),
            },
            DeliveredEvent {
                name: "approve".into(),
                payload: "not json".into(),
                received_at: at(2),
                consumed_by: None,
            },
        ],
        fire: Some(FireRecord {
            workflow: "saga".into(),
            index: 1,
            spec: "0 6 * * *".into(),
            timezone: Some("Europe/Paris".into()),
            fire_ms: at(0).ms(),
            fire_at: at(0),
        }),
        children: Vec::new(),
        actions: Vec::new(),
    }
}

#[test]
fn inspect() {
    let view = saga();
    insta::assert_json_snapshot!(InstanceView::new(&view, false));
}

#[test]
fn inspect_attempts() {
    let view = saga();
    insta::assert_json_snapshot!(InstanceView::new(&view, true));
}

#[test]
fn inspect_waiting() {
    let view = store::InstanceView {
        instance: InstanceRow {
            wake_at: Some(at(3600)),
            waiting_event: Some("approved".into()),
            ..instance(InstanceStatus::Waiting)
        },
        runs: vec![RunRow {
            number: 1,
            outcome: Some(RunEnd::Waiting),
            started_at: at(0),
            finished_at: Some(at(1)),
            restart_from: None,
            definition_hash: None,
        }],
        steps: vec![StepRow {
            retry_at: Some(at(3600)),
            started_at: Some(at(1)),
            ..step("approval", StepStatus::Waiting)
        }],
        attempts: Vec::new(),
        events: Vec::new(),
        fire: None,
        children: Vec::new(),
        actions: Vec::new(),
    };
    insta::assert_json_snapshot!(InstanceView::new(&view, false));
}

/// A parent waiting on one child of two, and that child, which knows it.
#[test]
fn inspect_parent_and_child() {
    let child = |id: &str, item: usize, status: InstanceStatus| InstanceRow {
        id: InstanceId::from(id),
        workflow: "deploy-region".into(),
        parent: Some(store::ParentRef {
            id: InstanceId::from("release-1"),
            key: format!("deploy[{item}]").into(),
            attempt: 1,
        }),
        depth: 1,
        created_at: at(2),
        updated_at: at(3),
        ..instance(status)
    };
    let parent = store::InstanceView {
        instance: InstanceRow {
            id: InstanceId::from("release-1"),
            workflow: "release".into(),
            waiting_event: Some("child:6bf0a882dfefd1c05308cad1b8acfa75".into()),
            ..instance(InstanceStatus::Waiting)
        },
        runs: Vec::new(),
        steps: vec![
            step("deploy[0]", StepStatus::Completed),
            step("deploy[1]", StepStatus::Waiting),
        ],
        attempts: Vec::new(),
        events: Vec::new(),
        fire: None,
        children: vec![
            child(
                "180d805f21a004836fbc085afd753a5f",
                0,
                InstanceStatus::Completed,
            ),
            child(
                "6bf0a882dfefd1c05308cad1b8acfa75",
                1,
                InstanceStatus::Waiting,
            ),
        ],
        actions: Vec::new(),
    };
    insta::assert_json_snapshot!(InstanceView::new(&parent, false));
    let child_view = store::InstanceView {
        instance: parent.children[1].clone(),
        runs: Vec::new(),
        steps: Vec::new(),
        attempts: Vec::new(),
        events: Vec::new(),
        fire: None,
        children: Vec::new(),
        actions: Vec::new(),
    };
    insta::assert_json_snapshot!("inspect_child", InstanceView::new(&child_view, false));
}

#[test]
fn inspect_orders_steps_as_the_definition() {
    let ids = ["reserve", "ship", "notify", "archive", "approval"].map(String::from);
    let keys: Vec<String> = ordered_steps(&ids, saga().steps)
        .into_iter()
        .map(|s| s.key.to_string())
        .collect();
    assert_eq!(
        keys,
        [
            "reserve",
            "ship",
            "ship[0]",
            "ship[1]",
            "notify",
            "archive",
            "approval",
            "reserve:compensate"
        ]
    );
}

#[test]
fn list() {
    let alive = InstanceRow {
        id: InstanceId::from("9e107d9d372bb6826bd81d3542a419d6"),
        lease_owner: Some("elsewhere:4242".into()),
        lease_expires_ms: Some(i64::MAX),
        created_at: at(20),
        updated_at: at(21),
        ..instance(InstanceStatus::Running)
    };
    // A child of the failed one: `parent` is its parent's id (null on a root).
    let dead = InstanceRow {
        id: InstanceId::from("e4d909c290d0fb1ca068ffaddf22cbd0"),
        created_at: at(10),
        updated_at: at(11),
        parent: Some(store::ParentRef {
            id: failed().id,
            key: "deploy[2]".into(),
            attempt: 1,
        }),
        depth: 1,
        ..instance(InstanceStatus::Running)
    };
    let rows = [alive, dead, failed()];
    let list: Vec<InstanceSummary> = rows.iter().map(InstanceSummary::from).collect();
    insta::assert_json_snapshot!(list);
}

#[test]
fn logs() {
    let id = InstanceId::from(ID);
    let view = LogsView {
        id: &id,
        logs: vec![
            LogView::new(
                "reserve",
                1,
                Some(AttemptOutcome::Ok),
                b"reserved A-1001\n",
                b"",
            ),
            LogView::new(
                "ship[1]",
                1,
                Some(AttemptOutcome::Failed),
                b"shipping lamp\n",
                b"carrier rejected lamp \xff\n",
            ),
            LogView::new("notify", 2, None, b"token=***", b""),
        ],
    };
    insta::assert_json_snapshot!(view);
}

#[test]
fn result() {
    let completed = instance(InstanceStatus::Completed);
    let outputs = json!({"tracking": ["T-1", "T-2"]});
    insta::assert_json_snapshot!("result_completed", ResultView::new(&completed, &outputs));
    let failed = failed();
    insta::assert_json_snapshot!("result_failed", ResultView::new(&failed, &Value::Null));
}

#[test]
fn run_reports() {
    let id = InstanceId::from(ID);
    let reports = [
        RunReport::ended(&id, &RunOutcome::Completed, 0),
        RunReport::ended(&id, &RunOutcome::Sleeping(at(3600)), 3),
        RunReport::exists(&id, ShownStatus::Interrupted, 130),
        RunReport::canceling(&id),
    ];
    insta::assert_json_snapshot!(reports);
}

#[test]
fn signal() {
    let id = InstanceId::from(ID);
    insta::assert_json_snapshot!(SignalView::delivered(&id, "approved"));
}

#[test]
fn signal_unawaited() {
    let id = InstanceId::from(ID);
    insta::assert_json_snapshot!(SignalView {
        warning: Some(
            "workflow w never waits for `aproved` (it waits for `approved`); the event is stored"
        ),
        ..SignalView::delivered(&id, "aproved")
    });
}

#[test]
fn accepted() {
    let id = InstanceId::from(ID);
    insta::assert_json_snapshot!(
        "accepted",
        [
            Accepted {
                id: &id,
                status: Accepting::Canceling,
            },
            Accepted {
                id: &id,
                status: Accepting::Resuming(ShownStatus::Interrupted),
            },
        ]
    );
    let steps = vec!["build".to_string(), "deploy".to_string()];
    insta::assert_json_snapshot!(
        "restart_accepted",
        RestartAccepted {
            id: &id,
            from: "build",
            steps: &steps,
            status: Accepting::Restarting,
        }
    );
    let start = |exit_code, created| Started {
        id: &id,
        workflow: "deploy",
        status: ShownStatus::Stored(InstanceStatus::Pending),
        exit_code,
        created,
    };
    insta::assert_json_snapshot!("started", [start(Some(0), true), start(None, false)]);
    insta::assert_json_snapshot!(
        "hook_ping",
        HookPing {
            hook: "push",
            ping: "ok"
        }
    );
}

#[test]
fn prune() {
    let pruned = Pruned {
        instances: 2,
        runs: 3,
        steps: 7,
        attempts: 9,
        spans: 31,
        events: 1,
    };
    insta::assert_json_snapshot!(PruneView::new(&pruned, true));
}

fn schedule_row(idx: i64) -> ScheduleRow {
    ScheduleRow {
        workflow: "nightly".into(),
        idx,
        spec: "0 6 * * *".into(),
        timezone: Some("Europe/Paris".into()),
        overlap: "skip".into(),
        catchup_ms: 3_600_000,
        inputs: json!({"full": false}),
        state: json!({}),
        definition_hash: HASH.into(),
        workflow_path: "workflows/nightly.yaml".into(),
        base_dir: "/srv/workflows".into(),
        next_fire_ms: at(86_400).ms(),
        buffered_ms: None,
        last_instance: None,
        last_fire_ms: None,
        skipped: 0,
        registered_at: at(0),
    }
}

fn schedules() -> Vec<ScheduleRow> {
    vec![
        ScheduleRow {
            last_instance: Some(InstanceId::from(ID)),
            last_fire_ms: Some(at(0).ms()),
            skipped: 2,
            ..schedule_row(0)
        },
        ScheduleRow {
            spec: "every 30s".into(),
            timezone: None,
            overlap: "buffer_one".into(),
            catchup_ms: 0,
            buffered_ms: Some(at(30).ms()),
            last_instance: Some(InstanceId::from("pruned-one")),
            last_fire_ms: Some(at(-30).ms()),
            ..schedule_row(1)
        },
    ]
}

#[test]
fn schedule_list() {
    let rows = schedules();
    let last = instance(InstanceStatus::Sleeping);
    let views = vec![
        ScheduleView::new(&rows[0], Some(&last)),
        ScheduleView::new(&rows[1], None),
    ];
    insta::assert_json_snapshot!(views);
}

#[test]
fn schedule_add() {
    let rows = [schedule_row(0)];
    insta::assert_json_snapshot!(ScheduleAdded {
        workflow: "nightly",
        schedules: rows.iter().map(|r| ScheduleView::new(r, None)).collect(),
    });
}

fn span(
    id: &str,
    parent: Option<&str>,
    run: i64,
    name: &str,
    start: i64,
    attributes: Value,
) -> SpanRow {
    // Nanoseconds after `at(0)`.
    let base = at(0).ms() * 1_000_000;
    SpanRow {
        trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
        span_id: id.into(),
        parent_span_id: parent.map(String::from),
        instance_id: InstanceId::from(ID),
        run,
        name: name.into(),
        kind: "internal".into(),
        start_ns: base + start,
        end_ns: base + start + 1_500_000,
        status: "unset".into(),
        status_message: None,
        attributes,
        links: json!([]),
    }
}

#[test]
fn trace() {
    let inst = instance(InstanceStatus::Completed);
    let runs = vec![RunRow {
        number: 1,
        outcome: Some(RunEnd::Sleeping),
        started_at: at(0),
        finished_at: Some(at(1)),
        restart_from: None,
        definition_hash: None,
    }];
    let spans = vec![
        span(
            "b7ad6b7169203331",
            Some("00f067aa0ba902b7"),
            1,
            "saga/workflow",
            0,
            json!({"workflow.name": "saga", "workflow.run": 1, "workflow.outcome": "sleeping"}),
        ),
        SpanRow {
            status: "error".into(),
            status_message: Some("exited with code 4".into()),
            ..span(
                "c1d2e3f4a5b6c7d8",
                Some("b7ad6b7169203331"),
                1,
                "saga/step",
                250_000,
                json!({"workflow.step.id": "ship", "workflow.step.attempt": 1, "process.exit.code": 4}),
            )
        },
        // A run with spans and no row (a crash before its run was
        // recorded): its outcome is its root span's.
        SpanRow {
            links: json!([{"trace_id": "0af7651916cd43dd8448eb211c80319c", "span_id": "b7ad6b7169203331", "attributes": {"workflow.run": 1}}]),
            ..span(
                "d4e5f6a7b8c9d0e1",
                None,
                2,
                "saga/workflow",
                30_000_000_000,
                json!({"workflow.run": 2, "workflow.outcome": "crashed"}),
            )
        },
    ];
    let mut traces = BTreeMap::new();
    traces.insert(
        1,
        (
            "0af7651916cd43dd8448eb211c80319c".to_string(),
            "b7ad6b7169203331".to_string(),
            Some("00f067aa0ba902b7".to_string()),
            at(0).ms() * 1_000_000,
        ),
    );
    assert_eq!(run_numbers(&runs, &spans), [1, 2]);
    insta::assert_json_snapshot!(TraceRunView::all(&inst, &runs, &spans, &traces));
}

#[test]
fn validate() {
    let mut wf = Workflow::from_pinned(
        "name: hello\nsteps:\n  - id: greet\n    run: echo hi\n  - id: shout\n    run: echo HI\n",
        "hello.yaml",
    )
    .expect("a valid workflow");
    wf.warnings.push(DefinitionError {
        file: "hello.yaml".into(),
        line: 4,
        col: 10,
        message: "`'3' == 3` compares as numbers".into(),
        more: Vec::new(),
    });
    insta::assert_json_snapshot!("validate_valid", ValidView::new("hello.yaml", &wf));
    let error = DefinitionError {
        file: "bad.yaml".into(),
        line: 3,
        col: 5,
        message: "unknown key `need`; did you mean `needs`?".into(),
        more: vec![DefinitionError {
            file: "bad.yaml".into(),
            line: 7,
            col: 12,
            message: "step `b` needs `c`, which is not a step".into(),
            more: Vec::new(),
        }],
    };
    insta::assert_json_snapshot!("validate_invalid", InvalidView::new("bad.yaml", &error));
}

#[test]
fn worker_lines() {
    let id = InstanceId::from(ID);
    let lines = [
        WorkerLine::ended(&id, &RunOutcome::Completed),
        WorkerLine::ended(&id, &RunOutcome::Failed("step `ship` failed".into())),
        WorkerLine::ended(&id, &RunOutcome::Sleeping(at(3600))),
        WorkerLine::ended(&id, &RunOutcome::Waiting("approved".into())),
        WorkerLine::error(
            &id,
            &EngineError::Internal("the pinned definition no longer loads".into()),
        ),
    ];
    insta::assert_json_snapshot!(lines);
    // Printed one a line.
    assert_eq!(
        serde_json::to_string(&lines[2]).unwrap(),
        format!(
            r#"{{"id":"{ID}","outcome":"sleeping","reason":"{}"}}"#,
            at(3600)
        )
    );
}

#[test]
fn queues() {
    use crate::store::queue::{
        Admission, Blocked, QueueLimits, QueuePlace, QueueSummary, RateLimit,
    };
    let summaries = [
        QueueSummary {
            key: "deploy-prod".into(),
            admitted: 1,
            queued: 2,
            limits: QueueLimits {
                concurrency: Some(1),
                ..QueueLimits::default()
            },
            rate_used: 0,
            oldest_queued: Some(at(10)),
        },
        QueueSummary {
            key: "tick".into(),
            admitted: 0,
            queued: 0,
            limits: QueueLimits {
                rate: Some(RateLimit {
                    count: 10,
                    period_ms: 60_000,
                }),
                ..QueueLimits::default()
            },
            rate_used: 4,
            oldest_queued: None,
        },
    ];
    let views: Vec<QueueView> = summaries
        .iter()
        .map(|q| QueueView::new(q, at(70)))
        .collect();
    insta::assert_json_snapshot!("queue_list", views);
    let place = QueuePlace {
        key: "deploy-prod".into(),
        priority: 5,
        limits: QueueLimits::default(),
        admitted: false,
    };
    let waiting = Admission::Waiting {
        key: "deploy-prod".into(),
        position: 2,
        ahead: 1,
        blocked: Blocked::Full {
            admitted: 1,
            limit: 1,
        },
    };
    insta::assert_json_snapshot!(
        "inspect_queue",
        [
            QueueStanding::new(&place, Some(&waiting)),
            QueueStanding::new(
                &QueuePlace {
                    admitted: true,
                    ..place.clone()
                },
                None
            ),
        ]
    );
}

#[test]
fn db_check() {
    let found = vec![
        crate::store::Finding {
            check: "attempt without its step",
            instance: Some("0af76519".into()),
            detail: "step a attempt 1".into(),
        },
        crate::store::Finding {
            check: "integrity",
            instance: None,
            detail: "row 3 missing from index instances_by_created".into(),
        },
    ];
    insta::assert_json_snapshot!(CheckView::new(&found));
    insta::assert_json_snapshot!("db_check_sound", CheckView::new(&[]));
}
