"""The SQL corpus (``tests/sql/slt/*.slt``): PostgreSQL is the oracle, spate must agree.

1. Against PostgreSQL alone: every file runs in a scratch schema of its own; every query's rows
   and column types must be exactly the ones written in the file. Regenerate a file's expected
   rows with ``python -m tests.sql._slt_pg --rewrite tests/sql/slt/<file>.slt``.
2. spate beside PostgreSQL (one Environment and one cluster, ``corpus_env``, shared with the
   package's other corpus tests): each record's answer through ``Environment.sql`` equals
   PostgreSQL's; each query that can define a view (over the views it reads, recreated as they
   were when it ran) is maintained as a materialized view through seeded random changes to the
   tables and equals PostgreSQL's answer after every round (see ``tests/sql/_slt_spate.py`` for
   the knobs and the replay).
   What spate does not support yet is listed in ``tests/sql/slt/KNOWN_GAPS`` (xfail; strict for
   answers, not for views, whose gaps show only when a run's random rounds make their data).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.sql._slt import corpus_files, parse_file
from tests.sql._slt_dml import apply_to_postgres, load, random_round
from tests.sql._slt_gaps import read_gaps
from tests.sql._slt_pg import PgScratch, run_file
from tests.sql._slt_spate import CLUSTER, FileResult, Knobs, format_result
from tests.sql._slt_spate import run_file as run_on_spate

if TYPE_CHECKING:
    from spate.environment.api import Environment

FILES = corpus_files()


def test_corpus_is_large_and_well_formed() -> None:
    files = [parse_file(p) for p in FILES]
    queries = [r for f in files for r in f.queries()]
    errors = [r for f in files for r in f.records if r.expect_error]
    print(f"SQL corpus: {len(files)} files, {len(queries)} queries, {len(errors)} error cases")
    assert len(queries) >= 400
    for f in files:
        for r in f.queries():
            assert "?" not in r.types, f"{f.name}:{r.line}: types not filled in (run --rewrite)"
        dupes = [k for k, n in Counter(r.key for r in f.records).items() if n > 1]
        assert not dupes, f"{f.name}: records with the same key {dupes}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_expected_rows_are_postgres_answers(path: Path, postgres_url: str) -> None:
    problems = run_file(parse_file(path), postgres_url)
    assert not problems, "\n".join(problems)


def test_a_wrong_expectation_is_reported(tmp_path: Path, postgres_url: str) -> None:
    path = tmp_path / "wrong.slt"
    path.write_text(
        "statement ok\nCREATE TABLE t (x bigint)\n\n"
        "statement ok\nINSERT INTO t VALUES (1), (NULL)\n\n"
        "query I rowsort\nSELECT x + 1 FROM t\n----\n2\n3\n\n"
        "query T rowsort\nSELECT x FROM t\n----\n1\nNULL\n\n"
        "statement error division by zero\nSELECT x FROM t\n"
    )
    problems = run_file(parse_file(path), postgres_url)
    assert len(problems) == 3, problems
    assert "rows differ" in problems[0]
    assert "column types I, the file says T" in problems[1]
    assert "an error was expected" in problems[2]


# -- spate against PostgreSQL ----------------------------------------------------------------------

GAPS = read_gaps()


def _params(check: str) -> list[Any]:
    out = []
    for path in FILES:
        f = parse_file(path)
        records = f.records if check == "query" else f.queries()
        for r in records:
            if not r.runs_on("spate"):
                continue
            if check == "incremental" and (r.noview or not r.runs_on("postgresql")):
                continue
            gap = GAPS.get((f.name, r.key, check))
            # An answer's gap fails every run; a view's shows only when the run's random rounds
            # make the data it needs (the seed changes per run), so it is not strict.
            strict = check == "query"
            marks = [pytest.mark.xfail(strict=strict, reason=gap.reason)] if gap else []
            out.append(pytest.param(path, r.key, id=f"{path.stem}:{r.line}", marks=marks))
    return out


@pytest.fixture(scope="module")
def spate_run(postgres_url: str, corpus_env: Environment) -> Callable[[Path], FileResult]:
    """Runs a corpus file through the package's Environment (one cluster, see ``corpus_env``),
    once per file, and remembers the result for the file's tests."""
    knobs = Knobs.from_env()
    print(f"SQL corpus rounds: {knobs.replay()} (set these to replay)")
    results: dict[Path, FileResult] = {}
    corpus_env.sql(f"SET cluster = {CLUSTER}")

    def run(path: Path) -> FileResult:
        if path not in results:
            f = parse_file(path)
            results[path] = run_on_spate(f, corpus_env, postgres_url, knobs)
            print(format_result(f, results[path]))
        return results[path]

    return run


