"""A Filter over a delta already on the driver is computed there
(:meth:`spate.render.operators.linear.FilterNode._on_driver`, with
:mod:`spate.plan.evaluation.vectorized`): every export, at every time, equals the reference
evaluator under random insertions and retractions, for predicates over text (NULLs among them),
int64 comparisons and arithmetic, AND/OR/NOT; an int64 overflow falls back to Spark, which
raises it as before; a predicate vectorized does not evaluate takes the Spark path.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from spate.plan.builder import col, count, lit
from spate.plan.expr import ScalarExpr
from spate.plan.relation import Get
from spate.render.layout import to_internal
from spate.render.operators import linear
from spate.repr.arrow import updates_to_table
from spate.testing.plan_strategies import single_plan_dataflow
from spate.testing.update_strategies import input_streams
from tests.plan.fixtures import BIDS_DESC, BIDS_ID
from tests.render.oracle import run_and_check

INPUTS = {BIDS_ID: BIDS_DESC}
BIDS = Get(BIDS_ID, BIDS_DESC)
PREDICATES: list[ScalarExpr] = [
    col("channel").eq("a"),
    col("price") > lit(5),
    (col("price") + col("bidder")) <= lit(20),
    col("channel").ne("b") | col("auction").eq(1),
    ~col("channel").eq("c"),
    col("channel").is_null(),
]


@pytest.fixture
def on_driver(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rows each filter computed on the driver kept."""
    runs: list[int] = []
    real = linear.FilterNode._on_driver

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = real(self, *args, **kwargs)
        if out is not None:
            runs.append(out.num_rows)
        return out

    monkeypatch.setattr(linear.FilterNode, "_on_driver", counting)
    return runs


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_filters_on_the_driver_match_the_reference(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    on_driver: list[int],
    data: st.DataObject,
) -> None:
    picked = data.draw(st.lists(st.sampled_from(PREDICATES), min_size=1, max_size=3))
    plan = BIDS.filter(*picked)
    if data.draw(st.booleans()):  # silver: a filter, then a reduce over it
        plan = plan.project("auction", "price").reduce(["auction"], n=count(col("price")))
    streams = data.draw(input_streams(INPUTS, max_time=9, max_updates=16))
    cuts = sorted(set(data.draw(st.lists(st.integers(2, 10), min_size=2, max_size=5))))
    dataflow = single_plan_dataflow(plan, INPUTS, as_of=1)
    run_and_check(spark, tmp_path_factory.mktemp("filter"), dataflow, streams, INPUTS, cuts)


def test_a_step_of_a_filter_runs_on_the_driver(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, on_driver: list[int]
) -> None:
    at = dt.datetime(1970, 1, 1)
    streams = {
        BIDS_ID: [
            ((1, 10, 5, "a", at), 0, 1),
            ((1, 11, 7, "b", at), 3, 1),
            ((2, 12, 9, None, at), 3, 1),
            ((1, 10, 5, "a", at), 4, -1),
        ]
    }
    plan = BIDS.filter(col("channel").ne("a"), (col("price") * col("bidder")) > lit(40))
    dataflow = single_plan_dataflow(plan, INPUTS, as_of=1)
    run_and_check(spark, tmp_path_factory.mktemp("f"), dataflow, streams, INPUTS, [2, 4, 5])
    assert on_driver == [0, 1, 0]  # the snapshot, [2, 4) and [4, 5): no Spark job for any


def test_an_overflow_on_the_driver_falls_back_to_spark() -> None:
    """``price * bidder`` beyond int64: the driver declines (Spark raises the error, or
    captures it), where the rows without an overflow are filtered on the driver."""
    at = dt.datetime(1970, 1, 1)
    node = linear.FilterNode(
        linear.GetNode(BIDS_ID, BIDS_DESC),
        BIDS.filter((col("price") * col("bidder")) > lit(40)).predicates,
        BIDS_DESC,
    )
    fine = [((1, 10, 5, "a", at), 2, 1), ((1, 1, 5, "a", at), 2, 1)]
    table = to_internal(updates_to_table(BIDS_DESC, fine), BIDS_DESC)
    kept = node._on_driver(table, 1_000_000)
    assert kept is not None and kept.num_rows == 1
    over = to_internal(updates_to_table(BIDS_DESC, [((1, 2**40, 2**40, "b", at), 2, 1)]), BIDS_DESC)
    assert node._on_driver(over, 1_000_000) is None
    assert node._on_driver(table, 1) is None  # beyond driver_rows
