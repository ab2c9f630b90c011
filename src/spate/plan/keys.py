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
``Reduce`` without aggregates whose group key contains a key of its input is a projection.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from spate.ids import GlobalId
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
        case Reduce(inp, key, aggregates, _) if not aggregates:
            group = frozenset(key)
            if any(k <= group for k in unique_keys(inp, known)):
                return Project(inp, key, tuple(plan.desc.names))
    return plan


__all__ = ["Key", "KnownKeys", "simplify_with_keys", "unique_keys"]