# The first test of each file runs the whole file (and the first of all starts the replica).
@pytest.mark.timeout(1800)
@pytest.mark.parametrize(("path", "key"), _params("query"))
def test_spate_answers_like_postgres(
    path: Path, key: str, spate_run: Callable[[Path], FileResult]
) -> None:
    problem = spate_run(path).problems[key]
    assert problem is None, f"{problem}\nreplay: {Knobs.from_env().replay()}"


@pytest.mark.timeout(1800)
@pytest.mark.parametrize(("path", "key"), _params("incremental"))
def test_maintained_view_equals_postgres_after_every_round(
    path: Path, key: str, spate_run: Callable[[Path], FileResult]
) -> None:
    result = spate_run(path)
    if key in result.not_maintained:
        pytest.skip(result.not_maintained[key])
    if key not in result.incremental:
        pytest.skip("no random rounds this run (SPATE_SLT_ROUNDS=0)")
    problem = result.incremental[key]
    assert problem is None, f"{problem}\nreplay: {Knobs.from_env().replay()}"


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_soak_every_other_view_equals_postgres_after_every_round(
    path: Path, postgres_url: str, corpus_env: Environment
) -> None:
    """The views the suite's draw leaves out, maintained through the same rounds (a sample of
    them per file by default; ``SPATE_SLT_SOAK_VIEWS=all``: every one), except known gaps."""
    knobs = Knobs.from_env().soaking()
    if knobs.rounds == 0:
        pytest.skip("no random rounds this run (SPATE_SLT_ROUNDS=0)")
    f = parse_file(path)
    corpus_env.sql(f"SET cluster = {CLUSTER}")
    result = run_on_spate(f, corpus_env, postgres_url, knobs)
    print(f"{format_result(f, result)} ({knobs.replay()})")
    known = {key for (name, key, _) in GAPS if name == f.name}
    lines = {r.key: r.line for r in f.records}
    wrong = [
        f"{f.name}:{lines[key]}: {problem}"
        for key, problem in sorted(result.incremental.items())
        if problem is not None and key not in known
    ]
    assert not wrong, "\n".join(wrong)


def test_known_gaps_name_existing_records(request: pytest.FixtureRequest) -> None:
    keys = {(p.name, r.key) for p in FILES for r in parse_file(p).records}
    stale = [g for g in GAPS.values() if (g.file, g.key) not in keys]
    assert not stale, f"KNOWN_GAPS lines naming no record: {stale[:5]}"
    by_check = Counter(g.check for g in GAPS.values())
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    line = (
        f"SQL corpus known gaps: {len(GAPS)} "
        f"({by_check['query']} answers, {by_check['incremental']} maintained views)"
    )
    if reporter is not None:
        reporter.write_line(line)
    print(line)


