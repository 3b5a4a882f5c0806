#!/usr/bin/env python3
"""Queues and locks (issue 37, item 7), on SQLite and on a private PostgreSQL
server (scripts/pg, fsync on), and DBOS's queue on the same server in the same run.

Run from the repository root:  python3 bench/queues.py   (builds the release binary first)
Options: --quick (smaller N), --json FILE, --no-build, --reps N, --no-dbos.

1. Drain: N detached instances of a 1-step `sleep 0.05` workflow with
   `queue: { concurrency: 20 }`, drained by 4 workers (`--concurrency 25`):
   wall time from the workers' start to the last completion, against the
   ideal N x 0.05 s / 20 (target: within 1.3x). Its floor in the same run:
   the same instances without a queue, 20 at once by the workers' own
   limit (4 x `--concurrency 5`).
2. Admission latency: 101 detached instances of a key with concurrency 1
   and one `/bin/true` step, drained by 2 workers: from one instance's
   attempt end to the next one's attempt start (p50, p99; the attempts'
   own records, ms).
3. The cost of a step `lock`: 300 sequential `/bin/true` steps, each with a
   `lock:`, against the same steps without one (per step, and the ratio).
4. DBOS (PyPI `dbos`, pinned, in a venv of its own under target/): N
   workflows of one step `time.sleep(0.05)` enqueued on a queue of
   `global_concurrency=20`, drained by 4 DBOS processes, timed as wf's
   drain: from the processes' start to the last workflow's SUCCESS.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import ROOT, WF, Report, median, parse_args, pg_env, prepare, run, wf_env, write  # noqa: E402
from pg import start_server  # noqa: E402

DBOS_VERSION = "3.4.0"


def drain(env, n, workers=4, per_worker=25):
    """Starts `workers` workers and waits until `n` runs completed; the wall time."""
    start = time.perf_counter()
    procs = [
        subprocess.Popen([WF, "worker", "-q", "--json", "--concurrency", str(per_worker)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        for _ in range(workers)
    ]
    done, lock, finished = set(), threading.Lock(), threading.Event()

    def count(worker):
        for line in worker.stdout:
            event = json.loads(line)
            with lock:
                if event.get("outcome") == "completed":
                    done.add(event["id"])
                if len(done) >= n:
                    finished.set()

    for w in procs:
        threading.Thread(target=count, args=(w,), daemon=True).start()
    if not finished.wait(timeout=600):
        sys.exit(f"the drain did not finish: {len(done)} of {n} completed")
    took = time.perf_counter() - start
    for w in procs:
        w.terminate()
    for w in procs:
        w.wait()
    return took


def detach(env, wf_file, n, prefix):
    for i in range(n):
        _, _, code, _ = run([WF, "run", "-q", wf_file, "--detach", "--id", f"{prefix}{i:05}"], env=env)
        assert code == 0, f"detach: exit {code}"


def attempts(env, ids):
    """(started_at, finished_at) in ms of each instance's one attempt, in id order."""
    out = []
    for i in ids:
        v = json.loads(run([WF, "inspect", i, "--json", "--attempts"], env=env)[3])
        a = v["steps"][0]["attempt_list"][0]
        out.append((ms(a["started_at"]), ms(a["finished_at"])))
    return out


def ms(text):
    from datetime import datetime
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def backend_cases(rep, name, env_for, tmp, n, reps):
    sleepy = write(os.path.join(tmp, "sleepy.yaml"),
                   "name: sleepy\nqueue: { concurrency: 20 }\nsteps:\n  - id: s\n    run: [sleep, '0.05']\n")
    ideal = n * 0.05 / 20
    ratios = []
    for r in range(reps):
        env = env_for(f"drain{r}")
        detach(env, sleepy, n, "d")
        took = drain(env, n)
        ratios.append(took / ideal)
        print(f"{name}: drain {r + 1}: {took:.2f}s, {took / ideal:.3f}x the ideal {ideal:.1f}s", flush=True)
    # The floor: the same instances without a queue, at most 20 at once
    # (4 workers x 5), which is what the queue's admissions come to.
    plain = write(os.path.join(tmp, "unqueued.yaml"),
                  "name: unqueued\nsteps:\n  - id: s\n    run: [sleep, '0.05']\n")
    floors = []
    for r in range(reps):
        env = env_for(f"floor{r}")
        detach(env, plain, n, "f")
        took = drain(env, n, per_worker=5)
        floors.append(took / ideal)
        print(f"{name}: floor {r + 1}: {took:.2f}s, {took / ideal:.3f}x the ideal", flush=True)
    rep.add(f"{name}: {n} queued x sleep 0.05, concurrency 20, 4 workers, wall / ideal", median(ratios), "x",
            "<= 1.3", median(ratios) <= 1.3, floor=("no queue, 4 workers x 5", median(floors)))
    rep.add(f"{name}: same without a queue, 4 workers x 5 (the floor)", median(floors), "x", "(info)", True)

    # 2. Admission latency.
    one = write(os.path.join(tmp, "one.yaml"),
                "name: one-at-a-time\nqueue: { concurrency: 1 }\nsteps:\n  - id: t\n    run: [/bin/true]\n")
    gaps = []
    for r in range(reps):
        env = env_for(f"latency{r}")
        detach(env, one, 101, "l")
        drain(env, 101, workers=2, per_worker=4)
        spans = sorted(attempts(env, [f"l{i:05}" for i in range(101)]))
        gaps += [b[0] - a[1] for a, b in zip(spans, spans[1:])]
    rep.add(f"{name}: admission latency after a slot frees, p50", percentile(gaps, 50), "ms", "(info)", True)
    rep.add(f"{name}: same, p99", percentile(gaps, 99), "ms", "(info)", True)

    # 3. A lock's cost a step.
    n_steps = 300
    plain = write(os.path.join(tmp, "plain.yaml"), "name: plain\nsteps:\n" + "".join(
        f"  - id: s{i}\n    run: [/bin/true]\n" for i in range(n_steps)))
    locked = write(os.path.join(tmp, "locked.yaml"), "name: locked\nsteps:\n" + "".join(
        f"  - id: s{i}\n    lock: {{ key: bench }}\n    run: [/bin/true]\n" for i in range(n_steps)))
    t_plain, t_locked = [], []
    for r in range(reps):
        for f, times, tag in ((plain, t_plain, "plain"), (locked, t_locked, "locked")):
            env = env_for(f"{tag}{r}")
            elapsed, _, code, _ = run([WF, "run", "-q", f], env=env)
            assert code == 0
            times.append(elapsed)
    per = (median(t_locked) - median(t_plain)) / n_steps * 1e6
    rep.add(f"{name}: a step lock, added a step", per, "us", "(info)", True)
    rep.add(f"{name}: {n_steps} steps with a lock / without", median(t_locked) / median(t_plain), "x", "(info)", True)
    return median(ratios) * ideal


