"""Rewriting plans: replace ``Get`` leaves (view inlining, binding ids to other collections).

``replace_gets(plan, fn)`` rebuilds ``plan`` bottom-up with every ``Get`` replaced by
``fn(get)``. Every rebuilt node is validated again on construction; the replacement of a ``Get``
must have the same relation description (names and types), so the plan above is unchanged in
meaning and the rewrite is total.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from spate.plan.errors import InvalidPlan
from spate.plan.relation import Get, RelationExpr


def replace_gets(plan: RelationExpr, fn: Callable[[Get], RelationExpr]) -> RelationExpr:
    """``plan`` with each ``Get`` leaf replaced by ``fn(get)`` (same desc required)."""
    if isinstance(plan, Get):
        new = fn(plan)
        if new is not plan and new.desc != plan.desc:
            raise InvalidPlan(
                f"replacement for Get({plan.id}) has schema {new.desc}, expected {plan.desc}"
            )
        return new
    changes: dict[str, object] = {}
    for f in dataclasses.fields(plan):  # type: ignore[arg-type]  # every node is a dataclass
        value = getattr(plan, f.name)
        if isinstance(value, RelationExpr):
            rewritten = replace_gets(value, fn)
            if rewritten is not value:
                changes[f.name] = rewritten
        elif isinstance(value, tuple) and value and all(isinstance(v, RelationExpr) for v in value):
            items = tuple(replace_gets(v, fn) for v in value)
            if any(a is not b for a, b in zip(items, value, strict=True)):
                changes[f.name] = items
    if not changes:
        return plan
    return dataclasses.replace(plan, **changes)  # type: ignore[type-var]  # every node is a dataclass
