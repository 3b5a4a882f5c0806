#!/usr/bin/env python3
"""wf on PostgreSQL: benchmarks against baselines measured in the same run.

Run from the repository root:  python3 bench/pg.py   (builds the release binary first)
It starts a private PostgreSQL server with fsync=on (scripts/pg), gives each
case a schema of its own, and stops the server at the end.
Options: --quick (smaller N), --json FILE, --no-build.

1. N sequential /bin/true steps, against a bash loop of the same commands,
   and against the floor of a step recorded in PostgreSQL (bench/pg_floor.rs):
   rung 0, the attempt rows alone in one durable statement a step; rung 4,
   the rows, fence and process group a wf step writes and makes.
2. Pure set_state steps: the cost of one checkpointed step (one commit).
3. 1,000 instances of a 3-step workflow whose steps sleep 0.2 s, due at
   once, drained by 4 workers with --concurrency 25: against the ideal
   (1,000 x 0.6 s / 100 slots = 6 s).
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import ROOT, WF, Report, example_bin, median, parse_args, pg_env, prepare, run, write  # noqa: E402


def start_server():
    out = subprocess.run(
        [os.path.join(ROOT, "scripts", "pg"), "start"],
        check=True,
        capture_output=True,
        text=True,
        env=dict(os.environ, WF_PG_FSYNC="on"),
    ).stdout
    vars = {}
    for line in out.splitlines():
        if line.startswith("export "):
            k, v = line[len("export "):].split("=", 1)
            vars[k] = v.strip("'")
    return vars


def unix_socket_url(server):
    """The URL of the server's Unix socket (scripts/pg puts it in its folder)."""
    port = server["WF_TEST_PG"].split("@", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]
    folder = server["WF_TEST_PG_DIR"].replace("/", "%2F")
    return f"postgres://wf@{folder}:{port}/postgres"


