"""A read that filters an indexed object by its index key is an index peek with literal
constraints: the same rows as the whole object filtered, and no dataflow."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from spate.environment.api import Environment
from spate.plan.builder import col, lit
from spate.repr.desc import RelationDesc
from spate.repr.types import FLOAT64, INT64, TEXT, Row

ITEMS = RelationDesc.of(("k", INT64), ("s", TEXT), ("v", FLOAT64))
ROWS: list[Row] = [
    (1, "a", 1.0),
    (1, "b", 2.0),
    (2, "a", 3.0),
    (2, "a", 3.0),
    (3, None, 4.0),
    (None, "a", 5.0),
    (None, None, 6.0),
    (42, "z", 7.5),
]


def _rows(t: pa.Table) -> Counter[Row]:
    cols = [t.column(i).to_pylist() for i in range(t.num_columns)]
    return Counter(tuple(c[i] for c in cols) for i in range(t.num_rows))


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    e = Environment.open(Path(tmp_path_factory.mktemp("lookup")) / "data")
    try:
        e.create_cluster("c", replicas=["r1"])
        e.create_table("items", ITEMS)
        e.insert("items", ROWS)
        e.create_view("v", e.get("items"))
        e.create_index("v_k", on="v", key=["k"], cluster="c")
        e.create_view("w", e.get("items"))
        e.create_index("w_ks", on="w", key=["k", "s"], cluster="c")
        assert e.select("v", timeout=600).num_rows == len(ROWS)
        assert e.select("w", timeout=600).num_rows == len(ROWS)
        yield e
    finally:
        e.close()


class Spy:
    """The dataflows created and the literal constraints peeked through the controller."""

    def __init__(self, env: Environment, monkeypatch: pytest.MonkeyPatch) -> None:
        self.dataflows = 0
        self.constraints: list[Any] = []
        compute = env.runtime.compute
        create, peek = compute.create_dataflow, compute.peek

        def create_dataflow(*a: Any, **kw: Any) -> Any:
            self.dataflows += 1
            return create(*a, **kw)

        def peek_(*a: Any, **kw: Any) -> Any:
            self.constraints.append(kw.get("literal_constraints"))
            return peek(*a, **kw)

        monkeypatch.setattr(compute, "create_dataflow", create_dataflow)
        monkeypatch.setattr(compute, "peek", peek_)


def _expected(keep: Callable[[Row], bool], out: Callable[[Row], Row] = lambda r: r) -> Counter[Row]:
    return Counter(out(r) for r in ROWS if keep(r))


SQL_CASES: list[tuple[str, Callable[[Row], bool], Callable[[Row], Row]]] = [
    ("SELECT * FROM v WHERE k = 42", lambda r: r[0] == 42, lambda r: r),
    ("SELECT * FROM v WHERE k = 2", lambda r: r[0] == 2, lambda r: r),
    ("SELECT * FROM v WHERE k = 999", lambda r: False, lambda r: r),
    ("SELECT * FROM v WHERE k = 1.0", lambda r: r[0] == 1, lambda r: r),
    ("SELECT * FROM v WHERE k = 1.5", lambda r: False, lambda r: r),
    ("SELECT * FROM v WHERE k = 1e0", lambda r: r[0] == 1, lambda r: r),
    ("SELECT * FROM v WHERE k = NULL", lambda r: False, lambda r: r),
    ("SELECT * FROM v WHERE k IS NULL", lambda r: r[0] is None, lambda r: r),
    ("SELECT * FROM v WHERE k IN (1, 3, 999)", lambda r: r[0] in (1, 3), lambda r: r),
    ("SELECT * FROM v WHERE 2 = k AND v > 2.5", lambda r: r[0] == 2 and r[2] > 2.5, lambda r: r),
    ("SELECT * FROM v WHERE k = 1 AND s = 'b'", lambda r: r[0] == 1 and r[1] == "b", lambda r: r),
    (
        "SELECT s, v * 2 AS twice FROM v WHERE k IN (1, 2)",
        lambda r: r[0] in (1, 2),
        lambda r: (r[1], r[2] * 2),
    ),
    ("SELECT * FROM w WHERE k = 1 AND s = 'a'", lambda r: r[0] == 1 and r[1] == "a", lambda r: r),
    (
        "SELECT * FROM w WHERE s IN ('a', 'b') AND k IN (1, 2) AND v < 3",
        lambda r: r[0] in (1, 2) and r[1] in ("a", "b") and r[2] < 3,
        lambda r: r,
    ),
    (
        "SELECT * FROM w WHERE k = 3 AND s IS NULL",
        lambda r: r[0] == 3 and r[1] is None,
        lambda r: r,
    ),
]


@pytest.mark.parametrize(("query", "keep", "out"), SQL_CASES, ids=[c[0] for c in SQL_CASES])
def test_sql_lookup_equals_filtered_read_without_dataflow(
    env: Environment,
    monkeypatch: pytest.MonkeyPatch,
    query: str,
    keep: Callable[[Row], bool],
    out: Callable[[Row], Row],
) -> None:
    spy = Spy(env, monkeypatch)
    got = env.sql(query)
    assert isinstance(got, pa.Table)
    assert _rows(got) == _expected(keep, out)
    assert spy.dataflows == 0
    # a lookup peeks only keys (or nothing at all when no key can match)
    assert spy.constraints == [] or all(c is not None for c in spy.constraints)
    assert len(spy.constraints) <= 1


def test_sql_lookup_peeks_with_literal_constraints(
    env: Environment, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = Spy(env, monkeypatch)
    env.sql("SELECT * FROM v WHERE k IN (1, 3)")
    assert [sorted(c) for c in spy.constraints] == [[(1,), (3,)]]
    spy.constraints.clear()
    env.sql("SELECT * FROM w WHERE k = 1 AND s IN ('a', 'b')")
    assert [sorted(c) for c in spy.constraints] == [[(1, "a"), (1, "b")]]


def test_select_plan_lookup_equals_filtered_read_without_dataflow(
    env: Environment, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = Spy(env, monkeypatch)
    plan = env.get("v").filter(col("k").eq(lit(2)))
    assert _rows(env.select(plan, isolation="serializable")) == _expected(lambda r: r[0] == 2)
    numeric = env.get("v").filter(col("k").eq(lit(Decimal("42.0"))))
    assert _rows(env.select(numeric)) == _expected(lambda r: r[0] == 42)
    mapped = (
        env.get("w")
        .filter(col("k").eq(lit(1)), col("s").eq(lit("b")) | col("s").eq(lit("a")))
        .map(v1=col("v") + lit(1.0))
    )
    got = env.select(mapped, order_by=["v"])
    assert [tuple(r.values()) for r in got.to_pylist()] == [(1, "a", 1.0, 2.0), (1, "b", 2.0, 3.0)]
    assert spy.dataflows == 0
    assert len(spy.constraints) == 3 and all(c is not None for c in spy.constraints)


def test_filter_on_another_column_is_not_a_lookup(
    env: Environment, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = Spy(env, monkeypatch)
    # a read this small is otherwise answered here without a peek at all
    got = env.select(env.get("v").filter(col("v").eq(lit(3.0))), small_reads=False)
    assert _rows(got) == _expected(lambda r: r[2] == 3.0)
    assert spy.constraints and all(c is None for c in spy.constraints)
