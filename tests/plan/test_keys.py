"""Key inference (spate.plan.keys) on hand-built plans, checked against the reference
evaluator: whenever a key is inferred, the evaluated result has no two rows agreeing on it
(and each row once); and the simplification keeps the results equal."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from spate.ids import GlobalId
from spate.plan import col, count, lit
from spate.plan.evaluation.relation import evaluate
from spate.plan.finishing import ColumnOrder
from spate.plan.keys import simplify_with_keys, unique_keys
from spate.plan.relation import Constant, Distinct, Get, Join, RelationExpr, TopK
from spate.repr import INT64, RelationDesc

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


@pytest.mark.parametrize("name", sorted(PLANS))
def test_simplified_plans_answer_the_same(name: str, seed: int) -> None:
    rng = random.Random(seed)
    plan = PLANS[name]
    for wrapped in (plan.distinct(), plan.reduce(list(range(plan.desc.arity)))):
        simpler = simplify_with_keys(wrapped, KNOWN)
        assert simpler.desc == wrapped.desc
        dropped = not any(isinstance(n, Distinct) for n in simpler.walk()) and simpler != wrapped
        assert dropped == bool(unique_keys(plan, KNOWN)), (name, simpler.explain())
        for _ in range(10):
            data = _contents(rng)
            assert evaluate(simpler, data, 0) == evaluate(wrapped, data, 0), (seed, name)
