"""Kept SELECTs of any shape (joins, aggregates, subqueries) answered at once on the pgwire
session's loop (spate.environment.reads_at_once.HereRead, spate.pgwire.prepared.text_at_once):
the same answers as PostgreSQL's, every acknowledged write seen, a catalog change obeyed, the
path actually taken (counted, not timed)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import spate.environment.reads_at_once
import spate.pgwire.environment
from spate.environment import reads_at_once
from spate.environment.api import Environment
from spate.repr.desc import RelationDesc
from spate.repr.types import INT64, TEXT, TIMESTAMP
from spate.sql import MemoryCatalog, plan_statements
from spate.sql import statements as st
from tests.pgwire._encoded import encoded_rows
from tests.pgwire._pg_scratch import pg_scratch
from tests.pgwire._served import environment_served


@pytest.fixture(params=["no cluster", "cluster"])
def served(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Environment, str]]:
    """A server over an environment without clusters (reads are evaluated here), or with a
    cluster of one replica the session runs on (small reads are still read here)."""
    with environment_served(tmp_path / "data", cluster=request.param == "cluster") as (env, _, dsn):
        yield env, dsn


class _Counts:
    """Executions answered at once, and executions run on a worker thread (execute_text)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.at_once = 0
        self.worker = 0
        real_answer, real_text = reads_at_once.answer_at_once, spate.pgwire.environment.execute_text

        def answer(*args: Any, **kwargs: Any) -> Any:
            found = real_answer(*args, **kwargs)
            self.at_once += found is not None
            return found

        def text(*args: Any, **kwargs: Any) -> Any:
            self.worker += 1
            return real_text(*args, **kwargs)

        monkeypatch.setattr(reads_at_once, "answer_at_once", answer)
        monkeypatch.setattr(spate.pgwire.environment, "execute_text", text)

    def clear(self) -> None:
        self.at_once = self.worker = 0


_DDL = [
    "CREATE TABLE big (id bigint NOT NULL, g bigint, v bigint)",
    "CREATE TABLE mid (id bigint NOT NULL, g bigint)",
    "CREATE TABLE tiny (id bigint NOT NULL, name text)",
    "INSERT INTO big VALUES "
    + ", ".join(f"({i}, {i % 10}, {(i * 37) % 1000})" for i in range(500))
    + ", (500, NULL, NULL)",
    "INSERT INTO mid VALUES " + ", ".join(f"({i}, {i % 6})" for i in range(300)) + ", (300, NULL)",
    "INSERT INTO tiny VALUES "
    + ", ".join(f"({i}, '{chr(97 + i)}')" for i in range(6))
    + ", (6, NULL), (7, 'it''s')",
    "CREATE VIEW tv AS SELECT id, name FROM tiny WHERE id > 1",
]

_QUERIES = [
    "SELECT * FROM tiny WHERE id = 3",
    "SELECT * FROM big WHERE id = 242",
    "SELECT id, v FROM big WHERE v < 40",
    "SELECT m.id, t.name FROM mid m JOIN tiny t ON m.g = t.id WHERE m.id < 20",
    "SELECT g, count(*), sum(v), min(v), max(v) FROM big GROUP BY g",
    "SELECT id FROM mid WHERE g IN (SELECT id FROM tiny WHERE name <> 'b')",
    "SELECT id FROM mid WHERE g NOT IN (SELECT id FROM tiny WHERE id < 3)",
    "SELECT count(*) FROM big WHERE g > (SELECT avg(g) FROM mid)",
    "SELECT t.id, (SELECT count(*) FROM mid m WHERE m.g = t.id) FROM tiny t",
    "SELECT name FROM tiny t WHERE EXISTS (SELECT 1 FROM mid m WHERE m.g = t.id AND m.id > 290)",
    "SELECT id, name FROM tiny ORDER BY name NULLS FIRST, id LIMIT 4 OFFSET 1",
    "SELECT DISTINCT g FROM mid ORDER BY g",
    "SELECT count(*) FROM tiny WHERE name IS NULL",
    "SELECT sum(v) FROM big WHERE id < 0",
    "SELECT coalesce(name, 'none') AS n, upper(name) FROM tiny ORDER BY id",
    "SELECT v.name, count(*) FROM tv v JOIN mid m ON m.g = v.id GROUP BY v.name",
    "SELECT * FROM tv",
]


def _tables(c: psycopg.Connection[Any], *, t: str, u: str, t_rows: str, u_rows: str) -> None:
    """Tables ``t`` and ``u`` of the given columns, holding the given rows (VALUES lists)."""
    c.execute(f"CREATE TABLE t ({t})")
    c.execute(f"CREATE TABLE u ({u})")
    c.execute(f"INSERT INTO t VALUES {t_rows}")
    c.execute(f"INSERT INTO u VALUES {u_rows}")


