//! Every route the router serves is in the document, and every route the
//! document lists is served.

use std::collections::BTreeSet;

/// The routes `serve::router` adds, read from its source.
fn routed() -> BTreeSet<(String, String)> {
    let src = include_str!("../mod.rs");
    let mut out = BTreeSet::new();
    for part in src.split(".route(").skip(1) {
        let Some(path) = part.split('"').nth(1) else {
            continue;
        };
        // The route's arguments: up to its closing parenthesis.
        let mut depth = 0usize;
        let args = part
            .char_indices()
            .find(|&(_, c)| match c {
                '(' => {
                    depth += 1;
                    false
                }
                ')' if depth == 0 => true,
                ')' => {
                    depth -= 1;
                    false
                }
                _ => false,
            })
            .map_or(part, |(at, _)| &part[..at]);
        for method in ["get", "post", "delete"] {
            let called = args.match_indices(&format!("{method}(")).any(|(at, _)| {
                !args[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            });
            if called {
                out.insert((method.to_string(), path.to_string()));
            }
        }
    }
    out
}

#[test]
fn every_route_is_documented_and_every_documented_route_is_served() {
    let documented: BTreeSet<(String, String)> = super::routes::all()
        .iter()
        .map(|r| (r.method(), r.path().to_string()))
        .collect();
    assert_eq!(routed(), documented);
}

/// Every operation of the document: (path, method, operation).
fn operations(doc: &serde_json::Value) -> Vec<(String, String, serde_json::Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            out.push((path.clone(), method.clone(), op.clone()));
        }
    }
    out
}

/// Every `$ref` under `v`.
fn refs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, item) in m {
                match (k.as_str(), item) {
                    ("$ref", serde_json::Value::String(r)) => out.push(r.clone()),
                    _ => refs(item, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|i| refs(i, out)),
        _ => {}
    }
}

