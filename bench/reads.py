"""Benchmark: one-off SELECTs with subqueries over small tables, through ``Environment.sql``.

Queries: ``IN``, ``NOT IN``, ``= ANY``/``<> ALL`` in the select list, correlated ``EXISTS``,
a correlated scalar subquery, over tables of ``--rows`` rows. Each query's latency is the median
of ``--reps`` runs (after one unmeasured run).

Baseline, measured in the same run on the same data: the same reads in an environment with
``small_read_updates = 0``, where each one builds a one-off dataflow on the cluster's replica,
hydrates it and peeks it (how every such read ran before small reads were evaluated in the
environment, :mod:`spate.environment.small_reads`). Both environments have one cluster of one
replica, warmed up first; they run one after the other. For scale, a plain read of one table
(a peek of its shard by the replica) is timed in the second.

    python bench/reads.py [--reps 5] [--rows 100]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._results import write_result
from spate.config import load_settings
from spate.environment.api import Environment

QUERIES = {
    "in": "SELECT x FROM t WHERE x IN (SELECT y FROM s)",
    "not_in": "SELECT x FROM t WHERE x NOT IN (SELECT y FROM s)",
    "any_all": "SELECT x, x = ANY (SELECT y FROM s), x <> ALL (SELECT y FROM s) FROM t",
    "exists": "SELECT x FROM t WHERE EXISTS (SELECT 1 FROM s WHERE s.y = t.x)",
    "scalar": "SELECT x, (SELECT count(*) FROM s WHERE s.y < t.x) FROM t",
}
PLAIN = "SELECT x FROM t"


def _median_ms(env: Environment, sql: str, reps: int) -> tuple[float, Any]:
    out = env.sql(sql)  # unmeasured: plans nothing twice, but the first may wait for a tick
    runs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = env.sql(sql)
        runs.append((time.perf_counter() - t0) * 1000)
    return statistics.median(runs), out


def _run(small_read_updates: int, rows: int, reps: int) -> tuple[dict[str, float], dict[str, Any]]:
    settings = load_settings(small_read_updates=small_read_updates)
    with (
        tempfile.TemporaryDirectory() as tmp,
        Environment.open(Path(tmp) / "data", settings=settings) as env,
    ):
        env.create_cluster("c", replicas=1)
        env.sql("CREATE TABLE w (x bigint); SET cluster = c")
        env.create_index("w_x", on="w", key=["x"], cluster="c")
        env.select("w", cluster="c", timeout=600)  # the replica hydrated an index: Spark is up
        env.sql("CREATE TABLE t (x bigint); CREATE TABLE s (y bigint)")
        values = ", ".join(f"({i})" for i in range(rows)) + ", (NULL)"
        env.sql(f"INSERT INTO t VALUES {values}")
        halves = ", ".join(f"({i})" for i in range(0, rows, 2))
        env.sql(f"INSERT INTO s VALUES {halves}")
        times: dict[str, float] = {}
        answers: dict[str, Any] = {}
        for name, sql in {**QUERIES, "plain": PLAIN}.items():
            ms, out = _median_ms(env, sql, reps)
            times[name] = ms
            answers[name] = sorted(map(str, out.to_pylist()))
            print(f"  small_read_updates={small_read_updates:>6}  {name:>8}: {ms:9.1f} ms")
        return times, answers


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=5, help="measured runs per query")
    ap.add_argument("--rows", type=int, default=100, help="rows of the outer table")
    args = ap.parse_args()
    print("baseline: every read builds a one-off dataflow (small_read_updates = 0)")
    before, before_answers = _run(0, args.rows, args.reps)
    print("small reads evaluated in the environment (the default)")
    after, after_answers = _run(load_settings().small_read_updates, args.rows, args.reps)
    same = all(before_answers[q] == after_answers[q] for q in QUERIES)
    ratios = {q: round(before[q] / after[q], 1) for q in QUERIES}
    figures: dict[str, Any] = {
        "rows": args.rows,
        "reps": args.reps,
        "dataflow_ms": {q: round(before[q], 1) for q in QUERIES},
        "here_ms": {q: round(after[q], 1) for q in QUERIES},
        "speedup": ratios,
        "speedup_median": statistics.median(ratios.values()),
        "plain_table_read_ms": round(after["plain"], 1),
        "same_answers": same,
    }
    for q in QUERIES:
        print(f"{q:>8}: {before[q]:9.1f} ms -> {after[q]:7.1f} ms  (x{ratios[q]})")
    print(f"plain table read: {after['plain']:.1f} ms; same answers: {same}")
    write_result("reads", figures)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
