"""replace_gets: Get leaves are replaced everywhere; schemas must match."""

from __future__ import annotations

import pytest

from spate.ids import GlobalId
from spate.plan.builder import col, count, max_
from spate.plan.errors import InvalidPlan
from spate.plan.relation import Get, RelationExpr
from spate.plan.rewrite import replace_gets
from spate.repr import INT64, TEXT, RelationDesc

A = RelationDesc.of(("k", INT64, False), ("v", TEXT))
U1, U2, U3 = GlobalId.user(1), GlobalId.user(2), GlobalId.user(3)


def test_inlines_a_view_in_every_position() -> None:
    base = Get(U1, A)
    view_plan = base.filter(col("k") > 3)
    view = Get(U2, view_plan.desc)
    plan = view.join(view, on=[("k", "k")]).reduce(["k"], m=max_(col("v")), n=count())
    plan = plan.union(plan)

    def inline(g: Get) -> RelationExpr:
        return view_plan if g.id == U2 else g

    out = replace_gets(plan, inline)
    assert out.depends_on() == frozenset({U1})
    assert out.desc == plan.desc
    assert replace_gets(out, inline) is out  # nothing left to replace: same object


def test_replacement_must_keep_the_schema() -> None:
    plan = Get(U1, A).project("k")
    with pytest.raises(InvalidPlan, match=r"replacement for Get\(u1\) has schema"):
        replace_gets(plan, lambda g: Get(U3, RelationDesc.of(("x", INT64))))
