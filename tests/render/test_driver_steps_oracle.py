"""Reduces and joins computed on the driver (spate.render.operators.driver_reduce and
driver_join) under random insertions and retractions: every export, at every time, equals the
reference evaluator, and the driver path is the one that ran (a step's touched groups, or the
other side of a join, looked up on the driver).

Keys over int64, text (NULL keys fall back to Spark, or match nothing in a join), timestamps;
count, sum, avg, min, max of int64, text and timestamp columns, several at once; a reduce over
a join keyed by the join key (its history from the join's inputs); steps over several times at
once.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from spate.plan.aggregate import AggregateExpr
from spate.plan.builder import avg, col, count, max_, min_, sum_
from spate.plan.relation import Get
from spate.render.batch import EngineSettings
from spate.render.operators import (
    driver_join,
    driver_reduce,
    join,
    join_history,
    keyed,
    reduce_state,
)
from spate.testing.plan_strategies import single_plan_dataflow
from spate.testing.update_strategies import input_streams
from tests.plan.fixtures import AUCTIONS_DESC, AUCTIONS_ID, BIDS_DESC, BIDS_ID
from tests.render.oracle import run_and_check

INPUTS = {BIDS_ID: BIDS_DESC}
AGGREGATES: list[AggregateExpr] = [
    count(),
    count(col("channel")),
    sum_(col("price")),
    avg(col("price")),
    min_(col("price")),
    max_(col("price")),
    min_(col("channel")),
    max_(col("date_time")),
    max_(col("bidder")),
]


@pytest.fixture
def driver_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many steps the driver path computed (and did not hand back to Spark)."""
    runs: list[int] = []
    real = driver_reduce.reduce_on_driver

    def counting(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        if out is not None:
            runs.append(out.num_rows)
        return out

    monkeypatch.setattr(keyed, "reduce_on_driver", counting)
    monkeypatch.setattr(reduce_state, "reduce_on_driver", counting)  # keys read from history
    return runs


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_driver_reduces_match_the_reference_under_retractions(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    driver_runs: list[int],
    data: st.DataObject,
) -> None:
    key = data.draw(
        st.sampled_from([["auction"], ["auction", "channel"], ["date_time"], ["bidder"]])
    )
    picked = data.draw(st.lists(st.sampled_from(AGGREGATES), min_size=1, max_size=4))
    plan = Get(BIDS_ID, BIDS_DESC).reduce(key, **{f"a{i}": a for i, a in enumerate(picked)})
    streams = data.draw(input_streams(INPUTS, max_time=9, max_updates=16))
    cuts = sorted(set(data.draw(st.lists(st.integers(2, 10), min_size=2, max_size=5))))
    dataflow = single_plan_dataflow(plan, INPUTS, as_of=1)
    run_and_check(spark, tmp_path_factory.mktemp("driver"), dataflow, streams, INPUTS, cuts)


def test_a_retracted_maximum_is_recomputed_on_the_driver(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, driver_runs: list[int]
) -> None:
    """The max of a group whose maximum is retracted falls back to the next value, within a
    step of two times; and the step ran no Spark job for the reduce."""
    at = dt.datetime(1970, 1, 1)
    rows = [(1, 10, v, "a", at + dt.timedelta(microseconds=v)) for v in (5, 9, 7)]
    streams = {
        BIDS_ID: [
            *[(r, 0, 1) for r in rows],
            (rows[1], 3, -1),  # the maximum goes: 7 is the max from time 3
            ((1, 11, 20, None, at), 4, 1),  # a new maximum
            ((2, 11, 1, "b", at), 4, 1),
        ]
    }
    plan = Get(BIDS_ID, BIDS_DESC).reduce(
        ["auction"], top=max_(col("price")), n=count(), total=sum_(col("price"))
    )
    dataflow = single_plan_dataflow(plan, INPUTS, as_of=1)
    run_and_check(spark, tmp_path_factory.mktemp("max"), dataflow, streams, INPUTS, [2, 5, 6])
    assert driver_runs, "the step over [2, 5) reduced on the driver"


@pytest.fixture
def driver_joins(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many joins the driver path computed."""
    runs: list[int] = []
    real = driver_join.join_on_driver

    def counting(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        if out is not None:
            runs.append(out.num_rows)
        return out

    monkeypatch.setattr(join, "join_on_driver", counting)
    monkeypatch.setattr(join_history, "join_on_driver", counting)
    return runs


BOTH = {BIDS_ID: BIDS_DESC, AUCTIONS_ID: AUCTIONS_DESC}


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_driver_joins_match_the_reference_under_retractions(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    driver_joins: list[int],
    data: st.DataObject,
) -> None:
    bids, auctions = Get(BIDS_ID, BIDS_DESC), Get(AUCTIONS_ID, AUCTIONS_DESC)
    on = data.draw(st.sampled_from([[("auction", "id")], [("auction", "id"), ("channel", "item")]]))
    joined = bids.join(auctions, on=on)
    if data.draw(st.booleans()):  # a reduce over it, keyed by the join key
        picked = data.draw(st.lists(st.sampled_from(AGGREGATES), min_size=1, max_size=3))
        plan = joined.reduce(["auction"], **{f"a{i}": a for i, a in enumerate(picked)})
    else:
        plan = joined.project("auction", "price", "channel", "item", "seller")
    streams = data.draw(input_streams(BOTH, max_time=9, max_updates=14))
    cuts = sorted(set(data.draw(st.lists(st.integers(2, 10), min_size=2, max_size=5))))
    dataflow = single_plan_dataflow(plan, BOTH, as_of=1)
    run_and_check(spark, tmp_path_factory.mktemp("join"), dataflow, streams, BOTH, cuts)


def test_a_join_step_and_the_reduce_above_it_run_no_spark_job(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    driver_joins: list[int],
    driver_runs: list[int],
) -> None:
    at = dt.datetime(1970, 1, 1)
    streams = {
        BIDS_ID: [
            ((1, 10, 5, "a", at), 0, 1),
            ((2, 10, 6, "a", at), 0, 1),
            ((1, 11, 9, None, at), 3, 1),
            ((1, 10, 5, "a", at), 4, -1),
            ((2, 12, 1, "b", at), 4, 1),
        ],
        AUCTIONS_ID: [
            ((1, "x", 7, 1, 1.0, at), 0, 1),
            ((2, "y", 8, 1, 1.0, at), 0, 1),
            ((2, "y", 8, 1, 1.0, at), 3, -1),
            ((2, "z", 9, 1, 1.0, at), 3, 1),
        ],
    }
    bids, auctions = Get(BIDS_ID, BIDS_DESC), Get(AUCTIONS_ID, AUCTIONS_DESC)
    plan = bids.join(auctions, on=[("auction", "id")]).reduce(
        ["auction"], top=max_(col("price")), n=count()
    )
    dataflow = single_plan_dataflow(plan, BOTH, as_of=1)
    run_and_check(spark, tmp_path_factory.mktemp("j"), dataflow, streams, BOTH, [2, 5, 6])
    assert driver_joins and driver_runs
    # Deltas above small_rows (the large paths for Spark) are still the driver's up to
    # driver_rows; with driver_rows=0 Spark computes every step, alike.
    for driver_rows in (1_000_000, 0):
        driver_joins.clear()
        driver_runs.clear()
        large = EngineSettings(small_rows=0, driver_rows=driver_rows)
        scratch = tmp_path_factory.mktemp("large")
        run_and_check(spark, scratch, dataflow, streams, BOTH, [2, 5, 6], settings=large)
        assert bool(driver_joins and driver_runs) == (driver_rows > 0)
