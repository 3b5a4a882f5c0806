//! An upgrade from the inspector (issue 58): the instance page offers it
//! for an instance that is not running and has not ended; the confirmation
//! shows the dry run's plan (STEP / PLAN / NOW) and, once confirmed, the
//! instance is on the registered definition, its page says which
//! definitions its runs used.

use super::{GATED, Scene, scene};
use crate::serve::until;

#[test]
fn the_upgrade_form_shows_the_plan_and_moves_the_instance() {
    let Scene {
        t,
        s,
        b,
        waiting,
        done,
        ..
    } = scene();
    let base = s.base.clone();
    // The new version, registered: `after` fixed, `notify` added.
    let v2 = GATED.replace("echo got it", "echo fixed")
        + "  - id: notify\n    needs: [after]\n    run: echo told\n";
    let path = t.write("gated-v2.yaml", &v2);
    t.wf(&["workflow", "add", path.to_str().unwrap()]).code(0);
    let before = t.inspect(&waiting)["definition_hash"].clone();

    // An ended instance offers no upgrade.
    b.goto(&format!("{base}/instances/{done}"));
    assert_eq!(b.count("a[href$='/act/upgrade']"), 0);

    b.goto(&format!("{base}/instances/{waiting}"));
    b.click("a[href$='/act/upgrade']");
    b.wait_text("Would be upgraded");
    let plan = b.text("table.plan");
    for line in ["gate unchanged waiting", "after changed -", "notify new -"] {
        assert!(plan.contains(line), "{line:?} in {plan}");
    }
    assert_eq!(
        t.inspect(&waiting)["definition_hash"],
        before,
        "the confirmation writes nothing"
    );
    b.click("button[type=submit]");
    b.wait_text("Upgraded:");
    let after = t.inspect(&waiting);
    assert_ne!(after["definition_hash"], before);
    let facts = b.text("dl.facts");
    assert!(
        facts.contains(&format!("{} from run 1", &before.as_str().unwrap()[..12])),
        "{facts}"
    );

    // Both definitions, the current one open, with what changed.
    assert_eq!(b.count("details.definition"), 2);
    assert_eq!(b.count("details.definition[open]"), 1);
    let diff = b.text("pre.diff");
    assert!(diff.contains("+    run: echo fixed"), "{diff}");
    assert!(diff.contains("-    run: echo got it"), "{diff}");
    assert!(b.count("pre.yaml span.k") > 5, "keys are marked");

    // It goes on as the new definition says.
    t.wf(&["signal", &waiting, "go"]).code(0);
    t.wf(&["resume", &waiting]).code(0);
    until("the upgraded run", || {
        t.inspect(&waiting)["status"] == "completed"
    });
    let logs = t.wf(&["logs", &waiting, "notify"]).code(0).stdout.clone();
    assert!(logs.contains("told"), "{logs}");
}
