//! Queues (`queue:`, docs/flow-control.md) through the real binary, on
//! SQLite and PostgreSQL: a key's `concurrency` holds across processes (a
//! second instance waits, then runs once the slot frees; another key runs
//! beside it), `wf run` past its inline wait exits 3 and a worker admits in
//! priority, then age, order; `on_full: skip` and `cancel_previous`;
//! `debounce`; `rate`; `hold_while_suspended`; a killed holder's slot frees,
//! and a stalled holder whose slot was given away is fenced. What ran when
//! is read from the steps' own records.

pub(crate) mod line;

use crate::durable::{Bg, eventually, spawn};
use crate::{Ran, Test};
use std::collections::BTreeMap;

/// A workflow whose one step records its start and its pid, waits for the
/// file `go-TAG` (the test's hand on it), and records its end (also when
/// it is stopped with SIGTERM; a SIGKILLed one is seen gone by its pid).
fn gated(extra_queue: &str) -> String {
    format!(
        "name: deploy\ninputs:\n  env: {{ default: prod }}\n  tag: {{ default: x }}\n  urgent: {{ default: '5' }}\n\
         queue:\n  key: \"deploy-${{{{ inputs.env }}}}\"\n  concurrency: 1\n{extra_queue}\
         steps:\n  - id: work\n    run: |\n      echo \"start ${{{{ inputs.tag }}}} $(date +%s%N)\" >> log\n      \
         echo $$ > pid-${{{{ inputs.tag }}}}\n      \
         trap 'echo \"end ${{{{ inputs.tag }}}} $(date +%s%N)\" >> log; exit 143' TERM\n      \
         while [ ! -e go-${{{{ inputs.tag }}}} ]; do sleep 0.02; done\n      \
         echo \"end ${{{{ inputs.tag }}}} $(date +%s%N)\" >> log\n"
    )
}

/// The steps' records: tag -> (start ns, end ns) of each run of the step.
fn spans(t: &Test) -> BTreeMap<String, Vec<(u128, Option<u128>)>> {
    let mut out: BTreeMap<String, Vec<(u128, Option<u128>)>> = BTreeMap::new();
    let log = std::fs::read_to_string(t.path().join("log")).unwrap_or_default();
    for line in log.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [what, tag, ns] = parts[..] else {
            panic!("bad log line {line:?}")
        };
        let ns: u128 = ns.parse().expect("ns");
        let runs = out.entry(tag.to_string()).or_default();
        match what {
            "start" => runs.push((ns, None)),
            _ => runs.last_mut().expect("a start before its end").1 = Some(ns),
        }
    }
    out
}

/// The most steps that ran at one instant, from their own records (an
/// unfinished one runs to the end of time).
fn most_at_once(t: &Test) -> usize {
    let mut edges: Vec<(u128, i32)> = Vec::new();
    for runs in spans(t).values() {
        for (start, end) in runs {
            edges.push((*start, 1));
            edges.push((end.unwrap_or(u128::MAX), -1));
        }
    }
    // An end and a start at the same nanosecond do not overlap.
    edges.sort_by_key(|&(at, d)| (at, d));
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most as usize
}

/// `wf run FILE --id TAG --input tag=TAG EXTRA…`, to its end.
fn run_as(t: &Test, file: &str, tag: &str, extra: &[&str]) -> Ran {
    let input = format!("tag={tag}");
    let mut args = vec!["run", file, "--id", tag, "--input", &input];
    args.extend_from_slice(extra);
    t.wf(&args)
}

/// The same, in the background.
fn start_as(t: &Test, file: &str, tag: &str, extra: &[&str]) -> Bg {
    let input = format!("tag={tag}");
    let mut args = vec!["run", file, "--id", tag, "--input", &input];
    args.extend_from_slice(extra);
    spawn(t, &args)
}

fn started(t: &Test, tag: &str) -> bool {
    spans(t).contains_key(tag)
}

