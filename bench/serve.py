#!/usr/bin/env python3
"""`wf serve` under load (issue 38, item 8), on a database of 100,000 instances, with the same
reads through the CLI process measured in the same run, and webhook starts.

Run from the repository root:  python3 bench/serve.py   (builds the release binary first)
Options: --instances N (default 100,000), --quick (5,000 instances, shorter loads), --seconds S
(each load, default 10), --clients C (concurrent HTTP clients, default 4), --hooks N (webhook
deliveries, default 2,000), --no-build, --json FILE, --pg URL (the same on PostgreSQL:
`eval "$(scripts/pg start)"`, then `--pg "$WF_TEST_PG"`; needs psql). Stdlib only: the clients
are Python threads, each with one keep-alive connection (http.client); the machine's 2 cores
are shared by the clients and the server, as they would be on a small host.

The database is made as bench/scale.py makes it (real instances of four templates, cloned with
SQL to N, their times spread over 7 days).

Figures:
- `GET /api/v1/instances?limit=50`: requests/s with C clients, and p50/p99 latency; beside it,
  `wf list --limit 50 --json` through the CLI (a process per query, one at a time): ms each;
- `GET /api/v1/instances/{id}` (an instance's inspect, a different instance each request):
  the same, beside `wf inspect ID --json`;
- webhooks: N signed deliveries (HMAC-SHA256, GitHub's header) from 4 clients, each delivery id
  sent twice (the second time after the first was answered, from another client): starts per
  second until every instance is recorded, then the count of instances is checked: one per
  delivery id, none lost, none doubled.
"""

import argparse
import hashlib
import hmac
import http.client
import json
import os
import platform
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Report, median, pg_env, run, wf_env, write  # noqa: E402
import scale  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
WF = os.path.join(TARGET, "release", "wf")
TOKEN = "bench-token-0123456789abcdef"
KEY = "bench hook key"

HOOK = """name: bench-hook
inputs:
  ref: { required: true }
on:
  webhook:
    name: bench
    secret: BENCH_HOOK_KEY
    inputs: { ref: "${{ body.ref }}" }
    dedupe: "${{ headers['x-github-delivery'] }}"
steps:
  - id: build
    run: echo ${{ inputs.ref }}
"""


