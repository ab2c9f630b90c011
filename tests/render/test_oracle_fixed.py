"""Fixed plans on Spark against the reference at every time (no scalar expressions needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from spate.plan import (
    Distinct,
    Join,
    Negate,
    Project,
    Threshold,
    TopK,
    Union,
    col,
    count,
    max_,
    string_agg,
    sum_,
)
from spate.plan.finishing import ColumnOrder
from spate.plan.relation import RelationExpr
from spate.testing.plan_strategies import single_plan_dataflow
from spate.testing.update_strategies import input_streams
from tests.plan.fixtures import AUCTIONS, AUCTIONS_DESC, AUCTIONS_ID, BIDS, BIDS_DESC, BIDS_ID
from tests.render.oracle import make_every_delta_large, run_and_check

INPUTS = {BIDS_ID: BIDS_DESC, AUCTIONS_ID: AUCTIONS_DESC}

PLANS: dict[str, RelationExpr] = {
    "project": Project(BIDS, (2, 0)),
    "join": Join((BIDS, AUCTIONS), ((0, 5),)),
    "self_join": Join((BIDS, BIDS), ((0, 5),)),
    "cross": Join((Project(BIDS, (0,)), Project(AUCTIONS, (0,))), ()),
    "distinct": Distinct(Project(BIDS, (0, 3))),
    "threshold_union_negate": Threshold(
        Union((Project(BIDS, (0,)), Negate(Project(AUCTIONS, (0,)))))
    ),
    "top2": TopK(BIDS, (0,), (ColumnOrder(2, desc=True),), limit=2),
    "top_offset": TopK(Project(BIDS, (0, 3)), (), (ColumnOrder(1, nulls_last=False),), 2, 1),
}


@st.composite
def step_plan(draw: st.DrawFn) -> tuple[int, list[int]]:
    as_of = draw(st.integers(0, 3))
    cuts = sorted(set(draw(st.lists(st.integers(as_of + 1, 10), min_size=1, max_size=3))))
    return as_of, cuts


@pytest.mark.parametrize("name", sorted(PLANS))
@settings(max_examples=4)
@given(data=st.data())
def test_fixed_plan_matches_reference_at_every_time(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, name: str, data: st.DataObject
) -> None:
    plan = PLANS[name]
    streams = data.draw(input_streams(INPUTS, max_time=9, max_updates=12))
    as_of, cuts = data.draw(step_plan())
    dataflow = single_plan_dataflow(plan, INPUTS, as_of=as_of)
    scratch: Path = tmp_path_factory.mktemp("oracle")
    checked = run_and_check(spark, scratch, dataflow, streams, INPUTS, cuts)
    assert checked >= 1


@pytest.mark.parametrize("name", ["join", "self_join", "distinct", "top2", "top_offset"])
@settings(max_examples=3)
@given(data=st.data())
def test_plans_match_reference_when_spark_reads_the_arrangements(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, name: str, data: st.DataObject
) -> None:
    """The same plans with key lookups off (arrangements too large to keep on the driver):
    Spark reads the arrangements and selects the touched keys itself."""
    import spate.render.arrangement as arrangement

    plan = PLANS[name]
    streams = data.draw(input_streams(INPUTS, max_time=9, max_updates=12))
    as_of, cuts = data.draw(step_plan())
    dataflow = single_plan_dataflow(plan, INPUTS, as_of=as_of)
    scratch: Path = tmp_path_factory.mktemp("oracle")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(arrangement, "LOOKUP_MAX_ROWS", -1)
        checked = run_and_check(spark, scratch, dataflow, streams, INPUTS, cuts)
    assert checked >= 1


JOIN_FED: dict[str, RelationExpr] = {
    "join_reduce": Join((BIDS, AUCTIONS), ((0, 5),))
    .project(0, 2)
    .reduce([0], top=max_(col("price"))),
    "join_reduce_other_side": Join((BIDS, AUCTIONS), ((0, 5),))
    .project(7, 2)
    .reduce([0], top=max_(col("price")), n=count()),
    "join_distinct_both_sides": Distinct(Project(Join((BIDS, AUCTIONS), ((0, 5),)), (1, 7))),
}


@pytest.mark.parametrize("name", sorted(JOIN_FED))
@settings(max_examples=8)
@given(data=st.data())
def test_keyed_operators_fed_by_joins_match_reference(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, name: str, data: st.DataObject
) -> None:
    """A keyed operator whose input is a join, its key from the side of the delta, from the
    other side, or from both (the keyed operator's lookups then follow the join's)."""
    plan = JOIN_FED[name]
    # join keys (bids.auction, auctions.id) folded into 0..2 so that most updates join;
    # the folding is a function of the row, so every retraction still has its insertion
    streams = {
        id: [((abs(row[0]) % 3, *row[1:]), t, d) for row, t, d in stream]
        for id, stream in data.draw(input_streams(INPUTS, max_time=9, max_updates=16)).items()
    }
    as_of, cuts = data.draw(step_plan())
    dataflow = single_plan_dataflow(plan, INPUTS, as_of=as_of)
    scratch: Path = tmp_path_factory.mktemp("oracle")
    checked = run_and_check(spark, scratch, dataflow, streams, INPUTS, cuts)
    assert checked >= 1


LARGE_PATH_PLANS: dict[str, RelationExpr] = {
    **{name: PLANS[name] for name in ("project", "join", "distinct", "top2")},
    "reduce": BIDS.reduce(
        ["auction"],
        top=max_(col("price")),
        n=count(),
        total=sum_(col("price")),
        channels=string_agg(col("channel"), ","),
        seen=count(col("channel")),
    ),
    "join_reduce": Join((BIDS, AUCTIONS), ((0, 5),))
    .project(0, 2)
    .reduce([0], top=max_(col("price"))),
}


@pytest.mark.parametrize("name", sorted(LARGE_PATH_PLANS))
@settings(max_examples=3)
@given(data=st.data())
def test_plans_match_reference_on_the_large_paths(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, name: str, data: st.DataObject
) -> None:
    """Every delta treated as large: Parquet instead of Arrow, snapshots and what is projected
    from them left unconsolidated, a reduce hydrated without consolidating its input when no
    diff is negative (and with it when one is)."""
    plan = LARGE_PATH_PLANS[name]
    streams = data.draw(input_streams(INPUTS, max_time=9, max_updates=12))
    as_of, cuts = data.draw(step_plan())
    dataflow = single_plan_dataflow(plan, INPUTS, as_of=as_of)
    scratch: Path = tmp_path_factory.mktemp("oracle")
    with pytest.MonkeyPatch.context() as mp:
        make_every_delta_large(mp)
        checked = run_and_check(spark, scratch, dataflow, streams, INPUTS, cuts)
    assert checked >= 1
