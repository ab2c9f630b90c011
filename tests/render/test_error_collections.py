"""Evaluation errors as data: a failing row goes to the dataflow's error collection, reads at
times where it holds records fail naming the expression and the row, and retracting the row
retracts the error (reads succeed again, with the right answer)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spate.errors import EvalError
from spate.frontier.antichain import Antichain
from spate.ids import GlobalId
from spate.plan import col, count, lit, sum_
from spate.plan.evaluation.relation import evaluate
from spate.plan.expr import BinaryFunc, CallBinary, Case, ColumnRef, Literal, RaiseError
from spate.plan.relation import Get, Join, Map
from spate.render.dataflow import CollectionInError, Dataflow
from spate.render.input import ArrowInputs
from spate.repr import INT64, TEXT, RelationDesc
from spate.repr.arrow import updates_to_table
from spate.testing.plan_strategies import single_plan_dataflow
from tests.render.oracle import EVERY_DELTA_LARGE, peeked

T = GlobalId.user(1)
DESC = RelationDesc.of(("k", INT64, False), ("x", INT64, False), ("who", TEXT, True))
SRC = Get(T, DESC)
BIG = 2**63 - 1


def _inputs(rows: list[tuple[tuple[int, int, str | None], int, int]], upper: int) -> ArrowInputs:
    inputs = ArrowInputs.of({T: updates_to_table(DESC, [])}, upper=0)
    inputs.append(T, updates_to_table(DESC, rows), upper)
    return inputs


def _peek(df: Dataflow, t: int) -> Counter[tuple[object, ...]]:
    ix = df.description.index_exports[0].id
    return peeked(df.peek(ix, timestamp=t))


@pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
def test_view_with_overflow_fails_reads_then_recovers_on_retraction(
    spark: SparkSession, tmp_path: Path, large: bool
) -> None:
    view = SRC.reduce(["k"], total=sum_(col("x")), n=count())
    inputs = _inputs([((1, 5, "a"), 0, 1), ((2, 7, "b"), 0, 1)], 1)
    df = Dataflow(
        single_plan_dataflow(view, {T: DESC}, subscribe_id=None),
        inputs,
        spark=spark,
        scratch=tmp_path,
        name="sums",
        settings=EVERY_DELTA_LARGE if large else None,
    )
    df.step()
    assert _peek(df, 0) == Counter({(1, 5, 1): 1, (2, 7, 1): 1})
    # key 1's sum passes 2**63 - 1 at time 2
    inputs.append(T, updates_to_table(DESC, [((1, BIG, "c"), 2, 1)]), 3)
    df.step()
    assert _peek(df, 1) == Counter({(1, 5, 1): 1, (2, 7, 1): 1})  # before the error: fine
    with pytest.raises(CollectionInError) as caught:
        _peek(df, 2)
    text = str(caught.value)
    assert "sums" in text and "bigint out of range" in text and "22003" in text
    assert "sum(x)" in text and "x=" in text  # the expression and a sample row of the group
    # the reference evaluator fails on the same contents with the same SQLSTATE
    with pytest.raises(EvalError) as ref:
        evaluate(view, {T: Counter({(1, 5, "a"): 1, (1, BIG, "c"): 1})}, 0)
    assert ref.value.sqlstate == "22003"
    # retract the offending row: reads at later times succeed with the right answer
    inputs.append(T, updates_to_table(DESC, [((1, BIG, "c"), 4, -1)]), 5)
    df.step()
    with pytest.raises(CollectionInError):
        _peek(df, 3)
    assert _peek(df, 4) == Counter({(1, 5, 1): 1, (2, 7, 1): 1})
    df.drop()


def test_a_failing_map_row_goes_to_the_errors_and_the_others_pass(
    spark: SparkSession, tmp_path: Path
) -> None:
    x, k = ColumnRef(1), ColumnRef(0)
    # x / k, failing with division by zero where k = 0 (lazily: the CASE guards the division)
    div = Case(
        (
            (
                CallBinary(BinaryFunc.EQ, k, Literal(0, INT64)),
                RaiseError("22012", "division by zero", INT64),
            ),
        ),
        CallBinary(BinaryFunc.DIV, x, k),
    )
    plan = Map(SRC, (div, x + lit(BIG)), ("q", "big"))
    inputs = _inputs([((1, 0, "a"), 0, 1)], 1)
    df = Dataflow(
        single_plan_dataflow(plan, {T: DESC}), inputs, spark=spark, scratch=tmp_path, name="q"
    )
    df.step()
    assert _peek(df, 0) == Counter({(1, 0, "a", 0, BIG): 1})
    inputs.append(T, updates_to_table(DESC, [((0, 6, "z"), 1, 1), ((2, 1, "y"), 2, 1)]), 3)
    report = df.step()
    with pytest.raises(CollectionInError, match=r"division by zero \[SQLSTATE 22012\]") as e:
        _peek(df, 1)
    assert "k=0, x=6, who=z" in str(e.value)
    for row, code in (((0, 6, "z"), "22012"), ((2, 1, "y"), "22003")):
        with pytest.raises(EvalError) as ref:  # the reference agrees, row by row
            evaluate(plan, {T: Counter({row: 1})}, 0)
        assert ref.value.sqlstate == code
    with pytest.raises(CollectionInError, match=r"bigint out of range.*x=1, who=y.*2 errors"):
        _peek(df, 2)
    # the subscribe sees the good rows only
    (updates,) = report.sink_updates.values()
    assert updates.num_rows == 0
    inputs.append(T, updates_to_table(DESC, [((0, 6, "z"), 3, -1), ((2, 1, "y"), 3, -1)]), 4)
    df.step()
    assert _peek(df, 3) == Counter({(1, 0, "a", 0, BIG): 1})
    df.drop()


def test_a_failing_filter_predicate_fails_reads_until_retracted(
    spark: SparkSession, tmp_path: Path
) -> None:
    plan = SRC.filter((col("x") * lit(4)) > lit(0))
    inputs = _inputs([((1, 2, "a"), 0, 1), ((3, 2**62, "b"), 0, 1)], 1)
    df = Dataflow(
        single_plan_dataflow(plan, {T: DESC}), inputs, spark=spark, scratch=tmp_path, name="f"
    )
    df.step()
    with pytest.raises(CollectionInError, match=r"\(x \* 4\).*k=3"):
        _peek(df, 0)
    inputs.append(T, updates_to_table(DESC, [((3, 2**62, "b"), 1, -1)]), 2)
    df.step()
    assert _peek(df, 1) == Counter({(1, 2, "a"): 1})
    assert df.upper == Antichain.of(2)
    df.drop()


def test_a_failing_aggregate_input_fails_its_group_until_retracted(
    spark: SparkSession, tmp_path: Path
) -> None:
    x = ColumnRef(1)
    inverse = Case(  # 100 / x, failing where x = 0
        (
            (
                CallBinary(BinaryFunc.EQ, x, Literal(0, INT64)),
                RaiseError("22012", "division by zero", INT64),
            ),
        ),
        CallBinary(BinaryFunc.DIV, Literal(100, INT64), x),
    )
    view = SRC.reduce(["k"], s=sum_(inverse))
    inputs = _inputs([((1, 5, "a"), 0, 1), ((2, 10, "b"), 0, 1)], 1)
    df = Dataflow(
        single_plan_dataflow(view, {T: DESC}, subscribe_id=None),
        inputs,
        spark=spark,
        scratch=tmp_path,
        name="inverses",
    )
    df.step()
    inputs.append(T, updates_to_table(DESC, [((2, 0, "z"), 1, 1)]), 2)
    df.step()
    with pytest.raises(CollectionInError, match=r"division by zero.*k=2, x=0, who=z"):
        _peek(df, 1)
    inputs.append(T, updates_to_table(DESC, [((2, 0, "z"), 2, -1), ((1, 5, "a"), 2, 1)]), 3)
    df.step()
    assert _peek(df, 2) == Counter({(1, 40): 1, (2, 10): 1})
    df.drop()


U = GlobalId.user(2)
PAIR = RelationDesc.of(("k", INT64, False), ("x", INT64, False))
OTHER = RelationDesc.of(("k", INT64, False), ("y", INT64, False))


def _ratio_above_one() -> CallBinary:
    """``x / y > 1`` over the join's ``(k, x, k_1, y)``, failing where y = 0 (as SQL lowers
    it: the CASE guards the division)."""
    x, y = ColumnRef(1), ColumnRef(3)
    div = Case(
        (
            (
                CallBinary(BinaryFunc.EQ, y, Literal(0, INT64)),
                RaiseError("22012", "division by zero", INT64),
            ),
        ),
        CallBinary(BinaryFunc.DIV, x, y),
    )
    return CallBinary(BinaryFunc.GT, div, Literal(1, INT64))


@pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
def test_a_failing_join_predicate_fails_reads_until_retracted(
    spark: SparkSession, tmp_path: Path, large: bool
) -> None:
    """A residual predicate of a join that fails on a joined row (``a.x / b.y > 1`` with
    b.y = 0) sends that row to the errors, with its time and the product of its parts' diffs:
    reads fail while it is there, and succeed with the reference evaluator's answer once
    either part is retracted. (It used to fail the whole dataflow.)"""
    plan = Join((Get(T, PAIR), Get(U, OTHER)), ((0, 2),), (_ratio_above_one(),))
    a: Counter[tuple[object, ...]] = Counter({(1, 10): 1, (2, 3): 1, (3, 8): 1})
    b: Counter[tuple[object, ...]] = Counter({(1, 2): 1, (2, 3): 1})
    inputs = ArrowInputs.of(
        {
            T: updates_to_table(PAIR, [(r, 0, n) for r, n in a.items()]),
            U: updates_to_table(OTHER, [(r, 0, n) for r, n in b.items()]),
        },
        upper=1,
    )
    df = Dataflow(
        single_plan_dataflow(plan, {T: PAIR, U: OTHER}),
        inputs,
        spark=spark,
        scratch=tmp_path,
        name="ratios",
        settings=EVERY_DELTA_LARGE if large else None,
    )

    def expected(t: int) -> Counter[tuple[object, ...]]:
        return Counter(evaluate(plan, {T: a, U: b}, t))

    df.step()
    assert _peek(df, 0) == expected(0) == Counter({(1, 10, 1, 2): 1})
    # b gains (3, 0): the joined row (3, 8, 3, 0) divides by zero at time 1
    b[(3, 0)] += 1
    inputs.append(U, updates_to_table(OTHER, [((3, 0), 1, 1)]), 2)
    inputs.append(T, updates_to_table(PAIR, []), 2)
    df.step()
    with pytest.raises(CollectionInError, match=r"division by zero \[SQLSTATE 22012\]") as e:
        _peek(df, 1)
    assert "ratios" in str(e.value) and "k=3, x=8, k_1=3, y=0" in str(e.value), str(e.value)
    with pytest.raises(EvalError) as ref:  # the reference fails on the same contents
        evaluate(plan, {T: a, U: b}, 1)
    assert ref.value.sqlstate == "22012"
    assert _peek(df, 0) == Counter({(1, 10, 1, 2): 1})  # reads before the error are fine
    # the other input changes while the error holds: still in error, and maintained
    a[(4, 9)] += 1
    b[(4, 3)] += 1
    inputs.append(T, updates_to_table(PAIR, [((4, 9), 2, 1)]), 3)
    inputs.append(U, updates_to_table(OTHER, [((4, 3), 2, 1)]), 3)
    df.step()
    with pytest.raises(CollectionInError, match="division by zero"):
        _peek(df, 2)
    # retracting a's side of the failing row clears the error; the answer is the reference's
    del a[(3, 8)]
    inputs.append(T, updates_to_table(PAIR, [((3, 8), 3, -1)]), 4)
    inputs.append(U, updates_to_table(OTHER, []), 4)
    df.step()
    assert _peek(df, 3) == expected(3) == Counter({(1, 10, 1, 2): 1, (4, 9, 4, 3): 1})
    # a new row meeting b's (3, 0) fails again; retracting b's side clears it
    a[(3, 5)] += 1
    inputs.append(T, updates_to_table(PAIR, [((3, 5), 4, 1)]), 5)
    inputs.append(U, updates_to_table(OTHER, []), 5)
    df.step()
    with pytest.raises(CollectionInError, match="k=3, x=5, k_1=3, y=0"):
        _peek(df, 4)
    del b[(3, 0)]
    inputs.append(U, updates_to_table(OTHER, [((3, 0), 5, -1)]), 6)
    inputs.append(T, updates_to_table(PAIR, []), 6)
    df.step()
    assert _peek(df, 5) == expected(5)
    df.drop()
