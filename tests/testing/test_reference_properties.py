"""Algebraic properties of the reference evaluator on random well-typed plans and inputs."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from spate.codec import decode, encode
from spate.ids import GlobalId
from spate.plan import (
    BinaryFunc,
    CallBinary,
    ColumnRef,
    Distinct,
    Filter,
    Join,
    Negate,
    Reduce,
    RelationExpr,
    Threshold,
    TopK,
    Union,
)
from spate.repr import Row
from spate.testing.plan_strategies import (
    OPERATORS,
    input_streams,
    plans,
    single_plan_dataflow,
)
from spate.testing.reference import (
    accumulate,
    evaluate,
    expected_contents,
    expected_updates,
)
from tests.plan.fixtures import (
    AUCTIONS_DESC,
    AUCTIONS_ID,
    BIDS_DESC,
    BIDS_ID,
    PEOPLE_DESC,
    PEOPLE_ID,
)

INPUTS = {BIDS_ID: BIDS_DESC, AUCTIONS_ID: AUCTIONS_DESC, PEOPLE_ID: PEOPLE_DESC}
SOME = settings(max_examples=100)
FEW = settings(max_examples=50)


@st.composite
def plan_and_contents(
    draw: st.DrawFn, operators: frozenset[str] = OPERATORS, max_depth: int = 2
) -> tuple[RelationExpr, dict[GlobalId, Counter[Row]], int]:
    plan = draw(plans(INPUTS, operators=operators, max_depth=max_depth))
    streams = draw(input_streams(INPUTS, max_updates=10))
    time = draw(st.integers(0, 8))
    return plan, {id: accumulate(u, time) for id, u in streams.items()}, time


@settings(max_examples=200)
@given(plans(INPUTS))
def test_random_plans_roundtrip_through_the_codec(plan: RelationExpr) -> None:
    data = encode(plan)
    back = decode(data, RelationExpr)
    assert back == plan and back.desc == plan.desc and encode(back) == data


@SOME
@given(plan_and_contents())
def test_negate_union_is_empty(
    case: tuple[RelationExpr, dict[GlobalId, Counter[Row]], int],
) -> None:
    plan, inputs, t = case
    assert evaluate(Union((plan, Negate(plan))), inputs, t) == Counter()
    assert evaluate(Negate(Negate(plan)), inputs, t) == evaluate(plan, inputs, t)


@SOME
@given(plan_and_contents(), st.data())
def test_threshold_is_multiset_difference(
    case: tuple[RelationExpr, dict[GlobalId, Counter[Row]], int], data: st.DataObject
) -> None:
    plan, inputs, t = case
    a = evaluate(plan, inputs, t)
    predicate = CallBinary(BinaryFunc.EQ, ColumnRef(0), ColumnRef(0))
    other = Filter(plan, (predicate,))  # the rows whose first column is not NULL
    b = evaluate(other, inputs, t)
    got = evaluate(Threshold(Union((plan, Negate(other)))), inputs, t)
    assert got == a - b  # Counter subtraction keeps only positive counts
    assert all(m > 0 for m in got.values())


@SOME
@given(plan_and_contents())
def test_distinct_is_idempotent_and_a_keyed_reduce(
    case: tuple[RelationExpr, dict[GlobalId, Counter[Row]], int],
) -> None:
    plan, inputs, t = case
    once = evaluate(Distinct(plan), inputs, t)
    assert evaluate(Distinct(Distinct(plan)), inputs, t) == once
    assert set(once.values()) <= {1}
    assert set(once) == set(evaluate(plan, inputs, t))
    keyed = Reduce(plan, tuple(range(plan.desc.arity)))
    assert evaluate(keyed, inputs, t) == once


@SOME
@given(plan_and_contents())
def test_top_k_takes_the_first_ranks(
    case: tuple[RelationExpr, dict[GlobalId, Counter[Row]], int],
) -> None:
    plan, inputs, t = case
    rows = evaluate(plan, inputs, t)
    assert evaluate(TopK(plan), inputs, t) == rows
    total = sum(rows.values())
    for limit in (0, 1, 3):
        for offset in (0, 2):
            got = evaluate(TopK(plan, (), (), limit, offset), inputs, t)
            assert sum(got.values()) == max(0, min(limit, total - offset))
            assert all(0 < got[r] <= rows[r] for r in got)


@FEW
@given(plan_and_contents(max_depth=1), plan_and_contents(max_depth=1))
def test_equijoin_is_a_filtered_cross_join(
    left: tuple[RelationExpr, dict[GlobalId, Counter[Row]], int],
    right: tuple[RelationExpr, dict[GlobalId, Counter[Row]], int],
) -> None:
    a, inputs, t = left
    b = right[0]
    cross = evaluate(Join((a, b)), inputs, t)
    ea, eb = evaluate(a, inputs, t), evaluate(b, inputs, t)
    assert sum(cross.values()) == sum(ea.values()) * sum(eb.values())
    pairs = [
        (i, a.desc.arity + j)
        for i, ca in enumerate(a.desc.columns)
        for j, cb in enumerate(b.desc.columns)
        if ca.type.kind is cb.type.kind and ca.type.kind.value != "jsonb"
    ]
    for i, j in pairs[:3]:
        joined = evaluate(Join((a, b), ((i, j),)), inputs, t)
        filtered = evaluate(
            Filter(Join((a, b)), (CallBinary(BinaryFunc.EQ, ColumnRef(i), ColumnRef(j)),)),
            inputs,
            t,
        )
        assert joined == filtered


@FEW
@given(st.data())
def test_expected_updates_accumulate_to_expected_contents(data: st.DataObject) -> None:
    plan = data.draw(plans(INPUTS, max_depth=2))
    streams = data.draw(input_streams(INPUTS, max_updates=10))
    as_of = data.draw(st.integers(0, 4))
    df = single_plan_dataflow(plan, INPUTS, as_of=as_of)
    df.validate()
    contents = expected_contents(df, streams, upper=10)
    updates = expected_updates(df, streams, upper=10)
    for export, by_time in contents.items():
        assert sorted(by_time) == list(range(as_of, 10))
        for t, expected in by_time.items():
            assert accumulate(updates[export], t) == expected
            used = {id: accumulate(u, t) for id, u in streams.items()}
            assert expected == evaluate(plan, used, t)
