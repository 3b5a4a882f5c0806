#!/usr/bin/env python3
"""Sub-workflows (issue 36, item 7): what a child instance costs, against the
same work as steps of one workflow, measured in the same run, on SQLite and on
a private PostgreSQL server (scripts/pg, fsync on).

Run from the repository root:  python3 bench/subworkflows.py   (builds the release binary first)
Options: --quick (smaller N), --json FILE, --no-build, --reps N.

1. A parent with `for_each` over 100 children, each one `sleep 0.1` step,
   against the same 100 sleeps as parallel steps of one workflow (target:
   within 1.5x).
2. N sequential children of a 1-step `/bin/true` workflow, against N
   sequential `/bin/true` steps (target: at most 2x).
3. The peak RSS of the parent running the N sequential children, against
   the same run with N/10 children (target: flat, within 1.25x).
"""

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import ROOT, WF, Report, median, parse_args, pg_env, prepare, remove_db, run, wf_env, write  # noqa: E402
from pg import start_server  # noqa: E402


def files(tmp, n_seq):
    """The workflows of the cases, written into `tmp`."""
    write(os.path.join(tmp, "true1.yaml"), "name: true1\nsteps:\n  - id: t\n    run: [/bin/true]\n")
    write(os.path.join(tmp, "sleep1.yaml"), "name: sleep1\nsteps:\n  - id: s\n    run: [sleep, '0.1']\n")
    out = {}
    for n in (n_seq, n_seq // 10):
        out[f"children{n}"] = write(os.path.join(tmp, f"children{n}.yaml"), "name: seq-children\nsteps:\n" + "".join(
            f"  - id: c{i}\n    workflow: true1.yaml\n" for i in range(n)))
    out["steps"] = write(os.path.join(tmp, "steps.yaml"), "name: seq-steps\nsteps:\n" + "".join(
        f"  - id: s{i}\n    run: [/bin/true]\n" for i in range(n_seq)))
    out["fan"] = write(os.path.join(tmp, "fan.yaml"),
                       "name: fan\nconcurrency: 100\nsteps:\n  - id: f\n    for_each: "
                       + json.dumps(list(range(100))) + "\n    max_parallel: 100\n    workflow: sleep1.yaml\n")
    out["par"] = write(os.path.join(tmp, "par.yaml"), "name: par\nconcurrency: 100\nsteps:\n" + "".join(
        f"  - id: p{i}\n    needs: []\n    run: [sleep, '0.1']\n" for i in range(100)))
    return out


def cases(rep, backend, env_for, wf, n_seq, reps):
    """The three cases on one backend; `env_for(name)` gives a fresh database."""
    fan, par, seq, steps, rss_small, rss_big = [], [], [], [], [], []
    k = 0
    for _ in range(reps):
        for name, times in (("par", par), ("fan", fan), ("steps", steps), (f"children{n_seq}", seq)):
            k += 1
            elapsed, rss, code, _ = run([WF, "run", "-q", wf[name]], env=env_for(f"{name}_{k}"))
            assert code == 0, f"{name}: exit {code}"
            times.append(elapsed)
            if name == f"children{n_seq}":
                rss_big.append(rss)
        k += 1
        _, rss, code, _ = run([WF, "run", "-q", wf[f"children{n_seq // 10}"]], env=env_for(f"small_{k}"))
        assert code == 0
        rss_small.append(rss)
    print(f"{backend}: 100 children x sleep 0.1 {median(fan):.3f}s, 100 parallel steps {median(par):.3f}s; "
          f"{n_seq} sequential children {median(seq):.3f}s, {n_seq} /bin/true steps {median(steps):.3f}s; "
          f"peak RSS {median(rss_big):.1f} MiB ({n_seq} children), {median(rss_small):.1f} MiB ({n_seq // 10}) "
          f"(medians of {reps}, alternated)")
    r = median(fan) / median(par)
    rep.add(f"{backend}: 100 children x sleep 0.1 / 100 parallel steps", r, "x", "<= 1.5", r <= 1.5)
    r = median(seq) / median(steps)
    rep.add(f"{backend}: {n_seq} sequential children / {n_seq} /bin/true steps", r, "x", "<= 2", r <= 2)
    rep.add(f"{backend}: same, per child", median(seq) / n_seq * 1000, "ms", "(info)", True)
    r = median(rss_big) / median(rss_small)
    rep.add(f"{backend}: peak RSS, {n_seq} children / {n_seq // 10}", r, "x", "<= 1.25", r <= 1.25)


def main():
    args = parse_args()
    n_seq = 200 if args.quick else 1000
    reps = 1 if args.quick else args.reps
    prepare(args)
    rep = Report()
    tmp = tempfile.mkdtemp(prefix="wf-bench-sub-")
    server = None
    try:
        wf = files(tmp, n_seq)

        def sqlite_env(name):
            db = os.path.join(tmp, f"{name}.db")
            remove_db(db)
            return wf_env(db)

        cases(rep, "SQLite", sqlite_env, wf, n_seq, reps)
        server = start_server()
        cases(rep, "PostgreSQL", lambda name: pg_env(server["WF_TEST_PG"], f"b_{name}"), wf, n_seq, reps)
    finally:
        if server:
            subprocess.run([os.path.join(ROOT, "scripts", "pg"), "stop", server["WF_TEST_PG_DIR"]])
        subprocess.run(["rm", "-rf", tmp])

    rep.finish(args.json)


if __name__ == "__main__":
    main()
