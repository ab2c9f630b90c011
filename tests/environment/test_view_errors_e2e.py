"""Evaluation errors inside maintained views are data (error collections): reads of a view in
error fail naming the view, the expression and a sample row, status() shows the error, and
retracting the offending input makes reads succeed again with the right answer. (An int64
overflow in a materialized view's sum used to stop the view for good: reads timed out blaming
the inputs' uppers.) A real compute replica process runs the views: the package's shared
Environment and cluster (``cluster_env``; a replica's start is most of a test's time)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from spate.environment.api import Environment
from spate.environment.inspect import inspect_environment
from spate.environment.status import render_tables
from spate.errors import EvaluationFailed, ReadFailed, SpateError
from spate.plan.builder import col, count, sum_
from spate.repr import INT64, RelationDesc

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

DESC = RelationDesc.of(("k", INT64, False), ("x", INT64, False))
BIG = 2**63 - 1


@pytest.fixture
def env(cluster_env: Environment) -> Environment:
    """The package's shared Environment with cluster ``c`` (``cluster_env``)."""
    return cluster_env


def _status_error(env: Environment, name: str, *, present: bool, timeout: float = 60) -> str | None:
    deadline = time.monotonic() + timeout
    while True:
        c = env.status().collection(name)
        if (c.error is not None) == present:
            return c.error
        if time.monotonic() > deadline:
            raise AssertionError(f"status of {name}: error={c.error!r}, wanted present={present}")
        time.sleep(0.5)


def test_view_with_overflow_fails_reads_then_recovers_on_retraction(
    env: Environment, shared_cluster_env: tuple[Environment, Path]
) -> None:
    data = shared_cluster_env[1]
    env.create_table("t", DESC)
    env.insert("t", [(1, 5), (2, 7)])
    sums = env.get("t").reduce(["k"], total=sum_(col("x")), n=count())
    env.create_materialized_view("sums", sums, cluster="c")
    assert sorted(env.select("sums", cluster="c", timeout=120).to_pylist(), key=str) == [
        {"k": 1, "total": 5, "n": 1},
        {"k": 2, "total": 7, "n": 1},
    ]
    env.insert("t", [(1, BIG)])  # key 1's sum no longer fits 64 bits
    with pytest.raises(EvaluationFailed) as caught:
        env.select("sums", cluster="c", timeout=120)
    text = str(caught.value)
    assert "sums" in text and "bigint out of range" in text, text
    assert "sum(x)" in text and "k=1" in text, text  # the expression and a sample row
    assert caught.value.sqlstate == "22003"
    assert isinstance(caught.value, ReadFailed)
    problem = _status_error(env, "sums", present=True)
    assert problem is not None and "bigint out of range" in problem
    assert env.status().collection("sums").status == "error"
    # spate_catalog.errors has it, and so does `spate status` (read offline, as recorded)
    recorded = env.sql("SELECT name, cluster, replica, message FROM spate_catalog.errors")
    assert [(r["name"], r["cluster"]) for r in recorded.to_pylist()] == [("sums", "c")]  # type: ignore[union-attr]
    assert "bigint out of range" in recorded.to_pylist()[0]["message"]  # type: ignore[union-attr]
    offline = next(c for c in inspect_environment(data).collections if c.name == "sums")
    assert offline.status == "error" and offline.error is not None, offline
    assert "bigint out of range" in offline.error and "k=1" in offline.error
    shown = render_tables(inspect_environment(data).tables(), width=400)
    assert "error: " in next(line for line in shown.splitlines() if " sums " in line)
    # a subscribe to it ends with the error
    with pytest.raises(EvaluationFailed, match="bigint out of range"):
        for _ in env.subscribe("sums", cluster="c", timeout=120):
            pass
    # the other views of the cluster are fine
    env.create_materialized_view("count_all", env.get("t").reduce([], n=count()), cluster="c")
    assert env.select("count_all", cluster="c", timeout=120).to_pylist() == [{"n": 3}]

    env.delete("t", [(1, BIG)])
    assert sorted(env.select("sums", cluster="c", timeout=120).to_pylist(), key=str) == [
        {"k": 1, "total": 5, "n": 1},
        {"k": 2, "total": 7, "n": 1},
    ]
    assert _status_error(env, "sums", present=False) is None
    assert env.sql("SELECT * FROM spate_catalog.errors").num_rows == 0  # type: ignore[union-attr]
    offline = next(c for c in inspect_environment(data).collections if c.name == "sums")
    assert (offline.status, offline.error) == (None, None)
    # and the view goes on being maintained
    env.insert("t", [(2, 1)])
    assert sorted(env.select("sums", cluster="c", timeout=120).to_pylist(), key=str) == [
        {"k": 1, "total": 5, "n": 1},
        {"k": 2, "total": 8, "n": 2},
    ]


