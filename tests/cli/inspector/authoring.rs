//! What GitHub Actions habits write, seen in the real browser and the API
//! (issue 60): a `matrix` step's combinations shown by their values in the
//! steps table, the graph and the waterfall, and their logs reached by
//! those values; the page fits a 360 px screen.

use super::Browser;
use crate::Test;
use crate::serve::{Server, TOKEN};

const MATRIX: &str = r#"
name: builds
steps:
  - id: build
    matrix:
      os: [linux, macos]
      arch: [amd64, arm64]
      exclude: [{ os: macos, arch: amd64 }]
    shell: bash
    run: echo "built ${{ matrix.os }}/${{ matrix.arch }}"
"#;

#[test]
fn matrix_combinations_show_by_their_values() {
    let t = Test::new();
    let (id, ran) = t.run_yaml("builds.yaml", MATRIX, &[]);
    ran.code(0);
    let s = Server::start(&t, &[], &[]);
    let b = Browser::start();
    b.goto(&format!("{}/instances/{id}?token={TOKEN}", s.base));
    let steps = b.text("table");
    for label in [
        "build[os=linux,arch=amd64]",
        "build[os=linux,arch=arm64]",
        "build[os=macos,arch=arm64]",
    ] {
        assert!(steps.contains(label), "{steps}");
    }
    assert!(b.text(".across svg.graph").contains("3 combinations"));
    assert!(
        b.text(".waterfall").contains("build[os=macos,arch=arm64]"),
        "{}",
        b.text(".waterfall")
    );
    // A combination's logs, named by its values.
    b.goto(&format!(
        "{}/instances/{id}/logs/build%5Bos%3Dlinux%2Carch%3Darm64%5D",
        s.base
    ));
    b.wait_text("built linux/arm64");
    assert!(
        b.too_wide_at(&format!("{}/instances/{id}", s.base))
            .is_empty()
    );
    // The API says the same.
    let api = s.get(&format!("/api/v1/instances/{id}"));
    assert_eq!(api.status, 200, "{}", api.text());
    let labels: Vec<String> = api.json()["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["label"].as_str().map(String::from))
        .collect();
    assert_eq!(labels.len(), 3, "{labels:?}");
    let logs = s.get(&format!(
        "/api/v1/instances/{id}/logs/build%5Bos%3Dmacos%2Carch%3Darm64%5D"
    ));
    assert_eq!(logs.status, 200, "{}", logs.text());
    assert!(logs.text().contains("built macos/arm64"), "{}", logs.text());
    let errors = b.console_errors();
    assert!(errors.is_empty(), "console errors: {errors:?}");
}

#[test]
fn a_cached_attempt_links_to_the_attempt_it_came_from() {
    let t = Test::new();
    let yaml = "name: cached\nsteps:\n  - id: build\n    run: echo built\n    cache: { key: k }\n";
    let (first, ran) = t.run_yaml("c.yaml", yaml, &[]);
    ran.code(0);
    let (second, ran) = t.run_yaml("c.yaml", yaml, &[]);
    ran.code(0);
    let s = Server::start(&t, &[], &[]);
    let b = Browser::start();
    b.goto(&format!("{}/instances/{second}?token={TOKEN}", s.base));
    let steps = b.text("table");
    assert!(steps.contains("cached"), "{steps}");
    let href = b.js("return document.querySelector('a.cached-from').getAttribute('href')");
    assert_eq!(href, format!("/instances/{first}"));
    // The attempts are folded under their count.
    b.click("table details summary");
    b.click("a.cached-from");
    b.wait_text(&format!("Instance {first}"));
    let api = s.get(&format!("/api/v1/instances/{second}/attempts"));
    assert_eq!(api.status, 200, "{}", api.text());
    let text = api.text();
    assert!(
        text.contains("\"cached\"") && text.contains(&first),
        "{text}"
    );
    let errors = b.console_errors();
    assert!(errors.is_empty(), "console errors: {errors:?}");
}

#[test]
fn the_resume_form_can_leave_the_cache_aside() {
    let t = Test::new();
    let yaml = "name: later\nsteps:\n  - id: gate\n    wait_for_event: { name: go }\n  - id: build\n    run: echo ran >> runs.log\n    cache: { key: k }\n";
    let keep = "name: later\nsteps:\n  - id: build\n    run: echo ran >> runs.log\n    cache: { key: k }\n";
    t.run_yaml("keep.yaml", keep, &[]).1.code(0);
    let (id, ran) = t.run_yaml("w.yaml", yaml, &[]);
    ran.code(3);
    t.wf(&["signal", &id, "go"]).code(0);
    let s = Server::start(&t, &[], &[]);
    let b = Browser::start();
    b.goto(&format!("{}/instances/{id}?token={TOKEN}", s.base));
    b.click("a[href$='/act/resume']");
    b.click("input[name=no_cache]");
    b.click("button[type=submit]");
    crate::serve::until("the resumed run", || {
        t.inspect(&id)["status"] == "completed"
    });
    let i = t.inspect(&id);
    let build = crate::Test::step(&i, "build");
    assert_eq!(build["attempt_list"][0]["outcome"], "ok", "{build}");
    assert_eq!(t.read("runs.log"), "ran\nran\n");
}
