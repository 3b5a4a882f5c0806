#!/usr/bin/env python3
"""wf at scale (issue 16, item 4): a database holding 100,000 ended instances, and what
it costs wf beside the same commands on an empty database measured in the same run.

Run from the repository root:  python3 bench/scale.py   (builds the release binary first)
Options: --instances N (default 100,000), --quick (5,000 instances, fewer repetitions),
--reps R, --no-build, --keep DIR (leave the databases there), --json FILE, --pg URL (the
same on PostgreSQL: `eval "$(scripts/pg start)"`, then `--pg "$WF_TEST_PG"`; needs psql).
The binary is $CARGO_TARGET_DIR/release/wf (target/release/wf without it). Stdlib only.

The generator: a few real instances are run with the release binary from templates
(a 1-step and a 3-step shell workflow that complete, a 1-step one that fails, one that
waits for an event which is then signalled), then their rows are cloned with SQL under
new ids, with their times spread over the past 7 days (oldest first, so rowid order
follows creation as it does in a real database), in every table that holds rows of an
instance: instances, runs, steps, attempts, spans, events (schedule_fires stays empty).
100,000 instances take some 5 s (2 vCPUs).

The figures, each with its target beside it (times are medians; full and empty runs
alternate, so drift of the shared machine hits both):
- `wf list --limit 50` on the full database (< 50 ms), and filtered by status and by
  workflow, with matches and with none (the same target);
- `wf run` of a 1-step `/bin/true` workflow, full / empty (<= 1.1x);
- a worker's scan for due work: `wf worker --once` with nothing due, full - empty
  (< 5 ms), and the scan queries themselves (the SQL of `due_instances` and of the
  selection inside `claim_due`, read out of src/store/sqlite/lease.rs so the bench
  runs what wf runs), timed in-process with Python's sqlite3;
- bytes per simple shell step: the file (after a TRUNCATE checkpoint) over the step
  attempts it holds, and per instance (<= 2 KiB a step, its spans included); and, on
  databases of one template each, a 1-step instance whole and what each further step adds;
- `wf inspect ID-PREFIX` (info).
"""

import argparse
import json
import os
import platform
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Report, median, pg_env, remove_db, run, wf_env, write  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
WF = os.path.join(TARGET, "release", "wf")
LEASE = os.path.join(ROOT, "src", "store", "sqlite", "lease.rs")

# Templates: (file name, YAML, runs of it, share of the clones).
ONE = "name: scale-one\nsteps:\n  - id: greet\n    run: echo \"hello from ${{ instance.id }}\"\n"
THREE = (
    "name: scale-three\ninputs:\n  who: { default: world }\nsteps:\n"
    "  - id: fetch\n    run: echo n=3 >> \"$WF_OUTPUT\"\n"
    "  - id: build\n    run: echo \"building for ${{ inputs.who }}\"\n"
    "  - id: ship\n    run: echo shipped\n    set_state: { shipped: true }\n"
)
FAIL = "name: scale-fail\nsteps:\n  - id: check\n    run: echo 'disk full' >&2; exit 3\n"
EVENT = (
    "name: scale-event\nsteps:\n  - id: approval\n    wait_for_event: { name: go }\n"
    "  - id: apply\n    run: echo applied\n"
)
TEMPLATES = [("one.yaml", ONE, 4, 40), ("three.yaml", THREE, 3, 30), ("fail.yaml", FAIL, 2, 20), ("event.yaml", EVENT, 1, 10)]

# Columns holding a time as RFC 3339 text, and as unix nanoseconds: shifted with the clone.
TEXT_TIMES = {"created_at", "updated_at", "started_at", "finished_at", "received_at", "wake_at", "retry_at"}
NS_TIMES = {"started_ns", "start_ns", "end_ns"}
# Tables holding rows of an instance, and the column naming it.
PER_INSTANCE = [("instances", "id"), ("runs", "instance_id"), ("steps", "instance_id"),
                ("attempts", "instance_id"), ("spans", "instance_id"), ("events", "instance_id")]


def wf(args, env, check=True):
    return run([WF] + args, env=env, check=check)


def timed_pair(argv, env_full, env_empty, n, argv_empty=None):
    """Medians (s) of `n` alternated runs of `wf ARGV` on the full and the empty
    database, after one warm-up run on each."""
    argv_empty = argv_empty or argv
    wf(argv, env_full)
    wf(argv_empty, env_empty)
    tf, te = [], []
    for _ in range(n):
        tf.append(wf(argv, env_full)[0])
        te.append(wf(argv_empty, env_empty)[0])
    return median(tf), median(te)