fn status(t: &Test, id: &str) -> String {
    t.inspect(id)["status"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_full_key_queues_the_next_instance_until_its_slot_frees_and_other_keys_run_beside_it() {
    let t = Test::new();
    let file = t.write("deploy.yaml", &gated(""));
    let file = file.to_str().unwrap();
    let a = start_as(&t, file, "a", &[]);
    eventually("a's step to start", || started(&t, "a"));
    let b = start_as(&t, file, "b", &["--inline-wait", "60s"]);
    eventually("b to be queued", || {
        t.wf(&["list", "--status", "queued", "--json"]).json()[0]["id"] == "b"
    });
    // Another key is not held back.
    t.write("go-dev", "");
    t.wf(&["run", file, "--input", "tag=dev", "--input", "env=dev"])
        .code(0);
    assert!(!started(&t, "b"), "b ran while a held the only slot");
    t.write("go-b", "");
    t.write("go-a", "");
    a.finish().code(0);
    let b = b.finish();
    b.code(0);
    assert!(
        b.stderr.contains(
            "queued: queue `deploy-prod`, position 1 (first in line): 1 of 1 admitted (concurrency)"
        ),
        "{}",
        b.stderr
    );
    let s = spans(&t);
    assert!(
        s["b"][0].0 > s["a"][0].1.unwrap(),
        "b started before a ended: {s:?}"
    );
    assert_eq!(most_at_once(&t), 2, "a (or b) and dev: {s:?}");
    assert_eq!(status(&t, "b"), "completed");
}

#[test]
fn past_its_inline_wait_it_exits_3_queued_and_a_worker_admits_by_priority_then_age() {
    let t = Test::new();
    let yaml = gated("  priority: \"${{ inputs.urgent }}\"\n");
    let file = t.write("deploy.yaml", &yaml);
    let file = file.to_str().unwrap();
    let a = start_as(&t, file, "a", &[]);
    eventually("a's step to start", || started(&t, "a"));
    let q = run_as(&t, file, "q1", &["--inline-wait", "0s"]);
    q.code(3);
    assert!(
        q.stdout.contains("queued (queue `deploy-prod`, position 1"),
        "{}",
        q.stdout
    );
    assert_eq!(status(&t, "q1"), "queued");
    for (id, urgent) in [("q2", "5"), ("u", "1"), ("late", "9"), ("q3", "5")] {
        let ran = t.wf(&[
            "run",
            file,
            "--detach",
            "--json",
            "--id",
            id,
            "--input",
            &format!("tag={id}"),
            "--input",
            &format!("urgent={urgent}"),
        ]);
        ran.code(0);
        assert_eq!(ran.json()["status"], "queued");
    }
    // Where they stand: the key, and each queued one's place and why.
    let queues = t.wf(&["queue", "list", "--json"]).code(0).json();
    assert_eq!(queues.as_array().unwrap().len(), 1, "{queues}");
    assert_eq!(queues[0]["key"], "deploy-prod");
    assert_eq!(queues[0]["admitted"], 1);
    assert_eq!(queues[0]["queued"], 5);
    assert_eq!(queues[0]["limit"], 1);
    assert!(queues[0]["oldest_queued_age_ms"].as_i64().unwrap() >= 0);
    let table = t.wf(&["queue", "list"]).code(0).stdout.clone();
    assert!(
        table.contains("deploy-prod") && table.contains("OLDEST QUEUED"),
        "{table}"
    );
    let q2 = t.inspect("q2")["queue"].clone();
    assert_eq!(q2["key"], "deploy-prod");
    assert_eq!(q2["admitted"], false);
    assert_eq!(
        q2["position"], 3,
        "after u (priority 1) and q1 (older): {q2}"
    );
    assert_eq!(q2["waiting_for"], "1 of 1 admitted (concurrency)");
    let shown = t.wf(&["inspect", "q2"]).code(0).stdout.clone();
    assert!(
        shown.contains("Queue:        `deploy-prod` (priority 5), queued at position 3: 1 of 1 admitted (concurrency)"),
        "{shown}"
    );
    assert_eq!(t.inspect("a")["queue"]["admitted"], true);
    for tag in ["a", "q1", "q2", "u", "late", "q3"] {
        t.write(&format!("go-{tag}"), "");
    }
    a.finish().code(0);
    // Nothing admitted them but a worker (or their own `wf resume`).
    assert_eq!(status(&t, "q1"), "queued");
    t.wf(&["worker", "--once", "--concurrency", "4"]).code(0);
    assert!(
        t.wf(&["queue", "list", "--json"])
            .json()
            .as_array()
            .unwrap()
            .is_empty(),
        "nothing admitted or queued is left"
    );
    let s = spans(&t);
    let mut order: Vec<(&u128, &str)> = s.iter().map(|(tag, r)| (&r[0].0, tag.as_str())).collect();
    order.sort();
    let order: Vec<&str> = order.into_iter().map(|(_, tag)| tag).collect();
    assert_eq!(order, ["a", "u", "q1", "q2", "q3", "late"]);
    assert_eq!(most_at_once(&t), 1, "{s:?}");
}

#[test]
fn on_full_skip_ends_the_newcomer_skipped_and_nothing_of_it_runs() {
    let t = Test::new();
    let file = t.write("deploy.yaml", &gated("  on_full: skip\n"));
    let file = file.to_str().unwrap();
    let a = start_as(&t, file, "a", &[]);
    eventually("a's step to start", || started(&t, "a"));
    let b = run_as(&t, file, "b", &[]);
    b.code(4);
    assert!(
        b.stdout
            .contains("skipped: queue `deploy-prod` is full: 1 of 1 admitted (concurrency)"),
        "{}",
        b.stdout
    );
    let v = run_as(&t, file, "c", &["--detach", "--json"])
        .code(4)
        .json();
    assert_eq!(v["status"], "skipped");
    let skipped = t.wf(&["list", "--status", "skipped", "--json"]).json();
    assert_eq!(skipped.as_array().unwrap().len(), 2);
    assert!(t.inspect("b")["runs"].as_array().unwrap().is_empty());
    t.write("go-a", "");
    a.finish().code(0);
    assert!(!started(&t, "b") && !started(&t, "c"));
    // Skipped for good: a resume says so.
    t.wf(&["resume", "b"]).code(4);
}

#[test]
fn cancel_previous_cancels_the_admitted_one_with_its_compensations_and_runs_the_newcomer() {
    let t = Test::new();
    let yaml = format!(
        "{}  - id: undo-me\n    needs: []\n    run: echo done-$TAG >> did\n    env: {{ TAG: \"${{{{ inputs.tag }}}}\" }}\n    \
         compensate: {{ run: echo undone-$TAG >> did, env: {{ TAG: \"${{{{ inputs.tag }}}}\" }} }}\n",
        gated("  on_full: cancel_previous\n")
    );
    let file = t.write("deploy.yaml", &yaml);
    let file = file.to_str().unwrap();
    let a = start_as(&t, file, "a", &[]);
    eventually("a's steps to start", || {
        started(&t, "a") && t.read("did").contains("done-a")
    });
    t.write("go-b", "");
    let b = run_as(&t, file, "b", &["--inline-wait", "60s"]);
    b.code(0);
    a.finish().code(4);
    assert_eq!(status(&t, "a"), "canceled");
    assert_eq!(status(&t, "b"), "completed");
    assert_eq!(t.read("did"), "done-a\nundone-a\ndone-b\n");
    let s = spans(&t);
    assert!(
        s["a"][0].1 < Some(s["b"][0].0),
        "a's step was stopped first: {s:?}"
    );
    assert_eq!(most_at_once(&t), 1, "{s:?}");
}

#[test]
fn debounce_keeps_the_newest_queued_instance_and_admits_it_after_the_period() {
    let t = Test::new();
    let file = t.write(
        "build.yaml",
        "name: build\ninputs:\n  tag: { default: x }\nqueue:\n  debounce: 1s\nsteps:\n  - id: b\n    \
         run: echo ${{ inputs.tag }} >> built\n",
    );
    let file = file.to_str().unwrap();
    for id in ["d1", "d2", "d3"] {
        t.wf(&[
            "run",
            file,
            "--detach",
            "--id",
            id,
            "--input",
            &format!("tag={id}"),
        ])
        .code(0);
    }
    // Each newer one replaced the one queued within the period before it.
    for (id, by) in [("d1", "d2"), ("d2", "d3")] {
        let v = t.inspect(id);
        assert_eq!(v["status"], "skipped");
        let shown = t.wf(&["inspect", id]);
        assert!(
            shown.stdout.contains(&format!(
                "instance {by} of queue `build` replaced it (debounce)"
            )),
            "{}",
            shown.stdout
        );
    }
    assert_eq!(t.inspect("d3")["status"], "queued");
    // The newest waits out its period (inline), then runs.
    let ran = t.wf(&["resume", "d3"]);
    ran.code(0);
    assert!(ran.stderr.contains("debounce until"), "{}", ran.stderr);
    assert_eq!(t.read("built"), "d3\n");
}

#[test]
fn a_rate_admits_at_most_its_count_in_any_window() {
    let t = Test::new();
    let file = t.write(
        "tick.yaml",
        "name: tick\ninputs:\n  tag: { default: x }\nqueue:\n  rate: 2/1s\nsteps:\n  - id: t\n    \
         run: echo ${{ inputs.tag }} >> ticked\n",
    );
    let file = file.to_str().unwrap();
    let mut ids = Vec::new();
    for i in 0..5 {
        let id = format!("r{i}");
        t.wf(&[
            "run",
            file,
            "--detach",
            "--id",
            &id,
            "--input",
            &format!("tag={id}"),
        ])
        .code(0);
        ids.push(id);
    }
    let worker = spawn(&t, &["worker", "--concurrency", "5"]);
    eventually("every instance to complete", || {
        t.wf(&["list", "--status", "completed", "--json"])
            .json()
            .as_array()
            .is_some_and(|a| a.len() == 5)
    });
    drop(worker);
    // Each instance's run started after its admission: no window of the
    // period holds more than 2 of them.
    let mut starts: Vec<i64> = ids
        .iter()
        .map(|id| {
            let at = t.inspect(id)["runs"][0]["started_at"]
                .as_str()
                .unwrap()
                .to_string();
            chrono::DateTime::parse_from_rfc3339(&at)
                .unwrap()
                .timestamp_millis()
        })
        .collect();
    starts.sort();
    for w in starts.windows(3) {
        assert!(w[2] - w[0] >= 1000, "3 admissions within 1s: {starts:?}");
    }
}

#[test]
fn a_suspended_instance_gives_its_slot_back_unless_it_holds_it() {
    for (hold, second) in [(false, 0), (true, 3)] {
        let t = Test::new();
        let file = t.write(
            "nap.yaml",
            &format!(
                "name: nap\nqueue:\n  concurrency: 1\n  hold_while_suspended: {hold}\nsteps:\n  - id: nap\n    sleep: 1h\n"
            ),
        );
        let file = file.to_str().unwrap();
        t.wf(&["run", file, "--id", "first"]).code(3);
        assert_eq!(status(&t, "first"), "sleeping");
        let ran = t.wf(&["run", file, "--id", "second", "--inline-wait", "0s"]);
        ran.code(3);
        let expected = if second == 0 { "sleeping" } else { "queued" };
        assert_eq!(status(&t, "second"), expected, "hold: {hold}");
        if hold {
            // Its end frees the slot.
            t.wf(&["cancel", "first"]).code(0);
            t.wf(&["resume", "second", "--inline-wait", "0s"]).code(3);
            assert_eq!(status(&t, "second"), "sleeping");
        }
    }
}

#[test]
fn a_killed_holders_slot_frees_and_it_runs_again_after() {
    let t = Test::new();
    let file = t.write("deploy.yaml", &gated(""));
    let file = file.to_str().unwrap();
    let mut a = start_as(&t, file, "a", &[]);
    eventually("a's step to start", || started(&t, "a"));
    a.kill9();
    eventually("a's process to be gone", || a.exited());
    let pid = t.read("pid-a").trim().to_string();
    eventually("a's step to be gone with it", || {
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
    });
    // Its holder is gone (this host): its slot is free at once.
    t.write("go-b", "");
    run_as(&t, file, "b", &["--inline-wait", "60s"]).code(0);
    assert_eq!(status(&t, "a"), "queued", "its slot was given away");
    t.write("go-a", "");
    t.wf(&["resume", "a"]).code(0);
    let v = t.inspect("a");
    assert_eq!(v["status"], "completed");
    assert_eq!(
        Test::step(&v, "work")["attempt_list"][0]["outcome"],
        "crashed"
    );
    // (a's first step was gone before b was started.)
    let s = spans(&t);
    assert!(s["b"][0].0 < s["a"][1].0, "{s:?}");
}

#[test]
fn a_stalled_holder_whose_slot_was_given_away_writes_nothing_more() {
    let t = Test::new().env("WF_LEASE_TTL", "1s");
    let file = t.write("deploy.yaml", &gated(""));
    let file = file.to_str().unwrap();
    let a = start_as(&t, file, "a", &[]);
    eventually("a's step to start", || started(&t, "a"));
    // Stalled, its step ends (its processes are not stopped with it), and
    // its lease expires (1s): the next instance takes the slot.
    a.signal("STOP");
    t.write("go-a", "");
    eventually("a's step to end", || spans(&t)["a"][0].1.is_some());
    t.write("go-b", "");
    let b = start_as(&t, file, "b", &["--inline-wait", "60s"]);
    let b_pid = b.pid();
    b.finish().code(0);
    let before = t.dump();
    let a_pid = a.pid();
    a.signal("CONT");
    let ran = a.finish();
    ran.code(5);
    // It names the process that took its slot (b's), not itself.
    crate::locks::names_the_taker(&ran, "a", b_pid, a_pid);
    assert_eq!(
        t.dump(),
        before,
        "the stalled holder wrote after its slot was given away"
    );
    assert_eq!(most_at_once(&t), 1, "{:?}", spans(&t));
    // It queued again, and runs (its unrecorded step again) when admitted.
    assert_eq!(status(&t, "a"), "queued");
    t.wf(&["resume", "a"]).code(0);
    assert_eq!(status(&t, "a"), "completed");
}

#[test]
fn a_queued_instance_is_canceled_without_running() {
    let t = Test::new();
    let file = t.write("deploy.yaml", &gated(""));
    let file = file.to_str().unwrap();
    let a = start_as(&t, file, "a", &[]);
    eventually("a's step to start", || started(&t, "a"));
    run_as(&t, file, "b", &["--inline-wait", "0s"]).code(3);
    t.wf(&["cancel", "b"]).code(0);
    assert_eq!(status(&t, "b"), "canceled");
    t.write("go-a", "");
    a.finish().code(0);
    assert!(!started(&t, "b"));
}

/// Issue 37's property: workers on three hosts admit and run 30 queued
/// instances (a key of concurrency 3, a step lock of limit 1 inside), while
/// workers are killed (and replaced) and stalled past their leases at
/// random moments. From the steps' own records: at no instant did more
/// than 3 instances of the key run, nor more than 1 attempt hold the lock;
/// every instance completed, with no side effect beyond its recorded
/// attempts.
#[test]
fn limits_hold_across_hosts_through_kills_and_stalls() {
    use crate::XorShift;
    use crate::pg::{can_unshare, pg_test, worker_on_host};
    let Some(t) = pg_test() else { return };
    let t = t.env("WF_LEASE_TTL", "2s");
    // Hosts of their own: a killed worker's slots wait for its lease, as
    // another machine's would (and its steps' records end by the time the
    // test sees it gone).
    assert!(can_unshare(), "unshare --uts is needed (CI runs as root)");
    let step = |id: &str, extra: &str| {
        format!(
            "  - id: {id}\n{extra}    run: |\n      echo \"start $WF_INSTANCE_ID {id} $(hostname) $(date +%s%N)\" >> steps.log\n      \
             sleep 0.1\n      echo \"end $WF_INSTANCE_ID {id} $(hostname) $(date +%s%N)\" >> steps.log\n"
        )
    };
    let yaml = format!(
        "name: limited\ninputs:\n  n: {{ default: '0' }}\nqueue: {{ key: shared, concurrency: 3 }}\nsteps:\n{}{}",
        step("work", ""),
        step("locked", "    lock: { key: the-one, limit: 1 }\n")
    );
    let file = t.write("limited.yaml", &yaml);
    let ids: Vec<String> = (0..30).map(|i| format!("i{i:02}")).collect();
    for id in &ids {
        t.wf(&["run", file.to_str().unwrap(), "--detach", "--id", id])
            .code(0);
    }
    let hosts = ["wf-host-b", "wf-host-c", "wf-host-d"];
    let mut workers: Vec<_> = hosts
        .iter()
        .map(|h| Some(worker_on_host(&t, h, true)))
        .collect();
    let mut rng = XorShift(0x5eed_1e55 ^ u64::from(std::process::id()));
    let completed = || {
        t.wf(&["list", "--status", "completed", "--json", "--limit", "0"])
            .json()
            .as_array()
            .map_or(0, Vec::len)
    };
    // When each host's worker was seen gone (its running steps died with it).
    let mut killed: Vec<(String, u128)> = Vec::new();
    let mut stalled = Vec::new();
    for _ in 0..4 {
        let before = completed();
        if before >= 27 {
            break;
        }
        eventually("progress", || completed() >= before + 2);
        let w = rng.below(3) as usize;
        if rng.below(2) == 0 {
            let mut gone = workers[w].take().expect("a worker");
            gone.kill9();
            eventually("the worker to be gone", || gone.exited());
            killed.push((hosts[w].to_string(), now_ns()));
            workers[w] = Some(worker_on_host(&t, hosts[w], true));
        } else {
            let paused = workers[w].take().expect("a worker");
            paused.signal("STOP");
            // The others go on past its leases.
            let at = completed();
            eventually("progress without it", || completed() >= at + 2);
            paused.signal("CONT");
            stalled.push(paused);
            workers[w] = Some(worker_on_host(&t, hosts[w], true));
        }
    }
    assert!(
        killed.len() + stalled.len() >= 2,
        "the work outran the chaos: {} kills, {} stalls",
        killed.len(),
        stalled.len()
    );
    eventually("every instance to complete", || completed() == ids.len());
    for w in workers.into_iter().flatten().chain(stalled) {
        w.signal("TERM");
        let r = w.finish();
        assert!(
            r.code == 0 || r.code == 130,
            "worker exited {}: {}",
            r.code,
            r.stderr
        );
    }

    // Each step run's interval; one a killed worker's death cut ends when
    // the test saw it gone.
    let log = std::fs::read_to_string(t.path().join("steps.log")).expect("steps.log");
    let mut open: BTreeMap<(String, String), (String, u128)> = BTreeMap::new();
    let mut runs: Vec<(String, String, u128, u128)> = Vec::new();
    for line in log.lines() {
        let p: Vec<&str> = line.split_whitespace().collect();
        let [what, inst, step, host, ns] = p[..] else {
            panic!("bad line {line:?}")
        };
        let ns: u128 = ns.parse().expect("ns");
        let k = (inst.to_string(), step.to_string());
        if what == "start" {
            if let Some((h, s)) = open.remove(&k) {
                runs.push((k.0.clone(), k.1.clone(), s, cut(&killed, &h, s)));
            }
            open.insert(k, (host.to_string(), ns));
        } else if let Some((_, s)) = open.remove(&k) {
            runs.push((k.0, k.1, s, ns));
        }
    }
    for ((inst, step), (h, s)) in open {
        runs.push((inst, step, s, cut(&killed, &h, s)));
    }
    let most = |pick: &dyn Fn(&str) -> bool| {
        let mut edges: Vec<(u128, i32)> = Vec::new();
        for (_, step, s, e) in &runs {
            if pick(step) {
                edges.push((*s, 1));
                edges.push((*e, -1));
            }
        }
        edges.sort();
        let (mut now, mut most) = (0, 0);
        for (_, d) in edges {
            now += d;
            most = most.max(now);
        }
        most
    };
    assert!(
        most(&|_| true) <= 3,
        "more than 3 admitted instances ran at once: {runs:?}"
    );
    assert!(
        most(&|_| true) >= 2,
        "the key never ran instances side by side"
    );
    assert_eq!(
        most(&|s| s == "locked"),
        1,
        "more than one lock holder: {runs:?}"
    );
    for id in &ids {
        let v = t.inspect(id);
        assert_eq!(v["status"], "completed", "{id}");
        for step in ["work", "locked"] {
            let attempts = Test::step(&v, step)["attempt_list"]
                .as_array()
                .unwrap()
                .len();
            let ran = runs.iter().filter(|r| r.0 == *id && r.1 == step).count();
            assert!(
                ran >= 1 && ran <= attempts,
                "{id} {step}: {ran} runs for {attempts} recorded attempts"
            );
        }
    }
    assert_eq!(t.sql("SELECT count(*) FROM locks"), "0");
}

fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos()
}

/// When an unfinished step run on `host` that started at `start` ended:
/// when its worker was seen killed after it started (it died with it).
fn cut(killed: &[(String, u128)], host: &str, start: u128) -> u128 {
    killed
        .iter()
        .filter(|(h, at)| h == host && *at > start)
        .map(|(_, at)| *at)
        .min()
        .unwrap_or_else(|| {
            panic!("a step run on {host} from {start} never ended, and no worker died there")
        })
}

#[test]
fn a_restart_that_its_queue_cannot_admit_leaves_the_instance_as_it_ended() {
    let t = Test::new();
    let file = t.write("deploy.yaml", &gated(""));
    let file = file.to_str().unwrap();
    t.write("go-done", "");
    run_as(&t, file, "done", &[]).code(0);
    let a = start_as(&t, file, "a", &[]);
    eventually("a's step to start", || started(&t, "a"));
    let before = t.inspect("done");
    let ran = t.wf(&["restart", "done", "--from", "work", "--inline-wait", "0s"]);
    ran.code(3);
    assert!(
        ran.stdout.contains("it was not started again"),
        "{}",
        ran.stdout
    );
    let after = t.inspect("done");
    assert_eq!(after["status"], "completed");
    assert_eq!(after["runs"], before["runs"], "no run was opened");
    assert_eq!(after["steps"], before["steps"], "nothing was reset");
    // With room, it is.
    t.write("go-a", "");
    a.finish().code(0);
    t.wf(&["restart", "done", "--from", "work"]).code(0);
    assert_eq!(t.inspect("done")["runs"].as_array().unwrap().len(), 2);
}

/// `wf list --queue KEY`, the API's `?queue=KEY` and the inspector's
/// queue page (each count a link to that key's instances) list one key's
/// instances, not every queued one.
#[test]
fn one_keys_instances_are_listed_by_the_cli_the_api_and_the_queue_page() {
    let t = Test::new();
    let file = t.write(
        "q.yaml",
        "name: q\ninputs:\n  k: { required: true }\n\
         queue: { key: \"${{ inputs.k }}\", concurrency: 1 }\n\
         steps:\n  - id: a\n    run: 'true'\n",
    );
    let mut ids: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for key in ["k1", "k1", "k2"] {
        let input = format!("k={key}");
        let ran = t.wf(&[
            "run",
            file.to_str().unwrap(),
            "--input",
            &input,
            "--detach",
            "--json",
        ]);
        ran.code(0);
        ids.entry(key)
            .or_default()
            .push(ran.json()["id"].as_str().unwrap().to_string());
    }
    let listed = |v: serde_json::Value| -> Vec<String> {
        let mut out: Vec<String> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap().to_string())
            .collect();
        out.sort();
        out
    };
    let mut k1 = ids["k1"].clone();
    k1.sort();
    assert_eq!(
        listed(t.wf(&["list", "--queue", "k1", "--json"]).json()),
        k1
    );
    assert_eq!(
        listed(
            t.wf(&["list", "--queue", "k2", "--status", "queued", "--json"])
                .json()
        ),
        ids["k2"]
    );
    assert!(listed(t.wf(&["list", "--queue", "none", "--json"]).json()).is_empty());
    let s = crate::serve::Server::start(&t, &[], &[]);
    assert_eq!(listed(s.get("/api/v1/instances?queue=k1").json()), k1);
    // The queue page links each key's counts to that key's instances.
    let page = s
        .call("GET", "/queues", &[("accept", "text/html")], None)
        .text();
    assert!(
        page.contains("href=\"/?queue=k1&amp;status=queued\""),
        "{page}"
    );
    assert!(
        page.contains("href=\"/?queue=k2&amp;status=queued\""),
        "{page}"
    );
    let list = s
        .call(
            "GET",
            "/?queue=k2&status=queued",
            &[("accept", "text/html")],
            None,
        )
        .text();
    assert!(list.contains(&ids["k2"][0][..12]), "{list}");
    assert!(!list.contains(&ids["k1"][0][..12]), "{list}");
}
