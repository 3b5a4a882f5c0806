#!/usr/bin/env python3
"""`wf db` (issue 56, item 5): what moving and backing up a history costs, as ratios to
baselines measured in the same run.

Run from the repository root:  python3 bench/db.py --pg URL   (builds the release binary first;
a private server: `eval "$(scripts/pg start)"`, then `--pg "$WF_TEST_PG"`; needs psql)
Options: --instances N (default 100,000), --quick (5,000), --reps R, --no-build, --json FILE.
Stdlib only; the database is made as bench/scale.py makes its (real template instances
cloned with SQL).

The figures:
- `wf db copy --to PG` of the SQLite database, against loading the same rows into the same
  (empty) schema with PostgreSQL's COPY from CSV files written beforehand (one psql session,
  the rows already in PostgreSQL's own form: a span's ids as a number and bytes, its instance
  by sequence number): target <= 2x;
- `wf db backup` of the SQLite database, against `cp` of the same file quiesced (its WAL
  checkpointed): target <= 1.5x; its floor, `cp` and `sync` of the copy (a backup is on the
  disk when it returns; `cp` alone is not); and, for information, against SQLite's online
  backup of the same file alone (Python's sqlite3, then an fsync): what a consistent copy of a
  file others write costs;
- a 300-step `/bin/true` run on that database while backups of it follow one another beside
  it, against the same run alone (alternated): target <= 1.1x; its floor, the same run beside
  `cp` + `sync` loops of the file.
"""

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Report, pg_env, remove_db, run, seq_true, wf_env, write  # noqa: E402
from scale import WF, checkpoint, clone, make_templates, psql, psql_bin  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The tables a copy writes, in order, with their columns (store/portable.rs).
TABLES = ["definitions", "workflows", "schedules", "admissions", "instances", "runs", "steps",
          "attempts", "events", "spans", "locks", "schedule_fires"]


def sqlite_columns(c, table):
    return [r[1] for r in c.execute(f"PRAGMA table_info({table})")]


def export_csv(db, out_dir):
    """Each table of the SQLite database as a CSV file in PostgreSQL's form; returns
    [(table, columns, path)] in load order."""
    import sqlite3
    c = sqlite3.connect(db)
    seq = {iid: n + 1 for n, (iid,) in enumerate(
        c.execute("SELECT id FROM instances ORDER BY created_at, rowid"))}
    bools = {("instances", "queue_hold"), ("instances", "admitted"), ("spans", "exported")}
    blobs = {("attempts", "stdout"), ("attempts", "stderr")}
    out = []
    for table in TABLES:
        cols = sqlite_columns(c, table)
        order = {"instances": " ORDER BY created_at, rowid"}.get(table, "")
        rows = c.execute(f"SELECT {', '.join(cols)} FROM {table}{order}")
        target_cols = list(cols)
        if table == "spans":
            target_cols = ["instance_seq" if x == "instance_id" else x for x in cols]
        path = os.path.join(out_dir, table + ".csv")
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            for row in rows:
                cells = []
                for col, v in zip(cols, row):
                    if v is None:
                        cells.append("\\N")
                    elif (table, col) in bools:
                        cells.append("t" if v else "f")
                    elif (table, col) in blobs:
                        b = v if isinstance(v, bytes) else str(v).encode()
                        cells.append("\\x" + b.hex())
                    elif table == "spans" and col == "trace_id":
                        cells.append("\\x" + v)
                    elif table == "spans" and col in ("span_id", "parent_span_id"):
                        cells.append(str(int.from_bytes(bytes.fromhex(v), "big", signed=True)))
                    elif table == "spans" and col == "instance_id":
                        cells.append(str(seq[v]))
                    else:
                        cells.append(v)
                w.writerow(cells)
        out.append((table, target_cols, path))
    c.close()
    return out


