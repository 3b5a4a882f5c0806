//! The inspector keeping up with the history (issue 54, item 4), in the
//! real browser: every page fits a 360 px screen (no element reaches past
//! its edge, every box of the graph within it), an instance's page follows
//! the instance to its end, the signal form offers the events the instance
//! takes and keeps what was typed when it is refused, the retry
//! confirmation names what the retry will run, a `workflow:` step's attempt
//! leads to its child, and a start form's list input is checked before
//! anything starts.

use super::{Browser, Scene, scene};
use crate::serve::{TOKEN, until};

/// What reaches past the left or right edge of the window, as
/// `TAG.class` (at most 8), once the page is laid out.
fn past_the_edge(b: &Browser) -> Vec<String> {
    let found = b.js(
        "const vw = document.documentElement.clientWidth;\n\
         return [...document.querySelectorAll('body *')]\n\
           .filter(e => { const r = e.getBoundingClientRect();\n\
             return r.width > 0 && r.height > 0 && (r.right > vw + 1 || r.left < -1); })\n\
           .slice(0, 8)\n\
           .map(e => e.tagName + '.' + (e.getAttribute('class') || '') + ' ' + Math.round(e.getBoundingClientRect().right));",
    );
    found
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

#[test]
fn every_page_fits_1280_and_360_px_screens_and_every_box_of_the_graph_is_on_it() {
    let Scene {
        t,
        s,
        b,
        done,
        failed,
        waiting,
    } = scene();
    let base = s.base.clone();
    let pages = [
        "/".to_string(),
        format!("/instances/{done}"),
        format!("/instances/{failed}"),
        format!("/instances/{waiting}"),
        format!("/instances/{done}/logs/greet?attempt=1"),
        format!("/instances/{waiting}/act/signal"),
        format!("/instances/{failed}/act/retry"),
        format!("/instances/{done}/act/restart?from=items"),
        "/workflows".to_string(),
        "/workflows/fanout/start".to_string(),
        "/queues".to_string(),
        "/?status=failed&children=1".to_string(),
        format!("/bulk?action=cancel&pick={waiting}&pick={done}"),
        "/bulk?action=retry&which=matching&status=failed".to_string(),
    ];
    // At a desktop's width and a phone's.
    for (page, width) in pages.iter().flat_map(|p| [(p, 1280), (p, 360)]) {
        b.resize(width, 740);
        b.goto(&format!("{base}{page}"));
        // A resize and a load take effect with the next layout: awaited.
        let mut past = past_the_edge(&b);
        for _ in 0..40 {
            if past.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            past = past_the_edge(&b);
        }
        assert!(past.is_empty(), "{page} at {width} px: {past:?}");
    }
    // The retry's confirmation names what it runs again, as the CLI does.
    b.goto(&format!("{base}/instances/{failed}/act/retry"));
    let text = b.text("main");
    assert!(text.contains("fresh attempt budget: boom"), "{text}");
    // The workflow's Start button is on the screen, not in a clipped column.
    b.goto(&format!("{base}/workflows"));
    let start = b.js(
        "const a = [...document.querySelectorAll('a.button')].find(a => a.textContent.includes('Start'));\n\
         if (!a) return null; const r = a.getBoundingClientRect();\n\
         return r.width > 0 && r.left >= 0 && r.right <= document.documentElement.clientWidth;",
    );
    assert_eq!(start, serde_json::json!(true));
    // Every box of the graph: drawn (six steps), wide enough to read, on
    // the screen, reached by scrolling down the page.
    b.goto(&format!("{base}/instances/{done}"));
    let boxes = b.js("const vw = document.documentElement.clientWidth;\n\
         return [...document.querySelectorAll('svg.graph g.node > rect:first-of-type')]\n\
           .map(r => r.getBoundingClientRect())\n\
           .filter(r => r.width > 0)\n\
           .map(r => [Math.round(r.left), Math.round(r.right), Math.round(r.width)]);");
    let boxes = boxes.as_array().expect("boxes");
    assert_eq!(boxes.len(), 4, "prepare, items, greet, report: {boxes:?}");
    for r in boxes {
        let (left, right, width) = (
            r[0].as_i64().unwrap(),
            r[1].as_i64().unwrap(),
            r[2].as_i64().unwrap(),
        );
        assert!(left >= 0 && right <= 360 && width >= 100, "{boxes:?}");
    }
    let _ = t;
}

const SLOW: &str = "name: slow
steps:
  - id: first
    run: echo first
  - id: gate
    needs: [first]
    wait_for_event: { name: go }
  - id: last
    needs: [gate]
    run: echo last
";

#[test]
fn an_instance_page_follows_its_instance_to_its_end() {
    let Scene { t, s, b, .. } = scene();
    let (id, ran) = t.run_yaml("slow.yaml", SLOW, &[]);
    ran.code(3);
    b.goto(&format!("{}/instances/{id}", s.base));
    assert!(b.count("a[href$='/act/cancel']") >= 1, "{}", b.page());
    // The signal form offers the event it waits for, first.
    b.goto(&format!("{}/instances/{id}/act/signal", s.base));
    assert_eq!(
        b.js("return document.querySelector('input[name=event]').value;"),
        serde_json::json!("go")
    );
    assert!(b.count("datalist#events option[value='go']") == 1);
    // A payload that is not JSON: refused, and what was typed is kept.
    b.fill("input[name=event]", "go");
    b.fill("textarea[name=data]", "{not json");
    b.click("button[type=submit]");
    b.wait_text("not JSON");
    assert_eq!(
        b.js("return [document.querySelector('input[name=event]').value, document.querySelector('textarea[name=data]').value];"),
        serde_json::json!(["go", "{not json"])
    );
    // The instance page open while the instance ends elsewhere: it
    // follows, to what an ended instance shows (no cancel, a restart form,
    // the trace), without a reload by hand.
    b.goto(&format!("{}/instances/{id}", s.base));
    t.wf(&["signal", &id, "go"]).code(0);
    t.wf(&["resume", &id]).code(0);
    until(
        "the page to show the instance completed, with its restart form",
        || {
            b.count("a[href$='/act/cancel']") == 0
                && b.count("select[name=from]") == 1
                && b.page().contains("completed")
        },
    );
    assert!(b.count(".waterfall") >= 1, "the trace: {}", b.page());
    // No console error but the refused signal's own answer (422).
    let errors: Vec<String> = b
        .console_errors()
        .into_iter()
        .filter(|e| !e.contains("status of 422"))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}

const REGIONS: &str = "name: regions
inputs:
  regions: { default: [eu, us] }
steps:
  - id: fan
    for_each: \"${{ inputs.regions }}\"
    run: echo ${{ item }}
";

const PARENT: &str = "name: parent
steps:
  - id: call
    workflow: child.yaml
";

const CHILD: &str = "name: child
steps:
  - id: only
    run: echo child
";

#[test]
fn a_list_input_is_checked_before_anything_starts_and_a_workflow_attempt_leads_to_its_child() {
    let Scene { t, s, b, .. } = scene();
    let path = t.write("regions.yaml", REGIONS);
    t.wf(&["workflow", "add", path.to_str().unwrap()]).code(0);
    // Text that is no list: refused by the form, naming the input; nothing started.
    b.goto(&format!("{}/workflows/regions/start", s.base));
    b.fill("input[name='input.regions']", "eu,us");
    b.click("button[type=submit]");
    b.wait_text("must be a list");
    assert_eq!(
        t.wf(&["list", "--workflow", "regions", "--json"])
            .json()
            .as_array()
            .map(Vec::len),
        Some(0)
    );
    // The same through the API: 400, in the API's words.
    let r = s.post(
        "/api/v1/workflows/regions/instances",
        serde_json::json!({"inputs": {"regions": "eu,us"}}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("must be a list"), "{}", r.text());
    // A `workflow:` step's attempt links to the child it made.
    t.write("child.yaml", CHILD);
    let (parent, ran) = t.run_yaml("parent.yaml", PARENT, &[]);
    ran.code(0);
    let child = t.inspect(&parent)["children"][0]["id"]
        .as_str()
        .expect("a child")
        .to_string();
    b.goto(&format!("{}/instances/{parent}", s.base));
    assert!(
        b.count(&format!("#step-call a[href='/instances/{child}']")) >= 1,
        "{}",
        b.page()
    );
    assert_eq!(b.count("#step-call a[href*='/logs/']"), 0, "{}", b.page());
    let _ = TOKEN;
}
