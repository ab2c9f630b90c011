"""Key inference (spate.plan.keys) on hand-built plans, checked against the reference
evaluator: whenever a key is inferred, the evaluated result has no two rows agreeing on it
(and each row once); and the simplification keeps the results equal, for a DISTINCT, a
GROUP BY without aggregates and one with every aggregate function (a Map where the group key
holds a key)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from spate.ids import GlobalId
from spate.plan import (
    avg,
    bool_and,
    bool_or,
    col,
    count,
    lit,
    max_,
    min_,
    string_agg,
    sum_,
)
from spate.plan.aggregate import AggregateExpr
from spate.plan.evaluation.relation import evaluate
from spate.plan.expr import Cast, ColumnRef
from spate.plan.finishing import ColumnOrder
from spate.plan.keys import simplify_with_keys, unique_keys
from spate.plan.relation import Constant, Distinct, Get, Join, Reduce, RelationExpr, TopK
from spate.repr import FLOAT64, INT64, TEXT, RelationDesc, numeric

T_ID, U_ID = GlobalId.user(1), GlobalId.user(2)
T = Get(T_ID, RelationDesc.of(("k", INT64, False), ("v", INT64, True)))
U = Get(U_ID, RelationDesc.of(("a", INT64, False), ("b", INT64, False), ("c", INT64, True)))
KNOWN = {T_ID: [(0,)], U_ID: [(0, 1)]}

PLANS: dict[str, RelationExpr] = {
    "get": T,
    "filter_map": T.filter(col("v") > lit(1)).map(w=col("v") + lit(1)),
    "project_kept": T.project("v", "k"),
    "project_lost": T.project("v"),
    "join_pair": Join((T, U), ((1, 4),)),
    "join_bound": Join((T, U), ((0, 2),)),
    "join_partly_bound": Join((U, T), ((0, 3),)),
    "reduce": U.reduce(["c"], n=count()),
    "topk1": TopK(U, (0,), (ColumnOrder(1),), 1),
    "topk2": TopK(U, (0,), (ColumnOrder(1),), 2),
    "constant": Constant((((1,), 1), ((2,), 1)), RelationDesc.of(("x", INT64, False))),
    "constant_twice": Constant((((1,), 2),), RelationDesc.of(("x", INT64, False))),
}


def _contents(rng: random.Random) -> dict[GlobalId, Counter[tuple[object, ...]]]:
    ks = rng.sample(range(10), rng.randint(0, 8))
    t = Counter({(k, rng.choice([None, 1, 2, 3])): 1 for k in ks})
    u = Counter(
        {(rng.randrange(4), rng.randrange(4), rng.choice([None, 1, 2])): 1 for _ in range(8)}
    )
    seen: dict[tuple[object, ...], tuple[object, ...]] = {}
    for r in u:
        seen.setdefault(r[:2], r)
    return {T_ID: t, U_ID: Counter(dict.fromkeys(seen.values(), 1))}


@pytest.mark.parametrize("name", sorted(PLANS))
def test_inferred_keys_hold(name: str, seed: int) -> None:
    rng = random.Random(seed)
    plan = PLANS[name]
    keys = unique_keys(plan, KNOWN)
    for _ in range(30):
        got = evaluate(plan, _contents(rng), 0)
        assert not keys or all(m == 1 for m in got.values()), (seed, name, got)
        for key in keys:
            values = [tuple(r[i] for i in sorted(key)) for r in got]
            assert len(values) == len(set(values)), (seed, name, key, got)


def test_what_is_inferred() -> None:
    assert unique_keys(PLANS["project_lost"], KNOWN) == frozenset()
    assert frozenset({1}) in unique_keys(PLANS["project_kept"], KNOWN)
    # T's key bound to U's a: each row of U meets at most one of T, U's key is the join's
    assert frozenset({2, 3}) in unique_keys(PLANS["join_bound"], KNOWN)
    assert unique_keys(PLANS["join_pair"], KNOWN) == frozenset({frozenset({0, 2, 3})})
    assert unique_keys(PLANS["topk1"], KNOWN) == frozenset({frozenset({0})})
    assert unique_keys(PLANS["topk2"], KNOWN) == frozenset()
    assert unique_keys(PLANS["constant_twice"], KNOWN) == frozenset()
    assert unique_keys(T, {}) == frozenset()


def _aggregates(plan: RelationExpr) -> dict[str, AggregateExpr]:
    """Every aggregate function over ``plan``'s last column (an int64), with and without
    DISTINCT, and over values of the other types made from it."""
    x = ColumnRef(plan.desc.arity - 1)
    return {
        "agg_n": count(),
        "agg_nx": count(x),
        "agg_nd": count(x, distinct=True),
        "agg_s": sum_(x),
        "agg_sd": sum_(x, distinct=True),
        "agg_sf": sum_(Cast(x, FLOAT64)),
        "agg_sn": sum_(Cast(x, numeric(10, 2))),
        "agg_lo": min_(x),
        "agg_hi": max_(Cast(x, TEXT)),
        "agg_mean": avg(x),
        "agg_meanf": avg(Cast(x, FLOAT64), distinct=True),
        "agg_all": bool_and(x > lit(1)),
        "agg_any": bool_or(x > lit(1)),
        "agg_cat": string_agg(Cast(x, TEXT), ","),
    }


@pytest.mark.parametrize("name", sorted(PLANS))
def test_simplified_plans_answer_the_same(name: str, seed: int) -> None:
    rng = random.Random(seed)
    plan = PLANS[name]
    every = list(range(plan.desc.arity))
    wrapped_ones = (plan.distinct(), plan.reduce(every), plan.reduce(every, **_aggregates(plan)))
    for wrapped in wrapped_ones:
        simpler = simplify_with_keys(wrapped, KNOWN)
        assert simpler.desc == wrapped.desc
        dropped = not any(isinstance(n, Distinct | Reduce) for n in simpler.walk())
        dropped = dropped or (name == "reduce" and simpler != wrapped)  # its own Reduce stays
        assert dropped == bool(unique_keys(plan, KNOWN)), (name, simpler.explain())
        for _ in range(10):
            data = _contents(rng)
            assert evaluate(simpler, data, 0) == evaluate(wrapped, data, 0), (seed, name)


def test_a_group_by_a_key_with_aggregates_is_a_map(seed: int) -> None:
    """T grouped by its key k: each group is one row, the aggregates of v are maps of it;
    T's v is nullable (count(v) is 0 and the others NULL on its NULLs)."""
    rng = random.Random(seed)
    v = col("v")
    grouped = T.reduce(
        ["k"],
        n=count(),
        nv=count(v),
        s=sum_(v),
        lo=min_(v),
        mean=avg(v),
        flag=bool_or(v.is_null()),
        cat=string_agg(Cast(v, TEXT), "-"),
    )
    simpler = simplify_with_keys(grouped, KNOWN)
    assert not any(isinstance(n, Reduce) for n in simpler.walk()), simpler.explain()
    assert simpler.desc == grouped.desc
    for _ in range(20):
        data = _contents(rng)
        assert evaluate(simpler, data, 0) == evaluate(grouped, data, 0), seed


def test_avg_of_numeric_keeps_the_reduce() -> None:
    """avg over numeric rounds its quotient to a scale taken from the values: no Map form."""
    grouped = T.reduce(["k"], mean=avg(Cast(col("v"), numeric(10, 2))), n=count())
    assert simplify_with_keys(grouped, KNOWN) == grouped
