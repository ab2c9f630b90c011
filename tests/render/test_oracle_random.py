"""Random plans and random update streams (insertions and retractions over >= 6 times) on
Spark: every export, at every time >= as_of, equals the reference evaluator on the inputs
accumulated at that time. Steps cover several times at once, so exactness inside a step's
interval is checked, not only at its ends.

About 110 Spark examples in all (hypothesis prints the falsifying example and its seed).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from spate.plan.relation import RelationExpr
from spate.testing.plan_strategies import plans, single_plan_dataflow
from spate.testing.update_strategies import input_streams
from tests.plan.fixtures import (
    AUCTIONS_DESC,
    AUCTIONS_ID,
    BIDS_DESC,
    BIDS_ID,
    PEOPLE_DESC,
    PEOPLE_ID,
)
from tests.render.oracle import run_and_check

INPUTS = {BIDS_ID: BIDS_DESC, AUCTIONS_ID: AUCTIONS_DESC, PEOPLE_ID: PEOPLE_DESC}

FAMILIES: dict[str, tuple[frozenset[str], int]] = {
    # name: (operators, examples)
    "per_row": (
        frozenset({"constant", "map", "filter", "project", "flat_map", "union", "arrange_by"}),
        20,
    ),
    "join_reduce_topk": (frozenset({"join", "reduce", "top_k", "project", "filter"}), 25),
    "union_negate_threshold": (
        frozenset({"union", "negate", "threshold", "distinct", "project"}),
        20,
    ),
    "temporal_reduce": (frozenset({"temporal_filter", "reduce", "project", "map"}), 20),
    "everything": (
        frozenset(
            {
                "constant",
                "map",
                "filter",
                "temporal_filter",
                "project",
                "flat_map",
                "join",
                "reduce",
                "top_k",
                "distinct",
                "negate",
                "threshold",
                "union",
                "arrange_by",
            }
        ),
        25,
    ),
}


@st.composite
def case(draw: st.DrawFn, operators: frozenset[str]) -> tuple[RelationExpr, dict, int, list[int]]:  # type: ignore[type-arg]
    plan = draw(plans(INPUTS, operators=operators, max_depth=2))
    streams = draw(input_streams(INPUTS, max_time=9, max_updates=12))
    as_of = draw(st.integers(0, 3))
    cuts = sorted(set(draw(st.lists(st.integers(as_of + 1, 10), min_size=1, max_size=3))))
    if cuts[-1] < as_of + 6:  # always cover at least 6 times
        cuts.append(as_of + 6)
    return plan, streams, as_of, cuts


def _run(
    spark: SparkSession, tmp: pytest.TempPathFactory, family: str, data: st.DataObject
) -> None:
    operators, _ = FAMILIES[family]
    plan, streams, as_of, cuts = data.draw(case(operators))
    dataflow = single_plan_dataflow(plan, INPUTS, as_of=as_of)
    run_and_check(spark, tmp.mktemp("oracle"), dataflow, streams, INPUTS, cuts)


def _test(family: str):  # type: ignore[no-untyped-def]
    examples = FAMILIES[family][1]

    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(data=st.data())
    def test(
        spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
    ) -> None:
        _run(spark, tmp_path_factory, family, data)

    test.__name__ = f"test_{family}_matches_reference_at_every_time"
    return test


test_per_row = _test("per_row")
test_join_reduce_topk = _test("join_reduce_topk")
test_union_negate_threshold = _test("union_negate_threshold")
test_temporal_reduce = _test("temporal_reduce")
test_everything = _test("everything")
