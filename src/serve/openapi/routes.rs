//! Every operation of the API: the types its handler reads and answers
//! with, the statuses of its own, its links and an example. The tests
//! check this list against the router (`tests.rs`).

use super::op::Op;
use crate::serve::{api, body, instances};
use crate::views;
use crate::vocab::InstanceId;
use serde_json::json;
use utoipa::openapi::schema::{ObjectBuilder, Type};

const ID: &str = "0f3a9c2e7b8d4e6fa1c2d3e4f5a6b7c8";
const AT: &str = "2026-12-07T13:22:25.123Z";

/// The instance operations a start or a list links to, with the
/// parameter each takes from the answer (`$response.body#/id`, or the
/// first element's in a list).
const INSTANCE_OPS: &[(&str, &str)] = &[
    ("inspect", "get_instance"),
    ("attempts", "get_instance_attempts"),
    ("logs", "get_instance_logs"),
    ("trace", "get_instance_trace"),
    ("result", "get_instance_result"),
    ("events", "get_instance_events"),
    ("definitions", "get_instance_definitions"),
    ("signal", "signal_instance"),
    ("cancel", "cancel_instance"),
    ("terminate", "terminate_instance"),
    ("resume", "resume_instance"),
    ("retry", "retry_instance"),
    ("upgrade", "upgrade_instance"),
];

/// Links from the answer `status` to every instance operation, the id at
/// `from` (a JSON pointer into the answer).
fn to_instance(mut op: Op, status: u16, from: &'static str) -> Op {
    for (name, to) in INSTANCE_OPS {
        op = op.link(status, name, to, &[("id", from)]);
    }
    op
}

/// An instance operation: `{id}` in its path, a 404 for an id that names
/// no instance (or a prefix that names several: 400).
fn on_instance(op: Op) -> Op {
    op.path_param::<InstanceId>("id", "The instance's id, or a unique prefix of it")
        .error(404, "No instance has this id (or prefix)")
        .error(409, "A prefix that several instances' ids start with")
}

/// An action the server runs in the background: 202 with what the
/// instance is doing, 409 when its state refuses it or another process
/// holds it.
fn acted(op: Op, example: serde_json::Value) -> Op {
    on_instance(op)
        .ok::<views::Accepted>(
            202,
            "Recorded; what it needs runs on in the server",
            example,
        )
        .error(
            409,
            "The instance's status refuses it, or another process holds it",
        )
}

fn summary_example() -> serde_json::Value {
    json!({"id": ID, "workflow": "deploy", "status": "completed", "created_at": AT, "updated_at": AT,
        "ended_at": AT, "duration_ms": 1520, "parent": null, "labels": {"team": "infra"},
        "started_by": "token:deployer"})
}