def _pg_sqlstate(postgres_url: str, setup: list[str], query: str) -> str | None:
    import psycopg

    schema = f"err_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            conn.execute(f"SET search_path = {schema}")
            for s in setup:
                conn.execute(s)
            try:
                conn.execute(query).fetchall()
            except psycopg.Error as e:
                return e.sqlstate
            return None
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


SETUP = [
    "CREATE TABLE t (a bigint NOT NULL, b bigint NOT NULL, s text)",
    "INSERT INTO t VALUES (6, 3, '12'), (8, 2, 'abc'), (9223372036854775807, 1, '1')",
    "CREATE TABLE u (x bigint)",
    "INSERT INTO u VALUES (1), (2)",
]
FAILING = [
    "SELECT 1 / 0",
    "SELECT 5 % 0",
    "SELECT 'abc'::int",
    "SELECT 9223372036854775807 + 1",
    "SELECT (SELECT x FROM u)",
    "SELECT a / (b - b) FROM t",
    "SELECT s::int FROM t",
    "SELECT (s || '0000000000')::int FROM t WHERE s <> 'abc'",
    "SELECT a + b FROM t",
    "SELECT a, (SELECT x FROM u) FROM t",
    "SELECT -(-a - 1) FROM t",
    "SELECT abs(-a - 1) FROM t",
    "SELECT (-a - 1) / -1 FROM t",
]


def test_failing_expressions_give_postgresql_sqlstates_in_selects_and_views(
    env: Environment, postgres_url: str
) -> None:
    env.sql("SET cluster = c")
    for s in SETUP:
        env.sql(s)
    for n, query in enumerate(FAILING):
        expected = _pg_sqlstate(postgres_url, SETUP, query)
        assert expected is not None, query
        with pytest.raises(SpateError) as caught:
            env.sql(query)
        assert getattr(caught.value, "sqlstate", None) == expected, (query, caught.value)
        if "FROM t" not in query:
            continue
        env.sql(f"CREATE MATERIALIZED VIEW v{n} AS {query}")
        env.sql(f"CREATE DEFAULT INDEX ON v{n}")
        with pytest.raises(EvaluationFailed) as in_view:
            env.sql(f"SELECT * FROM v{n}")
        assert in_view.value.sqlstate == expected, (query, in_view.value)
        assert f"v{n}" in str(in_view.value)


def test_division_by_zero_in_a_sql_view_fails_reads_until_retracted(env: Environment) -> None:
    env.sql("CREATE TABLE t (a bigint NOT NULL, b bigint NOT NULL)")
    env.sql("INSERT INTO t VALUES (6, 3), (8, 2)")
    env.sql("CREATE MATERIALIZED VIEW q IN CLUSTER c AS SELECT a, a / b AS r FROM t")
    env.sql("CREATE DEFAULT INDEX IN CLUSTER c ON q")
    env.sql("CREATE VIEW plain AS SELECT a % b AS m FROM t")
    env.sql("SET cluster = c")
    assert sorted(env.sql("SELECT * FROM q").to_pylist(), key=str) == [  # type: ignore[union-attr]
        {"a": 6, "r": 2},
        {"a": 8, "r": 4},
    ]
    env.sql("INSERT INTO t VALUES (5, 0)")
    for query in ("SELECT * FROM q", "SELECT * FROM plain", "SELECT a / b FROM t"):
        with pytest.raises(EvaluationFailed, match="division by zero") as caught:
            env.sql(query)
        assert caught.value.sqlstate == "22012"
        assert "b=0" in str(caught.value), str(caught.value)
    with pytest.raises(EvaluationFailed, match="division by zero"):
        env.select("q", cluster="c", timeout=120)
    env.sql("DELETE FROM t WHERE b = 0")
    assert sorted(env.sql("SELECT * FROM q").to_pylist(), key=str) == [  # type: ignore[union-attr]
        {"a": 6, "r": 2},
        {"a": 8, "r": 4},
    ]
    assert sorted(env.sql("SELECT * FROM plain").to_pylist(), key=str) == [  # type: ignore[union-attr]
        {"m": 0},
        {"m": 0},
    ]


