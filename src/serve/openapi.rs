//! The OpenAPI 3.1 document of the API (`GET /api/v1/openapi.json`), built
//! with utoipa from [`ROUTES`], the table the tests check against the
//! router: every route is in both, with its parameters, body and answers.

use axum::Json;
use utoipa::openapi::path::{
    HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn, PathItem,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, OpenApiBuilder, PathsBuilder, Ref, RefOr,
    Required, Schema,
};

/// A route of the API.
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub summary: &'static str,
    /// Query parameters: (name, description).
    pub query: &'static [(&'static str, &'static str)],
    /// The JSON body it takes, described; `None`: none.
    pub body: Option<&'static str>,
    /// Its answers: (status, description).
    pub answers: &'static [(&'static str, &'static str)],
    /// Whether it needs the token.
    pub token: bool,
}

const READ: &[(&str, &str)] = &[
    ("200", "The document (the CLI's `--json` shape)"),
    ("401", "No valid token"),
    ("404", "No such instance"),
];

const ACTED: &[(&str, &str)] = &[
    ("202", "Recorded; the run it needs goes on in the server"),
    ("401", "No valid token"),
    ("404", "No such instance"),
    (
        "409",
        "The instance's state refuses it, or another process holds it",
    ),
];

/// Every route the server has.
pub const ROUTES: &[Route] = &[
    Route {
        method: "get",
        path: "/healthz",
        summary: "200 while the database answers",
        query: &[],
        body: None,
        answers: &[
            ("200", "`{status: ok}`"),
            ("503", "The database does not answer"),
        ],
        token: false,
    },
    Route {
        method: "get",
        path: "/api/v1/instances",
        summary: "Instances, newest first (`wf list --json`); the next page's cursor in `Link` and `X-Next-Cursor`",
        query: &[
            (
                "status",
                "Only this status (pending, queued, running, interrupted, sleeping, waiting, completed, failed, canceled, skipped)",
            ),
            ("workflow", "Only this workflow"),
            ("label", "NAME=VALUE; repeat for all of several"),
            ("parent", "Only the children of this instance"),
            ("roots", "Only instances without a parent"),
            ("since", "Only instances created within this long (`1h`)"),
            ("queue", "Only instances of this queue key"),
            ("id", "Only instances whose id starts so"),
            (
                "error",
                "Only instances whose error holds these words (each whole or the start of one)",
            ),
            ("limit", "At most this many (1 to 1000, default 50)"),
            ("cursor", "The page after this cursor"),
        ],
        body: None,
        answers: &[
            (
                "200",
                "An array of `{id, workflow, status, created_at, updated_at, ended_at, duration_ms, parent, labels, started_by}`",
            ),
            ("400", "A bad filter"),
            ("401", "No valid token"),
        ],
        token: true,
    },
    Route {
        method: "get",
        path: "/api/v1/instances/counts",
        summary: "How many instances of each status the filters match (`wf list --counts --json`)",
        query: &[
            ("workflow", "Only this workflow"),
            ("label", "NAME=VALUE; repeat for all of several"),
            ("parent", "Only the children of this instance"),
            ("roots", "Only instances without a parent"),
            ("since", "Only instances created within this long (`1h`)"),
            ("queue", "Only instances of this queue key"),
            ("id", "Only instances whose id starts so"),
            ("error", "Only instances whose error holds these words"),
        ],
        body: None,
        answers: &[
            (
                "200",
                "`{statuses: [{status, count, at_least}], total, at_least}`; a count stops at 10,000 (`at_least`)",
            ),
            ("400", "A bad filter"),
            ("401", "No valid token"),
        ],
        token: true,
    },
    Route {
        method: "get",
        path: "/api/v1/instances/{id}",
        summary: "An instance (`wf inspect --json`)",
        query: &[("attempts", "With every attempt of every step")],
        body: None,
        answers: READ,
        token: true,
    },
    Route {
        method: "get",
        path: "/api/v1/instances/{id}/attempts",
        summary: "Every attempt of every step, each with its `step`",
        query: &[],
        body: None,
        answers: READ,
        token: true,
    },
    Route {
        method: "get",
        path: "/api/v1/instances/{id}/logs",
        summary: "The captured output of every attempt (`wf logs ID --json`)",
        query: &[],
        body: None,
        answers: READ,
        token: true,
    },
    Route {
        method: "get",
        path: "/api/v1/instances/{id}/logs/{step}",
        summary: "An attempt's captured output (`wf logs ID STEP --json`); `follow=1`: server-sent events while it runs",
        query: &[
            ("attempt", "The attempt (default: the last)"),
            (
                "follow",
                "Stream it as server-sent events: `attempt`, `stdout`, `stderr`, `end`",
            ),
        ],
        body: None,
        answers: READ,
        token: true,
    },
    Route {
        method: "get",
        path: "/api/v1/instances/{id}/trace",
        summary: "The instance's spans, with its children's, as one OTLP/JSON ExportTraceServiceRequest",
        query: &[],
        body: None,
        answers: READ,
        token: true,
    },
    Route {
        method: "get",
        path: "/api/v1/instances/{id}/result",
        summary: "`{id, status, outputs, error}` (`wf result --json`)",
        query: &[(
            "wait",
            "Wait up to this long (at most 5m) for the instance to end",
        )],
        body: None,
        answers: READ,
        token: true,
    },
    Route {
        method: "get",
        path: "/api/v1/instances/{id}/events",
        summary: "The events delivered to the instance, in the order received",
        query: &[],
        body: None,
        answers: READ,
        token: true,
    },
    Route {
        method: "get",
        path: "/api/v1/instances/{id}/compare",
        summary: "Two runs side by side: what each did of each step (`wf inspect ID --compare A,B --json`)",
        query: &[
            ("a", "The first run's number"),
            ("b", "The second run's number"),
        ],
        body: None,
        answers: &[
            (
                "200",
                "`{a: {number, outcome, started_at, finished_at, definition_hash}, b, steps: [{step, a: {attempts, outcome, error_type, error_message, took_ms} | null, b, differs}]}`",
            ),
            ("400", "A missing or bad run number"),
            ("401", "No valid token"),
            ("404", "No such instance or run"),
        ],
        token: true,
    },
    Route {
        method: "get",
        path: "/api/v1/instances/{id}/definitions",
        summary: "Every definition the instance ran or runs next, with its text and a unified diff from the one before (`wf inspect ID --definitions --json`'s `definitions`)",
        query: &[],
        body: None,
        answers: &[
            (
                "200",
                "An array of `{hash, from_run, source, diff?}`, oldest first",
            ),
            ("401", "No valid token"),
            ("404", "No such instance"),
        ],
        token: true,
    },
    Route {
        method: "post",
        path: "/api/v1/instances/{id}/signal",
        summary: "Deliver an event (`wf signal`)",
        query: &[],
        body: Some("`{event, data?}`"),
        answers: &[
            (
                "200",
                "`{id, event, delivered}` (and `warning` when no step waits for it)",
            ),
            ("400", "A bad body, or the instance has ended"),
            ("401", "No valid token"),
            ("404", "No such instance"),
            ("413", "A body over 1 MiB"),
        ],
        token: true,
    },
    Route {
        method: "post",
        path: "/api/v1/instances/{id}/cancel",
        summary: "Cancel; compensations run (`wf cancel`)",
        query: &[],
        body: None,
        answers: ACTED,
        token: true,
    },
    Route {
        method: "post",
        path: "/api/v1/instances/{id}/terminate",
        summary: "Cancel without compensations (`wf cancel --terminate`)",
        query: &[],
        body: None,
        answers: ACTED,
        token: true,
    },
    Route {
        method: "post",
        path: "/api/v1/instances/{id}/resume",
        summary: "Continue an interrupted, sleeping or waiting instance (`wf resume [--now] [--no-cache]`)",
        query: &[],
        body: Some(
            "`{now?, no_cache?}`: fire a timer that is not yet due; run `cache:` steps without taking a kept result",
        ),
        answers: ACTED,
        token: true,
    },
    Route {
        method: "post",
        path: "/api/v1/instances/{id}/retry",
        summary: "Give failed steps a fresh attempt budget and continue (`wf resume --retry-failed`)",
        query: &[],
        body: None,
        answers: ACTED,
        token: true,
    },
    Route {
        method: "post",
        path: "/api/v1/instances/{id}/restart",
        summary: "Run a step and everything downstream of it again (`wf restart`)",
        query: &[],
        body: Some("`{from, as?}`"),
        answers: ACTED,
        token: true,
    },
    Route {
        method: "post",
        path: "/api/v1/instances/{id}/upgrade",
        summary: "Move the instance onto the definition registered under its workflow's name (`wf upgrade ID`)",
        query: &[],
        body: Some("`{map?, allow_gaps?, children?, dry_run?}`: `map` renames steps, OLD to NEW"),
        answers: &[
            (
                "200",
                "`{id, outcome, plan}`: upgraded, or (a dry run) its plan, refused or not",
            ),
            ("400", "A bad body"),
            ("401", "No valid token"),
            ("404", "No such instance, or its workflow is not registered"),
            (
                "409",
                "The plan is refused, the instance's status is not one an upgrade moves, or another process holds it",
            ),
        ],
        token: true,
    },
    Route {
        method: "get",
        path: "/api/v1/queues",
        summary: "Queue keys (`wf queue list --json`)",
        query: &[],
        body: None,
        answers: &[
            (
                "200",
                "An array of `{key, admitted, queued, limit, rate, rate_left, oldest_queued_at, oldest_queued_age_ms}`",
            ),
            ("401", "No valid token"),
        ],
        token: true,
    },
    Route {
        method: "get",
        path: "/api/v1/tokens",
        summary: "The named tokens (`wf serve token list --json`; `admin`)",
        query: &[],
        body: None,
        answers: &[
            (
                "200",
                "An array of `{name, scope, created_at, created_by, last_used_at}`",
            ),
            ("401", "No valid token"),
            ("403", "The token's scope is not `admin`"),
        ],
        token: true,
    },
    Route {
        method: "post",
        path: "/api/v1/tokens",
        summary: "Make a named token (`wf serve token add`; `admin`)",
        query: &[],
        body: Some("`{name, scope}`: scope `read`, `operate` or `admin`"),
        answers: &[
            (
                "201",
                "`{name, scope, created_at, created_by, last_used_at, token}`: the token, shown this once",
            ),
            ("400", "A bad body, a bad name, or a name taken"),
            ("401", "No valid token"),
            ("403", "The token's scope is not `admin`"),
        ],
        token: true,
    },
    Route {
        method: "delete",
        path: "/api/v1/tokens/{name}",
        summary: "Revoke a named token and end its sessions (`wf serve token revoke`; `admin`)",
        query: &[],
        body: None,
        answers: &[
            (
                "204",
                "Revoked: every server refuses it from its next request",
            ),
            ("400", "No token of that name"),
            ("401", "No valid token"),
            ("403", "The token's scope is not `admin`"),
        ],
        token: true,
    },
    Route {
        method: "get",
        path: "/api/v1/db/backup",
        summary: "A consistent backup of the whole history, made now, as a SQLite file (`wf db backup`; `admin`)",
        query: &[],
        body: None,
        answers: &[
            (
                "200",
                "The SQLite file (`application/vnd.sqlite3`), any wf opens with `--db`",
            ),
            ("401", "No valid token"),
            ("403", "The token's scope is not `admin`"),
            (
                "503",
                "No temporary folder for the backup, or the database cannot serve now",
            ),
        ],
        token: true,
    },
    Route {
        method: "post",
        path: "/api/v1/db/copy",
        summary: "Copy the whole history into another database (`wf db copy --to`; `admin`)",
        query: &[],
        body: Some("`{to, resume?}`: a path on the server or a `postgres://` URL"),
        answers: &[
            ("200", "`{instances, written, skipped}` once done"),
            (
                "400",
                "A bad body, a target holding history (without `resume`), or this database",
            ),
            ("401", "No valid token"),
            ("403", "The token's scope is not `admin`"),
        ],
        token: true,
    },
    Route {
        method: "post",
        path: "/api/v1/db/import",
        summary: "Bring back the instances of an archive of `wf prune --archive` (`wf db import`; `admin`)",
        query: &[],
        body: Some("The archive: JSON lines, or zstd frames of them (at most 1 GiB)"),
        answers: &[
            ("200", "`{records, written, skipped}`"),
            ("400", "A line of the body that is not a record"),
            ("401", "No valid token"),
            ("403", "The token's scope is not `admin`"),
            ("413", "A body over 1 GiB"),
        ],
        token: true,
    },
    Route {
        method: "get",
        path: "/api/v1/db/actions",
        summary: "Who did what to the registry, the tokens and the history as a whole, newest first (`wf db actions --json`)",
        query: &[("limit", "At most this many (50)")],
        body: None,
        answers: &[
            ("200", "An array of `{at, action, actor, detail}`"),
            ("400", "A bad `limit`"),
            ("401", "No valid token"),
        ],
        token: true,
    },
    Route {
        method: "get",
        path: "/api/v1/queues/{key}",
        summary: "One queue key: the instances holding its slots, then those waiting in the order they are admitted (`wf queue show KEY --json`)",
        query: &[(
            "limit",
            "At most this many of each list (default 100, at most 1000)",
        )],
        body: None,
        answers: &[
            (
                "200",
                "`{key, limit, rate, rate_left, admitted: [{id, workflow, status, priority, created_at, age_ms}], admitted_total, waiting: [{position, …, not_before?}], waiting_total}`",
            ),
            ("400", "A bad parameter"),
            ("401", "No valid token"),
        ],
        token: true,
    },
    Route {
        method: "get",
        path: "/api/v1/db/check",
        summary: "Check the history: integrity and wf's invariants (`wf db check --json`)",
        query: &[],
        body: None,
        answers: &[
            (
                "200",
                "`{sound, problems: [{check, instance, detail}]}`, each problem naming the instance it hurts",
            ),
            ("401", "No valid token"),
        ],
        token: true,
    },
    Route {
        method: "get",
        path: "/api/v1/schedules",
        summary: "Registered schedules (`wf schedule list --json`)",
        query: &[],
        body: None,
        answers: &[
            ("200", "An array of schedule entries"),
            ("401", "No valid token"),
        ],
        token: true,
    },
    Route {
        method: "get",
        path: "/api/v1/workflows",
        summary: "Registered workflows (`wf workflow list --json`)",
        query: &[],
        body: None,
        answers: &[
            (
                "200",
                "An array of `{name, workflow_path, definition_hash, registered_at, inputs, schedules, webhook}`",
            ),
            ("401", "No valid token"),
        ],
        token: true,
    },
    Route {
        method: "get",
        path: "/api/v1/workflows/{name}",
        summary: "A registered workflow",
        query: &[],
        body: None,
        answers: &[
            (
                "200",
                "`{name, workflow_path, definition_hash, registered_at, inputs, schedules, webhook}`",
            ),
            ("401", "No valid token"),
            ("404", "Not registered"),
        ],
        token: true,
    },
    Route {
        method: "post",
        path: "/api/v1/workflows/{name}/instances",
        summary: "Start a registered workflow: the instance is recorded for the workers (`wf run --detach`); `Idempotency-Key` makes a retry return the same instance",
        query: &[],
        body: Some("`{inputs?, labels?}`"),
        answers: &[
            ("201", "`{id, workflow, status, exit_code, created: true}`"),
            ("200", "The instance this Idempotency-Key started before"),
            ("400", "Bad inputs or labels"),
            ("401", "No valid token"),
            ("404", "Not registered"),
            (
                "409",
                "The Idempotency-Key started an instance with other inputs",
            ),
        ],
        token: true,
    },
    Route {
        method: "post",
        path: "/api/v1/workflows/{name}/upgrade",
        summary: "Move every instance of the workflow that is not running and has not ended onto its registered definition (`wf upgrade --workflow NAME`)",
        query: &[],
        body: Some("`{map?, allow_gaps?, children?, dry_run?}`: `map` renames steps, OLD to NEW"),
        answers: &[
            (
                "200",
                "An array of `{id, outcome, status?, holder?, workflow?, plan?}`, one per instance",
            ),
            ("400", "A bad body"),
            ("401", "No valid token"),
            ("404", "Not registered"),
        ],
        token: true,
    },
    Route {
        method: "post",
        path: "/api/v1/bulk/{action}",
        summary: "Cancel, retry the failed steps of, or resume many instances (`action`: cancel, retry, resume; `wf cancel ID…`, `wf resume [--retry-failed] --status failed`)",
        query: &[],
        body: Some(
            "`{ids?, filter?, dry_run?, reason?}`: `ids` (any unique prefixes) or `filter` (the list's: status, workflow, label, since, queue, id, error, parent, roots), one of the two; at most 1000 instances",
        ),
        answers: &[
            (
                "200",
                "`{action, instances: [{id, workflow, status, plan, outcome, detail}]}`; `outcome` planned, canceled, canceling, resuming, skipped or failed",
            ),
            ("400", "A bad body, or more than 1000 instances"),
            ("401", "No valid token"),
            ("403", "The token's scope is not `operate`"),
            ("404", "No such action, or an unknown id"),
        ],
        token: true,
    },
    Route {
        method: "get",
        path: "/api/v1/openapi.json",
        summary: "This document",
        query: &[],
        body: None,
        answers: &[("200", "OpenAPI 3.1")],
        token: true,
    },
    Route {
        method: "get",
        path: "/metrics",
        summary: "Prometheus text format (OpenMetrics with `Accept: application/openmetrics-text`)",
        query: &[],
        body: None,
        answers: &[("200", "Metrics"), ("401", "No valid token")],
        token: true,
    },
    Route {
        method: "post",
        path: "/hooks/{name}",
        summary: "A webhook delivery: starts the workflow registered with `on.webhook.name` NAME; signed with `X-Hub-Signature-256`",
        query: &[],
        body: Some("JSON, at most 1 MiB"),
        answers: &[
            ("201", "Started `{id, workflow, status, created: true}`"),
            ("200", "A redelivery: the instance its dedupe value started"),
            ("400", "Not JSON, or inputs that do not fit"),
            ("401", "A missing or wrong signature"),
            ("404", "No such hook"),
            ("413", "A body over 1 MiB"),
        ],
        token: false,
    },
];