def full_vs_empty(rep, prefix, lists, one, env_full, env_empty, reps):
    """The figures both backends report: `wf list` (each of `lists`), `wf run`
    of the 1-step workflow `one`, and the worker's scan, full against empty."""
    for label, argv in lists:
        mf, me = timed_pair(argv, env_full, env_empty, reps)
        rep.add(f"{prefix}{label}, full (empty {me * 1e3:.1f} ms)", mf * 1e3, "ms", "< 50", mf * 1e3 < 50)
    mf, me = timed_pair(["run", "-q", one], env_full, env_empty, reps * 2)
    ratio = mf / me
    rep.add(f"{prefix}wf run, 1-step /bin/true, full / empty ({mf * 1e3:.1f} vs {me * 1e3:.1f} ms)",
            ratio, "x", "<= 1.1", ratio <= 1.1)
    mf, me = timed_pair(["worker", "--once", "-q"], env_full, env_empty, reps * 2)
    diff = (mf - me) * 1e3
    rep.add(f"{prefix}wf worker --once, nothing due, full - empty ({mf * 1e3:.1f} vs {me * 1e3:.1f} ms)",
            diff, "ms", "< 5", diff < 5)


def make_templates(tmp, env, templates=TEMPLATES):
    """Runs each template with the real binary (on the database `env` names);
    returns their instance ids, weighted."""
    weighted = []
    for name, text, runs, share in templates:
        path = write(os.path.join(tmp, name), text)
        ids = []
        for _ in range(runs):
            _, _, code, out = wf(["run", "-q", "--json", path], env, check=False)
            iid = json.loads(out)["id"]
            if name == "event.yaml":
                assert code == 3, f"expected the event template to wait, got exit {code}"
                wf(["signal", "-q", iid, "go", "--data", '{"ok": true}'], env)
                _, _, code, _ = wf(["resume", "-q", iid], env, check=False)
            want = 1 if name == "fail.yaml" else 0
            assert code == want, f"template {name} exited {code}, expected {want}"
            ids.append(iid)
        weighted.append((ids, share))
    return weighted


def clone_plan(weighted):
    """What both clones share: the mix (clone i copies the template at position i
    of a cycle of 100 weighted slots), now, and the 7 days the clones' times span."""
    cycle = []
    for ids, share in weighted:
        cycle += [ids[k % len(ids)] for k in range(share)]
    return cycle, int(time.time() * 1000), 7 * 86_400_000


def clone(db, weighted, n_total):
    """Clones the template instances to n_total instances in all, with SQL."""
    c = sqlite3.connect(db, isolation_level=None)
    c.execute("PRAGMA synchronous=OFF")
    c.execute("PRAGMA cache_size=-262144")
    c.execute("PRAGMA foreign_keys=OFF")
    have = c.execute("SELECT count(*) FROM instances").fetchone()[0]
    n = max(0, n_total - have)
    cycle, now_ms, span_ms = clone_plan(weighted)
    c.execute("BEGIN")
    c.execute("CREATE TEMP TABLE m (n INTEGER PRIMARY KEY, src TEXT, id TEXT, delta_ms INTEGER, trace TEXT)")
    src_created = {
        iid: c.execute(
            "SELECT CAST(round((julianday(created_at) - 2440587.5) * 86400000) AS INTEGER) FROM instances WHERE id=?",
            (iid,),
        ).fetchone()[0]
        for ids, _ in weighted
        for iid in ids
    }
    rows = []
    for i in range(n):
        src = cycle[i % len(cycle)]
        created = now_ms - span_ms + (span_ms - 3_600_000) * i // max(n, 1)
        rows.append((i, src, created - src_created[src]))
    c.executemany(
        "INSERT INTO m (n, src, id, delta_ms, trace) VALUES (?, ?, lower(hex(randomblob(16))), ?, lower(hex(randomblob(16))))",
        rows,
    )
    for table, key in PER_INSTANCE:
        cols = [r[1] for r in c.execute(f"PRAGMA table_info({table})")]
        if table == "events":
            cols.remove("id")  # INTEGER PRIMARY KEY: a new one
        exprs = []
        # Spans on PostgreSQL are under their instance's seq, with binary ids (migration 6).
        by_seq = "instance_seq" in cols
        source = (f"m JOIN instances si ON si.id = m.src JOIN {table} s ON s.instance_seq = si.seq "
                  f"JOIN instances ni ON ni.id = m.id") if by_seq else f"m JOIN {table} s ON s.{key} = m.src"
        for col in cols:
            if col == key:
                exprs.append("m.id")
            elif col == "instance_seq":
                exprs.append("ni.seq")
            elif col == "trace_id" and by_seq:
                exprs.append("decode(m.trace, 'hex')")
            elif col in TEXT_TIMES:
                exprs.append(
                    f"CASE WHEN s.{col} IS NULL THEN NULL ELSE strftime('%Y-%m-%dT%H:%M:%fZ', "
                    f"julianday(s.{col}) + m.delta_ms / 86400000.0) END"
                )
            elif col in NS_TIMES:
                exprs.append(f"s.{col} + m.delta_ms * 1000000")
            elif col in ("attributes", "output"):
                exprs.append(f"replace(s.{col}, m.src, m.id)")  # the instance id they name
            elif col == "trace_id":
                exprs.append("CASE WHEN s.trace_id IS NULL THEN NULL ELSE m.trace END")
            else:
                exprs.append(f"s.{col}")
        order = ", s.rowid" if table in ("spans", "events") else ""
        c.execute(
            f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(exprs)} "
            f"FROM m JOIN {table} s ON s.{key} = m.src ORDER BY m.n{order}"
        )
    c.execute("COMMIT")
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()
    return n


