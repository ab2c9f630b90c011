"""Benchmark: SQLite's public SQL corpus (sqllogictest) through ``Environment.sql``, whole files.

Each script of the corpus (``shared/sqllogictest`` next to the repository's folder, or
``$SPATE_SLT_CORPUS``) runs in a fresh
environment with its embedded defaults, through :mod:`spate.testing.sqllogictest`. Reported per
file: the queries run for the ``postgresql`` label, spate's passes, PostgreSQL's passes on the
same queries (``postgresql-baseline.json``), the ratio, wrong answers (where PostgreSQL passes,
and where it does not), errors by cause, and spate's time.

Baseline, for time: PostgreSQL 15 on the same records, measured in the same run by the same
runner when ``--postgres URL`` (or ``SPATE_TEST_POSTGRES_URL``) is given; else the baseline
file's time (measured on this machine by the corpus's own run).

    python bench/sqllogictest.py [GLOB ...] [--limit N] [--postgres URL] [--out NAME]
    python bench/sqllogictest.py --catalog-growth [--rounds N]

``--catalog-growth`` measures what the index/view scripts repeat, against the catalog's size
instead: rounds of CREATE VIEW, a read of it, the same read of its table, DROP VIEW, with 100
and then 1,600 other views in the catalog (added in DDL blocks, not timed). It prints the
median round at each size and their ratio (1.0: a DDL's cost does not grow with the catalog),
and writes ``bench/results/sqllogictest_catalog_growth.json`` (or ``<OUT>.json``).

With ``--views N`` (default 3; 0: none), N of each file's queries, drawn with ``--seed``, are
also kept as materialized views from when they ran, and checked against the same query after
the file's later writes (before any DROP, and at the end): reported per file as views checked,
differing (0 expected) and not made, their time apart from the file's.

GLOBs match file paths below the corpus folder (default: every ``*.test``), run in the order
the GLOBs are given; ``--limit`` runs only each file's first N records (statements and
queries); ``--slice`` runs the test suite's slice of each file
(:data:`spate.testing.sqllogictest.CI_SLICE`), whose total time against PostgreSQL's is the
"slice" figure.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._results import write_result
from spate.environment.api import Environment
from spate.testing.sqllogictest import (
    Baseline,
    EnvironmentEngine,
    FileReport,
    Outcome,
    PostgresEngine,
    Script,
    corpus_dir,
    parse_file,
    read_baseline,
    run_file,
    slice_end,
    versus,
)

ROOT = Path(__file__).resolve().parent.parent


def select_files(corpus: Path, globs: list[str]) -> list[str]:
    """The files the globs match, in the globs' order (each glob's matches sorted), once."""
    names = sorted(str(p.relative_to(corpus)) for p in corpus.rglob("*.test"))
    if not globs:
        return names
    matched = [n for g in globs for n in names if fnmatch.fnmatch(n, g) or g in n]
    return list(dict.fromkeys(matched))


class _Watch:
    """Prints progress every 1,000 records and keeps the slowest records."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self.started = time.monotonic()
        self.slowest: list[tuple[float, int, str]] = []

    def __call__(self, outcome: Outcome, seconds: float) -> None:
        self.count += 1
        self.slowest = sorted(
            [*self.slowest, (seconds, outcome.record.number, outcome.record.sql)]
        )[-5:]
        if self.count % 1000 == 0:
            elapsed = time.monotonic() - self.started
            print(f"  {self.name}: {self.count} records, {elapsed:.0f} s", flush=True)


