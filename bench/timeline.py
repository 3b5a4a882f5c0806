#!/usr/bin/env python3
"""Where a step's time goes, segment by segment (bench/RESULTS.md, issue 16).

A build with timestamps at fifteen points of a step's life, then the median and
mean of each segment between consecutive points:

    git apply bench/timeline.patch && cargo build --release && git checkout src
    WF_PROF=1 WF_DB=/tmp/t.db target/release/wf run -q STEPS.yaml 2> points.txt
    python3 bench/timeline.py points.txt

Points: commit0 (the commit begins; on PostgreSQL it is sent first), clone0/clone1
around the child's clone (the parent is suspended until the child reached its
exec), tx0/tx1 around a SQLite commit on its thread (store/sqlite/offthread.rs),
commit1 (the commit is durable, as wf's thread learns), released (the held processes let go),
exit (a process's exit seen), outputs (stdout, stderr and $WF_OUTPUT read),
joined (the loop has the result), flushed (ended spans made rows), settled (the
results applied), started (the next steps chosen and their attempts made),
cspans (the commit's own spans), handed (a SQLite commit handed to its thread).
"""

import collections
import statistics
import sys


def main():
    points = []
    with open(sys.argv[1]) as f:
        for line in f:
            if line.startswith("P "):
                _, label, ns = line.split()
                points.append((label, int(ns)))
    segments = collections.defaultdict(list)
    for (a, ta), (b, tb) in zip(points, points[1:]):
        segments[(a, b)].append((tb - ta) / 1000)
    for (a, b), us in sorted(segments.items(), key=lambda kv: -len(kv[1])):
        if len(us) > 20:
            print(f"{a:>8} -> {b:<8} n={len(us):5d}  median {statistics.median(us):8.1f} us  "
                  f"mean {statistics.mean(us):8.1f} us")


if __name__ == "__main__":
    main()
