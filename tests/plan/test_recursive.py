"""Recursive (WITH RECURSIVE) in the IR and the reference evaluator: round trips, validation,
and the evaluator against direct computations of closures, counters and tree walks on seeded
random graphs, and the iteration limit."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from spate.codec import decode, encode
from spate.plan.errors import EvalError, InvalidPlan
from spate.plan.evaluation.relation import evaluate
from spate.plan.recursive import RECURSION_LIMIT_SQLSTATE, Recursive, RecursiveRef
from spate.plan.relation import Join, RelationExpr
from tests.plan.recursive_plans import (
    EDGES,
    EDGES_ID,
    LIMITS_ID,
    PAIRS,
    PLANS,
    TREE_ID,
    closure,
    counter,
    tree_walk,
)


@pytest.mark.parametrize("name", sorted(PLANS))
def test_round_trip(name: str) -> None:
    plan = PLANS[name]
    back = decode(encode(plan), RelationExpr)
    assert back == plan and back.desc == plan.desc


def test_validation_names_the_problem() -> None:
    ref = RecursiveRef(0, PAIRS)
    with pytest.raises(InvalidPlan, match="Recursive: the base must not read its own"):
        Recursive(ref, ref, 0)
    with pytest.raises(InvalidPlan, match="max_iterations must be >= 1"):
        Recursive(EDGES, ref, 0, max_iterations=0)
    with pytest.raises(InvalidPlan, match="Recursive: the working table is"):
        Recursive(EDGES.project("src"), ref.project("a"), 0)


def _reach(edges: Counter[tuple[object, ...]]) -> Counter[tuple[object, ...]]:
    succ: dict[object, set[object]] = {}
    for (s, d), m in edges.items():
        if m > 0 and s is not None:
            succ.setdefault(s, set()).add(d)
    out: Counter[tuple[object, ...]] = Counter()
    for (s, d), m in edges.items():
        if m <= 0:
            continue
        seen, todo = {d}, [d]
        while todo:
            n = todo.pop()
            for nxt in succ.get(n, ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        for x in seen:
            out[(s, x)] = 1
    return out


def _random_edges(rng: random.Random) -> Counter[tuple[object, ...]]:
    edges: Counter[tuple[object, ...]] = Counter()
    for _ in range(rng.randint(0, 12)):
        s = rng.choice([None, *range(6)])
        edges[(s, rng.choice([None, *range(6)]))] += rng.choice([1, 1, 2])
    return edges


def test_closure_is_reachability(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(50):
        edges = _random_edges(rng)
        got = evaluate(closure(), {EDGES_ID: edges}, 0)
        assert got == _reach(edges), (seed, dict(edges))


def test_counter_counts_up_to_each_limit(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(30):
        limits: Counter[tuple[object, ...]] = Counter()
        for _ in range(rng.randint(0, 3)):
            limits[(rng.choice([None, -1, 0, 1, 3, 5]),)] += 1
        got = evaluate(counter(), {LIMITS_ID: limits}, 0)
        # row i appears once per path 1 → i through steps each allowed by some limit > the value
        want: Counter[tuple[object, ...]] = Counter({(1,): 1})
        level = Counter({1: 1})
        while level:
            nxt: Counter[int] = Counter()
            for i, m in level.items():
                for (n,), k in limits.items():
                    if n is not None and i < n:
                        nxt[i + 1] += m * k
            for i, m in nxt.items():
                want[(i,)] += m
            level = nxt
        assert got == want, (seed, dict(limits))


def test_tree_walk_stops_at_depth_and_repeats_per_path() -> None:
    tree = Counter({(1, None): 1, (2, 1): 1, (3, 2): 1, (4, 3): 1, (5, 4): 1, (6, 5): 1, (7, 7): 1})
    got = evaluate(tree_walk(), {TREE_ID: tree}, 0)
    assert got == Counter({(1, 0): 1, (2, 1): 1, (3, 2): 1, (4, 3): 1, (5, 4): 1})


def test_union_all_on_a_cycle_hits_the_iteration_limit() -> None:
    edges = Counter({(1, 2): 1, (2, 1): 1})
    with pytest.raises(EvalError, match="still produced rows after 7 iterations") as e:
        evaluate(closure(distinct=False, max_iterations=7), {EDGES_ID: edges}, 0)
    assert e.value.sqlstate == RECURSION_LIMIT_SQLSTATE
    # the same recursion with UNION ends: the second round finds nothing new
    assert evaluate(closure(max_iterations=2), {EDGES_ID: edges}, 0) == Counter(
        {(1, 2): 1, (2, 1): 1, (1, 1): 1, (2, 2): 1}
    )


def test_union_all_keeps_multiplicities() -> None:
    edges = Counter({(1, 2): 2, (2, 3): 1})
    got = evaluate(closure(distinct=False), {EDGES_ID: edges}, 0)
    assert got == Counter({(1, 2): 2, (2, 3): 1, (1, 3): 2})


def test_a_nested_recursive_with_the_same_binding_binds_its_own_references() -> None:
    """A view's recursive plan inlined into another recursive plan may reuse its binding: the
    nearest ``Recursive`` binds a reference, as a CTE name does in SQL."""
    inner = closure()  # binding 0, its own references in its step
    ref = RecursiveRef(0, PAIRS)
    step = Join((ref, inner), ((1, 2),)).project("a", "b_1").rename(b_1="b")
    outer = Recursive(inner, step, 0, True)  # the inner one in the base and in the step
    edges = Counter({(1, 2): 1, (2, 3): 1, (3, 1): 1, (4, 4): 1})
    got = evaluate(outer, {EDGES_ID: edges}, 0)
    assert got == evaluate(inner, {EDGES_ID: edges}, 0)
    assert got[(1, 1)] == 1 and got[(4, 4)] == 1 and len(got) == 10
