"""Unique keys of a plan's results, and the operators they make redundant.

A **key** of a relation is a set of column positions no two of its rows agree on, every row
appearing once (so a key implies the relation has no duplicates). Keys start at ``Get`` leaves,
from what the caller knows of the collections (a table's PRIMARY KEY, or a UNIQUE constraint
on NOT NULL columns: PostgreSQL lets rows with a NULL in a UNIQUE key repeat), and are
propagated:

* ``Filter``, ``Map``, ``Threshold``, ``ArrangeBy``: the input's keys (positions unchanged);
* ``Project``: the input's keys whose columns all stay (at their new positions);
* ``Join``: the union of one key of each input (a pair of rows is one output row); and when
  the equivalences bind every column of a key of one input to columns of the others, each row
  of the others meets at most one of its rows, so the others' keys are keys of the join;
* ``Reduce``: its group key (positions ``0…``); ``Distinct``: all its columns;
* ``TopK`` with a limit of 1: its group key (input positions); a ``Constant`` of distinct
  rows each once: all its columns.

:func:`simplify_with_keys` uses them: a ``Distinct`` over an input with a key is the input; a
``Reduce`` whose group key contains a key of its input has groups of one row each (of
multiplicity 1), so it is a ``Map`` of each aggregate over that one row, then a projection:

==================================  ==========================================================
aggregate of one value ``e``        is
==================================  ==========================================================
``count(*)``                        ``1``
``count(e)``                        ``CASE WHEN e IS NULL THEN 0 ELSE 1 END``
``sum``, ``min``, ``max``,          ``e`` (a ``numeric(p,s)`` sum cast to ``numeric(38,s)``)
``bool_and``, ``bool_or``,
``string_agg``
``avg``                             ``e`` (an ``int64`` cast to ``float64``); not over
                                    ``numeric``, whose quotient's scale depends on the values
==================================  ==========================================================

``DISTINCT`` inside an aggregate changes nothing over one value. The simplification keeps the
``Reduce`` where an aggregate has no such form or the result's column types would differ.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from spate.ids import GlobalId
from spate.plan.aggregate import AggregateExpr, AggregateFunc
from spate.plan.expr import Case, Cast, Literal, ScalarExpr
from spate.plan.infer import resolve
from spate.plan.relation import (
    ArrangeBy,
    Constant,
    Distinct,
    Filter,
    Get,
    Join,
    Map,
    Project,
    Reduce,
    RelationExpr,
    Threshold,
    TopK,
)
from spate.repr.desc import RelationDesc
from spate.repr.types import INT64, ScalarKind, ScalarType

Key = frozenset[int]
KnownKeys = Mapping[GlobalId, Sequence[Sequence[int]]]
"""The keys of the collections a plan reads, as column positions."""


def unique_keys(plan: RelationExpr, known: KnownKeys) -> frozenset[Key]:
    """The keys of ``plan``'s result (module docs); empty when none is known."""
    match plan:
        case Get(id, _):
            return frozenset(frozenset(k) for k in known.get(id, ()) if k)
        case Filter(inp) | Map(inp) | Threshold(inp) | ArrangeBy(inp):
            return unique_keys(inp, known)
        case Project(inp, outputs, _):
            return _projected(unique_keys(inp, known), outputs)
        case Join():
            return _join_keys(plan, known)
        case Reduce(_, key, _, _):
            return frozenset({frozenset(range(len(key)))})
        case Distinct():
            return frozenset({frozenset(range(plan.desc.arity))})
        case TopK(_, key, _, limit, _) if limit == 1:
            return frozenset({frozenset(key)})  # (no key: at most one row, the empty key)
        case Constant(rows, _):
            seen = [r for r, _ in rows]
            if all(m == 1 for _, m in rows) and len(set(seen)) == len(seen):
                return frozenset({frozenset(range(plan.desc.arity))})
    return frozenset()


def _projected(keys: frozenset[Key], outputs: Sequence[int]) -> frozenset[Key]:
    out: set[Key] = set()
    for key in keys:
        where: dict[int, int] = {}
        for pos, col in enumerate(outputs):
            where.setdefault(col, pos)
        if all(c in where for c in key):
            out.add(frozenset(where[c] for c in key))
    return frozenset(out)


