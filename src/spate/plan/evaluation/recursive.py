"""``Recursive`` evaluated in plain Python: PostgreSQL's iteration of ``WITH RECURSIVE``
(:mod:`spate.plan.recursive` states the semantics; this is its executable definition)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

from spate.plan.errors import EvalError
from spate.plan.recursive import (
    RECURSION_LIMIT_SQLSTATE,
    Recursive,
    iteration_limit_message,
    references,
)
from spate.plan.relation import RelationExpr
from spate.repr.types import Row

Multiset = Counter[Row]


def fixpoint(node: Recursive, base: Multiset, step: Callable[[Multiset], Multiset]) -> Multiset:
    """The contents of ``node`` given its base's contents and ``step``: the recursive term
    evaluated with the working table bound to its argument."""
    _nonnegative(base)
    working = Counter(dict.fromkeys(base, 1)) if node.dedupe else Counter(base)
    result = Counter(working)
    rounds = 0
    while working:
        if rounds == node.max_iterations:
            raise EvalError(
                iteration_limit_message(node.max_iterations), sqlstate=RECURSION_LIMIT_SQLSTATE
            )
        rounds += 1
        new = step(working)
        _nonnegative(new)
        if node.dedupe:
            new = Counter({r: 1 for r in new if r not in result})
        result.update(new)
        working = new
    return result


def _nonnegative(rows: Multiset) -> None:
    for r, m in rows.items():
        if m < 0:
            raise EvalError(f"Recursive: row {r} has negative multiplicity {m}")


def free_subplans(step: RelationExpr, binding: int) -> Iterator[RelationExpr]:
    """The largest sub-plans of ``step`` that do not read the working table ``binding``:
    their contents are the same in every round."""
    if not references(step, binding):
        yield step
        return
    for child in step.inputs():
        yield from free_subplans(child, binding)


__all__ = ["fixpoint", "free_subplans"]