def test_kept_reads_answer_as_postgresql_does_and_at_once(
    served: tuple[Environment, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, dsn = served
    url = os.environ.get("SPATE_TEST_POSTGRES_URL", "")
    with pg_scratch(_DDL, "at_once") as schema, psycopg.connect(url, autocommit=True) as pg:
        pg.execute(f"SET search_path = {schema}")
        with psycopg.connect(dsn, autocommit=True) as c:
            for sql in _DDL:
                c.execute(sql)
            counts = _Counts(monkeypatch)
            runs = 8  # simple and extended; psycopg prepares from the 6th on
            for sql in _QUERIES:
                want = pg.execute(sql).fetchall()
                ordered = "ORDER BY" in sql
                for i in range(runs):
                    got = c.execute(sql if i % 2 else sql.encode()).fetchall()
                    if not ordered:
                        got, want = sorted(got, key=repr), sorted(want, key=repr)
                    assert got == want, (sql, i)
            print(f"at once: {counts.at_once}, on a worker thread: {counts.worker}")
            # each text planned at its first two runs, its inputs read into memory then
            assert counts.worker <= 3 * len(_QUERIES)
            assert counts.at_once >= (runs - 3) * len(_QUERIES)


@pytest.mark.parametrize("isolation", ["serializable", "strict serializable"])
def test_a_write_between_executions_is_seen(
    served: tuple[Environment, str], monkeypatch: pytest.MonkeyPatch, isolation: str
) -> None:
    """After a write is acknowledged, the next strictly serializable read of a kept join or
    aggregate sees it; a serializable one sees it once the tables' uppers passed it. Between
    writes they are answered at once."""
    _, dsn = served
    join = "SELECT t.v, u.w FROM t JOIN u ON t.id = u.id"
    total = "SELECT count(*), sum(id) FROM t WHERE id IN (SELECT id FROM u)"
    with psycopg.connect(dsn, autocommit=True) as c:
        _tables(
            c,
            t="id bigint NOT NULL, v text",
            u="id bigint NOT NULL, w text",
            t_rows="(1, 'a'), (2, 'b')",
            u_rows="(1, 'x')",
        )
        c.execute(f"SET transaction_isolation = '{isolation}'")
        counts = _Counts(monkeypatch)
        wait = 0 if isolation == "strict serializable" else 10

        def check(sql: str, want: list[tuple[Any, ...]]) -> None:
            deadline = time.monotonic() + wait
            while True:
                got = sorted(c.execute(sql).fetchall())
                if got == want or time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
            assert got == want, sql

        rows = [("a", "x")]
        for k in range(3, 9):
            check(join, rows)
            for _ in range(3):
                assert sorted(c.execute(join).fetchall()) == rows
            ids = [1, *range(3, k)]
            check(total, [(len(ids), sum(ids))])
            c.execute(f"INSERT INTO t VALUES ({k}, 'v{k}')")
            c.execute(f"INSERT INTO u VALUES ({k}, 'w{k}')")
            rows = sorted([*rows, (f"v{k}", f"w{k}")])
            check(join, rows)
        c.execute("DELETE FROM u WHERE id = 1")
        if isolation == "strict serializable":
            assert ("a", "x") not in c.execute(join).fetchall()
        print(f"{isolation}: at once {counts.at_once}, on a worker thread {counts.worker}")
        assert counts.at_once >= 3 * 6  # between writes, answered at once


def test_ddl_invalidates_a_kept_read(
    served: tuple[Environment, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catalog change (another session's DDL) drops the kept plan and its answer: a table
    dropped and made again under the same name is the one read, from its own contents."""
    _, dsn = served
    query = "SELECT t.v, count(*) FROM t JOIN u ON t.id = u.id GROUP BY t.v"
    with psycopg.connect(dsn, autocommit=True) as c:
        _tables(
            c,
            t="id bigint NOT NULL, v text",
            u="id bigint NOT NULL",
            t_rows="(1, 'old')",
            u_rows="(1), (1)",
        )
        counts = _Counts(monkeypatch)
        for _ in range(5):
            assert c.execute(query).fetchall() == [("old", 2)]
        assert counts.at_once >= 2
        with psycopg.connect(dsn, autocommit=True) as other:
            other.execute("DROP TABLE t")
            other.execute("CREATE TABLE t (id bigint NOT NULL, v text)")
            other.execute("INSERT INTO t VALUES (1, 'new')")
        counts.clear()
        for _ in range(5):
            assert c.execute(query).fetchall() == [("new", 2)]
        assert counts.at_once >= 2
        with psycopg.connect(dsn, autocommit=True) as other:
            other.execute("DROP TABLE u")
        with pytest.raises(psycopg.errors.UndefinedTable):
            c.execute(query)


def test_an_evaluation_error_is_raised_every_time(
    served: tuple[Environment, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan failing on the inputs is never answered at once: each execution reads it as
    any read and fails as PostgreSQL does."""
    _, dsn = served
    with psycopg.connect(dsn, autocommit=True) as c:
        _tables(c, t="id bigint NOT NULL", u="id bigint NOT NULL", t_rows="(1), (2)", u_rows="(1)")
        counts = _Counts(monkeypatch)
        for _ in range(5):
            with pytest.raises(psycopg.errors.DivisionByZero):
                c.execute("SELECT t.id / (t.id - u.id) FROM t, u").fetchall()
        assert counts.at_once == 0


def test_a_transaction_block_reads_as_before(
    served: tuple[Environment, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, dsn = served
    query = "SELECT count(*) FROM t, u WHERE t.id = u.id"
    with psycopg.connect(dsn, autocommit=True) as c:
        _tables(c, t="id bigint NOT NULL", u="id bigint NOT NULL", t_rows="(1), (2)", u_rows="(1)")
        for _ in range(3):
            c.execute(query)
        counts = _Counts(monkeypatch)
        c.execute("BEGIN")
        for _ in range(3):
            assert c.execute(query).fetchall() == [(1,)]
        c.execute("COMMIT")
        assert counts.at_once == 0


def _plan(sql: str) -> st.Select:
    catalog = MemoryCatalog()
    catalog.add("t", RelationDesc.of(("id", INT64, False), ("v", TEXT), ("ts", TIMESTAMP)))
    (stmt,) = plan_statements(sql, catalog)
    assert isinstance(stmt, st.Select)
    return stmt


@pytest.mark.parametrize(
    ("sql", "reads_time"),
    [
        ("SELECT id FROM t WHERE id = 1", False),
        ("SELECT v, count(*) FROM t GROUP BY v", False),
        ("SELECT id FROM t WHERE mz_now() <= ts", True),
        ("SELECT v, count(*) FROM t WHERE ts + INTERVAL '1 day' > mz_now() GROUP BY v", True),
    ],
)
def test_a_plan_reading_the_time_is_never_answered_again(sql: str, reads_time: bool) -> None:
    """Only a plan whose answer is a function of its inputs' contents is answered from the
    last answer: one that reads the time is not (here_read gives it no HereRead)."""
    assert reads_at_once._reads_time(_plan(sql).plan) is reads_time


def test_a_kept_answer_is_encoded_once_per_format(
    served: tuple[Environment, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept answer given again is sent from the DataRows encoded the last time (for the
    same columns in the same formats); another answer, another format or a partial fetch
    are encoded as they come."""
    _, dsn = served
    encoded = encoded_rows(monkeypatch)
    query = "SELECT t.id, u.w FROM t JOIN u ON t.id = u.id"
    with psycopg.connect(dsn, autocommit=True) as c:
        _tables(
            c,
            t="id bigint NOT NULL",
            u="id bigint NOT NULL, w text",
            t_rows="(1), (2), (3)",
            u_rows="(1, 'x'), (2, NULL), (3, 'z')",
        )
        want = [(1, "x"), (2, None), (3, "z")]
        for _ in range(3):
            assert sorted(c.execute(query).fetchall()) == want
        encoded.clear()
        for _ in range(6):
            assert sorted(c.execute(query).fetchall()) == want
        assert len(encoded) <= 3  # encoded once, then sent as encoded
        with c.cursor(binary=True) as b:
            for _ in range(3):
                assert sorted(b.execute(query).fetchall()) == want
            assert sorted(c.execute(query).fetchall()) == want
        c.execute("INSERT INTO u VALUES (1, 'y')")
        assert sorted(c.execute(query).fetchall()) == sorted([*want, (1, "y")])
        with c.transaction(), c.cursor("named") as named:  # a portal fetched a few at a time
            named.execute(query)
            assert sorted(named.fetchmany(2) + named.fetchall()) == sorted([*want, (1, "y")])
        assert sorted(c.execute(query).fetchall()) == sorted([*want, (1, "y")])


def test_a_read_failing_at_once_is_read_as_usual(
    served: tuple[Environment, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the at-once path cannot follow (a plan too deep for the loop's stack, an
    evaluator bug) is read the usual way, which answers or says what is wrong."""
    _, dsn = served
    query = "SELECT count(*) FROM t, u WHERE t.id = u.id"
    with psycopg.connect(dsn, autocommit=True) as c:
        _tables(c, t="id bigint NOT NULL", u="id bigint NOT NULL", t_rows="(1), (2)", u_rows="(1)")

        def deep(*args: Any, **kwargs: Any) -> Any:
            raise RecursionError

        monkeypatch.setattr(reads_at_once, "here_read", deep)
        for _ in range(4):
            assert c.execute(query).fetchall() == [(1,)]
        monkeypatch.undo()
        monkeypatch.setattr(spate.environment.reads_at_once, "evaluate", deep)
        monkeypatch.setattr(spate.environment.reads_at_once, "vectorised", lambda plan: None)
        for _ in range(4):
            assert c.execute(query + " AND t.id > 0").fetchall() == [(1,)]