def counts(db):
    c = sqlite3.connect(db)
    out = {t: c.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t, _ in PER_INSTANCE}
    out["shell attempts"] = c.execute("SELECT count(*) FROM attempts WHERE exit_code IS NOT NULL").fetchone()[0]
    c.close()
    return out


def checkpoint(db):
    c = sqlite3.connect(db)
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()
    return os.path.getsize(db)


def pure_size(tmp, template, n):
    """(file bytes, row counts) of a database of n instances of one template."""
    db = os.path.join(tmp, "pure-" + template[0].replace(".yaml", ".db"))
    remove_db(db)
    clone(db, make_templates(tmp, wf_env(db), [template]), n)
    return checkpoint(db), counts(db)


def table_bytes(db):
    """Bytes per table and index (dbstat), or None where this sqlite3 lacks it."""
    c = sqlite3.connect(db)
    try:
        rows = c.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
    except sqlite3.OperationalError:
        rows = None
    c.close()
    return rows


# ---- the scan SQL, read from the Rust source ----

def rust_literals(text):
    """The contents of the Rust string literals in `text`, joined (`\\` + newline continues)."""
    out = []
    for lit in re.findall(r'"((?:[^"\\]|\\.)*)"', text, re.S):
        lit = re.sub(r"\\\n\s*", "", lit)
        out.append(lit.replace('\\"', '"').replace("\\\\", "\\"))
    return "".join(out)


def scan_sql():
    """(due_instances SQL, claim_due's selection SQL), as lease.rs has them."""
    src = open(LEASE).read()
    macro = re.search(r"macro_rules! due_sql \{\s*\(\) => \{(.*?)\};\s*\}", src, re.S)
    due = rust_literals(macro.group(1))

    def const(name):
        body = src[src.index(f"const {name}: &str = concat!(") :]
        body = body[: body.index(");")]
        return rust_literals(body.replace("due_sql!()", '"' + due.replace('"', '\\"') + '"'))

    due_instances = const("DUE_INSTANCES_SQL")
    claim = const("CLAIM_DUE_SQL")
    # The selection inside the UPDATE: what a worker's claim reads.
    inner = re.search(r"WHERE id IN \((SELECT id FROM instances WHERE .*LIMIT \?5)\)", claim, re.S)
    if not inner:
        sys.exit("bench/scale.py: cannot find claim_due's selection in lease.rs")
    # ?2..?6 appear in it: give it the numbered parameters it uses.
    return due_instances, inner.group(1)


def time_query(db, sql, params, reps):
    c = sqlite3.connect(db)
    c.execute(sql, params).fetchall()  # prepares, warms the cache
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        c.execute(sql, params).fetchall()
        ts.append(time.perf_counter() - t)
    plan = [r[3] for r in c.execute("EXPLAIN QUERY PLAN " + sql, params)]
    c.close()
    return median(ts), plan


