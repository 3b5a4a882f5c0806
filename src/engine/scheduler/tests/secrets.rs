//! Secrets in the core: the run is given their values in its setup (the
//! driver reads them from its process's environment), hands them to the
//! jobs that name them, and masks them in everything it records.

use super::run::Run;
use super::*;

#[test]
fn a_secret_given_in_the_setup_reaches_its_job_and_is_masked_in_the_record() {
    let secret = "hunter2-value";
    let mut history = History::of(
        "name: s\nsecrets: [TOKEN]\nsteps:\n  - id: a\n    run: echo ${{ secrets.TOKEN }}\n",
    );
    history.secrets.insert("TOKEN".into(), json!(secret));
    let mut r = Run::of(history);
    let e = r.tick(at(0));
    let job = e
        .iter()
        .find_map(|e| match e {
            Effect::Spawn { job, .. } => Some(format!("{job:?}")),
            _ => None,
        })
        .expect("a's job");
    assert!(job.contains(secret), "the job is given the value: {job}");
    r.settle(
        at(1),
        "a",
        AttemptResult {
            outcome: Ok(json!({ "stdout": format!("token is {secret}\n") })),
            ..AttemptResult::default()
        },
    );
    let recorded = r.s.records["a"].output.to_string();
    assert!(!recorded.contains(secret), "{recorded}");
    assert!(recorded.contains("token is"), "{recorded}");
}