DBOS_APP = r'''
import os, sys, time
from dbos import DBOS, DBOSConfig

@DBOS.step()
def nap():
    time.sleep(0.05)

@DBOS.workflow()
def work(i):
    nap()
    return i

if __name__ == "__main__":
    mode = sys.argv[1]
    config: DBOSConfig = {"name": "wf-bench", "system_database_url": os.environ["DBOS_URL"],
                          "executor_id": f"exec-{os.getpid()}", "run_admin_server": False}
    DBOS(config=config)
    DBOS.launch()
    DBOS.register_queue("bench", global_concurrency=20)
    if mode == "enqueue":
        n = int(sys.argv[2])
        for i in range(n):
            DBOS.enqueue_workflow("bench", work, i)
        print("enqueued", flush=True)
        DBOS.destroy()
    else:
        print("ready", flush=True)
        while True:
            time.sleep(3600)
'''


def dbos_venv():
    venv = os.path.join(ROOT, "target", "bench-venv")
    py = os.path.join(venv, "bin", "python3")
    stamp = os.path.join(venv, ".dbos")
    installed = os.path.exists(py) and os.path.exists(stamp) and open(stamp).read() == DBOS_VERSION
    if not installed:
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", f"dbos=={DBOS_VERSION}"], check=True)
        write(stamp, DBOS_VERSION)
    return py


def dbos_case(rep, server, tmp, n, reps, wf_drain):
    py = dbos_venv()
    app = write(os.path.join(tmp, "dbos_app.py"), DBOS_APP)
    psql = os.path.join(server["WF_TEST_PG_BIN"], "psql")
    base = server["WF_TEST_PG"]
    ideal = n * 0.05 / 20
    ratios = []
    for r in range(reps):
        db = f"dbos_bench_{r}"
        subprocess.run([psql, base, "-qc", f"CREATE DATABASE {db}"], check=True)
        url = base.rsplit("/", 1)[0] + f"/{db}"
        env = dict(os.environ, DBOS_URL=url.replace("postgres://", "postgresql://", 1))
        out = subprocess.run([py, app, "enqueue", str(n)], env=env, capture_output=True, text=True, timeout=900)
        assert "enqueued" in out.stdout, out.stderr[-2000:]
        start = time.perf_counter()
        procs = [subprocess.Popen([py, app, "serve"], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for _ in range(4)]
        try:
            while True:
                done = subprocess.run(
                    [psql, url, "-qAtc", "SELECT count(*) FROM dbos.workflow_status WHERE status = 'SUCCESS'"],
                    capture_output=True, text=True).stdout.strip()
                if done and int(done) >= n:
                    break
                if time.perf_counter() - start > 900:
                    sys.exit(f"DBOS did not drain: {done} of {n}")
                time.sleep(0.05)
            took = time.perf_counter() - start
        finally:
            for p in procs:
                p.kill()
            for p in procs:
                p.wait()
        ratios.append(took / ideal)
        print(f"DBOS {DBOS_VERSION}: drain {r + 1}: {took:.2f}s, {took / ideal:.3f}x the ideal", flush=True)
    rep.add(f"DBOS {DBOS_VERSION} on PostgreSQL: the same drain, wall / ideal", median(ratios), "x", "(info)", True)
    rep.add("wf / DBOS, the same drain on the same server", wf_drain / (median(ratios) * ideal), "x", "(info)", True)


def main():
    no_dbos = "--no-dbos" in sys.argv
    if no_dbos:
        sys.argv.remove("--no-dbos")
    args = parse_args()
    n = 400 if args.quick else 2000
    reps = 1 if args.quick else args.reps
    prepare(args)
    rep = Report()
    tmp = tempfile.mkdtemp(prefix="wf-bench-queues-")
    try:
        backend_cases(rep, "SQLite", lambda name: wf_env(os.path.join(tmp, f"{name}.db")), tmp, n, reps)
        server = start_server()
        try:
            url = server["WF_TEST_PG"]
            wf_drain = backend_cases(rep, "PostgreSQL", lambda name: pg_env(url, f"bq_{name}"), tmp, n, reps)
            if not no_dbos:
                dbos_case(rep, server, tmp, n, reps, wf_drain)
        finally:
            subprocess.run([os.path.join(ROOT, "scripts", "pg"), "stop", server["WF_TEST_PG_DIR"]])
    finally:
        subprocess.run(["rm", "-rf", tmp])
    rep.finish(args.json)


if __name__ == "__main__":
    main()
