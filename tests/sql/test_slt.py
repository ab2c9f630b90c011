"""The SQL corpus (``tests/sql/slt/*.slt``) against the real PostgreSQL server.

Every file runs in a scratch schema of its own; every query's rows and column types must be
exactly the ones written in the file. Regenerate a file's expected rows from PostgreSQL with
``python -m tests.sql._slt_pg --rewrite tests/sql/slt/<file>.slt``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.sql._slt import corpus_files, parse_file
from tests.sql._slt_pg import run_file

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
