"""Outer joins and decorrelated subqueries, each rule checked against hand-checked answers.

Fixtures as in PostgreSQL's classic pitfalls: t = {1, 2, NULL}, s = {2, NULL}, e = {}.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pytest

from spate.plan.relation import Join, Threshold
from spate.sql import MemoryCatalog, plan_statements
from spate.sql import statements as st
from tests.sql._plan_engine import ReferenceEngine


@pytest.fixture
def db() -> ReferenceEngine:
    e = ReferenceEngine()
    e.sql(
        """
        CREATE TABLE t (x bigint);
        INSERT INTO t VALUES (1), (2), (NULL);
        CREATE TABLE s (y bigint);
        INSERT INTO s VALUES (2), (NULL);
        CREATE TABLE e (x bigint);
        CREATE TABLE c (id bigint NOT NULL, name text);
        INSERT INTO c VALUES (1, 'ann'), (2, 'bob'), (3, 'cy');
        CREATE TABLE o (oid bigint NOT NULL, c bigint, total numeric(8,2));
        INSERT INTO o VALUES (10, 1, 5.00), (11, 1, 7.50), (12, 2, 1.25), (13, NULL, 3.00);
        """
    )
    return e


def bag(*rows: tuple[object, ...]) -> Counter[tuple[object, ...]]:
    return Counter(rows)


# --- outer joins -----------------------------------------------------------------------------


def test_left_join_pads_unmatched_rows(db: ReferenceEngine) -> None:
    got = db.bag("SELECT x, y FROM t LEFT JOIN s ON t.x = s.y")
    assert got == bag((1, None), (2, 2), (None, None))


def test_on_condition_is_not_where(db: ReferenceEngine) -> None:
    got = db.bag("SELECT x, y FROM t LEFT JOIN s ON t.x = s.y AND s.y > 5")
    assert got == bag((1, None), (2, None), (None, None))
    # a left-only ON conjunct pads the rows failing it instead of dropping them
    got = db.bag("SELECT x, y FROM t LEFT JOIN s ON t.x = s.y AND t.x > 1")
    assert got == bag((1, None), (2, 2), (None, None))
    got = db.bag("SELECT x FROM t LEFT JOIN s ON t.x = s.y WHERE s.y IS NULL")
    assert got == bag((1,), (None,))
    assert db.rows("SELECT count(*) FROM t LEFT JOIN s ON false") == [(3,)]


def test_right_and_full_joins(db: ReferenceEngine) -> None:
    assert db.bag("SELECT x, y FROM t RIGHT JOIN s ON t.x = s.y") == bag((2, 2), (None, None))
    got = db.bag("SELECT x, y FROM t FULL JOIN s ON t.x = s.y")
    assert got == bag((1, None), (2, 2), (None, None), (None, None))
    # a non-equi ON takes the general (null-safe, all columns) path
    got = db.bag("SELECT x, y FROM t FULL JOIN s ON t.x < s.y")
    assert got == bag((1, 2), (2, None), (None, None), (None, None))


def test_using_merges_columns(db: ReferenceEngine) -> None:
    db.sql("CREATE TABLE a (k bigint, va text); CREATE TABLE b (k bigint, vb text)")
    db.sql("INSERT INTO a VALUES (1, 'a1'), (2, 'a2'); INSERT INTO b VALUES (2, 'b2'), (3, 'b3')")
    r = db.sql("SELECT * FROM a FULL JOIN b USING (k) ORDER BY k")
    assert r is not None
    assert r.names == ["k", "va", "vb"]
    assert r.rows == [(1, "a1", None), (2, "a2", "b2"), (3, None, "b3")]
    assert db.rows("SELECT k, a.k, b.k FROM a JOIN b USING (k)") == [(2, 2, 2)]


def test_equi_outer_join_plan_uses_no_threshold() -> None:
    from spate.repr.desc import RelationDesc
    from spate.repr.types import INT64

    cat = MemoryCatalog()
    cat.add("l", RelationDesc.of(("a", INT64)))
    cat.add("r", RelationDesc.of(("b", INT64)))
    [stmt] = plan_statements("SELECT * FROM l LEFT JOIN r ON l.a = r.b", cat)
    assert isinstance(stmt, st.Select)
    nodes = list(stmt.plan.walk())
    assert not any(isinstance(n, Threshold) for n in nodes)
    assert all(n.equivalences for n in nodes if isinstance(n, Join))  # no cross products


# --- subqueries ------------------------------------------------------------------------------


def test_not_in_with_a_null_keeps_nothing(db: ReferenceEngine) -> None:
    assert db.rows("SELECT x FROM t WHERE x NOT IN (SELECT y FROM s)") == []
    assert db.bag("SELECT x FROM t WHERE x IN (SELECT y FROM s)") == bag((2,))
    assert db.rows("SELECT NULL::bigint NOT IN (SELECT x FROM e)") == [(True,)]


def test_not_exists_differs_from_not_in(db: ReferenceEngine) -> None:
    got = db.bag("SELECT x FROM t WHERE NOT EXISTS (SELECT 1 FROM s WHERE s.y = t.x)")
    assert got == bag((1,), (None,))
    got = db.bag("SELECT x FROM t WHERE EXISTS (SELECT 1 FROM s WHERE s.y = t.x)")
    assert got == bag((2,))


def test_in_and_any_all_values_in_select(db: ReferenceEngine) -> None:
    got = db.bag("SELECT x, x = ANY (SELECT y FROM s), x <> ALL (SELECT y FROM s) FROM t")
    assert got == bag((1, None, None), (2, True, False), (None, None, None))
    got = db.bag("SELECT x, x IN (SELECT y FROM s WHERE y IS NOT NULL) FROM t")
    assert got == bag((1, False), (2, True), (None, None))


def test_correlated_count_is_zero_not_null(db: ReferenceEngine) -> None:
    got = db.bag("SELECT c.id, (SELECT count(*) FROM o WHERE o.c = c.id) FROM c")
    assert got == bag((1, 2), (2, 1), (3, 0))
    got = db.bag("SELECT c.id, (SELECT max(total) FROM o WHERE o.c = c.id) FROM c")
    assert got == bag((1, Decimal("7.50")), (2, Decimal("1.25")), (3, None))


def test_uncorrelated_scalar_subquery(db: ReferenceEngine) -> None:
    assert db.rows("SELECT (SELECT max(x) FROM t)") == [(2,)]
    assert db.rows("SELECT (SELECT x FROM t WHERE false)") == [(None,)]
    got = db.bag("SELECT x FROM t WHERE x = (SELECT max(y) FROM s)")
    assert got == bag((2,))


def test_correlated_exists_under_or(db: ReferenceEngine) -> None:
    got = db.bag(
        "SELECT name FROM c WHERE id = 3 OR EXISTS (SELECT 1 FROM o WHERE o.c = c.id AND total > 5)"
    )
    assert got == bag(("ann",), ("cy",))


def test_nested_correlation_reaches_two_levels_out(db: ReferenceEngine) -> None:
    got = db.bag(
        "SELECT name FROM c WHERE EXISTS (SELECT 1 FROM o WHERE o.c = c.id AND EXISTS "
        "(SELECT 1 FROM t WHERE t.x = c.id))"
    )
    assert got == bag(("ann",), ("bob",))


def test_quantified_comparisons(db: ReferenceEngine) -> None:
    got = db.bag("SELECT x, x > ALL (SELECT x FROM e), x > ANY (SELECT x FROM e) FROM t")
    assert got == bag((1, True, False), (2, True, False), (None, True, False))
    got = db.bag(
        "SELECT x, x >= ALL (SELECT y FROM s WHERE y IS NOT NULL), x < ANY (SELECT y FROM s) FROM t"
    )
    assert got == bag((1, False, True), (2, True, None), (None, None, None))
    assert db.bag("SELECT x FROM t WHERE x >= ALL (SELECT y FROM s WHERE y IS NOT NULL)") == bag(
        (2,)
    )
