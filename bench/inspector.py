#!/usr/bin/env python3
"""The web inspector in headless Chromium (issue 39, item 5; issue 59, item 7): how long the
list over 1,000,000 instances, the page of a 1,000-step instance and that of a parent with 500
children take to first render and to load whole, and what they weigh, served by `wf serve`
(SQLite; `--pg URL` also on PostgreSQL). And the list's server time (issue 59, item 1, target
< 100 ms): the list page with its counts, and the API's counts, with each kind of filter,
timed from the request to the last byte of the answer over loopback with a kept-alive
connection (median of R; the client's share is some 0.1 ms).

Run from the repository root:  python3 bench/inspector.py   (builds the release binary first)
Options: --instances N (default 1,000,000), --steps N (default 1,000), --children N (default
500), --reps R (loads of each page, default 7), --quick (5,000 instances, 200 steps, 50
children, 3 loads), --no-build, --json FILE, --pg URL, --no-sqlite (the PostgreSQL figures alone). Needs Debian's chromium and chromium-driver (`.ci/run` installs them). Stdlib only:
WebDriver is spoken over HTTP to chromedriver.

Each page is loaded R times in one browser session, after a first load that is not counted
(it fills the cache of the stylesheet and script, as any later visit finds it). Figures are the
Navigation and Paint Timing of the browser itself: first contentful paint (the first text or
box drawn), and the load event's end (the document and its subresources done); weight is the
bytes the document and its subresources took on the wire (`transferSize`) on the first load,
and the document's size as served (`decodedBodySize`).
"""

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import http.client
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Report, pg_env, run, wf_env, write  # noqa: E402
import scale  # noqa: E402
import serve  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
WF = os.path.join(TARGET, "release", "wf")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Driver:
    """A chromedriver and one headless Chromium session, over WebDriver's HTTP."""

    def __init__(self):
        self.port = free_port()
        self.proc = subprocess.Popen(["chromedriver", f"--port={self.port}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert time.time() < deadline, "chromedriver did not listen"
                time.sleep(0.05)
        self.profile = tempfile.mkdtemp(prefix="wf-chrome-")
        caps = {"capabilities": {"alwaysMatch": {"goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,900", "--no-first-run", "--disable-extensions",
                     "--disable-background-networking", "--disable-component-update",
                     f"--user-data-dir={self.profile}"]}}}}
        self.session = self.call("POST", "/session", caps)["sessionId"]

    def call(self, method, path, body=None):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=300) as r:
            return json.loads(r.read())["value"]

    def goto(self, url):
        self.call("POST", f"/session/{self.session}/url", {"url": url})

    def js(self, script):
        return self.call("POST", f"/session/{self.session}/execute/sync", {"script": script, "args": []})

    def quit(self):
        try:
            self.call("DELETE", f"/session/{self.session}")
        finally:
            self.proc.terminate()
            self.proc.wait(timeout=30)
            shutil.rmtree(self.profile, ignore_errors=True)


TIMING = """
const n = performance.getEntriesByType('navigation')[0];
const fcp = performance.getEntriesByName('first-contentful-paint')[0];
const res = performance.getEntriesByType('resource');
return {fcp: fcp ? fcp.startTime : null, load: n.loadEventEnd, dom: n.domContentLoadedEventEnd,
        transfer: n.transferSize + res.reduce((a, r) => a + r.transferSize, 0),
        document: n.decodedBodySize, rows: document.querySelectorAll('tbody tr').length};
"""


def measure(d, url, reps):
    d.goto(url)  # the first load fills the cache; its weight is the wire's
    first = d.js(TIMING)
    fcps, loads = [], []
    for _ in range(reps):
        d.goto(url)
        t = d.js(TIMING)
        # Paint timing may lag a moment behind the load in headless mode.
        for _ in range(40):
            if t["fcp"] is not None:
                break
            time.sleep(0.025)
            t = d.js(TIMING)
        fcps.append(t["fcp"] or float("nan"))
        loads.append(t["load"])
    return statistics.median(fcps), statistics.median(loads), first["transfer"], first["document"], first["rows"]


def one_thousand(n):
    steps = "".join(f"  - id: s{i}\n    run: 'true'\n" + (f"    needs: [s{i - 1}]\n" if i else "") for i in range(n))
    return f"name: steps-{n}\nsteps:\n{steps}"


CHILD = "name: bench-child\nsteps:\n  - id: go\n    run: 'true'\n"


def fan_out(n):
    items = ", ".join(str(i) for i in range(n))
    return f"name: bench-parent\nsteps:\n  - id: regions\n    for_each: [{items}]\n    workflow: ./child.yaml\n"


