"""``Environment.sql`` end to end: real replicas (Spark local) behind the SQL statements."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from spate.environment.api import Environment
from spate.sql import SqlError

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    e = Environment.open(tmp_path_factory.mktemp("sql") / "data")
    e.sql("CREATE CLUSTER c1 (REPLICAS (r1))")
    yield e
    e.close()


def rows(table: object) -> list[tuple[object, ...]]:
    assert isinstance(table, pa.Table)
    return [tuple(r.values()) for r in table.to_pylist()]


def test_tables_views_indexes_and_dml(env: Environment) -> None:
    env.sql(
        "CREATE TABLE bids (auction bigint NOT NULL, price numeric(10,2), bidder text);"
        "INSERT INTO bids VALUES (1, 10.5, 'a'), (1, 25, 'b'), (2, 7, NULL)"
    )
    env.sql(
        "CREATE MATERIALIZED VIEW top_bids IN CLUSTER c1 AS "
        "SELECT auction, max(price) AS top, count(*) AS n FROM bids GROUP BY auction;"
        "CREATE INDEX top_idx IN CLUSTER c1 ON top_bids (auction)"
    )
    out = env.sql("SELECT * FROM top_bids ORDER BY auction")
    assert isinstance(out, pa.Table) and out.column_names == ["auction", "top", "n"]
    assert rows(out) == [(1, Decimal("25.00"), 2), (2, Decimal("7.00"), 1)]
    # map/filter/project over one object reads it (no dataflow) and applies the rest
    assert rows(env.sql("SELECT auction, n * 2 AS twice FROM top_bids WHERE n > 1")) == [(1, 4)]
    env.sql(
        "UPDATE bids SET price = price + 1 WHERE auction = 2; DELETE FROM bids WHERE bidder = 'a'"
    )
    assert rows(env.sql("SELECT * FROM top_bids ORDER BY auction")) == [
        (1, Decimal("25.00"), 1),
        (2, Decimal("8.00"), 1),
    ]
    # an ad-hoc query with a join and an outer join (small inputs: evaluated in the environment)
    got = env.sql(
        "SELECT b.auction, t.n FROM bids b LEFT JOIN top_bids t ON b.auction = t.auction "
        "AND t.n > 5 ORDER BY b.auction"
    )
    assert rows(got) == [(1, None), (2, None)]
    assert rows(env.sql("SHOW TABLES")) == [("bids",)]
    assert rows(env.sql("SHOW CREATE MATERIALIZED VIEW top_bids"))[0][1].startswith("CREATE")
    assert rows(env.sql("SELECT 1 + 1 AS two")) == [(2,)]


def test_a_failing_statement_changes_nothing(env: Environment) -> None:
    before = env.names()
    with pytest.raises(SqlError) as info:
        env.sql("CREATE VIEW broken AS SELECT nosuch FROM bids")
    assert info.value.sqlstate == "42703"
    assert env.names() == before
    with pytest.raises(SqlError):
        env.sql("SELEC 1")
    assert env.names() == before


def test_set_and_subscribe(env: Environment) -> None:
    env.sql("SET cluster = c1; SET transaction_isolation = 'serializable'")
    assert rows(env.sql("SHOW cluster")) == [("c1",)]
    assert rows(env.sql("SHOW transaction_isolation")) == [("serializable",)]
    stream = env.sql("SUBSCRIBE TO top_bids")
    assert isinstance(stream, Iterator)
    first = next(stream)
    assert sorted(r for _, r, d in first if d > 0) == [
        (1, Decimal("25.00"), 1),
        (2, Decimal("8.00"), 1),
    ]
    stream.close()  # type: ignore[attr-defined]
    env.sql("SET transaction_isolation = 'strict serializable'")


def test_results_of_other_statements_are_none(env: Environment, tmp_path: Path) -> None:
    del tmp_path
    assert env.sql("CREATE VIEW cheap AS SELECT auction FROM bids WHERE price < 10") is None
    assert env.sql("DROP VIEW cheap") is None


MAINTAINED = {
    "lj": "SELECT t.x, s.y FROM t LEFT JOIN s ON t.x = s.y",
    "notin": "SELECT x FROM t WHERE x NOT IN (SELECT y FROM s)",
    "cnt": "SELECT t.x, (SELECT count(*) FROM s WHERE s.y = t.x) AS n FROM t",
    "total": "SELECT count(*) AS n, sum(x) AS s FROM t",
}


def test_views_with_outer_joins_and_subqueries_stay_correct(env: Environment) -> None:
    """Materialized views lowered from outer joins, NOT IN, a correlated count and a global
    aggregate equal the reference evaluation of the same SQL after every change (NULLs, empty
    inputs and a NULL appearing in a NOT IN subquery included)."""
    from collections import Counter

    from tests.sql._plan_engine import ReferenceEngine

    ref = ReferenceEngine()
    ddl = "CREATE TABLE t (x bigint); CREATE TABLE s (y bigint)"
    env.sql(ddl)
    ref.sql(ddl)
    for name, q in MAINTAINED.items():
        env.sql(f"CREATE MATERIALIZED VIEW {name} IN CLUSTER c1 AS {q}")
        ref.sql(f"CREATE VIEW {name} AS {q}")
    rounds = [
        "INSERT INTO t VALUES (1), (2), (NULL); INSERT INTO s VALUES (2)",
        "INSERT INTO s VALUES (NULL), (2)",
        "DELETE FROM s WHERE y IS NULL; DELETE FROM t WHERE x = 2",
        "DELETE FROM t WHERE true",
    ]
    for change in rounds:
        env.sql(change)
        ref.sql(change)
        for name in MAINTAINED:
            got = Counter(rows(env.sql(f"SELECT * FROM {name}")))
            assert got == ref.bag(f"SELECT * FROM {name}"), (change, name)


def test_sessions_keep_their_own_settings(env: Environment) -> None:
    env.sql("CREATE CLUSTER spare (REPLICAS ())")
    a, b = env.sql_session(), env.sql_session()
    a.sql("SET cluster = spare")
    b.sql("SET transaction_isolation = 'serializable'")
    assert rows(a.sql("SHOW cluster")) == [("spare",)]
    assert rows(a.sql("SHOW transaction_isolation")) == [("strict serializable",)]
    assert rows(b.sql("SHOW transaction_isolation")) == [("serializable",)]
    assert rows(b.sql("SHOW CLUSTERS"))[-1] == ("spare", "")  # objects are shared
    env.sql("DROP CLUSTER spare")