def test_random_rounds_keep_postgres_and_the_model_in_step(postgres_url: str, seed: int) -> None:
    """The rounds' bookkeeping (what spate is sent) matches what PostgreSQL holds after each
    round, over every column type of the corpus, including the round that empties a table."""
    rng = random.Random(seed)
    with PgScratch(postgres_url, "rounds") as pg:
        pg.execute(
            "CREATE TABLE a (i bigint NOT NULL, d numeric(8,3), f double precision, t text,"
            " v varchar(1), b boolean, dt date, ts timestamp)"
        )
        pg.execute("CREATE TABLE b (k bigint, s text NOT NULL)")
        pg.execute("INSERT INTO b VALUES (1, 'x'), (1, 'x'), (NULL, '')")
        models = load(pg, pg.tables())
        held = {n: Counter(m.rows) for n, m in models.items()}
        for n in range(8):
            rnd, ops = random_round(rng, models, clear=n == 3)
            apply_to_postgres(pg, models, ops)
            for table, (gone, new) in rnd.changes.items():
                assert not gone - held[table], "a deletion of a row the table does not hold"
                held[table] = held[table] - gone + new
            for table in models:
                rows = pg.query(f"SELECT * FROM {table}")[2]
                assert Counter(rows) == held[table] == Counter(models[table].rows)
        assert any(len(m.rows) > 0 for m in models.values())


_VIEWS_FILE = """\
statement ok
CREATE TABLE t (x bigint, s text)

statement ok
INSERT INTO t VALUES (1, 'it''s v1'), (2, 'b'), (3, NULL)

statement ok
CREATE VIEW v1 AS SELECT x, s FROM t WHERE x > 1

statement ok
CREATE MATERIALIZED VIEW v2 IN CLUSTER slt AS SELECT count(*) AS n FROM v1

query I nosort
SELECT v2.n FROM v2
----
2

statement ok
CREATE OR REPLACE VIEW v1 AS SELECT x, s FROM t WHERE x > 2

query IT rowsort
SELECT x, 'v1' FROM v1 AS v2
----
3 v1

statement ok
DELETE FROM t WHERE x = 3

statement ok
DROP TABLE t CASCADE
"""


def test_a_query_reads_the_views_defined_when_it_ran(tmp_path: Path) -> None:
    from tests.sql._slt_deps import Definitions

    path = tmp_path / "v.slt"
    path.write_text(_VIEWS_FILE)
    f = parse_file(path)
    defs = Definitions()
    for r in f.records:
        for table in defs.dropping(r):
            defs.dropped[table] = []
        defs.ran(r)
    first, second = (defs.closure(r) for r in f.queries())
    assert first.sql == "SELECT slt_d1_v2.n FROM slt_d1_v2"
    assert first.views == [
        ("slt_d0_v1", "CREATE VIEW slt_d0_v1 AS SELECT x, s FROM t WHERE x > 1"),
        ("slt_d1_v2", "CREATE MATERIALIZED VIEW slt_d1_v2 IN CLUSTER slt AS"
                      " SELECT count(*) AS n FROM slt_d0_v1"),
    ]  # fmt: skip
    assert first.tables == second.tables == ["t"]
    # the replaced definition; neither the alias v2 nor the literal is a view
    assert second.sql == "SELECT x, 'v1' FROM slt_d2_v1 AS v2"
    assert second.views == [("slt_d2_v1", "CREATE OR REPLACE VIEW slt_d2_v1 AS "
                                          "SELECT x, s FROM t WHERE x > 2")]  # fmt: skip


def test_views_and_dropped_tables_are_recreated_in_postgres(
    tmp_path: Path, postgres_url: str
) -> None:
    """The maintained views of queries over views read the views as defined when the query
    ran, over the dropped table with the rows it held when dropped."""
    from tests.sql._slt_deps import Definitions
    from tests.sql._slt_pg import check_record
    from tests.sql._slt_spate import FileResult, _keep_rows, _maintainable

    path = tmp_path / "v.slt"
    path.write_text(_VIEWS_FILE)
    f = parse_file(path)
    defs = Definitions()
    with PgScratch(postgres_url, "deps") as pg:
        for r in f.records:
            for table in defs.dropping(r):
                _keep_rows(pg, defs, table)
            assert check_record(pg, r) is None
            defs.ran(r)
        result = FileResult()
        maintained, recreated = _maintainable(f, pg, result, defs)
        assert recreated == ["t"]
        assert not result.not_maintained
        assert [pg.query(f"SELECT * FROM {m.name}")[2] for m in maintained] == [[(1,)], []]
        assert pg.query("SELECT * FROM t ORDER BY x")[2] == [(1, "it's v1"), (2, "b")]