#[test]
fn every_reference_and_every_link_resolves() {
    let doc = super::json();
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(all.len() > 50, "{}", all.len());
    for r in &all {
        let name = r.strip_prefix("#/components/schemas/").expect(r);
        assert!(
            doc["components"]["schemas"].get(name).is_some(),
            "{r} is not among the components"
        );
    }
    let ids: BTreeSet<String> = operations(&doc)
        .iter()
        .map(|(_, _, op)| op["operationId"].as_str().unwrap().to_string())
        .collect();
    let mut links = 0;
    for (path, method, op) in operations(&doc) {
        for (status, answer) in op["responses"].as_object().unwrap() {
            for (name, link) in answer["links"].as_object().into_iter().flatten() {
                links += 1;
                // OpenAPI's spelling (utoipa writes `operation_id`).
                let to = link["operationId"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{method} {path} {status} link {name}: {link}"));
                assert!(ids.contains(to), "{method} {path} links to {to}");
                assert!(link.get("operation_id").is_none());
            }
        }
    }
    assert!(links >= 30, "{links}");
    // A start and the list lead to the instance's reads and actions.
    let start = &doc["paths"]["/api/v1/workflows/{name}/instances"]["post"];
    assert_eq!(
        start["responses"]["201"]["links"]["inspect"]["parameters"]["id"],
        "$response.body#/id"
    );
    let list = &doc["paths"]["/api/v1/instances"]["get"];
    assert_eq!(
        list["responses"]["200"]["links"]["signal"]["operationId"],
        "signal_instance"
    );
}

#[test]
fn answers_are_typed_with_their_statuses_and_bodies_refuse_unknown_fields() {
    let doc = super::json();
    let schemas = &doc["components"]["schemas"];
    // The views' fields, required where always there, with their words.
    let summary = &schemas["InstanceSummary"];
    let required: Vec<&str> = summary["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for f in ["id", "workflow", "status", "created_at", "labels"] {
        assert!(required.contains(&f), "{f}: {summary}");
    }
    assert_eq!(
        schemas["ShownStatus"]["enum"].as_array().unwrap().len(),
        crate::vocab::ShownStatus::ALL.len()
    );
    assert_eq!(schemas["Timestamp"]["format"], "date-time");
    assert!(
        schemas["AttemptOutcome"]["enum"]
            .as_array()
            .unwrap()
            .contains(&"cached".into())
    );
    // Request bodies refuse what they do not know, as the server does.
    for body in [
        "SignalBody",
        "StartBody",
        "RestartBody",
        "ResumeBody",
        "TokenBody",
        "BulkBody",
    ] {
        assert_eq!(schemas[body]["additionalProperties"], false, "{body}");
    }
    // Every operation answers its own statuses and the shared ones, each
    // error with the error's shape.
    for (path, method, op) in operations(&doc) {
        let answers = op["responses"].as_object().unwrap();
        assert!(answers.contains_key("400"), "{method} {path}");
        if path.starts_with("/api/") {
            assert!(answers.contains_key("401"), "{method} {path}");
        }
        for (status, a) in answers {
            if status.starts_with('4') || status.starts_with('5') {
                assert_eq!(
                    a["content"]["application/json"]["schema"]["$ref"],
                    "#/components/schemas/Error",
                    "{method} {path} {status}"
                );
            }
        }
        let is_instance = path.starts_with("/api/v1/instances/{id}");
        if is_instance {
            assert!(answers.contains_key("404"), "{method} {path}");
        }
        // An example for each operation that answers JSON.
        if let Some(ok) = answers.iter().find(|(s, _)| s.starts_with('2')) {
            let json = &ok.1["content"]["application/json"];
            if json.get("schema").is_some_and(|s| s.get("$ref").is_some()) {
                assert!(json.get("example").is_some(), "{method} {path}");
            }
        }
    }
    let signal = &doc["paths"]["/api/v1/instances/{id}/signal"]["post"]["responses"];
    assert!(signal.get("409").is_some() && signal.get("413").is_some());
    let tokens = &doc["paths"]["/api/v1/tokens"]["post"]["responses"];
    assert!(tokens.get("403").is_some(), "admin routes say the scope");
}

#[test]
fn no_string_of_the_document_may_hold_a_nul() {
    let doc = super::json();
    let list = &doc["paths"]["/api/v1/instances"]["get"]["parameters"];
    let workflow = list
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "workflow")
        .unwrap();
    assert_eq!(workflow["schema"]["pattern"], super::NO_NUL);
    let label = list
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "label")
        .unwrap();
    assert_eq!(
        label["schema"]["items"]["allOf"][0]["pattern"],
        super::NO_NUL
    );
    // ECMA-262's (and Python's) escape of U+0000.
    assert_eq!(super::NO_NUL, "^[^\\u0000]*$");
}

#[test]
fn the_document_is_openapi_3_1_with_unique_operation_ids() {
    let doc = super::json();
    assert_eq!(doc["openapi"], "3.1.0");
    let mut ids = BTreeSet::new();
    for item in doc["paths"].as_object().unwrap().values() {
        for op in item.as_object().unwrap().values() {
            assert!(ids.insert(op["operationId"].as_str().unwrap().to_string()));
        }
    }
    assert_eq!(ids.len(), super::routes::all().len());
}

#[test]
fn the_routes_the_timeout_does_not_bound_are_those_without_a_408() {
    let src = include_str!("../mod.rs");
    let from = src.find("let waiting = Router::new()").unwrap();
    let to = src[from..].find("let api = quick").unwrap() + from;
    let unbounded: BTreeSet<String> = src[from..to]
        .split(".route(\"")
        .skip(1)
        .filter_map(|part| part.split('"').next().map(str::to_string))
        .collect();
    assert_eq!(unbounded.len(), 5, "{unbounded:?}");
    let without_408: BTreeSet<String> = operations(&super::json())
        .into_iter()
        .filter(|(_, _, op)| op["responses"].get("408").is_none())
        .map(|(path, _, _)| path)
        .collect();
    assert_eq!(without_408, unbounded);
}
