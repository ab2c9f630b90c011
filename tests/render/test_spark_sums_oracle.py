"""The Spark dialect's ``sum`` of a ``bigint`` (``sum(CAST(v AS numeric(19, 0)))``) and its
``count(1)`` take the driver paths: a reduce keeps accumulators for them
(:mod:`spate.render.operators.accumulators`), and a TopK over such a sum keeps summaries of its
numeric column (:mod:`spate.render.operators.topk_state`). Every export, at every time, equals
the reference evaluator under random insertions and retractions, and the steps after the first
are folded on the driver.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from spate.plan.aggregate import AggregateExpr, AggregateFunc
from spate.plan.arguments import desc
from spate.plan.builder import col, count, lit, max_
from spate.plan.expr import Cast
from spate.plan.relation import Get
from spate.render.operators import driver_reduce, reduce_state, topk_state
from spate.repr.types import BOOL, INT64, numeric
from spate.testing.plan_strategies import single_plan_dataflow
from spate.testing.update_strategies import input_streams
from tests.plan.fixtures import BIDS_DESC, BIDS_ID
from tests.render.oracle import run_and_check

INPUTS = {BIDS_ID: BIDS_DESC}
BIDS = Get(BIDS_ID, BIDS_DESC)


def spark_sum(column: str) -> AggregateExpr:
    """``sum(column)`` as the Spark dialect plans it for a ``bigint``."""
    return AggregateExpr(AggregateFunc.SUM, Cast(col(column), numeric(19, 0)))


@pytest.fixture
def folded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The steps a reduce's accumulators or a TopK's summaries computed (not declined)."""
    runs: list[str] = []

    def counting(real: Any, what: str) -> Any:
        def step(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = real(self, *args, **kwargs)
            if out is not None:
                runs.append(what)
            return out

        return step

    monkeypatch.setattr(
        reduce_state.ReduceState, "step", counting(reduce_state.ReduceState.step, "reduce")
    )
    monkeypatch.setattr(topk_state.TopKState, "step", counting(topk_state.TopKState.step, "topk"))
    return runs


def test_the_spark_sum_and_count_1_are_computed_on_the_driver() -> None:
    reduce = BIDS.reduce(["channel"], s=spark_sum("price"), n=count(lit(1)), top=max_(col("price")))
    assert driver_reduce.supported(reduce.group_key, reduce.aggregates, BIDS_DESC)
    # a cast that could change the values (a scale, too few digits) is not
    for cast in (numeric(19, 2), numeric(18, 0)):
        other = BIDS.reduce(
            ["channel"], s=AggregateExpr(AggregateFunc.SUM, Cast(col("price"), cast))
        )
        assert driver_reduce.value_column(other.aggregates[0], BIDS_DESC) is None
    # count of a NULL literal counts nothing: not the row count
    assert not driver_reduce.counts_rows(AggregateExpr(AggregateFunc.COUNT, lit(None, BOOL)))
    assert driver_reduce.counts_rows(AggregateExpr(AggregateFunc.COUNT, lit(1, INT64)))


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_spark_sums_and_a_top_k_over_them_match_the_reference(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    folded: list[str],
    data: st.DataObject,
) -> None:
    key = data.draw(st.sampled_from([["channel"], ["auction"]]))
    plan = BIDS.reduce(key, s=spark_sum("price"), n=count(lit(1)), top=max_(col("price")))
    if data.draw(st.booleans()):  # gold_top_customers: the first keys by their sum
        plan = plan.top_k(order_by=[desc("s"), key[0]], limit=2)
    streams = data.draw(input_streams(INPUTS, max_time=9, max_updates=16))
    cuts = sorted(set(data.draw(st.lists(st.integers(2, 10), min_size=2, max_size=5))))
    dataflow = single_plan_dataflow(plan, INPUTS, as_of=1)
    run_and_check(spark, tmp_path_factory.mktemp("sums"), dataflow, streams, INPUTS, cuts)


def test_a_step_of_a_spark_sum_and_its_top_k_is_folded(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, folded: list[str]
) -> None:
    import datetime as dt

    at = dt.datetime(1970, 1, 1)
    streams = {
        BIDS_ID: [
            ((1, 10, 5, "a", at), 0, 1),
            ((2, 10, 9, "b", at), 0, 1),
            ((1, 11, 7, "a", at), 3, 1),
            ((2, 10, 9, "b", at), 4, -1),  # b's maximum goes
            # a sum beyond int64 (2**63), which the numeric holds exactly
            ((3, 12, 2**62, "c", at), 5, 1),
            ((4, 12, 2**62, "c", at), 5, 1),
        ]
    }
    plan = BIDS.reduce(["channel"], s=spark_sum("price"), n=count(lit(1)), top=max_(col("price")))
    top = plan.top_k(order_by=[desc("s"), "channel"], limit=1)
    for p in (plan, top):
        folded.clear()
        dataflow = single_plan_dataflow(p, INPUTS, as_of=1)
        run_and_check(spark, tmp_path_factory.mktemp("s"), dataflow, streams, INPUTS, [2, 5, 6])
        assert "reduce" in folded
        assert p is plan or "topk" in folded
