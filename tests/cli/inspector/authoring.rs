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
