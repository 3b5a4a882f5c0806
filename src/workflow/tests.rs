//! Parsing and validating whole workflow files: what `Workflow::parse`
//! accepts, refuses and builds, and the compiled form it keeps.

use super::*;

/// Every part of a definition, to check the compiled form keeps them all.
const EVERYTHING: &str = r#"
name: everything
description: every field
inputs:
  order_id: { required: true, description: the order }
  amount: { default: 100 }
  when: { default: "2030-01-01T00:00:00Z" }
secrets: [API_TOKEN]
env: { API: "http://127.0.0.1:8080/${{ inputs.order_id }}" }
state: { charged: false, n: 1.5 }
defaults: { timeout: 5m, retry: { max_attempts: 3 }, run: { shell: bash, working_directory: scripts } }
concurrency: 4
timeout: 1h
trace: { per: instance }
outputs: { order: "${{ inputs.order_id }}", charged: "${{ state.charged }}" }
steps:
  - id: reserve
    run: ./reserve.sh "${{ inputs.order_id }}"
    dir: scripts
    env: { ORDER: "${{ inputs.order_id }}" }
  - id: charge
    needs: [reserve]
    http:
      method: POST
      url: "${{ env.API }}/charge"
      headers: { Authorization: "Bearer ${{ secrets.API_TOKEN }}" }
      query: { q: "${{ inputs.amount }}" }
      json: { order: "${{ inputs.order_id }}", n: [1, 2.5, null, true] }
      expect_status: [200, 201]
      idempotency_key: true
    timeout: 10s
    retry: { max_attempts: 5, backoff: exponential, interval: 1s, multiplier: 2, max_interval: 1m,
             non_retryable: [user.card_declined, http.402], retryable: [http.409] }
    errors: { 3: card_declined, 4: gone }
    set_state: { charged: true, charge_id: "${{ output.json.id }}" }
    compensate: { run: ["./refund.sh", "${{ inputs.order_id }}"], timeout: 5s }
  - id: cool-down
    sleep: 1h
  - id: until
    sleep: { until: "${{ inputs.when }}" }
  - id: approval
    wait_for_event: { name: approved, timeout: 24h }
  - id: ship
    if: "${{ state.charged && steps.approval.output.json.ok || !(inputs.amount >= 3) }}"
    for_each: "${{ steps.reserve.output.json.items }}"
    max_parallel: 4
    run: ["./ship.sh", "${{ item.sku }}", "${{ item['x'][0] }}"]
    continue_on_error: true
  - id: build
    needs: []
    matrix: { os: [linux, macos], n: "${{ inputs.amount }}", include: [{ os: linux, x: 1 }], exclude: [{ os: macos, n: 2 }] }
    fail_fast: false
    max_parallel: 2
    shell: python3 -u {0}
    run: print("built")
  - id: body
    needs: []
    if: false
    http: { url: "http://x/${{ inputs.order_id }}", body: "text ${{ inputs.amount }}" }
"#;

#[test]
fn the_step_results_read_by_expressions_are_known() {
    let wf =
        |body: &str| Workflow::from_pinned(&format!("name: r\n{body}"), "r.yaml").expect("valid");
    let read = wf("outputs: { x: \"${{ steps.c.output }}\" }\nsteps:\n  - id: a\n    run: \"true\"\n  \
             - id: b\n    if: steps.a.status == 'completed'\n    run: \"true\"\n  - id: c\n    run: \"true\"\n  \
             - id: d\n    run: \"true\"\n")
        .results_read;
    assert_eq!(
        read,
        Some(["a", "c"].into_iter().map(String::from).collect())
    );
    // `steps` read whole: every result is kept.
    let all = wf(
        "steps:\n  - id: a\n    run: \"true\"\n  - id: b\n    run: echo '${{ toJSON(steps) }}'\n",
    )
    .results_read;
    assert_eq!(all, None);
}

#[test]
fn the_compiled_form_is_the_parsed_workflow() {
    let mut sources = vec![EVERYTHING.to_string()];
    for file in ["hello.yaml", "approval.yaml", "saga.yaml", "http.yaml"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("workflows")
            .join(file);
        sources.push(std::fs::read_to_string(path).expect("example workflow"));
    }
    for source in sources {
        let parsed = validate::parse_source(&source, "wf.yaml").expect("valid");
        let compiled = parsed.compiled().expect("serializable");
        let back = Workflow::from_compiled(&compiled, &source).expect("readable");
        assert_eq!(format!("{back:?}"), format!("{parsed:?}"));
        assert_eq!((back.hash, back.source), (parsed.hash, parsed.source));
    }
}

#[test]
fn a_compiled_form_from_another_version_or_damaged_is_not_used() {
    let parsed = validate::parse_source(EVERYTHING, "wf.yaml").expect("valid");
    let compiled = parsed.compiled().expect("serializable");
    let other = compiled.replace(COMPILED_FORMAT, "wf 0.0.0 compiled 1");
    assert!(Workflow::from_compiled(&other, EVERYTHING).is_none());
    assert!(Workflow::from_compiled(&compiled[..compiled.len() / 2], EVERYTHING).is_none());
    assert!(Workflow::from_compiled("null", EVERYTHING).is_none());
}

#[test]
fn a_label_filter_may_name_wf_s_own_labels_but_a_label_set_may_not() {
    assert_eq!(
        super::parse_label_filter("wf.webhook=github"),
        Ok(("wf.webhook".into(), "github".into()))
    );
    assert_eq!(
        super::parse_label_filter("team="),
        Ok(("team".into(), String::new()))
    );
    assert!(super::parse_label("wf.webhook=github").is_err());
    assert!(super::parse_label_filter("wf.a b=1").is_err());
    assert!(super::parse_label_filter("team").is_err());
}
