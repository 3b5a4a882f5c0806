//! The OpenAPI 3.1 document of the API (`GET /api/v1/openapi.json`),
//! generated from the types the handlers take and answer with: each
//! operation in [`routes`] names its query's struct (`utoipa::IntoParams`),
//! its body's and its answer's types (`utoipa::ToSchema`, derived on the
//! views of `crate::views` the CLI's `--json` prints too), so the document
//! cannot say a field the code does not have. What the types cannot say is
//! said here once: the statuses a route answers (from the layers every
//! route passes: the token and its scope, `auth::needed`; the query's
//! names; the body's limit; the database), the links from a start or a
//! list to the instance's operations, and an example of each.
//!
//! The tests check the document against the router (`tests.rs`: every
//! route in both), against OpenAPI's own validator, and against the live
//! server with schemathesis (tests/cli/openapi.rs).

mod op;
mod routes;

use axum::Json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ComponentsBuilder, InfoBuilder, OpenApiBuilder, PathsBuilder};

/// The document.
pub fn build() -> utoipa::openapi::OpenApi {
    let mut schemas = Vec::new();
    let mut paths = PathsBuilder::new().build();
    for op in routes::all() {
        let (path, method, operation) = op.build(&mut schemas);
        paths.add_path_operation(path, vec![method], operation);
    }
    let mut components = ComponentsBuilder::new()
        .schema("Error", op::error_schema())
        .security_scheme(
            "token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "`Authorization: Bearer TOKEN`: `WF_SERVE_TOKEN` (or the server's token file), or a token of `wf serve token add`",
                    ))
                    .build(),
            ),
        );
    schemas.sort_by(|a, b| a.0.cmp(&b.0));
    schemas.dedup_by(|a, b| a.0 == b.0);
    for (name, schema) in schemas {
        components = components.schema(name, schema);
    }
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("wf serve")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "The HTTP API of wf, a durable workflow runner: the CLI's reads and actions, with the shapes of its `--json`. Every error is `{error: {code, message}}`; its `code` and HTTP status follow the CLI's exit code for the same failure (docs/api.md).",
                ))
                .build(),
        )
        .paths(paths)
        .components(Some(components.build()))
        .security(Some(vec![SecurityRequirement::new(
            "token",
            Vec::<String>::new(),
        )]))
        .build()
}

/// What every string of the API may not hold: a NUL character (U+0000),
/// which the server refuses in a request's path, query and body
/// (`params::no_nul`, `query::read`, `body::json`; free JSON, a signal's
/// `data` and the `inputs`, aside: it is kept as JSON text, where a NUL is
/// an escape) and never answers with.
const NO_NUL: &str = "^[^\\u0000]*$";

/// Adds [`NO_NUL`] to every string schema in `schema` (and the schemas it
/// holds) that a closed set, a format or a media type does not bound
/// already: as its `pattern`, or beside the one it has (`allOf`).
fn forbid_nul(schema: &mut serde_json::Value) {
    use serde_json::{Value, json};
    let Value::Object(m) = schema else { return };
    let is_string = m.get("type").is_some_and(|t| {
        t == "string"
            || t.as_array()
                .is_some_and(|a| a.iter().any(|x| x == "string"))
    });
    let bounded = ["enum", "const", "format", "contentMediaType"]
        .iter()
        .any(|k| m.contains_key(*k));
    if is_string && !bounded {
        if m.contains_key("pattern") {
            let all = m.entry("allOf").or_insert_with(|| json!([]));
            if let Some(all) = all.as_array_mut() {
                all.push(json!({ "pattern": NO_NUL }));
            }
        } else {
            m.insert("pattern".into(), json!(NO_NUL));
        }
    }
    if let Some(Value::Object(props)) = m.get_mut("properties") {
        props.values_mut().for_each(forbid_nul);
    }
    for k in ["items", "additionalProperties", "propertyNames", "not"] {
        if let Some(v) = m.get_mut(k) {
            forbid_nul(v);
        }
    }
    for k in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(all)) = m.get_mut(k) {
            all.iter_mut().for_each(forbid_nul);
        }
    }
}

/// Applies [`forbid_nul`] to every schema under `v` (a path item, an
/// operation, a parameter, a body, an answer).
fn forbid_nul_below(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, item) in m.iter_mut() {
                if k == "schema" {
                    forbid_nul(item);
                } else {
                    forbid_nul_below(item);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(forbid_nul_below),
        _ => {}
    }
}

/// The document as JSON, with [`NO_NUL`] on its strings. utoipa 5.5
/// writes a link's fields in snake case (`operation_id`), which OpenAPI
/// names in camel case (`operationId`): they are renamed here.
pub fn json() -> serde_json::Value {
    let mut doc = serde_json::to_value(build()).unwrap_or_default();
    if let Some(paths) = doc.get_mut("paths") {
        forbid_nul_below(paths);
    }
    if let Some(serde_json::Value::Object(schemas)) = doc.pointer_mut("/components/schemas") {
        schemas.values_mut().for_each(forbid_nul);
    }
    if let Some(paths) = doc.get_mut("paths").and_then(|p| p.as_object_mut()) {
        let responses = paths
            .values_mut()
            .filter_map(|item| item.as_object_mut())
            .flat_map(|item| item.values_mut())
            .filter_map(|op| op.get_mut("responses").and_then(|r| r.as_object_mut()))
            .flat_map(|r| r.values_mut());
        for response in responses {
            let links = response.get_mut("links").and_then(|l| l.as_object_mut());
            for link in links.into_iter().flat_map(|l| l.values_mut()) {
                let Some(link) = link.as_object_mut() else {
                    continue;
                };
                for (snake, camel) in [
                    ("operation_id", "operationId"),
                    ("operation_ref", "operationRef"),
                    ("request_body", "requestBody"),
                ] {
                    if let Some(v) = link.remove(snake) {
                        link.insert(camel.to_string(), v);
                    }
                }
            }
        }
    }
    doc
}

/// `GET /api/v1/openapi.json`: made once, at the first request (the
/// document is the binary's, so it never changes while the server runs).
pub async fn document() -> Json<serde_json::Value> {
    static DOC: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    Json(DOC.get_or_init(json).clone())
}

#[cfg(test)]
mod tests;
