"""Window on Spark against the reference at every time >= as_of: fixed plans (every function,
partitioned or not, over a join keyed by the partition column, large deltas) and random plans
with windows, under random insertions and retractions fed in random steps.

Hypothesis prints the falsifying example; every example's input streams come from its draws.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from spate.ids import GlobalId
from spate.plan import (
    Join,
    Project,
    avg,
    bool_and,
    bool_or,
    col,
    count,
    cume_dist,
    dense_rank,
    desc,
    first_value,
    lag,
    last_value,
    lead,
    lit,
    max_,
    min_,
    nth_value,
    ntile,
    percent_rank,
    range_between,
    rank,
    row_number,
    rows_between,
    string_agg,
    sum_,
)
from spate.plan.builder import asc
from spate.plan.relation import RelationExpr
from spate.plan.window import Window
from spate.render.batch import EngineSettings
from spate.repr import FLOAT64, numeric
from spate.testing.plan_strategies import plans, single_plan_dataflow
from spate.testing.update_strategies import input_streams
from tests.plan.fixtures import (
    AUCTIONS,
    AUCTIONS_DESC,
    AUCTIONS_ID,
    BIDS,
    BIDS_DESC,
    BIDS_ID,
    PEOPLE_DESC,
    PEOPLE_ID,
)
from tests.render.oracle import EVERY_DELTA_LARGE, Update, run_and_check

INPUTS = {BIDS_ID: BIDS_DESC, AUCTIONS_ID: AUCTIONS_DESC, PEOPLE_ID: PEOPLE_DESC}
SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

PLANS: dict[str, RelationExpr] = {
    "ranking": BIDS.window(
        ["auction"],
        order_by=[desc("price")],
        rn=row_number(),
        r=rank(),
        dr=dense_rank(),
        prev=lag(col("price")),
        nxt=lead(col("channel"), 2, "none"),
        first=first_value(col("bidder")),
        last=last_value(col("channel")),
        second=nth_value(col("bidder"), 2),
        tile=ntile(2),
        pr=percent_rank(),
        cd=cume_dist(),
    ),
    "running_aggregates": BIDS.window(
        ["auction"],
        order_by=[asc("channel", nulls_last=False)],
        n=count(),
        s=sum_(col("price")),
        a=avg(col("price")),
        lo=min_(col("channel")),
        hi=max_(col("date_time")),
    ),
    "one_partition": Project(BIDS, (0, 2, 3)).window(
        order_by=["price"], rn=row_number(), whole=count(col("channel")), back=lag(col("price"), 0)
    ),
    "numeric_float_bool": BIDS.map(
        d=col("price").cast(numeric(10, 2)),
        f=col("price").cast(FLOAT64) * 0.25,
        b=col("price") > 1,
    ).window(
        ["auction"],
        order_by=[desc("bidder", nulls_last=True)],
        s=sum_(col("d")),
        a=avg(col("d")),
        fs=sum_(col("f")),
        fa=avg(col("f")),
        all_=bool_and(col("b")),
        any_=bool_or(col("b")),
        prev=lag(col("d"), 1, lit(Decimal("0.5")).cast(numeric(6, 4))),
    ),
    "no_order": BIDS.window(
        ["bidder"],
        s=sum_(col("price")),
        r=rank(),
        rn=row_number(),
        last=last_value(col("price")),
        pr=percent_rank(),
        cd=cume_dist(),
        third=nth_value(col("date_time"), 3),
    ),
    "rows_frames": BIDS.window(  # stacked: a frame that may be empty under one that may not
        ["auction"],
        order_by=[desc("price")],
        frame=rows_between(1, 2),
        n=count(),
        a=avg(col("price")),
        lo=min_(col("channel")),
        after=last_value(col("bidder")),
    ).window(
        ["auction"],
        order_by=["price"],
        frame=rows_between(-1, 1),
        s=sum_(col("price")),
        first=first_value(col("bidder")),
        last=last_value(col("channel")),
        second=nth_value(col("bidder"), 2),
        names=string_agg(col("channel"), ","),
    ),
    "range_frames": Project(BIDS, (0, 2, 3))
    .window(
        order_by=[desc("price")],
        frame=range_between(0, 0),
        peers=sum_(col("price")),
        first_peer=first_value(col("channel")),
        peer_names=string_agg(col("channel"), ","),
    )
    .window(
        ["auction"],
        order_by=["price"],
        frame=range_between(0, None),
        n=count(),
        first=first_value(col("price")),
        last=last_value(col("channel")),
        second=nth_value(col("channel"), 2),
        names=string_agg(col("channel"), "|"),
    ),
    "over_join": Join((BIDS, AUCTIONS), ((0, 5),)).window(
        ["auction"], order_by=[desc("price")], rn=row_number(), top=max_(col("reserve"))
    ),
}


@st.composite
def _steps(draw: st.DrawFn) -> tuple[int, list[int]]:
    as_of = draw(st.integers(0, 3))
    cuts = sorted(set(draw(st.lists(st.integers(as_of + 1, 10), min_size=1, max_size=3))))
    if cuts[-1] < as_of + 6:  # always cover at least 6 times
        cuts.append(as_of + 6)
    return as_of, cuts


def _fold(streams: dict[GlobalId, list[Update]]) -> dict[GlobalId, list[Update]]:
    """Integers folded into 0..2 and texts into "a", "b" or NULL, so that partitions are large
    and ORDER BY values tie (the tie-break decides row_number, lag and lead); a function of the
    row, so every retraction still has its insertion."""

    def fold(v: object) -> object:
        if isinstance(v, bool) or v is None:
            return v
        if isinstance(v, int):
            return abs(v) % 3
        if isinstance(v, str):
            return "ab"[len(v) % 2]
        return v

    return {
        id: [(tuple(fold(v) for v in row), t, d) for row, t, d in stream]
        for id, stream in streams.items()
    }


def _check(
    spark: SparkSession,
    tmp: pytest.TempPathFactory,
    plan: RelationExpr,
    data: st.DataObject,
    *,
    folded: bool = True,
    settings: EngineSettings | None = None,
) -> None:
    # at least 8 bid updates: a few rows make few ties, and most of the plans read the bids
    streams = data.draw(
        input_streams(INPUTS, max_time=9, max_updates=14).filter(lambda s: len(s[BIDS_ID]) >= 8)
    )
    if folded:
        streams = _fold(streams)
    as_of, cuts = data.draw(_steps())
    dataflow = single_plan_dataflow(plan, INPUTS, as_of=as_of)
    scratch = tmp.mktemp("window")
    assert run_and_check(spark, scratch, dataflow, streams, INPUTS, cuts, settings) >= 1


@pytest.mark.parametrize("name", sorted(PLANS))
@settings(SETTINGS, max_examples=4)
@given(data=st.data())
def test_fixed_window_plans_match_reference(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, name: str, data: st.DataObject
) -> None:
    _check(spark, tmp_path_factory, PLANS[name], data)


@settings(SETTINGS, max_examples=3)
@given(data=st.data())
def test_window_with_large_deltas_matches_reference(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    _check(spark, tmp_path_factory, PLANS["ranking"], data, settings=EVERY_DELTA_LARGE)
    _check(spark, tmp_path_factory, PLANS["over_join"], data, settings=EVERY_DELTA_LARGE)


@settings(SETTINGS, max_examples=20)
@given(data=st.data())
def test_random_window_plans_match_reference(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    operators = data.draw(
        st.sampled_from(
            [
                frozenset({"window", "project", "filter", "map"}),
                frozenset({"window", "join", "reduce", "top_k", "union", "negate"}),
            ]
        )
    )
    plan = data.draw(
        plans(INPUTS, operators=operators, max_depth=2).filter(
            lambda p: any(isinstance(n, Window) for n in p.walk())
        )
    )
    _check(spark, tmp_path_factory, plan, data, folded=data.draw(st.booleans()))