/// The operations on instances.
fn instance_ops() -> Vec<Op> {
    let list = Op::get("/api/v1/instances", "list_instances", "Instances, newest first")
        .describe("`wf list --json`, a page at a time: the next page's cursor is in the `Link` (`rel=\"next\"`) and `X-Next-Cursor` headers, absent on the last page.")
        .query::<instances::ListParams>()
        .ok_list::<views::InstanceSummary>(200, "A page of instances", json!([summary_example()]))
        .header(200, "Link", "`</api/v1/instances?…&cursor=ID>; rel=\"next\"`, while more follow")
        .header(200, "X-Next-Cursor", "The next page's `cursor`, while more follow")
        .error(404, "No instance matches the `parent` filter")
        .error(409, "A `parent` prefix that several instances' ids start with");
    vec![
        to_instance(list, 200, "$response.body#/0/id"),
        Op::get("/api/v1/instances/counts", "count_instances", "How many instances of each status the filters match")
            .describe("`wf list --counts --json`; a count stops at 10,000 (`at_least`).")
            .query::<instances::CountParams>()
            .error(404, "No instance matches the `parent` filter")
            .error(409, "A `parent` prefix that several instances' ids start with")
            .ok::<views::CountsView>(200, "The counts", json!({"statuses": [{"status": "completed", "count": 12, "at_least": false}], "total": 12, "at_least": false})),
        on_instance(Op::get("/api/v1/instances/{id}", "get_instance", "An instance"))
            .describe("`wf inspect --json`: its runs, steps (with every attempt, `?attempts=true`), events, parent, children, queue place and actions.")
            .query::<api::InspectParams>()
            .ok::<views::InstanceView>(200, "The instance", json!({"id": ID, "workflow": "deploy", "status": "completed"}))
            .link_with_body(200, "restart", "restart_instance", &[("id", "$response.body#/id")], json!({"from": "{$response.body#/steps/0/id}"})),
        on_instance(Op::get("/api/v1/instances/{id}/attempts", "get_instance_attempts", "Every attempt of every step"))
            .ok_list::<views::StepAttempt>(200, "The attempts, in the steps' order, each with its `step`", json!([{"step": "build", "attempt": 1, "run": 1, "outcome": "completed", "error_type": null, "error_message": null, "exit_code": 0, "started_at": AT, "finished_at": AT}])),
        on_instance(Op::get("/api/v1/instances/{id}/logs", "get_instance_logs", "The captured output of every attempt"))
            .describe("`wf logs ID --json`.")
            .ok::<views::LogsView>(200, "The logs", json!({"id": ID, "logs": [{"step": "build", "attempt": 1, "outcome": "completed", "stdout": "ok\n", "stderr": ""}]})),
        on_instance(Op::get("/api/v1/instances/{id}/logs/{step}", "get_step_logs", "An attempt's captured output"))
            .unbounded()
            .describe("`wf logs ID STEP --json` (the last attempt, or `?attempt=N`). With `?follow=true`, server-sent events while it runs: `attempt` (its number), `stdout` and `stderr` (chunks of text), then `end` (its outcome).")
            .path_schema("step", "The unit: a step's id, `id[N]`, a matrix combination's label (`build[os=linux]`) or `id:compensate`", ObjectBuilder::new().schema_type(Type::String).into())
            .query::<api::LogsParams>()
            .ok::<views::LogsView>(200, "The attempt's logs (or, with `follow`, its events)", json!({"id": ID, "logs": [{"step": "build", "attempt": 1, "outcome": "completed", "stdout": "ok\n", "stderr": ""}]}))
            .ok_as(200, "The attempt's logs (or, with `follow`, its events)", "text/event-stream", ObjectBuilder::new().schema_type(utoipa::openapi::schema::SchemaType::AnyValue).description(Some("Each event's data: `attempt` its number; `stdout`, `stderr` a JSON string of text; `end` `{attempt, outcome}`; `error` an error's `{error: {code, message}}`")).into())
            .error(404, "No instance has this id, or it has no such unit or attempt"),
        on_instance(Op::get("/api/v1/instances/{id}/trace", "get_instance_trace", "The instance's spans, with its children's"))
            .describe("`wf trace ID --format otlp`: one OTLP/JSON `ExportTraceServiceRequest` (opentelemetry-proto's JSON encoding).")
            .ok_as(200, "The trace", "application/json", otlp_schema()),
        on_instance(Op::get("/api/v1/instances/{id}/result", "get_instance_result", "The instance's outputs, whatever its status"))
            .unbounded()
            .describe("`wf result --json`; `?wait=30s` waits (at most 5 minutes) for it to end first.")
            .query::<api::ResultParams>()
            .ok::<views::ResultView>(200, "The result", json!({"id": ID, "status": "completed", "outputs": {"version": "1.4.2"}, "error": null})),
        on_instance(Op::get("/api/v1/instances/{id}/events", "get_instance_events", "The events delivered to the instance, in the order received"))
            .ok_list::<views::EventView>(200, "The events", json!([{"name": "approved", "data": {"by": "ana"}, "received_at": AT, "consumed_by": "approve"}])),
        on_instance(Op::get("/api/v1/instances/{id}/definitions", "get_instance_definitions", "Every definition the instance ran or runs next"))
            .describe("`wf inspect ID --definitions --json`'s `definitions`: each with its text and a unified diff from the one before, oldest first.")
            .ok_list::<views::DefinitionUse>(200, "The definitions", json!([{"hash": "9c1e4b2a77f0", "from_run": 1, "source": "name: deploy\n…"}])),
        on_instance(Op::get("/api/v1/instances/{id}/compare", "compare_runs", "Two runs side by side"))
            .describe("`wf inspect ID --compare A,B --json`: what each run did of each step.")
            .query::<api::CompareParams>()
            .ok::<views::CompareView>(200, "The comparison", json!({"a": {"number": 1, "outcome": "failed", "started_at": AT, "finished_at": AT, "definition_hash": "9c1e4b2a77f0"}, "b": {"number": 2, "outcome": "completed", "started_at": AT, "finished_at": AT, "definition_hash": "9c1e4b2a77f0"}, "steps": []}))
            .error(404, "No instance has this id, or it has no such run"),
        on_instance(Op::post("/api/v1/instances/{id}/signal", "signal_instance", "Deliver an event"))
            .describe("`wf signal`: the event is stored for the instance; a step waiting for it wakes.")
            .body::<body::SignalBody>("The event", json!({"event": "approved", "data": {"by": "ana"}}), true)
            .ok::<views::SignalView>(200, "Delivered (with a `warning` when no step of its definition waits for that name)", json!({"id": ID, "event": "approved", "delivered": true}))
            .error(409, "The instance has ended: it takes no more events"),
        acted(Op::post("/api/v1/instances/{id}/cancel", "cancel_instance", "Cancel; compensations run"), json!({"id": ID, "status": "canceling"}))
            .describe("`wf cancel`.")
            .body::<body::NoBody>("Nothing (or `{}`)", json!({}), false),
        acted(Op::post("/api/v1/instances/{id}/terminate", "terminate_instance", "Cancel without compensations"), json!({"id": ID, "status": "canceling"}))
            .describe("`wf cancel --terminate`.")
            .body::<body::NoBody>("Nothing (or `{}`)", json!({}), false),
        acted(Op::post("/api/v1/instances/{id}/resume", "resume_instance", "Continue an interrupted, sleeping or waiting instance"), json!({"id": ID, "status": "sleeping"}))
            .describe("`wf resume [--now] [--no-cache]`.")
            .body::<body::ResumeBody>("How", json!({"now": true}), false),
        acted(Op::post("/api/v1/instances/{id}/retry", "retry_instance", "Give failed steps a fresh attempt budget and continue"), json!({"id": ID, "status": "failed"}))
            .describe("`wf resume --retry-failed`.")
            .body::<body::NoBody>("Nothing (or `{}`)", json!({}), false),
        on_instance(Op::post("/api/v1/instances/{id}/restart", "restart_instance", "Run a step and everything downstream of it again"))
            .describe("`wf restart --from STEP [--as ID]`.")
            .body::<body::RestartBody>("From where", json!({"from": "deploy"}), true)
            .ok::<views::RestartAccepted>(202, "Recorded; the run goes on in the server", json!({"id": ID, "from": "deploy", "steps": ["deploy", "notify"], "status": "restarting"}))
            .error(404, "No instance has this id, or its workflow has no such step")
            .error(409, "The instance has not ended, or another process holds it, or the copy's id is taken"),
        on_instance(Op::post("/api/v1/instances/{id}/upgrade", "upgrade_instance", "Move the instance onto its workflow's registered definition"))
            .describe("`wf upgrade ID`: with `dry_run`, its plan, refused or not.")
            .body::<body::UpgradeBody>("How", json!({"map": {"ship": "deploy"}, "dry_run": true}), false)
            .ok::<crate::serve::upgrade::One>(200, "Upgraded, or (a dry run) its plan", json!({"id": ID, "outcome": "planned", "plan": {"from": "9c1e4b2a77f0", "to": "4d7a0e5c9b31", "steps": []}}))
            .error(404, "No instance has this id, or its workflow is not registered")
            .error(409, "The plan is refused, its status is not one an upgrade moves, or another process holds it"),
        Op::post("/api/v1/bulk/{action}", "bulk_action", "One action over many instances, by id or by the list's filters")
            .describe("`wf cancel|resume … --json` over many: `ids` or `filter` (one of the two; at most 1000 instances).")
            .path_schema("action", "The action", crate::vocab::words("The action", views::BULK_ACTIONS))
            .body_and::<body::BulkBody>("Which instances", json!({"filter": {"status": "failed", "workflow": "deploy"}, "dry_run": true}), one_of_ids_or_filter())
            .ok::<views::BulkAnswer>(200, "A line per instance", json!({"action": "retry", "instances": [{"id": ID, "workflow": "deploy", "status": "failed", "plan": "retry the failed steps", "outcome": "planned", "detail": ""}]}))
            .error(400, "Neither or both of `ids` and `filter`, or a bad filter")
            .error(404, "No such bulk action, or no instance has an id (or prefix) of `ids` or the `parent` filter")
            .error(409, "A prefix of `ids` or the `parent` filter that several instances' ids start with"),
    ]
}