class _MaintainedViews(EnvironmentEngine):
    """The file's engine, which also maintains a seeded sample of its queries as materialized
    views: each drawn query that passed becomes one right after it ran, and is checked (its
    view's rows against the same query run once, compared by :mod:`tests.sql._slt_compare`)
    after the file's later writes: before a DROP of anything (so that the file's own DROPs
    are not refused because of it; the view goes then) and at the file's end. The time spent
    on the views is kept apart from the file's."""

    def __init__(self, env: Environment, script: Script, views: int, seed: str) -> None:
        import random

        super().__init__(env)
        queries = [r.number for r in script.records if r.kind == "query" and r.runs_on()]
        self.drawn = set(random.Random(seed).sample(queries, min(views, len(queries))))
        self.live: dict[str, str] = {}  # view name -> its query
        self.checked = 0
        self.differ: list[str] = []
        self.not_made: list[str] = []
        self.seconds = 0.0

    def run(self, sql: str) -> Sequence[Sequence[object]] | None:
        if self.live and sql.lstrip()[:4].upper() == "DROP":
            self.check_all()
        return super().run(sql)

    def observe(self, outcome: Outcome) -> None:
        record = outcome.record
        if record.number not in self.drawn or outcome.kind != "pass":
            return
        began = time.monotonic()
        name = f"bench_mv_{record.number}"
        try:
            self.env.sql(f"CREATE MATERIALIZED VIEW {name} AS {record.sql}")
            self.live[name] = record.sql
        except Exception as e:  # what spate cannot maintain is named, not counted as differing
            self.not_made.append(f"#{record.number}: {type(e).__name__}: {str(e)[:200]}")
        self.seconds += time.monotonic() - began

    def check_all(self) -> None:
        from tests.sql._slt_compare import compare, table_rows

        began = time.monotonic()
        for name, sql in self.live.items():
            self.checked += 1
            try:
                expected = table_rows(self.env.sql(sql))
                problem = compare(expected, self.env.sql(f"SELECT * FROM {name}"), ordered=False)
            except Exception as e:
                problem = f"{type(e).__name__}: {str(e)[:200]}"
            if problem:
                self.differ.append(f"{name}: {sql[:200]}: {problem[:300]}")
            self.env.sql(f"DROP MATERIALIZED VIEW {name}")
        self.live.clear()
        self.seconds += time.monotonic() - began

    def figures(self) -> dict[str, Any]:
        return {
            "views_drawn": len(self.drawn),
            "views_checked": self.checked,
            "views_differ": len(self.differ),
            "views_not_made": len(self.not_made),
            "view_examples": (self.differ + self.not_made)[:5],
            "view_seconds": round(self.seconds, 1),
        }


def run_spate(
    path: Path, limit: int | None, watch: _Watch, views: int, seed: int
) -> tuple[FileReport, dict[str, Any]]:
    script = parse_file(path)
    with tempfile.TemporaryDirectory() as tmp, Environment.open(Path(tmp) / "data") as env:
        if views <= 0:
            return run_file(script, EnvironmentEngine(env), limit=limit, observe=watch), {}
        engine = _MaintainedViews(env, script, views, f"{seed}:{path.name}")

        def observe(outcome: Outcome, seconds: float) -> None:
            watch(outcome, seconds)
            engine.observe(outcome)

        report = run_file(script, engine, limit=limit, observe=observe)
        report.seconds -= engine.seconds  # the views' time, spent within the file's
        engine.check_all()
        return report, engine.figures()


def run_postgres(path: Path, url: str, limit: int | None) -> FileReport:
    engine = PostgresEngine(url, "bench_slt")
    try:
        return run_file(parse_file(path), engine, limit=limit)
    finally:
        engine.close()


def figures_of(
    name: str, report: FileReport, baseline: Baseline, pg: FileReport | None
) -> dict[str, Any]:
    vs = versus(report, baseline)
    pg_seconds = pg.seconds if pg is not None else baseline.seconds
    return {
        "queries": report.queries,
        "complete": report.complete,
        "spate_passed": report.passed,
        "postgresql_passed": vs.postgres_passed,
        "ratio_of_postgresql_passes": round(vs.ratio, 5),
        "wrong": len(vs.wrong),
        "wrong_where_postgresql_fails": len(vs.wrong_where_postgres_fails),
        "passes_where_postgresql_fails": report.passed - vs.passed,
        "errors": len(report.errors),
        "errors_by_cause": dict(report.causes.most_common()),
        "statements_ok": report.statements_ok,
        "statements_failed": len(report.statements_failed),
        "statement_failures_by_cause": _statement_causes(report),
        "wrong_examples": [
            {"record": o.record.number, "line": o.record.line, "sql": o.record.sql, "why": o.detail}
            for o in vs.wrong[:5]
        ],
        "spate_seconds": round(report.seconds, 1),
        "postgresql_seconds": round(pg_seconds, 1),
        "postgresql_seconds_from": "this run" if pg is not None else "baseline file",
        "time_ratio": round(report.seconds / pg_seconds, 2) if pg_seconds else None,
    } | ({} if pg is None else _runner_check(pg, baseline))