# ---- PostgreSQL (--pg URL) ----

def psql_bin():
    import glob
    for d in [os.environ.get("WF_TEST_PG_BIN", "")] + sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if d and os.path.exists(os.path.join(d, "psql")):
            return os.path.join(d, "psql")
    found = shutil.which("psql")
    if not found:
        sys.exit("bench/scale.py: --pg needs psql")
    return found


def psql(url, sql):
    out = subprocess.run([psql_bin(), url, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def pg_clone(url, schema, weighted, n_total):
    """The same clone as `clone`, in PostgreSQL's SQL."""
    have = int(psql(url, f"SELECT count(*) FROM {schema}.instances"))
    n = max(0, n_total - have)
    cycle, now_ms, span_ms = clone_plan(weighted)
    ms = "(extract(epoch FROM {}::timestamptz) * 1000)::bigint"
    script = [
        f"SET search_path = {schema}",
        "CREATE TEMP TABLE cyc (k int, src text)",
        "INSERT INTO cyc VALUES " + ", ".join(f"({k}, '{src}')" for k, src in enumerate(cycle)),
        "CREATE TEMP TABLE m (n int PRIMARY KEY, src text, id text, delta_ms bigint, trace text)",
        f"INSERT INTO m SELECT i, c.src, md5(random()::text || i), "
        f"({now_ms - span_ms} + {span_ms - 3_600_000}::bigint * i / {max(n, 1)}) - {ms.format('s.created_at')}, "
        f"md5(random()::text || 't' || i) FROM generate_series(0, {n - 1}) i "
        f"JOIN cyc c ON c.k = i % {len(cycle)} JOIN instances s ON s.id = c.src",
    ]
    for table, key in PER_INSTANCE:
        cols = psql(url, f"SELECT string_agg(column_name, ',' ORDER BY ordinal_position) FROM information_schema.columns "
                         f"WHERE table_schema = '{schema}' AND table_name = '{table}' "
                         f"AND coalesce(column_default, '') NOT LIKE 'nextval(%'").split(",")
        exprs = []
        # Spans on PostgreSQL are under their instance's seq, with binary ids (migration 6).
        by_seq = "instance_seq" in cols
        source = (f"m JOIN instances si ON si.id = m.src JOIN {table} s ON s.instance_seq = si.seq "
                  f"JOIN instances ni ON ni.id = m.id") if by_seq else f"m JOIN {table} s ON s.{key} = m.src"
        for col in cols:
            if col == key:
                exprs.append("m.id")
            elif col == "instance_seq":
                exprs.append("ni.seq")
            elif col == "trace_id" and by_seq:
                exprs.append("decode(m.trace, 'hex')")
            elif col in TEXT_TIMES:
                exprs.append(f"to_char((s.{col}::timestamptz + m.delta_ms * interval '1 millisecond') "
                             f"AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')")
            elif col in NS_TIMES:
                exprs.append(f"s.{col} + m.delta_ms * 1000000")
            elif col in ("attributes", "output"):
                exprs.append(f"replace(s.{col}, m.src, m.id)")
            elif col == "trace_id":
                exprs.append("CASE WHEN s.trace_id IS NULL THEN NULL ELSE m.trace END")
            else:
                exprs.append(f"s.{col}")
        script.append(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(exprs)} "
                      f"FROM {source} ORDER BY m.n")
    subprocess.run([psql_bin(), url, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-1"],
                   input=";\n".join(script) + ";\n", check=True, text=True, capture_output=True)
    psql(url, f"VACUUM ANALYZE {schema}.instances, {schema}.runs, {schema}.steps, {schema}.attempts, "
              f"{schema}.spans, {schema}.events")
    return n


def pg_size(url, schema):
    """Bytes of the schema's tables with their indexes and TOAST, after `pg_clone`'s VACUUM."""
    return int(psql(url, "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace s "
                         f"ON s.oid = c.relnamespace WHERE s.nspname = '{schema}' AND c.relkind = 'r'"))


def postgres(url, tmp, n_total, reps, rep):
    """The same figures on PostgreSQL (no in-process query timings: no driver in the stdlib)."""
    full_s, empty_s = "wf_scale_full", "wf_scale_empty"
    psql(url, f"DROP SCHEMA IF EXISTS {full_s} CASCADE; DROP SCHEMA IF EXISTS {empty_s} CASCADE")
    env_full, env_empty = pg_env(url, full_s), pg_env(url, empty_s)
    print(f"PostgreSQL: {psql(url, 'SHOW server_version')}, fsync={psql(url, 'SHOW fsync')}")
    t0 = time.perf_counter()
    weighted = make_templates(tmp, env_full)
    cloned = pg_clone(url, full_s, weighted, n_total)
    one = os.path.join(tmp, "true.yaml")
    wf(["run", "-q", one], env_empty)
    q = lambda t: int(psql(url, f"SELECT count(*) FROM {full_s}.{t}"))  # noqa: E731
    n = {t: q(t) for t, _ in PER_INSTANCE}
    print(f"PostgreSQL: generated {n['instances']:,} instances ({cloned:,} cloned) in "
          f"{time.perf_counter() - t0:.1f} s: " + ", ".join(f"{k} {v:,}" for k, v in n.items()))
    size = pg_size(url, full_s)
    per = size / n["attempts"]
    rep.add("PG: bytes per step attempt (tables, indexes, TOAST / attempts)", per, "B", "<= 2048", per <= 2048)
    by = psql(url, "SELECT string_agg(c.relname || ' ' || round(pg_relation_size(c.oid)::numeric / "
                   f"{n['attempts']}), ', ' ORDER BY pg_relation_size(c.oid) DESC) FROM pg_class c "
                   f"JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = '{full_s}' "
                   f"AND c.relkind IN ('r', 'i', 't') AND pg_relation_size(c.oid) >= {n['attempts']}")
    print(f"  PG: bytes per attempt, by table/index: {by}")
    # One template alone, as on SQLite: what each further simple shell step adds.
    n_pure = max(1000, n_total // 10)
    sized = []
    for template in TEMPLATES[:2]:
        pure_s = "wf_scale_pure"
        psql(url, f"DROP SCHEMA IF EXISTS {pure_s} CASCADE")
        pg_clone(url, pure_s, make_templates(tmp, pg_env(url, pure_s), [template]), n_pure)
        sized.append((pg_size(url, pure_s), int(psql(url, f"SELECT count(*) FROM {pure_s}.attempts"))))
        psql(url, f"DROP SCHEMA {pure_s} CASCADE")
    (size1, att1), (size3, att3) = sized
    extra = (size3 - size1) / (att3 - att1)
    rep.add("PG: bytes each further simple shell step adds (3-step vs 1-step)", extra, "B", "<= 2048",
            extra <= 2048)
    lists = [("wf list --limit 50", ["list", "--limit", "50"]),
             ("wf list --limit 50 --status running (none)", ["list", "--limit", "50", "--status", "running"]),
             ("wf list --limit 50 --workflow nonesuch", ["list", "--limit", "50", "--workflow", "nonesuch"])]
    full_vs_empty(rep, "PG: ", lists, one, env_full, env_empty, reps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", type=int, default=100_000)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--keep", metavar="DIR")
    ap.add_argument("--json")
    ap.add_argument("--pg", metavar="URL",
                    help="also on PostgreSQL at URL (schemas wf_scale_full and wf_scale_empty, replaced)")
    args = ap.parse_args()
    n_total = 5_000 if args.quick else args.instances
    reps = 7 if args.quick else args.reps

    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--locked", "--quiet"], cwd=ROOT, check=True)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}; "
          f"python sqlite3 {sqlite3.sqlite_version}")
    rep = Report()
    tmp = args.keep or tempfile.mkdtemp(prefix="wf-scale-")
    os.makedirs(tmp, exist_ok=True)
    full, empty = os.path.join(tmp, "full.db"), os.path.join(tmp, "empty.db")
    for f in (full, empty):
        remove_db(f)
    try:
        # 1. Fill.
        t0 = time.perf_counter()
        weighted = make_templates(tmp, wf_env(full))
        t1 = time.perf_counter()
        cloned = clone(full, weighted, n_total)
        t2 = time.perf_counter()
        n = counts(full)
        print(f"generated {n['instances']:,} instances ({cloned:,} cloned) in {t2 - t0:.1f} s "
              f"(templates {t1 - t0:.1f} s, SQL {t2 - t1:.1f} s): " +
              ", ".join(f"{k} {v:,}" for k, v in n.items()))
        # The empty database: created by the run of a 1-step workflow (which it keeps).
        one = write(os.path.join(tmp, "true.yaml"), "name: scale-true\nsteps:\n  - id: only\n    run: [/bin/true]\n")
        wf(["run", "-q", one], wf_env(empty))

        # 2. Bytes per step, before the timed runs add rows.
        size = checkpoint(full)
        per_attempt = size / n["attempts"]
        per_instance = size / n["instances"]
        rep.add("bytes per step attempt (file / attempts, instances included)", per_attempt, "B",
                "<= 2048", per_attempt <= 2048)
        rep.add("bytes per instance (mix: 1.7 steps an instance)", per_instance, "B", "(info)", True)
        print(f"  file {size / 2**20:.1f} MiB for {n['instances']:,} instances, {n['attempts']:,} attempts, "
              f"{n['spans']:,} spans")
        tb = table_bytes(full)
        if tb:
            print("  bytes per attempt, by table/index: " +
                  ", ".join(f"{name} {b / n['attempts']:.0f}" for name, b in tb if b / n["attempts"] >= 1))
        # One template alone: a 1-step instance whole, and what each further
        # simple shell step adds (3-step instances against 1-step ones).
        n_pure = max(1000, n_total // 10)
        size1, c1 = pure_size(tmp, TEMPLATES[0], n_pure)
        size3, c3 = pure_size(tmp, TEMPLATES[1], n_pure)
        whole = size1 / c1["instances"]
        extra = (size3 - size1) / (c3["attempts"] - c1["attempts"])
        rep.add(f"bytes of a 1-step shell instance whole ({c1['spans'] // c1['instances']} spans; "
                f"{n_pure:,} of them)", whole, "B", "(info)", True)
        rep.add("bytes each further simple shell step adds (3-step vs 1-step)", extra, "B", "<= 2048", extra <= 2048)

        # 3-5. `wf list --limit 50` (and filtered), `wf run` of a 1-step
        # /bin/true workflow, the worker's scan (`wf worker --once`, nothing
        # due): full, with empty beside it.
        env_full, env_empty = wf_env(full), wf_env(empty)
        lists = [
            ("wf list --limit 50", ["list", "--limit", "50"]),
            ("wf list --limit 50 --status failed", ["list", "--limit", "50", "--status", "failed"]),
            ("wf list --limit 50 --status running (none)", ["list", "--limit", "50", "--status", "running"]),
            ("wf list --limit 50 --workflow scale-event", ["list", "--limit", "50", "--workflow", "scale-event"]),
            ("wf list --limit 50 --workflow nonesuch", ["list", "--limit", "50", "--workflow", "nonesuch"]),
        ]
        full_vs_empty(rep, "", lists, one, env_full, env_empty, reps)

        # 6. `wf inspect` of an instance named by an 8-character prefix of its id.
        def newest(db):
            c = sqlite3.connect(db)
            iid = c.execute("SELECT id FROM instances ORDER BY created_at DESC LIMIT 1").fetchone()[0]
            c.close()
            return iid[:8]
        mf, me = timed_pair(["inspect", newest(full)], env_full, env_empty, reps, ["inspect", newest(empty)])
        rep.add(f"wf inspect ID-PREFIX, full (empty {me * 1e3:.1f} ms)", mf * 1e3, "ms", "(info)", True)

        # 7. The scan queries in-process (Python's sqlite3, not wf's bundled one).
        due_sql, claim_sql = scan_sql()
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
        now_ms = int(time.time() * 1000)
        claim_params = (now, now_ms, "owner", 30_000, 4, "[]")
        # Only the parameters a statement names: sqlite3 wants exactly as many as it has.
        for label, sql, params in (("due_instances", due_sql, (now,)), ("claim_due selection", claim_sql, claim_params)):
            k = max(int(x) for x in re.findall(r"\?(\d+)", sql))
            tf_s, plan = time_query(full, sql, params[:k], 200)
            te_s, _ = time_query(empty, sql, params[:k], 200)
            us = tf_s * 1e6
            rep.add(f"{label} query, full (empty {te_s * 1e6:.0f} us)", us, "us", "< 5000", us < 5000)
            print("    plan: " + "; ".join(plan))
        if args.pg:
            postgres(args.pg, tmp, n_total, reps, rep)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)

    rep.finish(args.json, instances=n_total)


if __name__ == "__main__":
    main()
