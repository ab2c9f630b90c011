"""GROUPING SETS, ROLLUP and CUBE: the grouping sets of a GROUP BY clause and their lowering.

A GROUP BY clause denotes a list of *grouping sets*, each a list of grouping expressions
(PostgreSQL's rules, and Spark's ``WITH ROLLUP`` / ``WITH CUBE``):

* a plain expression ``e`` is the one set ``[e]``; ``()`` is the empty set;
* ``ROLLUP(e1, …, en)`` is ``[e1…en], [e1…en-1], …, []``; ``CUBE(e1, …, en)`` is every subset
  (an element may be a parenthesised list, which stays together);
* ``GROUPING SETS (s1, …)`` is the concatenation of its items' sets (items may nest ROLLUP, CUBE
  and GROUPING SETS);
* the elements of the clause combine by cross product (``GROUP BY a, ROLLUP(b)`` is
  ``[a, b], [a]``); repeated sets stay (each gives its groups once more) unless the clause says
  ``GROUP BY DISTINCT``.

Lowering (:func:`union_of_reduces`): one ``Reduce`` per set, keyed by the context prefix and
the set's expressions, each padded to every grouping expression with typed NULLs for those not
in the set and followed by the constant value of each ``grouping(…)`` call for that set, then
the ``Union`` of them all. A set without expressions is a global aggregate: it gives its one row
even on empty input (one per context row in a correlated subquery), as PostgreSQL does.
``grouping(a, b, …)`` is the bitmask with one bit per argument, the first argument the most
significant, set when the argument is *not* grouped in the row's set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import combinations, product

from sqlglot import exp

from spate.plan.aggregate import AggregateExpr
from spate.plan.expr import Literal, ScalarExpr
from spate.plan.relation import Map, Reduce, RelationExpr, Union
from spate.repr.types import INT64, ScalarType
from spate.sql.relops import global_defaults, rename
from spate.sql.scope import project

Resolve = Callable[[exp.Expression], exp.Expression]
"""Maps a grouping element as written (a position, an output alias, an expression) to the
expression it groups by."""

GROUPING_CALLS = (exp.Grouping, exp.GroupingId)


def is_grouping(node: exp.Expression) -> bool:
    """A ``grouping(…)`` (or Spark ``grouping_id(…)``) call."""
    return isinstance(node, GROUPING_CALLS)


def has_grouping_sets(group: exp.Expression | None) -> bool:
    """Whether ``group`` uses ROLLUP, CUBE, GROUPING SETS, WITH ROLLUP/CUBE or DISTINCT."""
    if group is None:
        return False
    if group.args.get("rollup") or group.args.get("cube") or group.args.get("all") is False:
        return True
    return any(isinstance(g, (exp.Rollup, exp.Cube, exp.GroupingSets)) for g in group.expressions)


def expand(group: exp.Expression, resolve: Resolve) -> tuple[list[exp.Expression], list[list[int]]]:
    """The distinct grouping expressions of ``group`` (resolved) and its grouping sets, each a
    list of positions in them, in PostgreSQL's order."""
    keys: list[exp.Expression] = []

    def key(node: exp.Expression) -> int:
        resolved = resolve(node)
        for i, k in enumerate(keys):
            if k == resolved:
                return i
        keys.append(resolved)
        return len(keys) - 1

    def element(node: exp.Expression) -> list[int]:
        """A ROLLUP/CUBE element: one expression or a parenthesised list of them."""
        if isinstance(node, exp.Tuple):
            return [key(e) for e in node.expressions]
        if isinstance(node, exp.Paren):
            return element(node.this)
        return [key(node)]

    def sets_of(node: exp.Expression, nested: bool) -> list[list[int]]:
        if isinstance(node, exp.Rollup):
            parts = [element(e) for e in node.expressions]
            return [_concat(parts[:n]) for n in range(len(parts), -1, -1)]
        if isinstance(node, exp.Cube):
            parts = [element(e) for e in node.expressions]
            return [
                _concat([parts[i] for i in chosen])
                for n in range(len(parts), -1, -1)
                for chosen in combinations(range(len(parts)), n)
            ]
        if isinstance(node, exp.GroupingSets):
            return [s for item in node.expressions for s in sets_of(item, True)]
        if isinstance(node, exp.Tuple) and (nested or not node.expressions):
            return [[key(e) for e in node.expressions]]
        if isinstance(node, exp.Paren) and nested:
            return sets_of(node.this, True)
        return [[key(node)]]

    factors = [sets_of(g, False) for g in group.expressions]
    plain = [k for f in factors if len(f) == 1 for k in f[0]]
    if group.args.get("rollup"):  # Spark: GROUP BY a, b WITH ROLLUP
        factors = [[plain[:n] for n in range(len(plain), -1, -1)]]
    elif group.args.get("cube"):
        factors = [[list(c) for n in range(len(plain), -1, -1) for c in combinations(plain, n)]]
    sets = [_concat(list(choice)) for choice in product(*factors)]
    if group.args.get("all") is False:  # GROUP BY DISTINCT
        seen: list[frozenset[int]] = []
        unique = []
        for s in sets:
            if frozenset(s) not in seen:
                seen.append(frozenset(s))
                unique.append(s)
        sets = unique
    return keys, sets