def _runner_check(pg: FileReport, baseline: Baseline) -> dict[str, Any]:
    """PostgreSQL's outcomes in this run against the baseline file's: the runner's check."""
    disagree = [
        o.record.number
        for o in pg.outcomes
        if (o.kind == "pass") == (o.record.number in baseline.not_passed)
    ]
    return {"postgresql_passed_this_run": pg.passed, "runner_disagrees_on": disagree[:20]}


def _statement_causes(report: FileReport) -> dict[str, int]:
    out: dict[str, int] = {}
    for o in report.statements_failed:
        out[o.detail] = out.get(o.detail, 0) + 1
    return out


def _write(out: str, limit: int | str | None, files: dict[str, Any]) -> None:
    totals = {
        key: sum(f[key] for f in files.values())
        for key in ("queries", "spate_passed", "postgresql_passed", "wrong", "errors")
    }
    for key in ("views_checked", "views_differ", "views_not_made"):
        totals[key] = sum(f.get(key, 0) for f in files.values())
    totals["spate_seconds"] = round(sum(f["spate_seconds"] for f in files.values()), 1)
    totals["postgresql_seconds"] = round(sum(f["postgresql_seconds"] for f in files.values()), 1)
    print(f"total so far: {totals}")
    write_result(out, {"limit": limit, "totals": totals, "files": files})


GROWTH_SIZES = (100, 1_600)


def _source_commit(path: Path) -> str:
    """The commit of the checkout ``path`` is in (the code measured: the runner may be
    another checkout's), ``+`` if it has uncommitted changes."""
    import subprocess

    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], capture_output=True, text=True, cwd=path)
        return out.stdout.strip()

    dirty = git("status", "--porcelain", "--untracked-files=no", ".")
    return git("rev-parse", "--short", "HEAD") + ("+" if dirty else "")