def server_time(port, path, reps):
    """The median time of GET `path` (with the token), request to last byte, in ms."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Authorization": f"Bearer {serve.TOKEN}"}
    times = []
    try:
        for i in range(reps + 1):
            t0 = time.perf_counter()
            c.request("GET", path, headers=headers)
            r = c.getresponse()
            body = r.read()
            took = (time.perf_counter() - t0) * 1000
            assert r.status == 200, f"{path}: {r.status} {body[:300]!r}"
            if i:  # the first warms the caches
                times.append(took)
    finally:
        c.close()
    return statistics.median(times)


def list_times(rep, prefix, port, parent, args):
    """The list page (rows, counts, children counts) and the API's counts, per filter."""
    # (name, the page's filters, the API's: the page lists roots unless asked otherwise)
    views = [("no filter (roots)", {}, {"roots": "1"}),
             ("status=failed", {"status": "failed"}, {"roots": "1"}),
             ("workflow=scale-one", {"workflow": "scale-one"}, {"workflow": "scale-one", "roots": "1"}),
             ("since=1d", {"since": "1d"}, {"since": "1d", "roots": "1"}),
             ("error=disk (a fifth of all match)", {"error": "disk"}, {"error": "disk", "roots": "1"}),
             ("error=nowhere (none match)", {"error": "nowhere"}, {"error": "nowhere", "roots": "1"}),
             ("id=ab (a prefix)", {"id": "ab"}, {"id": "ab"}),
             ("children=1", {"children": "1"}, {}),
             (f"parent=ID (its {args.children} children)", {"parent": parent}, {"parent": parent})]
    for name, q, api in views:
        page = server_time(port, f"/?{urllib.parse.urlencode(q)}", args.reps)
        rep.add(f"{prefix}the list page, {name}", page, "ms", "< 100", page < 100)
        counts = server_time(port, f"/api/v1/instances/counts?{urllib.parse.urlencode(api)}", args.reps)
        rep.add(f"{prefix}its counts alone (API), {name}", counts, "ms", "< 100", counts < 100)


def pages(rep, prefix, env, tmp, args):
    path = write(os.path.join(tmp, "steps.yaml"), one_thousand(args.steps))
    out = subprocess.run([WF, "-q", "run", "--json", path], env=env, check=True, capture_output=True, text=True)
    big = json.loads(out.stdout)["id"]
    write(os.path.join(tmp, "child.yaml"), CHILD)
    path = write(os.path.join(tmp, "parent.yaml"), fan_out(args.children))
    out = subprocess.run([WF, "-q", "run", "--json", path], env=env, check=True, capture_output=True, text=True)
    parent = json.loads(out.stdout)["id"]
    server = serve.Server(env)
    d = Driver()
    try:
        base = f"http://127.0.0.1:{server.port}"
        list_times(rep, prefix, server.port, parent, args)
        d.goto(f"{base}/?token={serve.TOKEN}")
        for name, url in [(f"the list over {args.instances:,} instances", f"{base}/"),
                          (f"a {args.steps:,}-step instance", f"{base}/instances/{big}"),
                          (f"a parent of {args.children} children", f"{base}/instances/{parent}"),
                          (f"the list with that parent open", f"{base}/?open={parent}")]:
            fcp, load, transfer, doc, rows = measure(d, url, args.reps)
            rep.add(f"{prefix}{name}: first contentful paint", fcp, "ms", "(info)", True)
            rep.add(f"{prefix}{name}: load complete", load, "ms", "(info)", True)
            rep.add(f"{prefix}{name}: bytes on the wire, first load (document {doc:,} B, {rows} rows)",
                    transfer, "B", "(info)", True)
    finally:
        d.quit()
        server.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", type=int, default=1_000_000)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--children", type=int, default=500)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--pg")
    ap.add_argument("--no-sqlite", action="store_true", help="only the PostgreSQL figures (with --pg)")
    args = ap.parse_args()
    if args.quick:
        args.instances, args.steps, args.children, args.reps = 5000, 200, 50, 3
    if not args.no_build:
        run(["cargo", "build", "--release", "--quiet"], env=dict(os.environ))
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.release()}")
    print(subprocess.run(["chromium", "--version"], capture_output=True, text=True).stdout.strip())
    rep = Report()
    tmp = tempfile.mkdtemp(prefix="wf-inspector-bench-")
    try:
        if not args.no_sqlite:
            db = os.path.join(tmp, "full.db")
            env = wf_env(db)
            scale.clone(db, scale.make_templates(tmp, env), args.instances)
            scale.checkpoint(db)
            pages(rep, "SQLite: ", env, tmp, args)
        if args.pg:
            schema = "wf_inspector_bench"
            scale.psql(args.pg, f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            penv = pg_env(args.pg, schema)
            scale.pg_clone(args.pg, schema, scale.make_templates(tmp, penv), args.instances)
            pages(rep, "PG: ", penv, tmp, args)
            scale.psql(args.pg, f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rep.finish(args.json)


if __name__ == "__main__":
    main()
