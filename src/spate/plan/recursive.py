"""Recursion: ``Recursive``, SQL's ``WITH RECURSIVE``, and ``RecursiveRef``, its working table.

``Recursive(base, step, binding, dedupe, max_iterations)`` is PostgreSQL's evaluation of
``WITH RECURSIVE r AS (base UNION [ALL] step)``, where ``step`` reads ``r`` through the leaf
``RecursiveRef(binding, desc)`` (and nowhere else may such a leaf appear)::

    W := base                       (dedupe: each row of base once)
    R := W
    repeat:
        N := step evaluated with RecursiveRef = W
        dedupe: N := each row of N once, minus the rows already in R
        if N is empty: stop
        R := R + N;  W := N
    the contents are R

With ``dedupe`` false (``UNION ALL``) multiplicities add up, so a term that keeps producing
rows never stops: after ``max_iterations`` rounds that still produced rows the evaluation fails
(an :class:`~spate.plan.errors.EvalError`, SQLSTATE ``54001``) instead of looping forever, as
PostgreSQL would. Inputs must have non-negative multiplicities (as for ``Distinct``).

**Maintenance.** A renderer computes the fixpoint as rounds of its own operators over the
inputs' contents, at every time of a step at once, and emits the difference from the previous
result (:mod:`spate.render.operators.recursive`): correct under every change, deletions
included (which make naive incremental recursion wrong), at a cost per changed step of the
rounds of its longest recursion over the inputs' whole contents.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final

from spate.plan import typing_rules as rules
from spate.plan.errors import InvalidPlan
from spate.plan.node_checks import node_errors, set_field
from spate.plan.relation import RelationExpr
from spate.repr.desc import RelationDesc
from spate.wire import wire

DEFAULT_MAX_ITERATIONS: Final = 10_000
"""The default bound on a ``Recursive`` node's rounds."""

RECURSION_LIMIT_SQLSTATE: Final = "54001"


@wire("plan.recursive_ref")
@dataclass(frozen=True, slots=True)
class RecursiveRef(RelationExpr):
    """The working table of the enclosing ``Recursive`` with the same ``binding``: the rows
    its previous round produced (the base's in the first round)."""

    binding: int
    relation: RelationDesc

    def explain_line(self, names: Sequence[str]) -> str:
        return f"RecursiveRef #{self.binding} {self.relation}"

    def __post_init__(self) -> None:
        if isinstance(self.binding, bool) or not isinstance(self.binding, int):
            raise InvalidPlan(f"RecursiveRef: binding must be an int, got {self.binding!r}")
        if not isinstance(self.relation, RelationDesc):
            raise InvalidPlan("RecursiveRef: relation must be a RelationDesc")

    @property
    def desc(self) -> RelationDesc:
        return self.relation

    def inputs(self) -> tuple[RelationExpr, ...]:
        return ()


@wire("plan.recursive")
@dataclass(frozen=True, slots=True)
class Recursive(RelationExpr):
    """The fixpoint of ``base UNION [ALL] step`` (see the module docs for the semantics)."""

    base: RelationExpr
    step: RelationExpr
    binding: int
    dedupe: bool = False
    """``UNION`` (rows kept once) rather than ``UNION ALL``."""
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    _desc: RelationDesc = field(init=False, repr=False, compare=False)

    def explain_line(self, names: Sequence[str]) -> str:
        kind = "UNION" if self.dedupe else "UNION ALL"
        return (
            f"Recursive #{self.binding} {kind} max_iterations={self.max_iterations} "
            f"(rounds to a fixpoint at every changed time)  -> {self.desc}"
        )

    def __post_init__(self) -> None:
        with node_errors("Recursive"):
            for what, value in (("base", self.base), ("step", self.step)):
                if not isinstance(value, RelationExpr):
                    raise InvalidPlan(f"{what} must be a relation expression")
            if isinstance(self.binding, bool) or not isinstance(self.binding, int):
                raise InvalidPlan(f"binding must be an int, got {self.binding!r}")
            if not isinstance(self.dedupe, bool):
                raise InvalidPlan("dedupe must be a bool")
            if (
                isinstance(self.max_iterations, bool)
                or not isinstance(self.max_iterations, int)
                or self.max_iterations < 1
            ):
                raise InvalidPlan(f"max_iterations must be >= 1, got {self.max_iterations!r}")
            if references(self.base, self.binding):
                raise InvalidPlan("the base must not read its own working table")
            for r in _free_refs(self.step, self.binding):
                if r.desc.types != self.base.desc.types:
                    raise InvalidPlan(f"the working table is {r.desc}, the base {self.base.desc}")
            desc = rules.union_columns([self.base.desc, self.step.desc])
            set_field(self, "_desc", desc)

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.base, self.step)


def _free_refs(plan: RelationExpr, binding: int) -> Iterator[RecursiveRef]:
    """The ``RecursiveRef(binding)`` leaves of ``plan`` that a ``Recursive`` around ``plan``
    binds: not those in the step of a nested ``Recursive`` with the same binding (a view's
    plan inlined into another's may reuse its numbers; the nearest binds, as in SQL)."""
    if isinstance(plan, RecursiveRef):
        if plan.binding == binding:
            yield plan
        return
    if isinstance(plan, Recursive) and plan.binding == binding:
        yield from _free_refs(plan.base, binding)
        return
    for child in plan.inputs():
        yield from _free_refs(child, binding)


def references(plan: RelationExpr, binding: int) -> bool:
    """Whether ``plan`` reads the working table ``binding`` of a ``Recursive`` around it."""
    return next(_free_refs(plan, binding), None) is not None


def iteration_limit_message(max_iterations: int) -> str:
    return (
        f"WITH RECURSIVE: the recursive term still produced rows after {max_iterations} "
        "iterations (max_iterations); a recursion that never ends is refused"
    )


__all__ = [
    "DEFAULT_MAX_ITERATIONS",
    "RECURSION_LIMIT_SQLSTATE",
    "Recursive",
    "RecursiveRef",
    "iteration_limit_message",
    "references",
]