fn error_schema() -> Schema {
    let inner = ObjectBuilder::new()
        .property(
            "code",
            ObjectBuilder::new().schema_type(SchemaType::new(Type::String)),
        )
        .required("code")
        .property(
            "message",
            ObjectBuilder::new().schema_type(SchemaType::new(Type::String)),
        )
        .required("message");
    Schema::Object(
        ObjectBuilder::new()
            .property("error", inner)
            .required("error")
            .build(),
    )
}

fn any_json() -> RefOr<Schema> {
    RefOr::T(Schema::Object(ObjectBuilder::new().build()))
}

/// The document.
pub fn build() -> utoipa::openapi::OpenApi {
    let mut paths = PathsBuilder::new();
    for r in ROUTES {
        let mut op = OperationBuilder::new()
            .summary(Some(r.summary))
            .operation_id(Some(format!(
                "{}_{}",
                r.method,
                r.path
                    .trim_start_matches('/')
                    .replace(['/', '.'], "_")
                    .replace(['{', '}'], "")
            )));
        for seg in r.path.split('/') {
            if let Some(name) = seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                op = op.parameter(
                    ParameterBuilder::new()
                        .name(name)
                        .parameter_in(ParameterIn::Path)
                        .required(Required::True)
                        .schema(Some(
                            ObjectBuilder::new().schema_type(SchemaType::new(Type::String)),
                        )),
                );
            }
        }
        for (name, what) in r.query {
            op = op.parameter(
                ParameterBuilder::new()
                    .name(*name)
                    .parameter_in(ParameterIn::Query)
                    .required(Required::False)
                    .description(Some(*what))
                    .schema(Some(
                        ObjectBuilder::new().schema_type(SchemaType::new(Type::String)),
                    )),
            );
        }
        if let Some(body) = r.body {
            op = op.request_body(Some(
                RequestBodyBuilder::new()
                    .description(Some(body))
                    .content(
                        "application/json",
                        ContentBuilder::new().schema(Some(any_json())).build(),
                    )
                    .build(),
            ));
        }
        for (status, what) in r.answers {
            let content = if status.starts_with('2') {
                ContentBuilder::new().schema(Some(any_json())).build()
            } else {
                ContentBuilder::new()
                    .schema(Some(RefOr::<Schema>::Ref(Ref::from_schema_name("Error"))))
                    .build()
            };
            let kind = if r.path == "/metrics" && status.starts_with('2') {
                "text/plain"
            } else {
                "application/json"
            };
            op = op.response(
                *status,
                ResponseBuilder::new()
                    .description(*what)
                    .content(kind, content)
                    .build(),
            );
        }
        if !r.token {
            op = op.security(SecurityRequirement::default());
        }
        let method = match r.method {
            "post" => HttpMethod::Post,
            "delete" => HttpMethod::Delete,
            _ => HttpMethod::Get,
        };
        paths = paths.path(r.path, PathItem::new(method, op.build()));
    }
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("wf serve")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "The HTTP API of wf, a durable workflow runner: the CLI's reads and actions, with its JSON shapes. Errors are `{error: {code, message}}`.",
                ))
                .build(),
        )
        .paths(paths.build())
        .components(Some(
            ComponentsBuilder::new()
                .schema("Error", error_schema())
                .security_scheme(
                    "token",
                    SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
                )
                .build(),
        ))
        .security(Some(vec![SecurityRequirement::new(
            "token",
            Vec::<String>::new(),
        )]))
        .build()
}

/// `GET /api/v1/openapi.json`.
pub async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(build())
}

#[cfg(test)]
#[path = "openapi_tests.rs"]
mod tests;