/// A bulk body's selection: a non-empty `ids`, or a `filter`, not both.
fn one_of_ids_or_filter() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
    use utoipa::openapi::schema::{ArrayBuilder, OneOfBuilder};
    OneOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .property("ids", ArrayBuilder::new().min_items(Some(1)))
                .required("ids"),
        )
        .item(
            ObjectBuilder::new()
                .property("filter", ObjectBuilder::new().schema_type(Type::Object))
                .required("filter"),
        )
        .into()
}

/// The OTLP/JSON trace's outer shape.
fn otlp_schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some("An OTLP/JSON ExportTraceServiceRequest"))
        .property(
            "resourceSpans",
            utoipa::openapi::schema::ArrayBuilder::new()
                .items(ObjectBuilder::new().schema_type(Type::Object)),
        )
        .required("resourceSpans")
        .into()
}

/// The operations on workflows, queues, schedules, tokens, the database,
/// webhooks and the server.
fn other_ops() -> Vec<Op> {
    let start = Op::post("/api/v1/workflows/{name}/instances", "start_instance", "Start an instance of a registered workflow")
        .describe("`wf run --detach` of the registered definition: recorded `pending` (or `queued`) for a worker. An `Idempotency-Key` header makes a repeat answer the instance it started (200) instead of another.")
        .path_schema("name", "The registered workflow's name", ObjectBuilder::new().schema_type(Type::String).into())
        .body::<body::StartBody>("Its inputs and labels", json!({"inputs": {"who": "ana"}, "labels": {"team": "infra"}}), false)
        .ok::<views::Started>(201, "Started", json!({"id": ID, "workflow": "deploy", "status": "pending", "exit_code": 0, "created": true}))
        .ok::<views::Started>(200, "The instance this `Idempotency-Key` started before", json!({"id": ID, "workflow": "deploy", "status": "completed", "exit_code": 0, "created": false}))
        .error(400, "Inputs that do not fit the workflow's, or a bad label")
        .error(404, "No workflow is registered under this name")
        .error(409, "The `Idempotency-Key` started an instance with other inputs");
    let start = to_instance(
        to_instance(start, 201, "$response.body#/id"),
        200,
        "$response.body#/id",
    );
    let workflows = Op::get("/api/v1/workflows", "list_workflows", "The registered workflows")
        .describe("`wf workflow list --json`.")
        .ok_list::<views::WorkflowView>(200, "The workflows", json!([{"name": "deploy", "description": null, "workflow_path": "deploy.yaml", "definition_hash": "9c1e4b2a77f0", "registered_at": AT, "inputs": [], "schedules": [], "webhook": null}]))
        .link(200, "workflow", "get_workflow", &[("name", "$response.body#/0/name")])
        .link(200, "start", "start_instance", &[("name", "$response.body#/0/name")])
        .link(200, "upgrade", "upgrade_workflow", &[("name", "$response.body#/0/name")]);
    vec![
        Op::get("/healthz", "health", "200 while the database answers")
            .open()
            .ok::<api::Health>(200, "The database answers", json!({"status": "ok"})),
        Op::get("/api/v1/queues", "list_queues", "Queue keys")
            .describe("`wf queue list --json`.")
            .ok_list::<views::QueueView>(200, "The queue keys", json!([{"key": "deploy", "admitted": 1, "queued": 2, "limit": 1, "rate": null, "rate_left": null, "oldest_queued_at": AT, "oldest_queued_age_ms": 5000}]))
            .link(200, "queue", "get_queue", &[("key", "$response.body#/0/key")]),
        Op::get("/api/v1/queues/{key}", "get_queue", "A queue key's admitted and waiting instances")
            .describe("`wf queue show KEY --json`.")
            .path_schema("key", "The queue key", ObjectBuilder::new().schema_type(Type::String).into())
            .query::<api::QueueParams>()
            .ok::<views::QueueLineView>(200, "The key", json!({"key": "deploy", "limit": 1, "rate": null, "rate_left": null, "admitted": [], "admitted_total": 0, "waiting": [], "waiting_total": 0})),
        Op::get("/api/v1/db/check", "check_database", "Whether the history is sound")
            .describe("`wf db check --json`: 200 whether or not it is.")
            .ok::<views::CheckView>(200, "The check", json!({"sound": true, "problems": []})),
        Op::get("/api/v1/db/actions", "list_actions", "Who did what to the registry, the tokens and the history as a whole, newest first")
            .describe("`wf db actions --json`.")
            .query::<api::ActionsQuery>()
            .ok_list::<views::ActionView>(200, "The actions", json!([{"at": AT, "action": "token_add", "actor": "cli:ana@build1", "detail": "deployer (operate)"}])),
        Op::get("/api/v1/schedules", "list_schedules", "Schedule entries")
            .describe("`wf schedule list --json`.")
            .ok_list::<views::ScheduleView>(200, "The entries", json!([{"workflow": "nightly", "index": 0, "spec": "0 3 * * *", "timezone": "UTC", "overlap": "skip", "catchup": null, "inputs": {}, "next_fire_at": AT}])),
        workflows,
        Op::get("/api/v1/workflows/{name}", "get_workflow", "A registered workflow, with its figures")
            .path_schema("name", "The registered workflow's name", ObjectBuilder::new().schema_type(Type::String).into())
            .ok::<views::WorkflowView>(200, "The workflow", json!({"name": "deploy", "description": null, "workflow_path": "deploy.yaml", "definition_hash": "9c1e4b2a77f0", "registered_at": AT, "inputs": [], "schedules": [], "webhook": null}))
            .link(200, "start", "start_instance", &[("name", "$response.body#/name")])
            .error(404, "No workflow is registered under this name"),
        start,
        Op::post("/api/v1/workflows/{name}/upgrade", "upgrade_workflow", "Move every instance of a workflow onto its registered definition")
            .describe("`wf upgrade --workflow NAME`: an answer per instance; with `dry_run`, the plans.")
            .path_schema("name", "The registered workflow's name", ObjectBuilder::new().schema_type(Type::String).into())
            .body::<body::UpgradeBody>("How", json!({"dry_run": true}), false)
            .ok_list::<crate::engine::upgrade::Done>(200, "An answer per instance", json!([{"id": ID, "outcome": "planned", "plan": {"from": "9c1e4b2a77f0", "to": "4d7a0e5c9b31", "steps": []}}]))
            .error(404, "No workflow is registered under this name"),
        Op::get("/api/v1/openapi.json", "openapi", "This document")
            .ok_as(200, "The OpenAPI 3.1 document", "application/json", ObjectBuilder::new().schema_type(Type::Object).into()),
        Op::get("/api/v1/tokens", "list_tokens", "The named tokens")
            .describe("`wf serve token list --json`: names, scopes and times, never a token's text or hash.")
            .ok_list::<views::TokenView>(200, "The tokens", json!([{"name": "deployer", "scope": "operate", "created_at": AT, "created_by": "cli:ana@build1", "last_used_at": null}])),
        Op::post("/api/v1/tokens", "add_token", "Make a named token")
            .describe("`wf serve token add`: the token's text is in the answer, this once; the database keeps its hash.")
            .body::<body::TokenBody>("Its name and scope", json!({"name": "deployer", "scope": "operate"}), true)
            .ok::<views::TokenAdded>(201, "Made", json!({"name": "deployer", "scope": "operate", "created_at": AT, "created_by": "token:default", "last_used_at": null, "token": "wft_…"}))
            .link(201, "revoke", "revoke_token", &[("name", "$response.body#/name")])
            .error(409, "A token of this name exists (or it is `default`, the server's own)"),
        Op::delete("/api/v1/tokens/{name}", "revoke_token", "Revoke a named token and end its sessions")
            .describe("`wf serve token revoke`: every server refuses it from its next request.")
            .path_schema("name", "The token's name", ObjectBuilder::new().schema_type(Type::String).into())
            .empty(204, "Revoked")
            .error(404, "No token has this name"),
        Op::get("/api/v1/db/backup", "backup_database", "A consistent backup of the whole history, made now")
            .unbounded()
            .describe("`wf db backup`: a SQLite file any wf opens with `--db`, whichever backend the server uses.")
            .ok_as(200, "The SQLite file", "application/vnd.sqlite3", ObjectBuilder::new().schema_type(Type::String).content_media_type("application/vnd.sqlite3").into())
            .header(200, "Content-Disposition", "`attachment; filename=\"wf-backup-….db\"`")
            .header(200, "X-Wf-Instances", "How many instances it holds"),
        Op::post("/api/v1/db/copy", "copy_database", "Copy the whole history into another database")
            .unbounded()
            .describe("`wf db copy --to`: answers when done.")
            .body::<body::CopyBody>("Where", json!({"to": "postgres://wf@db.internal/wf"}), true)
            .ok::<crate::store::transfer::Copied>(200, "Copied", json!({"instances": 1200, "written": 1200, "skipped": 0}))
            .error(400, "A `to` that is not a path or a `postgres://` URL, the server's own database, or a target that cannot be opened")
            .error(409, "The target holds history already (continue with `resume`)"),
        Op::post("/api/v1/db/import", "import_archive", "Bring back the instances of an archive of `wf prune --archive`")
            .unbounded()
            .describe("`wf db import`: the body is the archive (JSON lines, or zstd frames of them; at most 1 GiB); instances the database holds already are skipped.")
            .raw_body("application/octet-stream", false)
            .ok::<crate::engine::db::archive::Imported>(200, "Imported", json!({"records": 40, "written": 12, "skipped": 0}))
            .error(400, "A line of the body that is not an archive's record"),
        Op::get("/metrics", "metrics", "Prometheus metrics")
            .describe("The Prometheus text format (or OpenMetrics, as `Accept` asks): instances by workflow and status, attempts by outcome, durations, queues, workers.")
            .ok_as(200, "The metrics", "text/plain", ObjectBuilder::new().schema_type(Type::String).into())
            .ok_as(200, "The metrics", "application/openmetrics-text", ObjectBuilder::new().schema_type(Type::String).into()),
        Op::post("/hooks/{name}", "deliver_webhook", "A webhook delivery")
            .describe("Starts the workflow whose `on.webhook.name` is NAME; signed with `X-Hub-Signature-256: sha256=HMAC(secret, body)`. A `dedupe` value (default: the `Idempotency-Key` header) makes a redelivery answer the instance it started.")
            .open()
            .path_schema("name", "The hook's name", ObjectBuilder::new().schema_type(Type::String).into())
            .raw_body("application/json", true)
            .ok::<views::Started>(201, "Started", json!({"id": ID, "workflow": "deploy", "status": "pending", "created": true}))
            .ok_either::<views::Started, views::HookPing>(200, "A redelivery: the instance its dedupe value started; or a ping (`X-GitHub-Event: ping`), which starts nothing", json!({"id": ID, "workflow": "deploy", "status": "completed", "created": false}))
            .error(400, "Not JSON, or inputs that do not fit")
            .error(401, "A missing or wrong signature")
            .error(404, "No registered workflow has this hook"),
    ]
}

/// Every operation.
pub fn all() -> Vec<Op> {
    let mut all = instance_ops();
    all.extend(other_ops());
    all
}
