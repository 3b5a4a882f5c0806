#!/usr/bin/env python3
"""A mass upgrade (issue 58, item 4): `wf upgrade` of 1,000 waiting instances,
per instance, against a `wf signal` of each of the same instances, on SQLite and
on a private PostgreSQL server (scripts/pg, fsync on).

Run from the repository root:  python3 bench/upgrades.py   (builds the release binary first)
Options: --quick (N = 200), --json FILE, --no-build, --reps N, --no-pg.

Each repetition, on a fresh database: N instances of a workflow whose first
step runs and whose second waits for an event (`wf run`, each exits 3). Then
1. `wf upgrade --workflow NAME --to v2.yaml` (one process; v2 fixes a later
   step and adds one): its wall time / N, per instance. Each instance is read,
   planned, taken over and moved in a commit of its own, which gives its lease
   back (two durable commits an instance).
2. `wf signal ID go` for each of the same instances (N processes, one durable
   commit each): wall time / N, per instance. The ratio 1 / 2 (target: an
   instance's upgrade costs no more than signalling it).
3. (info) `wf upgrade --dry-run` of the same instances: the reads and plans
   alone, per instance.
"""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import ROOT, WF, Report, median, parse_args, pg_env, prepare, remove_db, run, wf_env, write  # noqa: E402
from pg import start_server  # noqa: E402

V1 = """name: fleet
steps:
  - id: fetch
    run: [/bin/true]
  - id: approve
    needs: [fetch]
    wait_for_event: { name: go }
  - id: ship
    needs: [approve]
    run: [/bin/false]
"""

V2 = V1.replace("[/bin/false]", "[/bin/true]") + """  - id: notify
    needs: [ship]
    run: [/bin/true]
"""


def one_rep(env, tmp, n, v1, v2):
    for i in range(n):
        run([WF, "run", "-q", v1, "--id", f"w{i:05}"], env=env)
    dry = run([WF, "upgrade", "--workflow", "fleet", "--to", v2, "--dry-run", "--json"], env=env)
    assert dry[2] == 0, f"dry run: exit {dry[2]}"
    up = run([WF, "upgrade", "--workflow", "fleet", "--to", v2, "--json"], env=env)
    assert up[2] == 0, f"upgrade: exit {up[2]}"
    assert up[3].count('"outcome": "upgraded"') + up[3].count('"outcome":"upgraded"') == n, up[3][:400]
    signal = 0.0
    for i in range(n):
        took, _, code, _ = run([WF, "signal", "-q", f"w{i:05}", "go"], env=env)
        assert code == 0, f"signal: exit {code}"
        signal += took
    return up[0] / n, signal / n, dry[0] / n


def bench(rep, label, envs, tmp, n, reps, v1, v2):
    ups, sigs, drys = [], [], []
    for r in range(reps):
        env = envs(r)
        u, s, d = one_rep(env, tmp, n, v1, v2)
        ups.append(u)
        sigs.append(s)
        drys.append(d)
        print(f"  {label} rep {r + 1}: upgrade {u * 1e3:.2f} ms, signal {s * 1e3:.2f} ms, dry run {d * 1e3:.2f} ms an instance",
              flush=True)
    u, s, d = median(ups), median(sigs), median(drys)
    rep.add(f"{label}: wf upgrade of {n} waiting, per instance", u * 1e3, "ms", "(info)", True)
    rep.add(f"{label}: wf signal of each, per instance", s * 1e3, "ms", "(info)", True)
    rep.add(f"{label}: upgrade / signal, per instance", u / s, "x", "<= 1", u / s <= 1)
    rep.add(f"{label}: the dry run (reads and plans), per instance", d * 1e3, "ms", "(info)", True)


def main():
    args = parse_args(lambda ap: ap.add_argument("--no-pg", action="store_true"))
    n = 200 if args.quick else 1000
    reps = 1 if args.quick else args.reps
    prepare(args)
    rep = Report()
    tmp = tempfile.mkdtemp(prefix="wf-bench-upgrade-")
    v1 = write(os.path.join(tmp, "fleet.yaml"), V1)
    v2 = write(os.path.join(tmp, "fleet-v2.yaml"), V2)

    def sqlite(r):
        db = os.path.join(tmp, f"up{r}.db")
        remove_db(db)
        return wf_env(db)

    bench(rep, "SQLite", sqlite, tmp, n, reps, v1, v2)
    if not args.no_pg:
        server = start_server()
        try:
            url = server["WF_TEST_PG"]
            bench(rep, "PostgreSQL", lambda r: pg_env(url, f"up{r}"), tmp, n, reps, v1, v2)
        finally:
            subprocess.run([os.path.join(ROOT, "scripts", "pg"), "stop", server["WF_TEST_PG_DIR"]])
    rep.finish(args.json, n=n, reps=reps)


if __name__ == "__main__":
    main()
