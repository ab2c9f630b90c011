"""Evaluation errors as data in the operators that evaluate scalars inside their own plans: a
table function's arguments (FlatMap), a window function's value (Window), a temporal filter's
time bound, and a join's residual predicate when the join serves the history of a reduce keyed
on the join key. A row whose expression fails goes to the dataflow's error collection: reads
fail naming the view and the SQLSTATE (the reference evaluator fails with the same), the
dataflow goes on stepping, and once the row is retracted reads equal the reference's answer.
(Each used to fail the whole step, for good.) Small deltas and large ones (every step in
Spark) both."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spate.errors import EvalError
from spate.frontier.antichain import Antichain
from spate.ids import GlobalId
from spate.plan import col, count, lag, lit, sum_
from spate.plan.builder import now_ms
from spate.plan.evaluation.relation import evaluate
from spate.plan.expr import BinaryFunc, CallBinary, Case, ColumnRef, Literal, RaiseError, ScalarExpr
from spate.plan.relation import Filter, Get, Join, RelationExpr
from spate.render.dataflow import CollectionInError, Dataflow
from spate.render.input import ArrowInputs
from spate.repr import INT64, RelationDesc
from spate.repr.arrow import updates_to_table
from spate.repr.types import Row
from spate.testing.plan_strategies import single_plan_dataflow
from tests.render.oracle import EVERY_DELTA_LARGE, peeked

T = GlobalId.user(1)
U = GlobalId.user(2)
DESC = RelationDesc.of(("k", INT64, False), ("x", INT64, False))
OTHER = RelationDesc.of(("k", INT64, False), ("y", INT64, False))
SRC = Get(T, DESC)


def _div(a: ScalarExpr, b: ScalarExpr) -> ScalarExpr:
    """``a / b``, failing with division by zero where b = 0 (as SQL lowers it)."""
    zero = CallBinary(BinaryFunc.EQ, b, Literal(0, INT64))
    return Case(
        ((zero, RaiseError("22012", "division by zero", INT64)),), CallBinary(BinaryFunc.DIV, a, b)
    )


def _run(
    plan: RelationExpr,
    contents: dict[GlobalId, Counter[Row]],
    bad: tuple[GlobalId, Row],
    *,
    name: str,
    sqlstate: str,
    large: bool,
    spark: SparkSession,
    scratch: Path,
    later: tuple[GlobalId, Row] | None = None,
    descs: dict[GlobalId, RelationDesc] | None = None,
    message: str | None = None,
) -> None:
    """Hydrate over ``contents``; insert ``bad`` at 1 (reads fail, as the reference does), a
    good row ``later`` at 2 (still failing, still stepping), retract ``bad`` at 3 (reads
    equal the reference's)."""
    descs = descs or {T: DESC, U: OTHER}
    data = {id: Counter(rows) for id, rows in contents.items()}
    inputs = ArrowInputs.of(
        {
            id: updates_to_table(descs[id], [(r, 0, n) for r, n in rows.items()])
            for id, rows in data.items()
        },
        upper=1,
    )
    df = Dataflow(
        single_plan_dataflow(plan, {id: descs[id] for id in data}),
        inputs,
        spark=spark,
        scratch=scratch,
        name=name,
        settings=EVERY_DELTA_LARGE if large else None,
    )
    ix = df.description.index_exports[0].id

    def append(t: int, change: tuple[GlobalId, Row] | None, diff: int) -> None:
        for id in data:
            rows = [] if change is None or change[0] != id else [(change[1], t, diff)]
            inputs.append(id, updates_to_table(descs[id], rows), t + 1)
        if change is not None:
            data[change[0]][change[1]] += diff
        at[t] = {id: +rows for id, rows in data.items()}
        df.step()
        assert df.upper == Antichain.of(t + 1)  # the dataflow steps on

    at = {0: {id: +rows for id, rows in data.items()}}  # the contents at each time

    def expected(t: int) -> Counter[Row]:
        return Counter(evaluate(plan, at[t], t))

    df.step()
    assert peeked(df.peek(ix, timestamp=0)) == expected(0)
    append(1, bad, 1)
    with pytest.raises(CollectionInError) as caught:
        df.peek(ix, timestamp=1)
    text = str(caught.value)
    assert name in text and f"[SQLSTATE {sqlstate}]" in text, text
    assert message is None or message in text, text
    with pytest.raises(EvalError) as ref:  # the reference fails on the same contents
        expected(1)
    assert ref.value.sqlstate == sqlstate
    assert peeked(df.peek(ix, timestamp=0)) == expected(0)  # before the error: fine
    append(2, later, 1)
    with pytest.raises(CollectionInError):
        df.peek(ix, timestamp=2)
    append(3, bad, -1)
    assert peeked(df.peek(ix, timestamp=3)) == expected(3)
    df.drop()


LARGE = pytest.mark.parametrize("large", [False, True], ids=["small", "large"])


@LARGE
def test_a_failing_table_function_argument_fails_reads_until_retracted(
    spark: SparkSession, tmp_path: Path, large: bool
) -> None:
    """generate_series(1, 10 / x) with x = 0."""
    plan = SRC.flat_map("generate_series", lit(1), _div(lit(10), col("x")), name="i")
    _run(
        plan,
        {T: Counter({(1, 5): 1, (2, 2): 1})},
        (T, (3, 0)),
        name="series",
        sqlstate="22012",
        large=large,
        spark=spark,
        scratch=tmp_path,
        later=(T, (4, 10)),
    )


@LARGE
def test_a_failing_window_function_value_fails_reads_until_retracted(
    spark: SparkSession, tmp_path: Path, large: bool
) -> None:
    """lag(10 / x) over (partition by k order by x), with x = 0 in a partition of others."""
    plan = SRC.window(["k"], order_by=["x"], prev=lag(_div(lit(10), col("x"))))
    _run(
        plan,
        {T: Counter({(1, 5): 1, (1, 2): 1, (2, 1): 1})},
        (T, (1, 0)),
        name="lags",
        sqlstate="22012",
        large=large,
        spark=spark,
        scratch=tmp_path,
        later=(T, (2, 10)),
    )


@LARGE
def test_a_failing_temporal_bound_fails_reads_until_retracted(
    spark: SparkSession, tmp_path: Path, large: bool
) -> None:
    """now() < 100 / x (an upper bound on the logical time) with x = 0."""
    bound = CallBinary(BinaryFunc.LT, now_ms(), _div(lit(100), col("x")))
    plan = Filter(SRC, (bound,))
    _run(
        plan,
        {T: Counter({(1, 5): 1, (2, 50): 1})},
        (T, (3, 0)),
        name="recent",
        sqlstate="22012",
        large=large,
        spark=spark,
        scratch=tmp_path,
        later=(T, (4, 20)),
    )


@LARGE
def test_a_failing_join_predicate_under_a_reduce_on_the_join_key_fails_reads_until_retracted(
    spark: SparkSession, tmp_path: Path, large: bool
) -> None:
    """count(*), sum(y) per k of a JOIN b ON a.k = b.k WHERE a.x / b.y > 1, with b.y = 0: the
    join serves the reduce's history of its groups (render.operators.join_history)."""
    x, y = ColumnRef(1), ColumnRef(3)
    ratio = CallBinary(BinaryFunc.GT, _div(x, y), Literal(1, INT64))
    join = Join((SRC, Get(U, OTHER)), ((0, 2),), (ratio,))
    plan = join.reduce(["k"], n=count(), total=sum_(col("y")))
    _run(
        plan,
        {T: Counter({(1, 10): 1, (2, 3): 1, (3, 8): 1}), U: Counter({(1, 2): 1, (2, 3): 1})},
        (U, (3, 0)),
        name="ratios",
        sqlstate="22012",
        large=large,
        spark=spark,
        scratch=tmp_path,
        later=(T, (3, 9)),
    )


@LARGE
def test_a_failing_ordering_key_of_a_top_k_fails_reads_until_retracted(
    spark: SparkSession, tmp_path: Path, large: bool
) -> None:
    """ORDER BY 10 / x LIMIT 2 per k (the ordering key a computed column), with x = 0."""
    ordered = SRC.map(q=_div(lit(10), col("x")))
    plan = ordered.top_k(["k"], order_by=["q"], limit=2)
    _run(
        plan,
        {T: Counter({(1, 5): 1, (1, 2): 1, (1, 1): 1, (2, 1): 1})},
        (T, (1, 0)),
        name="firsts",
        sqlstate="22012",
        large=large,
        spark=spark,
        scratch=tmp_path,
        later=(T, (1, 10)),
    )