def catalog_growth(rounds: int) -> dict[str, Any]:
    """Median seconds of a CREATE VIEW / read / read / DROP VIEW round at each catalog size."""
    import statistics

    import spate

    medians: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, Environment.open(Path(tmp) / "data") as env:
        env.sql("CREATE TABLE t(pk INTEGER PRIMARY KEY, a INTEGER, b TEXT)")
        env.sql("INSERT INTO t VALUES (1, 10, 'x'), (2, 20, 'y'), (3, 30, 'z')")
        env.sql("CREATE INDEX t_a ON t(a)")
        kept = 0
        for size in GROWTH_SIZES:
            while kept < size:  # one commit per block of 100 views
                batch = range(kept, min(size, kept + 100))
                env.sql("BEGIN")
                for i in batch:
                    env.sql(f"CREATE VIEW keep_{i} AS SELECT pk, a FROM t WHERE a > {i}")
                env.sql("COMMIT")
                kept = batch[-1] + 1
            times = []
            for r in range(rounds):
                started = time.perf_counter()
                env.sql(f"CREATE VIEW v_{size}_{r} AS SELECT pk, a FROM t WHERE a > {r}")
                env.sql(f"SELECT pk FROM v_{size}_{r}")
                env.sql(f"SELECT pk FROM t WHERE a > {r}")
                env.sql(f"DROP VIEW v_{size}_{r}")
                times.append(time.perf_counter() - started)
            medians[str(size)] = statistics.median(times)
            print(f"catalog of {size} views: median round {1000 * medians[str(size)]:.1f} ms")
    small, large = (medians[str(s)] for s in GROWTH_SIZES)
    print(f"ratio {GROWTH_SIZES[1]} / {GROWTH_SIZES[0]} views: {large / small:.2f}")
    return {
        "rounds": rounds,
        "round": "CREATE VIEW, SELECT from it, the same SELECT from its table, DROP VIEW",
        "median_round_ms": {k: round(1000 * v, 2) for k, v in medians.items()},
        "ratio": round(large / small, 2),
        "spate_source": str(Path(spate.__file__).parent),
        "spate_source_commit": _source_commit(Path(spate.__file__).parent),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("globs", nargs="*", help="file paths below the corpus folder (fnmatch)")
    ap.add_argument("--limit", type=int, default=None, help="run each file's first N records")
    ap.add_argument("--slice", action="store_true", help="run the test suite's slice of each")
    ap.add_argument("--postgres", default=os.environ.get("SPATE_TEST_POSTGRES_URL"))
    ap.add_argument("--out", default="sqllogictest", help="bench/results/<OUT>.json")
    ap.add_argument("--views", type=int, default=3, help="queries per file kept as views")
    ap.add_argument("--seed", type=int, default=20261207, help="the draw of those queries")
    ap.add_argument("--catalog-growth", action="store_true", help="DDL cost vs catalog size")
    ap.add_argument("--rounds", type=int, default=30, help="rounds per size (--catalog-growth)")
    args = ap.parse_args()
    if args.catalog_growth:
        out = "sqllogictest_catalog_growth" if args.out == "sqllogictest" else args.out
        write_result(out, catalog_growth(args.rounds))
        return 0
    # a terminated run closes its environments (and stops their replicas) on the way out
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    corpus = corpus_dir(ROOT)
    if not corpus.is_dir():
        print(f"no corpus at {corpus} (set $SPATE_SLT_CORPUS)")
        return 2
    baselines = read_baseline(corpus)
    files: dict[str, Any] = {}
    for name in select_files(corpus, args.globs):
        watch = _Watch(name)
        limit = slice_end(name, parse_file(corpus / name)) if args.slice else args.limit
        report, views = run_spate(corpus / name, limit, watch, args.views, args.seed)
        pg = run_postgres(corpus / name, args.postgres, limit) if args.postgres else None
        files[name] = figures_of(name, report, baselines[name], pg) | views
        files[name]["slowest"] = [
            {"record": n, "seconds": round(t, 2), "sql": sql[:300]}
            for t, n, sql in watch.slowest[::-1]
        ]
        f = files[name]
        print(
            f"{name}: {f['queries']} queries, spate {f['spate_passed']} / PostgreSQL"
            f" {f['postgresql_passed']} ({100 * f['ratio_of_postgresql_passes']:.2f} %),"
            f" wrong {f['wrong']} (+{f['wrong_where_postgresql_fails']} where PostgreSQL"
            f" fails), errors {f['errors']}, {f['spate_seconds']} s vs"
            f" {f['postgresql_seconds']} s",
            flush=True,
        )
        if views:
            print(
                f"    views (seed {args.seed}): {views['views_checked']} checked,"
                f" {views['views_differ']} differ, {views['views_not_made']} not made,"
                f" {views['view_seconds']} s apart"
            )
            for example in views["view_examples"][:3]:
                print(f"    VIEW {example}")
        if pg is not None:
            print(
                f"    PostgreSQL this run: {pg.passed} passed; disagrees with the baseline on"
                f" records {f['runner_disagrees_on']}"
            )
        for cause, n in list(f["errors_by_cause"].items())[:5]:
            print(f"    {n:6d}  {cause}")
        for w in f["wrong_examples"][:3]:
            print(
                f"    WRONG #{w['record']} line {w['line']}: {w['sql'][:100]!r}: {w['why'][:200]}"
            )
        # after every file: a run cut short keeps its figures
        _write(args.out, "slice" if args.slice else args.limit, files)
    return 0


if __name__ == "__main__":
    sys.exit(main())
