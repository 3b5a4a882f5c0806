#!/usr/bin/env python3
"""Two builds of wf, alternated run by run on the same machine: what a change costs where
it could cost something, as the ratio of medians (new / old).

Run from the repository root:  python3 bench/builds.py OLD_WF [NEW_WF]
(NEW_WF: the release binary, built first unless --no-build). Options: --pairs N (default 12),
--hooks N (deliveries per webhook round, default 200), --json FILE.

Workloads (a fresh SQLite database for each run):
- a 300-step `/bin/true` run (`wf run`): wall and CPU time of the process;
- webhook starts: N signed deliveries to a `wf serve` of each build, one client, each
  delivery timed from request to answer (a start is recorded in the request).

Issue 57 asked that recording actors cost nothing measurable here (within noise).
"""

import argparse
import hashlib
import hmac
import http.client
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Report, remove_db, seq_true, wf_env, write  # noqa: E402
from serve import HOOK, KEY, TOKEN, listening_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(argv, env):
    """Wall seconds and the child's CPU seconds (utime + stime) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def run300(wf, tmp, flow):
    db = os.path.join(tmp, "run.db")
    remove_db(db)
    out = timed([wf, "run", "-q", flow], wf_env(db))
    remove_db(db)
    return out


def hook_round(wf, tmp, n, round_no):
    """Median ms of a signed delivery's start, over `n` deliveries to a fresh server."""
    db = os.path.join(tmp, "hooks.db")
    remove_db(db)
    env = wf_env(db)
    path = write(os.path.join(tmp, "hook.yaml"), HOOK)
    subprocess.run([wf, "workflow", "add", path], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env["WF_SERVE_TOKEN"] = TOKEN
    env["BENCH_HOOK_KEY"] = KEY
    proc = subprocess.Popen([wf, "-q", "serve", "--listen", "127.0.0.1:0"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        port = None
        while port is None:
            assert proc.poll() is None and time.time() < deadline, "wf serve did not listen"
            port = listening_port(proc.pid)
            time.sleep(0.02)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        times = []
        for i in range(n):
            body = json.dumps({"ref": f"refs/heads/r{round_no}-{i}"}).encode()
            sig = "sha256=" + hmac.new(KEY.encode(), body, hashlib.sha256).hexdigest()
            hdrs = {"Content-Type": "application/json", "X-GitHub-Event": "push",
                    "X-GitHub-Delivery": f"d-{round_no}-{i}", "X-Hub-Signature-256": sig}
            t0 = time.perf_counter()
            conn.request("POST", "/hooks/bench", body=body, headers=hdrs)
            r = conn.getresponse()
            r.read()
            times.append((time.perf_counter() - t0) * 1e3)
            assert r.status == 201, r.status
        conn.close()
        return statistics.median(times)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        remove_db(db)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new", nargs="?")
    ap.add_argument("--pairs", type=int, default=12)
    ap.add_argument("--hooks", type=int, default=200)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    new = args.new or os.path.join(ROOT, "target", "release", "wf")
    if not args.new and not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--locked", "--quiet"], cwd=ROOT, check=True)
    rep = Report()
    with tempfile.TemporaryDirectory() as tmp:
        flow = write(os.path.join(tmp, "true300.yaml"), seq_true(300))
        runs = {"old": [], "new": []}
        hooks = {"old": [], "new": []}
        for wf in (args.old, new):  # warm the page cache with both
            run300(wf, tmp, flow)
        for p in range(args.pairs):
            order = [("old", args.old), ("new", new)]
            if p % 2:
                order.reverse()
            for name, wf in order:
                runs[name].append(run300(wf, tmp, flow))
            for name, wf in order:
                if p < max(3, args.pairs // 2):
                    hooks[name].append(hook_round(wf, tmp, args.hooks, p))
        med = lambda xs, i: statistics.median(x[i] for x in xs)  # noqa: E731
        wall = med(runs["new"], 0) / med(runs["old"], 0)
        cpu = med(runs["new"], 1) / med(runs["old"], 1)
        rep.add(f"300 /bin/true steps, new / old, wall ({med(runs['new'], 0):.3f} vs "
                f"{med(runs['old'], 0):.3f} s, {args.pairs} alternated pairs)", wall, "x", "(noise)", True)
        rep.add(f"same, CPU of wf ({med(runs['new'], 1):.3f} vs {med(runs['old'], 1):.3f} s)",
                cpu, "x", "(noise)", True)
        h_new, h_old = statistics.median(hooks["new"]), statistics.median(hooks["old"])
        rep.add(f"a webhook start, new / old ({h_new:.2f} vs {h_old:.2f} ms, medians of "
                f"{len(hooks['new'])} rounds of {args.hooks})", h_new / h_old, "x", "(noise)", True)
    rep.finish(args.json, old=args.old, new=new)


if __name__ == "__main__":
    main()