def test_a_failing_join_predicate_in_a_sql_view_fails_reads_until_retracted(
    env: Environment, postgres_url: str
) -> None:
    """``a.x / b.y > 1`` in a join's WHERE, with b.y = 0 on a joined row: reads of the view
    fail as PostgreSQL's query does (22012), and once the row is gone the view's rows are
    PostgreSQL's. (It used to fail the view's dataflow for good.)"""
    import psycopg

    setup = [
        "CREATE TABLE a (k bigint NOT NULL, x bigint NOT NULL)",
        "CREATE TABLE b (k bigint NOT NULL, y bigint NOT NULL)",
        "INSERT INTO a VALUES (1, 10), (2, 3), (3, 8)",
        "INSERT INTO b VALUES (1, 2), (2, 3)",
    ]
    query = "SELECT a.k, a.x, b.y FROM a JOIN b ON a.k = b.k WHERE a.x / b.y > 1"
    failing = [*setup, "INSERT INTO b VALUES (3, 0)"]
    assert _pg_sqlstate(postgres_url, failing, query) == "22012"
    schema = f"err_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            conn.execute(f"SET search_path = {schema}")
            for s in setup:
                conn.execute(s)
            want = sorted(conn.execute(query).fetchall())
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    env.sql("SET cluster = c")
    for s in setup:
        env.sql(s)
    env.sql(f"CREATE MATERIALIZED VIEW r AS {query}")
    env.sql("CREATE DEFAULT INDEX ON r")

    def rows() -> list[tuple[object, ...]]:
        out = env.sql("SELECT * FROM r").to_pylist()  # type: ignore[union-attr]
        return sorted(tuple(r.values()) for r in out)

    assert rows() == want
    env.sql("INSERT INTO b VALUES (3, 0)")
    with pytest.raises(EvaluationFailed, match="division by zero") as caught:
        env.sql("SELECT * FROM r")
    assert caught.value.sqlstate == "22012"
    assert "y=0" in str(caught.value), str(caught.value)
    env.sql("DELETE FROM b WHERE y = 0")
    assert rows() == want


def test_an_overflowing_running_sum_in_a_view_fails_reads_until_the_row_is_deleted(
    env: Environment,
) -> None:
    """A window aggregate that overflows is an error as data too: a running ``sum(x)`` of int64
    passing 2**63 (it used to fail the view's dataflow for good)."""
    big = 2**63 - 3
    env.create_table("t", DESC)
    env.insert("t", [(1, 5), (1, 2), (2, 7)])
    running = env.get("t").window(["k"], order_by=["x"], total=sum_(col("x")))
    env.create_materialized_view("running", running, cluster="c")
    expected = [
        {"k": 1, "x": 2, "total": 2},
        {"k": 1, "x": 5, "total": 7},
        {"k": 2, "x": 7, "total": 7},
    ]

    def rows() -> list[dict[str, object]]:
        return sorted(env.select("running", cluster="c", timeout=120).to_pylist(), key=str)

    assert rows() == sorted(expected, key=str)
    env.insert("t", [(1, big)])  # k=1's running sum passes 2**63 - 1 at its last row
    with pytest.raises(EvaluationFailed) as caught:
        env.select("running", cluster="c", timeout=120)
    text = str(caught.value)
    assert "running" in text and "bigint out of range" in text, text
    assert "sum(x)" in text and "k=1" in text, text  # the aggregate and a sample row
    assert caught.value.sqlstate == "22003"
    problem = _status_error(env, "running", present=True)
    assert problem is not None and "bigint out of range" in problem
    env.delete("t", [(1, big)])
    assert rows() == sorted(expected, key=str)
    assert _status_error(env, "running", present=False) is None
    env.insert("t", [(2, 1)])  # and the view goes on being maintained
    assert rows() == sorted(
        [*expected[:2], {"k": 2, "x": 1, "total": 1}, {"k": 2, "x": 7, "total": 8}], key=str
    )
