"""Fixed plans on Spark against the reference at every time (no scalar expressions needed).

``SPATE_SPARK_EXAMPLES=<n>`` raises the number of random keyed-over-join plans (nightly runs).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from spate.ids import GlobalId
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
    lit,
    max_,
    string_agg,
    sum_,
)
from spate.plan.finishing import ColumnOrder
from spate.plan.relation import RelationExpr
from spate.render.batch import EngineSettings
from spate.testing.plan_strategies import single_plan_dataflow
from spate.testing.update_strategies import input_streams
from tests.plan.fixtures import AUCTIONS, AUCTIONS_DESC, AUCTIONS_ID, BIDS, BIDS_DESC, BIDS_ID
from tests.render.oracle import EVERY_DELTA_LARGE, Update, run_and_check

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


def check_plan(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
    plan: RelationExpr,
    *,
    joined: bool = False,
    engine: EngineSettings | None = None,
) -> None:
    """Random input streams (``joined``: longer, join keys and texts folded so that most
    updates join) fed to ``plan`` in random steps; every export checked at every time."""
    streams = data.draw(input_streams(INPUTS, max_time=9, max_updates=16 if joined else 12))
    if joined:
        streams = _fold(streams)
    as_of, cuts = data.draw(step_plan())
    dataflow = single_plan_dataflow(plan, INPUTS, as_of=as_of)
    scratch: Path = tmp_path_factory.mktemp("oracle")
    assert run_and_check(spark, scratch, dataflow, streams, INPUTS, cuts, engine) >= 1


@pytest.mark.parametrize("name", sorted(PLANS))
@settings(max_examples=4)
@given(data=st.data())
def test_fixed_plan_matches_reference_at_every_time(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, name: str, data: st.DataObject
) -> None:
    check_plan(spark, tmp_path_factory, data, PLANS[name])


@pytest.mark.parametrize("name", ["join", "self_join", "distinct", "top2", "top_offset"])
@settings(max_examples=3)
@given(data=st.data())
def test_plans_match_reference_when_spark_reads_the_arrangements(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, name: str, data: st.DataObject
) -> None:
    """The same plans with key lookups off (arrangements too large to keep on the driver):
    Spark reads the arrangements and selects the touched keys itself."""
    import spate.render.arrangement as arrangement

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(arrangement, "LOOKUP_MAX_ROWS", -1)
        check_plan(spark, tmp_path_factory, data, PLANS[name])


JOIN_FED: dict[str, RelationExpr] = {
    "join_reduce": Join((BIDS, AUCTIONS), ((0, 5),))
    .project(0, 2)
    .reduce([0], top=max_(col("price"))),
    "join_reduce_other_side": Join((BIDS, AUCTIONS), ((0, 5),))
    .project(7, 2)
    .reduce([0], top=max_(col("price")), n=count()),
    "join_distinct_both_sides": Distinct(Project(Join((BIDS, AUCTIONS), ((0, 5),)), (1, 7))),
    # keyed by a join key: the history comes from the join's inputs (join_history)
    "join_filter_top2": TopK(
        Join((BIDS, AUCTIONS), ((0, 5),)).filter(col("price") > lit(0)),
        (5,),
        (ColumnOrder(2, desc=True),),
        limit=2,
    ),
    "three_way_join_reduce": Join((BIDS, AUCTIONS, BIDS), ((0, 5, 11),))
    .project(11, 13, 2)
    .reduce([0], top=max_(col("price")), n=count()),
    "text_key_join_reduce": Join((BIDS, AUCTIONS), ((3, 6),))
    .project(6, 2)
    .reduce([0], top=max_(col("price")), n=count()),
}
FUSED = ["join_filter_top2", "join_reduce", "text_key_join_reduce", "three_way_join_reduce"]


def _fold(streams: dict[GlobalId, list[Update]]) -> dict[GlobalId, list[Update]]:
    """Join keys (bids.auction, auctions.id) folded into 0..2, and texts (bids.channel,
    auctions.item) into "a", "b" or NULL, so that most updates join; a function of the row,
    so every retraction still has its insertion."""

    def text(v: object) -> object:
        return None if v is None else "ab"[len(str(v)) % 2]

    out: dict[GlobalId, list[Update]] = {}
    for id, stream in streams.items():
        column = 3 if id == BIDS_ID else 1
        out[id] = [
            (
                tuple(
                    abs(v) % 3 if i == 0 else text(v) if i == column else v  # type: ignore[arg-type]
                    for i, v in enumerate(row)
                ),
                t,
                d,
            )
            for row, t, d in stream
        ]
    return out


@pytest.mark.parametrize("name", sorted(JOIN_FED))
@settings(max_examples=8)
@given(data=st.data())
def test_keyed_operators_fed_by_joins_match_reference(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, name: str, data: st.DataObject
) -> None:
    """A keyed operator whose input is a join, its key from the side of the delta, from the
    other side, or from both (the keyed operator's lookups then follow the join's)."""
    check_plan(spark, tmp_path_factory, data, JOIN_FED[name], joined=True)


@pytest.mark.parametrize("name", FUSED)
@settings(max_examples=3)
@given(data=st.data())
def test_keyed_operators_over_joins_when_spark_reads_the_join_arrangements(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, name: str, data: st.DataObject
) -> None:
    """The history read from the join's inputs without lookups: Spark selects the touched
    keys (an IN list for integer keys, a semi-join for text)."""
    import spate.render.arrangement as arrangement

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(arrangement, "LOOKUP_MAX_ROWS", -1)
        check_plan(spark, tmp_path_factory, data, JOIN_FED[name], joined=True)


@st.composite
def keyed_over_join(draw: st.DrawFn) -> RelationExpr:
    """A Reduce or TopK keyed by a column of a join's key class (read from the join's inputs):
    two or three inputs, sometimes a second class (text) and a filter, random aggregates or
    ordering."""
    three = draw(st.booleans())
    operands = (BIDS, AUCTIONS, BIDS) if three else (BIDS, AUCTIONS)
    key_class = (0, 5, 11) if three else (0, 5)
    classes = [key_class]
    if draw(st.booleans()):
        classes.append((3, 6))  # bids.channel = auctions.item
    plan: RelationExpr = Join(operands, tuple(classes))
    if draw(st.booleans()):
        plan = plan.filter(col("price") > lit(draw(st.integers(-5, 5))))
    key = draw(st.sampled_from(key_class))
    if draw(st.booleans()):
        options = {
            "top": max_(col("price")),
            "n": count(),
            "total": sum_(col("price")),
            "channels": string_agg(col("channel"), ","),
        }
        names = draw(
            st.lists(st.sampled_from(sorted(options)), min_size=1, max_size=3, unique=True)
        )
        return plan.reduce([key], **{n: options[n] for n in names})
    order = ColumnOrder(2, desc=draw(st.booleans()))
    limit = draw(st.sampled_from([1, 2, 3]))
    return TopK(plan, (key,), (order,), limit, draw(st.sampled_from([0, 1])))


@settings(max_examples=int(os.environ.get("SPATE_SPARK_EXAMPLES", "12")), deadline=None)
@given(data=st.data())
def test_random_keyed_operators_over_joins_match_reference(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    from spate.render.operators.build import Builder
    from spate.render.operators.keyed import KeyedNode

    plan = data.draw(keyed_over_join())
    node = Builder("t").build(plan)
    assert isinstance(node, KeyedNode) and node.joined is not None
    check_plan(spark, tmp_path_factory, data, plan, joined=True)


def test_keyed_operators_read_the_join_inputs_only_when_keyed_by_a_join_key() -> None:
    from spate.render.operators.build import Builder
    from spate.render.operators.keyed import KeyedNode

    for name, plan in JOIN_FED.items():
        node = Builder("t").build(plan)
        assert isinstance(node, KeyedNode)
        assert (node.joined is not None) == (name in FUSED), name


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
    check_plan(spark, tmp_path_factory, data, LARGE_PATH_PLANS[name], engine=EVERY_DELTA_LARGE)
