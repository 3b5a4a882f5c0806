#!/usr/bin/env python3
"""A `/metrics` scrape of `wf serve` at 1,000 and at 1,000,000 instances (issue 54, item 1).

Run from the repository root:  python3 bench/metrics.py   (builds the release binary first)
Options: --small N (default 1,000), --large N (default 1,000,000), --scrapes K (default 200),
--no-build, --json FILE, --skip-sqlite, --reuse-pg (the schemas of an earlier run), --pg URL (the same on PostgreSQL: `eval "$(scripts/pg start)"`, then
`--pg "$WF_TEST_PG"`; needs psql), --keep DIR.

The databases are made as bench/scale.py makes them (real instances of four templates, cloned
with SQL, their times spread over 7 days; the clones' rows fire the triggers that keep the
counts, as instances made by wf do). K scrapes one after another from one keep-alive client;
p50 and p99 of each size, and their ratio: the scrape reads the kept counts, never the history,
so the target is the same cost at both sizes, under 50 ms (SPEC §8).
"""

import argparse
import http.client
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Report, pg_env, remove_db, wf_env  # noqa: E402
import scale  # noqa: E402
import serve  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def scrapes(env, k):
    """K scrapes of a `wf serve` on `env`'s database: latencies in ms, and the last body."""
    s = serve.Server(env)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
        headers = {"Authorization": f"Bearer {serve.TOKEN}"}
        lat, body = [], b""
        for _ in range(k + 5):
            t0 = time.perf_counter()
            conn.request("GET", "/metrics", headers=headers)
            r = conn.getresponse()
            body = r.read()
            lat.append((time.perf_counter() - t0) * 1e3)
            assert r.status == 200, f"/metrics: {r.status} {body[:200]}"
        conn.close()
        return sorted(lat[5:]), body.decode()
    finally:
        s.stop()


def pct(xs, p):
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def figures(rep, prefix, env_small, env_large, small, large, k):
    (ls, _), (ll, body) = scrapes(env_small, k), scrapes(env_large, k)
    total = sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
                if line.startswith("wf_instances{"))
    assert total >= large, f"the large database's scrape counts {total} instances, not {large}"
    for name, lat, n in ((f"{small:,}", ls, small), (f"{large:,}", ll, large)):
        p50, p99 = pct(lat, 0.5), pct(lat, 0.99)
        rep.add(f"{prefix}/metrics at {name} instances, p50 (p99 {p99:.2f} ms)", p50, "ms", "< 50", p99 < 50)
    ratio = pct(ll, 0.5) / pct(ls, 0.5)
    rep.add(f"{prefix}/metrics p50, {large:,} / {small:,} instances", ratio, "x", "(same cost)", ratio < 2)


def sqlite(tmp, small, large, k, rep):
    dbs = {}
    for n in (small, large):
        db = os.path.join(tmp, f"m{n}.db")
        remove_db(db)
        t0 = time.perf_counter()
        weighted = scale.make_templates(tmp, wf_env(db))
        scale.clone(db, weighted, n)
        have = sqlite3.connect(db).execute("SELECT count(*) FROM instances").fetchone()[0]
        print(f"SQLite: {have:,} instances in {time.perf_counter() - t0:.1f} s "
              f"({os.path.getsize(db) / 2**20:.0f} MiB)")
        dbs[n] = wf_env(db)
    figures(rep, "", dbs[small], dbs[large], small, large, k)


def postgres(url, tmp, small, large, k, rep, reuse):
    envs = {}
    for n in (small, large):
        schema = f"wf_metrics_{n}"
        env = pg_env(url, schema)
        t0 = time.perf_counter()
        have = scale.psql(url, f"SELECT count(*) FROM {schema}.instances") if reuse and scale.psql(
            url, f"SELECT count(*) FROM pg_namespace WHERE nspname = '{schema}'") == "1" else "0"
        if int(have) < n:
            scale.psql(url, f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            weighted = scale.make_templates(tmp, env)
            scale.pg_clone(url, schema, weighted, n)
        # The clone's rows left their counts as deltas (the triggers'), as a
        # day of work would: a worker's heartbeat folds them into the totals
        # (and vacuums the deltas' table after so many), as it does every 5 s.
        t1 = time.perf_counter()
        scale.wf(["worker", "--once", "-q"], env)
        print(f"PostgreSQL: the worker's first fold took {time.perf_counter() - t1:.1f} s")
        print(f"PostgreSQL: {scale.psql(url, f'SELECT count(*) FROM {schema}.instances')} instances in "
              f"{time.perf_counter() - t0:.1f} s")
        envs[n] = env
    figures(rep, "PG: ", envs[small], envs[large], small, large, k)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", type=int, default=1_000)
    ap.add_argument("--large", type=int, default=1_000_000)
    ap.add_argument("--scrapes", type=int, default=200)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--keep", metavar="DIR")
    ap.add_argument("--json")
    ap.add_argument("--pg", metavar="URL")
    ap.add_argument("--skip-sqlite", action="store_true")
    ap.add_argument("--reuse-pg", action="store_true",
                    help="keep the PostgreSQL schemas of an earlier run that have the instances")
    args = ap.parse_args()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--locked", "--quiet"], cwd=ROOT, check=True)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}")
    rep = Report()
    tmp = args.keep or tempfile.mkdtemp(prefix="wf-metrics-")
    os.makedirs(tmp, exist_ok=True)
    try:
        if not args.skip_sqlite:
            sqlite(tmp, args.small, args.large, args.scrapes, rep)
        if args.pg:
            postgres(args.pg, tmp, args.small, args.large, args.scrapes, rep, args.reuse_pg)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    rep.finish(args.json)


if __name__ == "__main__":
    main()