def fresh_schema(url, schema, flow):
    """An empty schema holding wf's tables: made by a run (wf creates and
    migrates the schema it writes to), whose rows are then emptied."""
    psql(url, f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    run([WF, "run", "-q", flow], env=pg_env(url, schema))
    psql(url, f"SET search_path TO {schema}; TRUNCATE {', '.join(TABLES)}, metric_counts, metric_ends, "
              "metric_deltas RESTART IDENTITY CASCADE")


def copy_load(url, schema, files):
    """Seconds for one psql session to COPY every file into `schema`."""
    script = [f"SET search_path TO {schema};", "BEGIN;"]
    for table, cols, path in files:
        script.append(f"\\copy {table} ({', '.join(cols)}) FROM '{path}' WITH (FORMAT csv, NULL '\\N')")
    script.append("SELECT setval(pg_get_serial_sequence('events', 'id'), GREATEST((SELECT max(id) FROM events), 1));")
    script.append("COMMIT;")
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write("\n".join(script) + "\n")
        sql = f.name
    start = time.perf_counter()
    subprocess.run([psql_bin(), url, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", sql], check=True,
                   capture_output=True)
    took = time.perf_counter() - start
    os.unlink(sql)
    return took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pg", required=True)
    ap.add_argument("--instances", type=int, default=100_000)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    n = 5_000 if args.quick else args.instances
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--locked", "--quiet"], cwd=ROOT, check=True)
    rep = Report()
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "full.db")
        env = wf_env(db)
        made = clone(db, make_templates(tmp, env), n)
        size = checkpoint(db)
        print(f"database: {made} cloned instances, {size / 1e6:.1f} MB", flush=True)

        # 1. copy to PostgreSQL, against COPY of the same rows.
        csv_dir = os.path.join(tmp, "csv")
        os.mkdir(csv_dir)
        files = export_csv(db, csv_dir)
        one = write(os.path.join(tmp, "one.yaml"), seq_true(1))
        wf_copy, pg_copy = [], []
        for r in range(args.reps):
            psql(args.pg, "DROP SCHEMA IF EXISTS bench_copy CASCADE")
            t, _, code, _ = run([WF, "db", "copy", "-q", "--to", args.pg], env={**pg_env(args.pg, "bench_copy"),
                                                                                 "WF_DB": db})
            assert code == 0, "wf db copy failed"
            wf_copy.append(t)
            fresh_schema(args.pg, "bench_copyin", one)
            pg_copy.append(copy_load(args.pg, "bench_copyin", files))
        a, b = statistics.median(wf_copy), statistics.median(pg_copy)
        rep.add(f"wf db copy of {n} instances to PostgreSQL / COPY ({a:.2f} vs {b:.2f} s)", a / b, "x",
                "<= 2", a / b <= 2)
        for s in ("bench_copy", "bench_copyin"):
            psql(args.pg, f"DROP SCHEMA IF EXISTS {s} CASCADE")

        # 2. backup against cp of the quiesced file.
        def online_backup(dest):
            # The floor of a consistent copy: SQLite's online backup alone
            # (Python's sqlite3, the same pragmas as wf's: no journal, no
            # syncs of its own), then one fsync, in a process of its own.
            code = ("import os, sqlite3, sys\n"
                    "s = sqlite3.connect(sys.argv[1]); d = sqlite3.connect(sys.argv[2])\n"
                    "d.execute('PRAGMA journal_mode=OFF'); d.execute('PRAGMA synchronous=OFF')\n"
                    "s.backup(d); d.close()\n"
                    "f = os.open(sys.argv[2], os.O_RDONLY); os.fsync(f)\n")
            return run([sys.executable, "-c", code, db, dest])[0]

        backups, cps, synced, online = [], [], [], []
        for r in range(args.reps):
            dest = os.path.join(tmp, f"backup-{r}.db")
            t, _, code, _ = run([WF, "db", "backup", "-q", dest], env=env)
            assert code == 0, "wf db backup failed"
            backups.append(t)
            os.unlink(dest)
            checkpoint(db)
            t, _, _, _ = run(["cp", db, dest])
            cps.append(t)
            os.unlink(dest)
            # The floor of a backup that is on the disk when it returns:
            # the same copy, synced (coreutils' `sync FILE` fsyncs it).
            t, _, _, _ = run(["sh", "-c", 'cp "$1" "$2" && sync "$2"', "sh", db, dest])
            synced.append(t)
            os.unlink(dest)
            online.append(online_backup(dest))
            os.unlink(dest)
        a, b, c = statistics.median(backups), statistics.median(cps), statistics.median(synced)
        d = statistics.median(online)
        rep.add(f"wf db backup / cp of the quiesced file ({a:.3f} vs {b:.3f} s; cp + sync {c:.3f} s; "
                f"SQLite's online backup + fsync {d:.3f} s)",
                a / b, "x", "<= 1.5", a / b <= 1.5, floor=("cp + sync of the copy / cp", c / b))
        rep.add("wf db backup / SQLite's online backup of the same file + fsync (Python)", a / d, "x",
                "info", True)

        # 3. a 300-step run beside backups, against alone.
        flow = write(os.path.join(tmp, "true300.yaml"), seq_true(300))
        stop = threading.Event()

        def beside_loop(copy):
            k = 0
            while not stop.is_set():
                dest = os.path.join(tmp, f"beside-{k}.db")
                copy(dest)
                remove_db(dest)
                k += 1

        def backup(dest):
            run([WF, "db", "backup", "-q", dest], env=env)

        def cp_sync(dest):
            # The floor: the same bytes copied and synced, by cp (the file
            # as it is: a WAL beside it is not copied).
            run(["sh", "-c", 'cp "$1" "$2" && sync "$2"', "sh", db, dest])

        def beside_run(copy):
            stop.clear()
            th = threading.Thread(target=beside_loop, args=(copy,))
            th.start()
            time.sleep(0.05)
            t = run([WF, "run", "-q", flow], env=env)[0]
            stop.set()
            th.join()
            return t

        alone, beside, floor = [], [], []
        run([WF, "run", "-q", flow], env=env)
        for r in range(args.reps * 2):
            alone.append(run([WF, "run", "-q", flow], env=env)[0])
            beside.append(beside_run(backup))
            floor.append(beside_run(cp_sync))
        a, b, c = statistics.median(beside), statistics.median(alone), statistics.median(floor)
        rep.add(f"300-step run beside backups / alone ({a:.3f} vs {b:.3f} s; beside cp + sync {c:.3f} s)",
                a / b, "x", "<= 1.1", a / b <= 1.1, floor=("the run beside cp + sync loops / alone", c / b))
    rep.finish(args.json, instances=n)


if __name__ == "__main__":
    main()
