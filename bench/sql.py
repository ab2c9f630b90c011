"""Benchmark: planning SQL (text -> plan IR) for every query of the SQL corpus.

Each corpus file (``tests/sql/slt/*.slt``) is replayed against an in-memory catalog: its
CREATE TABLE / CREATE VIEW statements are planned and their schemas added, so that each query
is planned against exactly the objects it reads. Every statement spate runs is timed: the
median of ``--reps`` planning runs is that statement's time; the report gives the median and
the p99 over statements (target: p99 <= 50 ms, so that SQL never adds noticeably to a DDL or a
read).

Baseline, measured in the same run on the same statements: sqlglot parsing alone
(``sqlglot.parse_one(text, read="postgres")``), the part of planning no SQL front end built on
sqlglot can avoid. The ratio planning/parsing says what binding, typing, decorrelation and
lowering cost on top of it.

    python bench/sql.py [--reps 5] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``bench`` and ``tests`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlglot
from tests.sql._slt import corpus_files, parse_file

from bench._results import write_result
from spate.sql import MemoryCatalog, SqlError, plan_statements
from spate.sql import statements as st

TARGET_P99_MS = 50.0


@dataclass
class Timings:
    plan_ms: list[float] = field(default_factory=list)
    parse_ms: list[float | None] = field(default_factory=list)
    by_kind: dict[str, list[float]] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    slowest: list[tuple[float, str]] = field(default_factory=list)


def _time(fn: Callable[[], Any], reps: int) -> float:
    runs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0) * 1000)
    return statistics.median(runs)


def _register(catalog: MemoryCatalog, stmt: st.Statement) -> None:
    """Keep the catalog as the file's statements leave it."""
    if isinstance(stmt, st.CreateTable):
        catalog.add(stmt.name, stmt.desc)
    elif isinstance(stmt, st.CreateView):
        kind = "materialized view" if stmt.materialized else "view"
        catalog.add(stmt.name, stmt.plan.desc, kind=kind)
    elif isinstance(stmt, st.CreateIndex):
        catalog.add(stmt.name, None, kind="index", on=stmt.on, cluster=stmt.cluster)
    elif isinstance(stmt, st.CreateCluster):
        catalog.clusters.append(stmt.name)
    elif isinstance(stmt, st.DropCluster) and stmt.name in catalog.clusters:
        catalog.clusters.remove(stmt.name)
    elif isinstance(stmt, st.DropObjects):
        for name in stmt.names:
            catalog.items.pop(name, None)


def bench(reps: int, quick: bool) -> Timings:
    out = Timings()
    for path in corpus_files():
        f = parse_file(path)
        catalog = MemoryCatalog(clusters=["default", "slt"])
        records = [r for r in f.records if r.runs_on("spate")]
        if quick:
            records = records[:: max(1, len(records) // 8)]
        for r in records:
            label = f"{f.name}:{r.line}"
            try:
                stmts = plan_statements(r.sql, catalog)
            except SqlError:
                if not r.expect_error:
                    out.failed.append(label)
                continue
            except Exception as e:  # a planner bug: count it, keep measuring the rest
                out.failed.append(f"{label} ({type(e).__name__})")
                continue
            ms = _time(lambda sql=r.sql, cat=catalog: plan_statements(sql, cat), reps)
            kind = type(stmts[-1]).__name__
            out.plan_ms.append(ms)
            try:  # spate-only statements (RETAIN HISTORY, SUBSCRIBE…) are not sqlglot's
                sqlglot.parse_one(r.sql, read="postgres")
            except sqlglot.errors.SqlglotError:
                out.parse_ms.append(None)
            else:
                out.parse_ms.append(
                    _time(lambda sql=r.sql: sqlglot.parse_one(sql, read="postgres"), reps)
                )
            out.by_kind.setdefault(kind, []).append(ms)
            out.slowest.append((ms, label))
            if not r.expect_error:  # planned, refused when run (e.g. a drop with dependents)
                for s in stmts:
                    _register(catalog, s)
    out.slowest = sorted(out.slowest, reverse=True)[:5]
    return out


def _p99(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[98] if len(xs) > 1 else xs[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=5, help="planning runs per statement")
    ap.add_argument("--quick", action="store_true", help="every 8th statement of each file")
    args = ap.parse_args()
    t = bench(args.reps, args.quick)
    if not t.plan_ms:
        print("no statement could be planned", file=sys.stderr)
        return 1
    parsed = [b for b in t.parse_ms if b is not None]
    ratios = [p / b for p, b in zip(t.plan_ms, t.parse_ms, strict=True) if b]
    figures: dict[str, Any] = {
        "statements_planned": len(t.plan_ms),
        "statements_failed": len(t.failed),
        "reps_per_statement": args.reps,
        "plan_ms": {
            "median": round(statistics.median(t.plan_ms), 3),
            "p99": round(_p99(t.plan_ms), 3),
            "max": round(max(t.plan_ms), 3),
        },
        "baseline_sqlglot_parse_ms": {
            "statements": len(parsed),
            "median": round(statistics.median(parsed), 3),
            "p99": round(_p99(parsed), 3),
        },
        "ratio_plan_over_parse": {
            "median": round(statistics.median(ratios), 2),
            "p99": round(_p99(ratios), 2),
        },
        "plan_ms_by_statement": {
            kind: {
                "count": len(xs),
                "median": round(statistics.median(xs), 3),
                "p99": round(_p99(xs), 3),
            }
            for kind, xs in sorted(t.by_kind.items())
        },
        "slowest": [f"{label} {ms:.1f} ms" for ms, label in t.slowest],
        "target_p99_ms": TARGET_P99_MS,
        "target_met": _p99(t.plan_ms) <= TARGET_P99_MS,
    }
    for kind, fig in figures["plan_ms_by_statement"].items():
        print(f"{kind:>22}: n={fig['count']:4d}  median {fig['median']:7.2f} ms  "
              f"p99 {fig['p99']:7.2f} ms")  # fmt: skip
    plan, base = figures["plan_ms"], figures["baseline_sqlglot_parse_ms"]
    print(f"planning: median {plan['median']} ms, p99 {plan['p99']} ms (target <= 50 ms)")
    print(f"sqlglot parse alone: median {base['median']} ms, p99 {base['p99']} ms")
    print(f"planning / parsing: {figures['ratio_plan_over_parse']['median']}x (median)")
    if t.failed:
        print(f"{len(t.failed)} statements did not plan: {', '.join(t.failed[:10])}")
    if not args.quick:
        write_result("sql", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
