//! Fuzzes the `${{ }}` language: parsing templates and expressions and
//! evaluating them against a context must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wf::workflow::{expr, template};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let ctx = serde_json::json!({
        "inputs": { "n": 5, "s": "x", "list": [1, "two", { "k": null }] },
        "state": { "flag": true, "nested": { "a": [1, 2, 3] } },
        "steps": { "a-b": { "status": "completed", "output": { "json": { "id": 7 } } } },
    });
    if let Ok(e) = expr::parse(text) {
        let _ = e.eval(&ctx);
        let _ = e.references();
    }
    if let Ok(t) = template::Template::parse(text) {
        let _ = t.render_value(&ctx);
        let mut env = Vec::new();
        let _ = t.render_shell(&ctx, &mut env);
    }
});
