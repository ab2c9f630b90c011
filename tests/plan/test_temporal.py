"""Temporal filters: predicates on now() become per-row validity intervals [lower, upper)."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spate.plan import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    ColumnRef,
    Filter,
    InvalidPlan,
    Literal,
    Now,
    UnaryFunc,
    col,
    interval,
    now,
    now_ms,
)
from spate.plan.temporal import conjuncts, temporal_bounds
from spate.repr import INT64, TIMESTAMP
from spate.testing.plan_strategies import small_rows
from spate.testing.reference import evaluate, validity_interval
from tests.plan.fixtures import BIDS, BIDS_ID

ONE = Literal(1, INT64)


def plus_one(e: object) -> CallBinary:
    return CallBinary(BinaryFunc.ADD, e, ONE)  # type: ignore[arg-type]


def test_int64_bounds() -> None:
    p = ColumnRef(2)
    cases = {
        BinaryFunc.LT: ((), (p,)),
        BinaryFunc.LE: ((), (plus_one(p),)),
        BinaryFunc.GT: ((plus_one(p),), ()),
        BinaryFunc.GE: ((p,), ()),
        BinaryFunc.EQ: ((p,), (plus_one(p),)),
    }
    for op, (lower, upper) in cases.items():
        b = temporal_bounds([CallBinary(op, Now(INT64), p)])
        assert (b.lower, b.upper, b.predicates) == (lower, upper, ()), op
        # The mirrored form means the same.
        mirrored = {
            BinaryFunc.LT: BinaryFunc.GT,
            BinaryFunc.LE: BinaryFunc.GE,
            BinaryFunc.GT: BinaryFunc.LT,
            BinaryFunc.GE: BinaryFunc.LE,
            BinaryFunc.EQ: BinaryFunc.EQ,
        }[op]
        assert temporal_bounds([CallBinary(mirrored, p, Now(INT64))]) == b


def test_timestamp_bounds_round_toward_the_row() -> None:
    ts = ColumnRef(4)
    floor = CallUnary(UnaryFunc.EPOCH_MS, ts)
    ceil = CallUnary(UnaryFunc.EPOCH_MS_CEIL, ts)
    assert temporal_bounds([CallBinary(BinaryFunc.LT, Now(TIMESTAMP), ts)]).upper == (ceil,)
    assert temporal_bounds([CallBinary(BinaryFunc.LE, Now(TIMESTAMP), ts)]).upper == (
        plus_one(floor),
    )
    assert temporal_bounds([CallBinary(BinaryFunc.GT, Now(TIMESTAMP), ts)]).lower == (
        plus_one(floor),
    )
    assert temporal_bounds([CallBinary(BinaryFunc.GE, Now(TIMESTAMP), ts)]).lower == (ceil,)


def test_filter_exposes_its_bounds() -> None:
    f = BIDS.filter(
        (now() >= col("date_time")) & (col("price") > 3),
        now() < col("date_time") + interval(hours=1),
    )
    b = f.temporal_bounds()
    assert b.is_temporal() and f.is_temporal()
    assert b.predicates == (CallBinary(BinaryFunc.GT, ColumnRef(2), Literal(3, INT64)),)
    assert len(b.lower) == 1 and len(b.upper) == 1
    assert not BIDS.filter(col("price") > 3).is_temporal()
    assert (
        len(conjuncts([CallBinary(BinaryFunc.AND, ONE, CallBinary(BinaryFunc.AND, ONE, ONE))])) == 3
    )


def test_unsupported_forms_are_refused_at_construction() -> None:
    for bad in [
        now_ms().ne(col("price")),
        now_ms() + 1 < col("price"),
        (now_ms() < col("price")) | (col("price") > 3),
        ~(now_ms() < col("price")),
        now_ms() < now_ms(),
        now_ms().is_null(),
    ]:
        with pytest.raises(InvalidPlan, match=r"^Filter: unsupported use of now\(\)"):
            BIDS.filter(bad)


TEMPORAL_OPS = [BinaryFunc.LT, BinaryFunc.LE, BinaryFunc.GT, BinaryFunc.GE, BinaryFunc.EQ]


@st.composite
def temporal_filters(draw: st.DrawFn) -> Filter:
    preds = []
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(TEMPORAL_OPS))
        shift = draw(st.integers(-2, 4))
        if draw(st.booleans()):
            now_, bound = now_ms(), col("price") + shift
        else:
            now_, bound = now(), col("date_time") + interval(ms=shift)
        pred = CallBinary(op, now_, bound) if draw(st.booleans()) else CallBinary(op, bound, now_)
        preds.append(pred)
    if draw(st.booleans()):
        preds.append(col("channel").is_not_null())
    return BIDS.filter(*preds)


@settings(max_examples=100)
@given(temporal_filters(), st.lists(small_rows(BIDS.desc), min_size=1, max_size=4))
def test_validity_interval_matches_evaluation_at_every_time(f: Filter, rows: list[tuple]) -> None:
    bounds = f.temporal_bounds()
    cols = BIDS.desc.columns
    intervals = {tuple(r): validity_interval(bounds, cols, tuple(r)) for r in rows}
    contents = Counter(tuple(r) for r in rows)
    for t in range(0, 20):
        kept = evaluate(f, {BIDS_ID: contents}, t)
        for row, iv in intervals.items():
            inside = iv is not None and iv[0] <= t and (iv[1] is None or t < iv[1])
            assert (row in kept) == inside, (row, t, iv)


def test_validity_interval_of_sub_millisecond_timestamps() -> None:
    f = BIDS.filter(now() > col("date_time"), now() <= col("date_time") + interval(ms=2))
    row = (1, 1, 1, None, dt.datetime(1970, 1, 1, 0, 0, 0, 3_250))  # 3.25 ms
    # now() > 3.25 ms: t >= 4; now() <= 5.25 ms: t <= 5.
    assert validity_interval(f.temporal_bounds(), BIDS.desc.columns, row) == (4, 6)
