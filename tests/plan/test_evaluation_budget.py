"""``evaluate(..., max_rows=n)``: the plain-Python evaluation the environment runs small reads
with stops (``TooLarge``) as soon as a node would hold more than ``n`` rows, a join before it
builds its pairs; under the limit it gives exactly what an unbounded evaluation gives. A
sub-plan shared by several parents (decorrelated subqueries share the outer relation) is
evaluated once."""

from __future__ import annotations

from collections import Counter

import pytest

from spate.ids import GlobalId
from spate.plan.builder import col
from spate.plan.evaluation import relation
from spate.plan.evaluation.relation import TooLarge, evaluate
from spate.plan.relation import Get, Join, Project, RelationExpr, Union
from spate.repr import INT64, RelationDesc

A, B = GlobalId.user(1), GlobalId.user(2)
DESC = RelationDesc.of(("x", INT64))


def _inputs(n: int) -> dict[GlobalId, Counter[tuple[object, ...]]]:
    return {A: Counter({(i,): 1 for i in range(n)}), B: Counter((i % 7,) for i in range(n))}


def _cross() -> RelationExpr:
    return Join((Get(A, DESC), Get(B, DESC)))


def test_a_cross_join_beyond_the_limit_stops_before_building_its_pairs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[int] = []
    original = relation._all_equal

    def counting(values: list[object]) -> bool:
        built.append(1)
        return original(values)

    monkeypatch.setattr(relation, "_all_equal", counting)
    with pytest.raises(TooLarge):
        evaluate(_cross(), _inputs(100), 0, max_rows=699)
    assert built == []
    assert len(evaluate(_cross(), _inputs(100), 0, max_rows=700)) == 100 * 7


def test_an_equi_join_counts_its_matches_not_the_product() -> None:
    plan = Join((Get(A, DESC), Get(B, DESC)), equivalences=((0, 1),))
    out = evaluate(plan, _inputs(1000), 0, max_rows=1000)
    assert out == evaluate(plan, _inputs(1000), 0)
    with pytest.raises(TooLarge):
        evaluate(plan, _inputs(1000), 0, max_rows=6)  # 7 matches


def test_under_the_limit_the_answer_is_the_unbounded_one() -> None:
    a = Get(A, DESC)
    plan = Union((a.filter(col("x") > 3), a.filter(col("x") < 50), Get(B, DESC)))
    assert evaluate(plan, _inputs(100), 0, max_rows=10_000) == evaluate(plan, _inputs(100), 0)


def test_a_shared_sub_plan_is_evaluated_once(monkeypatch: pytest.MonkeyPatch) -> None:
    shared = Get(A, DESC).filter(col("x") > 3)
    joined = Project(Join((shared, Get(B, DESC)), equivalences=((0, 1),)), (0,))
    plan = Union((shared, shared, joined))
    calls: list[RelationExpr] = []
    original = relation._Evaluator.contents

    def counting(self: relation._Evaluator, p: RelationExpr) -> relation.Multiset:
        calls.append(p)
        return original(self, p)

    monkeypatch.setattr(relation._Evaluator, "contents", counting)
    out = evaluate(plan, _inputs(20), 0)
    assert sum(1 for p in calls if p is shared) == 1
    assert out[(4,)] == 2 + 3 and out[(13,)] == 2  # B holds 4 three times (4, 11, 18), 13 never