def main():
    args = parse_args()
    n_true = 200 if args.quick else 1000
    n_state = 500 if args.quick else 2000
    n_inst = 100 if args.quick else 1000
    reps = 1 if args.quick else args.reps

    prepare(args)
    server = start_server()
    url = server["WF_TEST_PG"]
    version = subprocess.run(
        [os.path.join(server["WF_TEST_PG_BIN"], "postgres"), "--version"], capture_output=True, text=True
    ).stdout.strip()
    print(f"server: {version}, fsync=on, synchronous_commit=on, on loopback")
    rep = Report()
    tmp = tempfile.mkdtemp(prefix="wf-bench-pg-")
    try:
        # 1. Sequential /bin/true steps vs a bash loop of the same commands,
        #    alternated in the same run, per step: each schema is made (its
        #    migrations run) by a 1-step run before the timed one. Over TCP
        #    on loopback (the figure with the target: how workers on other
        #    machines connect) and over the server's Unix socket (how a
        #    client on the server's machine connects by default).
        wf_file = write(os.path.join(tmp, "true.yaml"), "name: bench-true\nsteps:\n" + "".join(
            f"  - id: s{i}\n    run: [/bin/true]\n" for i in range(n_true)))
        one = write(os.path.join(tmp, "one.yaml"), "name: one\nsteps:\n  - id: s\n    run: [/bin/true]\n")
        socket_url = unix_socket_url(server)
        pg_floor = example_bin("pg_floor", not args.no_build)
        bash, tcp, unix, floor0, floor4 = [], [], [], [], []
        for r in range(max(reps, 5)):
            bash.append(run(["bash", "-c", f"for i in $(seq {n_true}); do /bin/true; done"])[0])
            for times, u in ((tcp, url), (unix, socket_url)):
                env = pg_env(u, f"b_true{len(times)}_{'tcp' if u == url else 'unix'}")
                run([WF, "run", "-q", one], env=env)
                times.append(run([WF, "run", "-q", wf_file], env=env)[0])
            floor0.append(run([pg_floor, str(n_true), url, "0"])[0])
            floor4.append(run([pg_floor, str(n_true), url, "4"])[0])
        b = median(bash)
        print(f"{n_true} sequential /bin/true steps: wf {median(tcp):.3f}s over TCP, {median(unix):.3f}s over "
              f"the Unix socket, bash loop {b:.3f}s, PostgreSQL floor {median(floor0):.3f}s (attempt rows) and "
              f"{median(floor4):.3f}s (wf's rows, fence and group) over TCP (medians of {len(bash)}, alternated)")
        rep.add(f"{n_true} x /bin/true on PostgreSQL (TCP loopback), wf/bash", median(tcp) / b, "x", "<= 1.6",
                median(tcp) / b <= 1.6)
        rep.add("same, per step", median(tcp) / n_true * 1e6, "us", "(info)", True)
        rep.add(f"{n_true} x /bin/true on PostgreSQL (Unix socket), wf/bash", median(unix) / b, "x", "(info)", True)
        rep.add("same, PostgreSQL floor/bash (attempt rows, one durable statement a step)", median(floor0) / b, "x",
                "(info)", True)
        rep.add("same, PostgreSQL floor/bash (wf's rows, fence and process group)", median(floor4) / b, "x",
                "(info)", True)
        rep.add("same, wf/that floor (wf's engine)", median(tcp) / median(floor4), "x", "(info)", True)

        # 2. Pure set_state steps: one commit each.
        wf_file = write(os.path.join(tmp, "state.yaml"), "name: bench-state\nstate: { n: -1 }\nsteps:\n" + "".join(
            f"  - id: s{i}\n    set_state: {{ n: {i} }}\n" for i in range(n_state)))
        times = []
        for r in range(reps):
            env = pg_env(url, f"b_state{r}")
            run([WF, "run", "-q", one], env=env)  # the schema, untimed
            times.append(run([WF, "run", "-q", wf_file], env=env)[0])
        per_step = median(times) / n_state * 1e6
        rep.add(f"{n_state} x set_state on PostgreSQL, per step", per_step, "us", "<= 150", per_step <= 150)

        # 3. 1,000 due instances of 3 x sleep 0.2, drained by 4 workers x 25.
        wf_file = write(
            os.path.join(tmp, "drain.yaml"),
            "name: bench-drain\nsteps:\n  - id: nap\n    sleep: 1s\n"
            + "".join(
                f"  - id: s{i}\n    needs: [{'nap' if i == 1 else f's{i - 1}'}]\n    run: [sleep, '0.2']\n"
                for i in range(1, 4)
            ),
        )
        ratios = []
        ideal = n_inst * 0.6 / 100
        for r in range(reps):
            env = pg_env(url, f"b_drain{r}")
            created = time.perf_counter()
            for i in range(n_inst):
                _, _, code, _ = run([WF, "run", "-q", wf_file, "--id", f"d{i:04}", "--inline-wait", "0s"], env=env)
                assert code == 3, f"expected the instance to sleep, got exit {code}"
            print(f"created {n_inst} sleeping instances in {time.perf_counter() - created:.1f}s")
            time.sleep(1.1)  # every timer is due
            # The workers say when each run ends (`--json`): counted as they
            # come, so that no polling process competes with them for the CPU.
            start = time.perf_counter()
            workers = [
                subprocess.Popen([WF, "worker", "-q", "--json", "--concurrency", "25"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                for _ in range(4)
            ]
            done, lock, finished = set(), threading.Lock(), threading.Event()

            def count(worker):
                for line in worker.stdout:
                    event = json.loads(line)
                    with lock:
                        if event.get("outcome") == "completed":
                            done.add(event["id"])
                        if len(done) >= n_inst:
                            finished.set()

            readers = [threading.Thread(target=count, args=(w,), daemon=True) for w in workers]
            for t in readers:
                t.start()
            if not finished.wait(timeout=30 * ideal):
                sys.exit(f"the drain did not finish: {len(done)} of {n_inst} completed")
            took = time.perf_counter() - start
            for w in workers:
                w.terminate()
            for w in workers:
                w.wait()
            ratios.append(took / ideal)
            print(f"drain {r + 1}: {took:.1f}s, {took / ideal:.3f}x the ideal")
        took = median(ratios) * ideal
        rep.add(f"{n_inst} instances x 3 x sleep 0.2, 4 workers x 25, wall / ideal {ideal:.1f}s (median of {reps})",
                took / ideal, "x", "<= 1.3", took / ideal <= 1.3)
    finally:
        subprocess.run([os.path.join(ROOT, "scripts", "pg"), "stop", server["WF_TEST_PG_DIR"]])
        subprocess.run(["rm", "-rf", tmp])

    rep.finish(args.json)


if __name__ == "__main__":
    main()
