"""The known gaps of spate's SQL against the corpus (``tests/sql/slt/KNOWN_GAPS``).

Each line names one test that is expected to fail, as ``<file> <record key> <check>  # why``,
where ``check`` is ``query`` (the record's answer in spate) or ``incremental`` (its maintained
view under random changes). The tests turn each line into an xfail: strict for ``query`` (when
the feature lands the test passes, reports XPASS as a failure, and the line must go); not strict
for ``incremental``, whose gap shows only when the run's random rounds (a seed per run) make the
data it needs.

Rewrite the list from a run of the whole corpus through spate (every view maintained)::

    SPATE_TEST_POSTGRES_URL=... python -m tests.sql._slt_gaps [tests/sql/slt/<file>.slt ...]

(the lines of the files named, or of all files, are replaced; the list is written after each
file)
or, in seconds, from planning alone (``--plan-only``: every query spate cannot plan is a gap,
both for its answer and for its maintained view; answers that plan but differ are not found).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.sql._slt import SLT_DIR, corpus_files, parse_file

GAPS_FILE = SLT_DIR / "KNOWN_GAPS"
CHECKS = ("query", "incremental")

_HEADER = """\
# Known gaps of spate's SQL against the corpus: '<file> <record key> <query|incremental>  # why'.
# Each line is a test expected to fail (xfail; strict for query, not for incremental, whose
# gaps need data a run's random rounds may not make): when support lands, remove the line.
# Rewrite from a full run: SPATE_TEST_POSTGRES_URL=... python -m tests.sql._slt_gaps
"""


@dataclass(frozen=True)
class Gap:
    file: str
    key: str
    check: str
    reason: str


def read_gaps(path: Path = GAPS_FILE) -> dict[tuple[str, str, str], Gap]:
    gaps: dict[tuple[str, str, str], Gap] = {}
    if not path.exists():
        return gaps
    for n, line in enumerate(path.read_text().splitlines(), 1):
        body, _, reason = line.partition("#")
        words = body.split()
        if not words:
            continue
        if len(words) != 3 or words[2] not in CHECKS:
            raise ValueError(f"{path.name}:{n}: expected '<file> <key> query|incremental # why'")
        gap = Gap(words[0], words[1], words[2], reason.strip())
        gaps[(gap.file, gap.key, gap.check)] = gap
    return gaps


def write_gaps(gaps: list[Gap], path: Path = GAPS_FILE) -> None:
    lines = [_HEADER]
    for g in sorted(gaps, key=lambda g: (g.file, g.check, g.key)):
        reason = " ".join(g.reason.split())[:140]
        lines.append(f"{g.file} {g.key} {g.check}  # {reason}\n")
    path.write_text("".join(lines))


def plan_only_gaps() -> list[Gap]:
    """Gaps found by planning each file's records against an in-memory catalog."""
    from bench.sql import _register

    from spate.sql import MemoryCatalog, plan_statements

    gaps: list[Gap] = []
    for path in corpus_files():
        f = parse_file(path)
        catalog = MemoryCatalog(clusters=["default", "slt"])
        for r in f.records:
            if not r.runs_on("spate"):
                continue
            try:
                stmts = plan_statements(r.sql, catalog)
                if not r.expect_error:  # planned, refused when run (a drop with dependents)
                    for stmt in stmts:
                        _register(catalog, stmt)
            except Exception as e:
                if r.expect_error:
                    continue
                why = f"{type(e).__name__}: {str(e).splitlines()[0]} | {r.sql}"
                gaps.append(Gap(f.name, r.key, "query", why))
                if r.kind == "query" and r.runs_on("postgresql") and not r.noview:
                    gaps.append(Gap(f.name, r.key, "incremental", why))
    return gaps


def main() -> int:
    from spate.environment.api import Environment
    from tests.sql._slt_spate import CLUSTER, Knobs, format_result, run_file, warm_up

    ap = argparse.ArgumentParser(description="rewrite the corpus's known gaps")
    ap.add_argument("files", nargs="*", type=Path, help="corpus files (default: all)")
    ap.add_argument("--plan-only", action="store_true", help="gaps from planning alone")
    ap.add_argument("--out", type=Path, default=GAPS_FILE, help="where to write the list")
    args = ap.parse_args()
    if args.plan_only:
        gaps = plan_only_gaps()
        write_gaps(gaps, args.out)
        print(f"{len(gaps)} known gaps written to {args.out}")
        return 0
    url = os.environ.get("SPATE_TEST_POSTGRES_URL")
    if not url:
        print("SPATE_TEST_POSTGRES_URL is not set", file=sys.stderr)
        return 2
    # SIGTERM unwinds like Ctrl-C, so the environment stops its replica processes.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    knobs = Knobs.from_env()
    if "SPATE_SLT_VIEWS" not in os.environ:
        knobs = Knobs(knobs.seed, knobs.rounds, None)
    print(f"seed: {knobs.replay()}")
    paths = args.files or corpus_files()
    names = {p.name for p in paths}
    gaps = [g for g in read_gaps(args.out).values() if g.file not in names]
    with tempfile.TemporaryDirectory() as d, Environment.open(Path(d) / "data") as env:
        env.create_cluster(CLUSTER, replicas=1)
        warm_up(env)
        for path in paths:
            f = parse_file(path)
            result = run_file(f, env, url, knobs)
            print(format_result(f, result), flush=True)
            for r in f.records:
                for check, problem in (
                    ("query", result.problems.get(r.key)),
                    ("incremental", result.incremental.get(r.key)),
                ):
                    if problem:
                        print(f"  {f.name}:{r.line} {check}: {problem}", flush=True)
                        gaps.append(Gap(f.name, r.key, check, f"{problem} | {r.sql}"))
                # A query that fails cannot be maintained either (whether or not this run drew
                # it for the random rounds).
                if (
                    result.problems.get(r.key)
                    and r.kind == "query"
                    and not r.noview
                    and r.runs_on("postgresql")
                    and not result.incremental.get(r.key)
                ):
                    why = f"the query itself fails | {r.sql}"
                    gaps.append(Gap(f.name, r.key, "incremental", why))
            write_gaps(gaps, args.out)  # after each file: a long run's progress is kept
    print(f"{len(gaps)} known gaps written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