def _concat(parts: Sequence[Sequence[int]]) -> list[int]:
    out: list[int] = []
    for part in parts:
        out.extend(i for i in part if i not in out)
    return out


def grouping_value(args: Sequence[int], grouped: Sequence[int]) -> int:
    """``grouping(args…)`` in a row of the set ``grouped`` (positions of grouping keys)."""
    value = 0
    for a in args:
        value = (value << 1) | (0 if a in grouped else 1)
    return value


def union_of_reduces(
    mapped: RelationExpr,
    *,
    prefix: int,
    key_positions: Sequence[int],
    key_types: Sequence[ScalarType],
    sets: Sequence[Sequence[int]],
    aggregates: Sequence[AggregateExpr],
    names: Sequence[str],
    defaults: Sequence[ScalarExpr],
    grouping_args: Sequence[Sequence[int]],
    context: RelationExpr | None,
) -> RelationExpr:
    """The union over ``sets`` of ``mapped`` reduced by the prefix and the set's keys.

    ``key_positions`` are the grouping expressions' columns in ``mapped`` (after the prefix
    ``0…prefix-1``). Output: the prefix, every grouping expression (NULL where not grouped),
    the aggregates, then one int64 column per entry of ``grouping_args`` (the positions of a
    ``grouping(…)`` call's arguments among the grouping expressions). ``names`` names the
    prefix, the keys and the aggregates."""
    branches: list[RelationExpr] = []
    nkeys = len(key_positions)
    for grouped in sets:
        reduced: RelationExpr = Reduce(
            mapped,
            (*range(prefix), *(key_positions[i] for i in grouped)),
            tuple(aggregates),
            tuple(names[prefix + nkeys :]),
        )
        if not grouped:
            reduced = global_defaults(reduced, context, defaults)
        width = prefix + len(grouped)
        pads: list[ScalarExpr] = [
            Literal(None, key_types[i]) for i in range(nkeys) if i not in grouped
        ]
        bits: list[ScalarExpr] = [
            Literal(grouping_value(args, grouped), INT64) for args in grouping_args
        ]
        arity = width + len(aggregates)
        padded = Map(reduced, (*pads, *bits))
        pad_at = {i: arity + n for n, i in enumerate(i for i in range(nkeys) if i not in grouped)}
        order = [
            *range(prefix),
            *(prefix + grouped.index(i) if i in grouped else pad_at[i] for i in range(nkeys)),
            *range(width, arity),
            *range(arity + len(pads), arity + len(pads) + len(bits)),
        ]
        out = project(padded, order)
        branches.append(rename(out, [*names, *(f"grouping_{n}" for n in range(len(bits)))]))
    return branches[0] if len(branches) == 1 else Union(tuple(branches))


__all__ = [
    "GROUPING_CALLS",
    "expand",
    "grouping_value",
    "has_grouping_sets",
    "is_grouping",
    "union_of_reduces",
]
