"""Filters over reduces and top-ks over windows on Spark against the reference at every time:
``count(DISTINCT (a, b)) … HAVING`` lowers to a Filter over a Reduce(max) over a dense_rank
Window, and a step whose reduce ran on the driver once handed the filter a table whose
empty Arrow batches made Spark drop rows (a retraction lost: the view kept a stale row)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from spate.ids import GlobalId
from spate.plan import col, dense_rank, max_
from spate.plan.relation import Reduce, RelationExpr, TopK
from spate.plan.window import Window
from spate.testing.plan_strategies import plans, single_plan_dataflow
from spate.testing.update_strategies import input_streams
from tests.plan.fixtures import BIDS, BIDS_DESC, BIDS_ID
from tests.render.oracle import Update, run_and_check

INPUTS = {BIDS_ID: BIDS_DESC}
SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _distinct_pairs(having: bool) -> RelationExpr:
    ranked = BIDS.window(["auction"], order_by=["bidder", "channel"], dr=dense_rank())
    reduced = ranked.reduce(["auction"], n=max_(col("dr")))
    return reduced.filter(col("n") > 1) if having else reduced


def _small(
    streams: Mapping[GlobalId, Sequence[Update]], mod: int = 3
) -> dict[GlobalId, list[Update]]:
    """Auctions and bidders folded into ``0..mod-1``: large groups, many ties."""
    return {
        id: [((r[0] % mod, r[1] % mod, *r[2:]), t, d) for r, t, d in s] for id, s in streams.items()
    }


def test_having_over_distinct_pairs_after_retractions(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> None:
    t0 = dt.datetime(1970, 1, 1)
    a, b = (0, 0, 0, None, t0), (0, 1, 0, None, t0)
    stream: list[Update] = [(a, 0, 1), (a, 0, 1), (b, 0, 1), (a, 1, -1), (b, 2, -1)]
    for having in (False, True):
        dataflow = single_plan_dataflow(_distinct_pairs(having), INPUTS, as_of=0)
        scratch = tmp_path_factory.mktemp("having")
        assert run_and_check(spark, scratch, dataflow, {BIDS_ID: stream}, INPUTS, [2, 4]) >= 4


@settings(SETTINGS, max_examples=6)
@given(data=st.data())
def test_filter_over_reduce_over_window(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    streams = _small(data.draw(input_streams(INPUTS, max_time=9, max_updates=14)))
    as_of = data.draw(st.integers(0, 3))
    dataflow = single_plan_dataflow(_distinct_pairs(True), INPUTS, as_of=as_of)
    steps = [as_of + 2, as_of + 4, as_of + 7]
    run_and_check(spark, tmp_path_factory.mktemp("wr"), dataflow, streams, INPUTS, steps)


def _shape(plan: RelationExpr) -> bool:
    """A Reduce or TopK over a Window somewhere, or a Filter over a Reduce or TopK."""
    from spate.plan.relation import Filter

    for node in plan.walk():
        if isinstance(node, Filter) and isinstance(node.input, (Reduce, TopK)):
            return True
        if isinstance(node, (Reduce, TopK)) and isinstance(node.input, Window):
            return True
    return False


@settings(SETTINGS, max_examples=10)
@given(data=st.data())
def test_random_filters_reduces_topks_windows(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    operators = frozenset({"window", "reduce", "top_k", "filter", "map"})
    plan = data.draw(plans(INPUTS, operators=operators, max_depth=3).filter(_shape))
    streams = _small(data.draw(input_streams(INPUTS, max_time=9, max_updates=14)))
    as_of = data.draw(st.integers(0, 3))
    dataflow = single_plan_dataflow(plan, INPUTS, as_of=as_of)
    steps = [as_of + 2, as_of + 4, as_of + 7]
    run_and_check(spark, tmp_path_factory.mktemp("rnd"), dataflow, streams, INPUTS, steps)