class Server:
    """A `wf serve` on a free port, with the token TOKEN."""

    def __init__(self, env, extra=()):
        env = dict(env)
        env["WF_SERVE_TOKEN"] = TOKEN
        env["BENCH_HOOK_KEY"] = KEY
        self.proc = subprocess.Popen([WF, "-q", "serve", "--listen", "127.0.0.1:0", *extra], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # `-q` keeps the access log quiet; the listening line is not printed then, so the
        # port is found from /proc.
        deadline = time.time() + 30
        self.port = None
        while self.port is None:
            assert self.proc.poll() is None, f"wf serve exited: {self.proc.stderr.read()}"
            assert time.time() < deadline, "wf serve did not listen"
            self.port = listening_port(self.proc.pid)
            time.sleep(0.02)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


def listening_port(pid):
    """The TCP port process `pid` listens on, from /proc (None yet)."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        return None
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            parts = line.split()
            if parts[3] == "0A" and parts[9] in inodes:  # LISTEN
                return int(parts[1].split(":")[1], 16)
    return None


def load(port, paths, seconds, clients, headers=None):
    """GETs `paths` (cycled) with `clients` threads for `seconds`: (requests/s, latencies ms)."""
    headers = dict(headers or {})
    headers["Authorization"] = f"Bearer {TOKEN}"
    lat = []
    lock = threading.Lock()
    stop_at = time.perf_counter() + seconds
    counter = iter(range(10**12))

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        mine = []
        while time.perf_counter() < stop_at:
            path = paths[next(counter) % len(paths)]
            t0 = time.perf_counter()
            conn.request("GET", path, headers=headers)
            r = conn.getresponse()
            body = r.read()
            mine.append((time.perf_counter() - t0) * 1e3)
            assert r.status == 200, f"{path}: {r.status} {body[:200]}"
        conn.close()
        with lock:
            lat.extend(mine)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return len(lat) / wall, sorted(lat)


def pct(xs, p):
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]


def cli_ms(env, argv, reps):
    """Median wall ms of `wf ARGV` (a process each)."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run([WF, *argv], env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append((time.perf_counter() - t0) * 1e3)
    return median(times)


def instance_ids(env, n):
    out = subprocess.run([WF, "list", "--json", "--limit", str(n)], env=env, check=True,
                         capture_output=True, text=True).stdout
    return [i["id"] for i in json.loads(out)]


def reads(rep, prefix, env, seconds, clients, reps):
    server = Server(env)
    try:
        ids = instance_ids(env, 2000)
        for name, paths, argv in [
            ("GET /api/v1/instances?limit=50", ["/api/v1/instances?limit=50"], ["list", "--limit", "50", "--json"]),
            ("GET /api/v1/instances/{id} (inspect)", [f"/api/v1/instances/{i}" for i in ids],
             ["inspect", ids[len(ids) // 2], "--json"]),
        ]:
            load(server.port, paths, 1, clients)  # warm
            rps, lat = load(server.port, paths, seconds, clients)
            cli = cli_ms(env, argv, reps)
            rep.add(f"{prefix}{name}: requests/s, {clients} clients", rps, "req/s", "(info)", True)
            rep.add(f"{prefix}{name}: p50 / p99 ms ({pct(lat, 50):.2f} / {pct(lat, 99):.2f})",
                    pct(lat, 99), "ms", "(info)", True)
            rep.add(f"{prefix}same through the CLI, a process per query: ms each ({1000 / cli:.0f}/s)",
                    cli, "ms", "(info)", True)
    finally:
        server.stop()


def hooks(rep, prefix, env, tmp, n, count_instances):
    path = write(os.path.join(tmp, "hook.yaml"), HOOK)
    run([WF, "workflow", "add", path], env=env)
    before = count_instances()
    server = Server(env)
    work = queue.Queue()
    for i in range(n):
        work.put(i)
    answers = {}
    lock = threading.Lock()

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        while True:
            try:
                i = work.get_nowait()
            except queue.Empty:
                break
            body = json.dumps({"ref": f"refs/heads/b{i}", "after": "0" * 40,
                               "repository": {"full_name": "bench/bench"}}).encode()
            sig = "sha256=" + hmac.new(KEY.encode(), body, hashlib.sha256).hexdigest()
            hdrs = {"Content-Type": "application/json", "X-GitHub-Event": "push",
                    "X-GitHub-Delivery": f"d-{i}", "X-Hub-Signature-256": sig}
            conn.request("POST", "/hooks/bench", body=body, headers=hdrs)
            r = conn.getresponse()
            doc = json.loads(r.read())
            with lock:
                answers.setdefault(i, []).append((r.status, doc.get("id")))
            if len(answers[i]) == 1:
                work.put(i)  # delivered again, by whichever client takes it
        conn.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    server.stop()
    made = count_instances() - before
    statuses = sorted(s for a in answers.values() for s, _ in a)
    created = statuses.count(201)
    again = statuses.count(200)
    same = all(len({iid for _, iid in a}) == 1 for a in answers.values())
    ok = made == n and created == n and again == n and same
    rep.add(f"{prefix}webhook starts/s, {n:,} signed deliveries each sent twice, 4 clients "
            f"({made:,} instances recorded, {created:,} 201 + {again:,} 200, "
            f"{'none lost or doubled' if ok else 'LOST OR DOUBLED'})",
            n / wall, "starts/s", "(info)", ok)
    assert ok, (made, created, again, same)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", type=int, default=100_000)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--hooks", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--pg")
    args = ap.parse_args()
    if args.quick:
        args.instances, args.seconds, args.hooks, args.reps = 5000, 3, 300, 5
    if not args.no_build:
        run(["cargo", "build", "--release", "--quiet"], env=dict(os.environ))
    rep = Report()
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.release()}")
    tmp = tempfile.mkdtemp(prefix="wf-serve-bench-")
    try:
        db = os.path.join(tmp, "full.db")
        env = wf_env(db)
        t0 = time.perf_counter()
        weighted = scale.make_templates(tmp, env)
        scale.clone(db, weighted, args.instances)
        scale.checkpoint(db)
        print(f"SQLite: {args.instances:,} instances in {time.perf_counter() - t0:.1f} s")
        reads(rep, "SQLite: ", env, args.seconds, args.clients, args.reps)
        hook_db = os.path.join(tmp, "hooks.db")
        hook_env = wf_env(hook_db)

        def sqlite_count():
            out = subprocess.run([WF, "list", "--json", "--limit", "0"], env=hook_env, check=True,
                                 capture_output=True, text=True).stdout
            return len(json.loads(out))

        hooks(rep, "SQLite: ", hook_env, tmp, args.hooks, sqlite_count)
        if args.pg:
            url = args.pg
            full, hook_s = "wf_serve_full", "wf_serve_hooks"
            scale.psql(url, f"DROP SCHEMA IF EXISTS {full} CASCADE; DROP SCHEMA IF EXISTS {hook_s} CASCADE")
            penv = pg_env(url, full)
            t0 = time.perf_counter()
            weighted = scale.make_templates(tmp, penv)
            scale.pg_clone(url, full, weighted, args.instances)
            print(f"PostgreSQL: {args.instances:,} instances in {time.perf_counter() - t0:.1f} s")
            reads(rep, "PG: ", penv, args.seconds, args.clients, args.reps)
            henv = pg_env(url, hook_s)
            hooks(rep, "PG: ", henv, tmp, args.hooks,
                  lambda: int(scale.psql(url, f"SELECT count(*) FROM {hook_s}.instances")) if
                  scale.psql(url, f"SELECT count(*) FROM pg_tables WHERE schemaname = '{hook_s}' "
                                  "AND tablename = 'instances'") != "0" else 0)
            scale.psql(url, f"DROP SCHEMA IF EXISTS {full} CASCADE; DROP SCHEMA IF EXISTS {hook_s} CASCADE")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rep.finish(args.json)


if __name__ == "__main__":
    main()
