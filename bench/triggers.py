#!/usr/bin/env python3
"""What `/metrics`' triggers cost a step on SQLite (issue 54, item 1): the same release binary
runs the same workflows on a database with the triggers of migration 17 and on one where they
were dropped, alternated, and the per-step times are compared.

Run from the repository root:  python3 bench/triggers.py   (builds the release binary first)
Options: --steps N (default 10,000 `set_state` steps; 1,000 `/bin/true` steps), --reps K
(default 5 alternated pairs), --no-build.

The figures: µs a `set_state` step (a step that runs nothing: the commit is all of its cost,
so a trigger's share is as large as it can be) and ms a `/bin/true` step, with and without the
triggers, and their ratio. Dropping the triggers is for this measurement only: without them the
counts go wrong.
"""

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import remove_db, run, seq_state, seq_true, wf_env, write  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
WF = os.path.join(TARGET, "release", "wf")
TRIGGERS = ["metrics_instance_added", "metrics_instance_changed", "metrics_instance_deleted",
            "metrics_attempt_ended", "metrics_run_ended"]


def fresh(db, drop):
    remove_db(db)
    run([WF, "worker", "--once", "-q"], env=wf_env(db))
    if drop:
        c = sqlite3.connect(db)
        for t in TRIGGERS:
            c.execute(f"DROP TRIGGER {t}")
        c.commit()
        c.close()


def timed(db, path):
    elapsed, _, code, _ = run([WF, "run", "-q", path], env=wf_env(db), check=False)
    assert code == 0, f"{path}: exit {code}"
    return elapsed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-build", action="store_true")
    args = ap.parse_args()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--locked", "--quiet"], cwd=ROOT, check=True)
    tmp = tempfile.mkdtemp(prefix="wf-triggers-")
    state = write(os.path.join(tmp, "state.yaml"), seq_state(args.steps))
    true = write(os.path.join(tmp, "true.yaml"), seq_true(args.steps // 10))
    for name, path, n, unit, scale in (("set_state", state, args.steps, "µs", 1e6),
                                       ("/bin/true", true, args.steps // 10, "ms", 1e3)):
        with_t, without = [], []
        for _ in range(args.reps):
            for drop, out in ((False, with_t), (True, without)):
                db = os.path.join(tmp, "t.db")
                fresh(db, drop)
                out.append(timed(db, path) / n * scale)
        w, wo = statistics.median(with_t), statistics.median(without)
        print(f"{n:,} {name} steps: {w:.2f} {unit} a step with the triggers, {wo:.2f} without "
              f"(ratio {w / wo:.3f}; medians of {args.reps} alternated pairs)", flush=True)


if __name__ == "__main__":
    main()
