"""Checks every relational node applies to its parameters when it is built: column positions,
output names, predicates, ``now()``; errors name the node (:func:`node_errors`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from spate.errors import InvalidRelationDesc, SchemaMismatch
from spate.plan.errors import InvalidPlan, PlanColumnMissing, PlanTypeError
from spate.plan.expr import ColumnType, ScalarExpr, contains_now, show
from spate.repr.desc import RelationDesc
from spate.repr.types import ScalarKind

__all__ = [
    "bool_predicate",
    "fresh_name",
    "no_now",
    "node_errors",
    "output_names",
    "positions",
    "set_field",
]


@contextmanager
def node_errors(name: str) -> Iterator[None]:
    """Prefix plan errors raised inside with the node name."""
    try:
        yield
    except InvalidPlan as e:
        raise type(e)(f"{name}: {e}") from None
    except (InvalidRelationDesc, SchemaMismatch) as e:
        raise InvalidPlan(f"{name}: {e}") from None


def set_field(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)


def positions(values: Sequence[int], arity: int, what: str, desc: RelationDesc) -> tuple[int, ...]:
    out = tuple(values)
    for p in out:
        if isinstance(p, bool) or not isinstance(p, int):
            raise InvalidPlan(f"{what}: column positions are ints, got {p!r}")
        if not 0 <= p < arity:
            raise PlanColumnMissing(
                f"{what}: column #{p} not found; the input has {arity} columns"
                f" ({', '.join(desc.names)})"
            )
    return out


def fresh_name(base: str, taken: set[str]) -> str:
    name, k = base, 1
    while name in taken:
        name = f"{base}_{k}"
        k += 1
    taken.add(name)
    return name


def output_names(
    given: Sequence[str], count: int, defaults: Sequence[str], taken: set[str]
) -> tuple[str, ...]:
    names = tuple(given)
    if not names:
        return tuple(fresh_name(d, taken) for d in defaults)
    if len(names) != count:
        raise InvalidPlan(f"{count} outputs but {len(names)} names: {', '.join(names)}")
    for n in names:
        if not isinstance(n, str):
            raise InvalidPlan(f"column names are strings, got {n!r}")
    return names


def no_now(expr: ScalarExpr, names: Sequence[str]) -> None:
    if contains_now(expr):
        raise InvalidPlan(
            f"now() may only appear in Filter predicates (temporal filters): {show(expr, names)}"
        )


def bool_predicate(expr: ScalarExpr, t: ColumnType, names: Sequence[str]) -> None:
    if t.type.kind is not ScalarKind.BOOL:
        raise PlanTypeError(f"predicate must be bool, got {t.type}: {show(expr, names)}")