def _join_keys(plan: Join, known: KnownKeys) -> frozenset[Key]:
    offsets = plan.input_offsets()
    per_input: list[list[Key]] = []
    for n, operand in enumerate(plan.operands):
        found = unique_keys(operand, known)
        if not found:
            return frozenset()
        per_input.append([frozenset(c + offsets[n] for c in k) for k in found])
    bound: set[int] = set()  # columns equated to a column of another input
    for cls in plan.equivalences:
        owners = {_owner(offsets, c) for c in cls}
        if len(owners) > 1:
            bound.update(cls)
    out: set[Key] = set(_combined(per_input))  # one key of each input together
    for n, own in enumerate(per_input):
        if any(k <= bound for k in own):  # bound to the others: the others' keys suffice
            out.update(_combined(per_input[:n] + per_input[n + 1 :]))
    return frozenset(out)


_MAX_KEYS = 16
"""Key combinations kept per join (the product of the inputs' keys could grow fast)."""


def _combined(per_input: Sequence[Sequence[Key]]) -> list[Key]:
    """Each union of one key of every input (at most ``_MAX_KEYS``, smallest first)."""
    combos: list[Key] = [frozenset()]
    for keys in per_input:
        combos = sorted({c | k for c in combos for k in keys}, key=len)[:_MAX_KEYS]
    return combos


def _owner(offsets: Sequence[int], column: int) -> int:
    owner = 0
    for n, start in enumerate(offsets):
        if column >= start:
            owner = n
    return owner


def simplify_with_keys(plan: RelationExpr, known: KnownKeys) -> RelationExpr:
    """``plan`` without the operators its keys make redundant (module docs)."""
    changes: dict[str, object] = {}
    for f in dataclasses.fields(plan):  # type: ignore[arg-type]  # every node is a dataclass
        if not f.init:
            continue
        value = getattr(plan, f.name)
        if isinstance(value, RelationExpr):
            new = simplify_with_keys(value, known)
            if new is not value:
                changes[f.name] = new
        elif isinstance(value, tuple) and value and all(isinstance(v, RelationExpr) for v in value):
            items = tuple(simplify_with_keys(v, known) for v in value)
            if any(a is not b for a, b in zip(items, value, strict=True)):
                changes[f.name] = items
    if changes:
        plan = dataclasses.replace(plan, **changes)  # type: ignore[type-var]  # every node is a dataclass
    match plan:
        case Distinct(inp) if unique_keys(inp, known):
            return inp
        case Reduce(inp, key, _, _):
            group = frozenset(key)
            if any(k <= group for k in unique_keys(inp, known)):
                simpler = _groups_of_one(plan)
                return plan if simpler is None else simpler
    return plan


def _groups_of_one(plan: Reduce) -> RelationExpr | None:
    """``plan`` (each of whose groups is one row) as a projection of a ``Map`` of its
    aggregates over that row (module docs); None where an aggregate has no such form."""
    names = tuple(plan.desc.names)
    if not plan.aggregates:
        return Project(plan.input, plan.group_key, names)
    results = plan.desc.columns[len(plan.group_key) :]
    scalars: list[ScalarExpr] = []
    for agg, result in zip(plan.aggregates, results, strict=True):
        scalar = _of_one_value(agg, result.type, plan.input.desc)
        if scalar is None:
            return None
        scalars.append(scalar)
    arity = plan.input.desc.arity
    mapped = Map(plan.input, tuple(scalars))
    out = Project(mapped, (*plan.group_key, *range(arity, arity + len(scalars))), names)
    same = [(c.type, c.nullable) for c in out.desc.columns] == [
        (c.type, c.nullable) for c in plan.desc.columns
    ]
    return out if same else None


def _of_one_value(agg: AggregateExpr, result: ScalarType, row: RelationDesc) -> ScalarExpr | None:
    """``agg`` over one row (of type ``row``) of multiplicity 1, as a scalar of that row
    (module docs)."""
    match agg.func:
        case AggregateFunc.COUNT if agg.is_count_star():
            return Literal(1, INT64)
        case AggregateFunc.COUNT:
            return Case(((agg.expr.is_null(), Literal(0, INT64)),), Literal(1, INT64))
        case AggregateFunc.AVG if result.kind is ScalarKind.NUMERIC:
            return None
        case AggregateFunc.SUM | AggregateFunc.AVG:
            if resolve(agg.expr, row.columns)[1].type == result:  # no cast needed
                return agg.expr
            return Cast(agg.expr, result)
        case (
            AggregateFunc.MIN
            | AggregateFunc.MAX
            | AggregateFunc.BOOL_AND
            | AggregateFunc.BOOL_OR
            | AggregateFunc.STRING_AGG
        ):
            return agg.expr


__all__ = ["Key", "KnownKeys", "simplify_with_keys", "unique_keys"]
