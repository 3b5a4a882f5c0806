//! Every route the router serves is in the document, and every route the
//! document lists is served.

use super::ROUTES;
use std::collections::BTreeSet;

/// The routes `serve::router` adds, read from its source.
fn routed() -> BTreeSet<(String, String)> {
    let src = include_str!("mod.rs");
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
    let documented: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|r| (r.method.to_string(), r.path.to_string()))
        .collect();
    assert_eq!(routed(), documented);
}

#[test]
fn the_document_is_openapi_3_1_with_unique_operation_ids() {
    let doc = serde_json::to_value(super::build()).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    let mut ids = BTreeSet::new();
    for item in doc["paths"].as_object().unwrap().values() {
        for op in item.as_object().unwrap().values() {
            assert!(ids.insert(op["operationId"].as_str().unwrap().to_string()));
        }
    }
    assert_eq!(ids.len(), ROUTES.len());
}
