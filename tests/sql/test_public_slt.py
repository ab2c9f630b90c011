"""SQLite's public SQL corpus (sqllogictest, 23 scripts) through ``Environment.sql``.

The scripts are read from the folder ``shared/sqllogictest`` next to the repository's
folder (or ``$SPATE_SLT_CORPUS``), never copied here; ``postgresql-baseline.json`` there says which
queries PostgreSQL 15 passes. CI runs a fixed slice of every script, its first records
(up to its N-th query: ``SPATE_SLT_SLICE_INDEX`` for the ``index/`` scripts, whose reads go to
the cluster's replica, ``SPATE_SLT_SLICE_RANDOM`` for the ``random/`` ones; ``all`` runs a
whole script), and asserts
that spate answers no query wrongly that PostgreSQL answers right, and passes at least 99 % of
the queries PostgreSQL passes in the slice. ``bench/sqllogictest.py`` runs the scripts whole.

The scripts share one environment (its default cluster, started once: a replica's first Spark
job takes a minute on a small machine); each script starts from nothing, as in a fresh
environment: what it created is dropped after it. The runner itself is checked against
PostgreSQL: on the first records of every script it must reproduce the baseline's verdicts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from spate.testing.sqllogictest import (
    Baseline,
    EnvironmentEngine,
    PostgresEngine,
    Record,
    corpus_dir,
    matches,
    parse_file,
    parse_text,
    read_baseline,
    result_values,
    run_file,
    slice_end,
    values_hash,
    versus,
)

if TYPE_CHECKING:
    from spate.environment.api import Environment

ROOT = Path(__file__).resolve().parents[2]
CORPUS = corpus_dir(ROOT)
PRESENT = (CORPUS / "postgresql-baseline.json").is_file()
BASELINES: dict[str, Baseline] = read_baseline(CORPUS) if PRESENT else {}
FILES = sorted(BASELINES)
MIN_RATIO = 0.99

corpus_needed = pytest.mark.skipif(
    not PRESENT, reason=f"the sqllogictest corpus is not at {CORPUS} (set $SPATE_SLT_CORPUS)"
)


# -- the format ------------------------------------------------------------------------------------


def test_values_print_and_sort_as_sqllogictest_does() -> None:
    rows = [(2, None, "b"), (10, 1.5, ""), (-3, 2, "x\ty")]
    assert result_values(rows, "IRT", "nosort") == [
        "2", "NULL", "b", "10", "1.500", "(empty)", "-3", "2.000", "x@y",
    ]  # fmt: skip
    # rows sort as strings, column by column; valuesort sorts every value
    assert result_values([(10,), (9,), (-1,)], "I", "rowsort") == ["-1", "10", "9"]
    assert result_values([(3, 1), (2, 0)], "II", "valuesort") == ["0", "1", "2", "3"]
    # an I column truncates a fraction toward zero (SQLite's column_int64)
    assert result_values([(-29.28,), (7.9,)], "I", "nosort") == ["-29", "7"]


def test_results_beyond_the_hash_threshold_compare_by_md5() -> None:
    values = [str(v) for v in range(10)]
    digest = values_hash(values)
    script = parse_text(
        "hash-threshold 8\n\nquery I rowsort\nSELECT 1\n----\n"
        f"10 values hashing to {digest}\n\nquery II nosort\nSELECT 1, 2\n----\n1\n2\n"
    )
    hashed, plain = script.records
    assert hashed.hash_threshold == 8
    assert matches(hashed, values)
    assert not matches(hashed, [*values[:-1], "x"])
    assert matches(plain, ["1", "2"])
    assert not matches(plain, ["2", "1"])


def test_conditions_number_and_halt() -> None:
    script = parse_text(
        "statement ok\nCREATE TABLE t (x int)\n\n"
        "skipif postgresql # not here\nquery I nosort\nSELECT 1\n----\n1\n\n"
        "onlyif mysql\nhalt\n\n"
        "onlyif postgresql\nquery I nosort label-1\nSELECT 2\n----\n2\n\n"
        "onlyif postgresql\nhalt\n\nquery I nosort\nSELECT 3\n----\n3\n"
    )
    numbers = [(r.number, r.runs_on()) for r in script.records]
    assert numbers == [(1, True), (2, False), (3, True)]  # the second halt stops the file
    assert isinstance(script.records[2], Record) and script.records[2].label == "label-1"


# -- the runner against PostgreSQL -----------------------------------------------------------------


@corpus_needed
@pytest.mark.parametrize("name", FILES)
def test_runner_reproduces_postgres_verdicts(name: str, postgres_url: str) -> None:
    """Run by the same runner, PostgreSQL passes exactly the queries the baseline says it does:
    the runner's parsing, printing, sorting and hashing are sqllogictest's."""
    engine = PostgresEngine(postgres_url, "public_slt_runner")
    try:
        report = run_file(parse_file(CORPUS / name), engine, limit=150)
    finally:
        engine.close()
    baseline = BASELINES[name]
    disagree = [
        (o.record.number, o.kind, o.detail)
        for o in report.outcomes
        if (o.kind == "pass") == (o.record.number in baseline.not_passed)
    ]
    assert report.queries > 0
    assert not disagree, disagree[:5]


# -- spate -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def slt_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    """An environment with its defaults (the default cluster), shared by the scripts."""
    from spate.environment.api import Environment

    with Environment.open(tmp_path_factory.mktemp("public_slt") / "data") as env:
        yield env


def _drop_new(env: Environment, before: set[str]) -> None:
    """Drop what a script created (dependents through CASCADE)."""
    for _ in range(3):
        fresh = sorted(set(env.names()) - before)
        if not fresh:
            return
        for name in fresh:
            try:
                env.drop(name, cascade=True)
            except Exception:  # already gone with a cascade; the next pass sees
                continue
    assert not set(env.names()) - before, "a script's objects could not be dropped"


@corpus_needed
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", FILES)
def test_spate_passes_what_postgres_passes(name: str, slt_env: Environment) -> None:
    before = set(slt_env.names())
    try:
        script = parse_file(CORPUS / name)
        report = run_file(script, EnvironmentEngine(slt_env), limit=slice_end(name, script))
    finally:
        _drop_new(slt_env, before)
    vs = versus(report, BASELINES[name])
    print(
        f"{name}: {report.queries} queries, {report.passed} passed; PostgreSQL passes"
        f" {vs.postgres_passed}, spate {vs.passed} of those ({100 * vs.ratio:.2f} %);"
        f" {len(report.errors)} errors, {report.seconds:.1f} s"
    )
    for cause, n in report.causes.most_common(5):
        print(f"  {n:5d}  {cause}")
    wrong = [
        f"#{o.record.number} line {o.record.line}: {o.record.sql}\n  {o.detail}" for o in vs.wrong
    ]
    assert not wrong, "wrong answers:\n" + "\n".join(wrong[:10])
    failed = [f"{o.record.sql[:80]}: {o.message}" for o in report.statements_failed]
    assert vs.ratio >= MIN_RATIO, (
        f"{vs.passed} of PostgreSQL's {vs.postgres_passed} passes; errors by cause:"
        f" {report.causes.most_common(5)}; failed statements: {failed[:3]}"
    )
