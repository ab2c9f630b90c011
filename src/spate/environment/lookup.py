"""Index lookups: a read that filters an indexed object by its key, answered by an index peek.

A plan of ``Map``/``Filter``/``Project`` over ``Get(x)`` whose filters fix every key column of
an index on ``x`` to literals (``k = 42``, ``k IN (1, 2)``, ``k IS NULL``, one conjunct per key
column, the others anything) is read by peeking the index with those key values as literal
constraints: the replica answers from its memory, without a Spark job. The peek selects a
superset of the rows the plan keeps; the whole plan (the filters again, maps, projections) is
then applied to those rows by the plan's plain-Python evaluation
(:func:`spate.plan.evaluation.relation.evaluate`). A key value that no row can equal
(``int_key = 1.5``, ``k = NULL``) matches nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Final

from spate.environment.catalog import IndexItem
from spate.environment.runtime import Runtime
from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    Cast,
    ColumnRef,
    Literal,
    ScalarExpr,
    UnaryFunc,
)
from spate.plan.relation import Filter, Get, Map, Project, RelationExpr
from spate.repr.types import Datum, Row, ScalarKind, ScalarType

K = ScalarKind
MAX_CONSTRAINTS: Final = 1024
"""At most this many key tuples (the product of the IN lists) make a lookup."""

_KEY_KINDS: Final = frozenset(
    {K.BOOL, K.INT64, K.FLOAT64, K.NUMERIC, K.TEXT, K.BYTES, K.DATE, K.TIMESTAMP}
)
_EXACT_FLOAT: Final = 2**53


@dataclass(frozen=True, slots=True)
class IndexLookup:
    """Peek ``index`` (on ``base``) for the key tuples ``constraints`` (empty: no row)."""

    index: IndexItem
    base: Get
    constraints: tuple[Row, ...]


def index_lookup(rt: Runtime, plan: RelationExpr, cluster: str | None) -> IndexLookup | None:
    """The index lookup that answers ``plan``, if there is one (see the module doc)."""
    chain: list[RelationExpr] = []
    node = plan
    while isinstance(node, (Map, Filter, Project)):
        if isinstance(node, Filter) and node.is_temporal():
            return None
        chain.append(node)
        node = node.input
    if not isinstance(node, Get) or not any(isinstance(n, Filter) for n in chain):
        return None
    base = node
    values = _key_values(base, chain)
    if not values:
        return None
    for item in rt.catalog:
        if (
            isinstance(item, IndexItem)
            and item.on == base.id
            and (cluster is None or item.cluster == cluster)
            and rt.catalog.cluster(item.cluster).replicas
            and all(k in values for k in item.key)
        ):
            sets = [values[k] for k in item.key]
            n = 1
            for s in sets:
                n *= len(s)
            if n > MAX_CONSTRAINTS:
                continue
            rows = tuple(tuple(r) for r in itertools.product(*sets))
            return IndexLookup(item, base, rows)
    return None


def fixed_column(plan: RelationExpr) -> tuple[int, tuple[Datum, ...]] | None:
    """For ``Map``/``Filter``/``Project`` over a ``Get``: a column of the ``Get`` its filters
    fix to at most :data:`MAX_CONSTRAINTS` literal values (the fewest), and those values —
    every row the plan keeps has one of them there; else ``None``."""
    chain: list[RelationExpr] = []
    node = plan
    while isinstance(node, (Map, Filter, Project)):
        if isinstance(node, Filter) and node.is_temporal():
            return None
        chain.append(node)
        node = node.input
    if not isinstance(node, Get):
        return None
    found = sorted(_key_values(node, chain).items(), key=lambda kv: len(kv[1]))
    if not found or len(found[0][1]) > MAX_CONSTRAINTS:
        return None
    column, values = found[0]
    return column, tuple(values)


# -- finding the key values --------------------------------------------------------------------


def _key_values(base: Get, chain: Sequence[RelationExpr]) -> dict[int, list[Datum]]:
    """For each base column some filter fixes, the values it may take (may be empty)."""
    out: dict[int, list[Datum]] = {}
    # position in the current node's output -> base column (None: computed)
    mapping: list[int | None] = list(range(base.desc.arity))
    for node in reversed(chain):
        if isinstance(node, Map):
            mapping = mapping + [None] * len(node.scalars)
        elif isinstance(node, Project):
            mapping = [mapping[o] for o in node.outputs]
        else:
            assert isinstance(node, Filter)
            for p in node.predicates:
                for conjunct in conjuncts(p):
                    if isinstance(conjunct, Literal) and conjunct.value is not True:
                        # never holds (``k = NULL`` folds to NULL): no row has any key
                        return {c: [] for c in range(base.desc.arity)}
                    found = _fixed(conjunct, mapping, base)
                    if found is None:
                        continue
                    column, vals = found
                    if column in out:
                        vals = [v for v in out[column] if any(_same(v, w) for w in vals)]
                    out[column] = vals
    return out


def conjuncts(p: ScalarExpr) -> list[ScalarExpr]:
    """The conjuncts of ``p`` (``a AND b`` split, at any depth)."""
    if isinstance(p, CallBinary) and p.func is BinaryFunc.AND:
        return conjuncts(p.left) + conjuncts(p.right)
    return [p]


def _disjuncts(p: ScalarExpr) -> list[ScalarExpr]:
    if isinstance(p, CallBinary) and p.func is BinaryFunc.OR:
        return _disjuncts(p.left) + _disjuncts(p.right)
    return [p]


def _fixed(
    p: ScalarExpr, mapping: Sequence[int | None], base: Get
) -> tuple[int, list[Datum]] | None:
    """``(base column, values)`` when ``p`` holds only if that column is one of ``values``."""
    column: int | None = None
    values: list[Datum] = []
    for d in _disjuncts(p):
        one = _equality(d, mapping, base)
        if one is None:
            return None
        c, vals = one
        if column is not None and c != column:
            return None
        column = c
        for v in vals:
            if not any(_same(v, w) for w in values):
                values.append(v)
    assert column is not None
    return column, values


def _equality(
    p: ScalarExpr, mapping: Sequence[int | None], base: Get
) -> tuple[int, list[Datum]] | None:
    """``col = literal`` (either side, the column maybe cast to a wider number) or
    ``col IS NULL``: the column and the values it may then have."""
    if isinstance(p, CallUnary) and p.func is UnaryFunc.IS_NULL:
        column = _base_column(p.expr, mapping)
        if column is None or not _keyable(base.desc.columns[column].type):
            return None
        return column, [None]
    if not (isinstance(p, CallBinary) and p.func is BinaryFunc.EQ):
        return None
    for side, other in ((p.left, p.right), (p.right, p.left)):
        if not isinstance(other, Literal):
            continue
        cast = isinstance(side, Cast)
        column = _base_column(side.expr if isinstance(side, Cast) else side, mapping)
        if column is None:
            continue
        ctype = base.desc.columns[column].type
        if not _keyable(ctype):
            return None
        vals = _convert(other, ctype, cast)
        return None if vals is None else (column, vals)
    return None


def _base_column(e: ScalarExpr, mapping: Sequence[int | None]) -> int | None:
    if isinstance(e, ColumnRef) and e.index < len(mapping):
        return mapping[e.index]
    return None


def _keyable(t: ScalarType) -> bool:
    return t.kind in _KEY_KINDS


def _convert(lit: Literal, ctype: ScalarType, cast: bool) -> list[Datum] | None:
    """The key values a column of type ``ctype`` (cast to the literal's type when ``cast``)
    must have to equal ``lit``: none (``[]``) or one; ``None`` when that is not certain."""
    v = lit.value
    if v is None:
        return []  # = NULL is never true
    lk, ck = lit.type.kind, ctype.kind
    if isinstance(v, float) and v != v:
        return None  # NaN: leave it to the residual filter
    if not cast and lit.type == ctype:
        return [v]
    if ck is K.INT64 and lk in (K.NUMERIC, K.FLOAT64):
        if lk is K.FLOAT64:
            assert isinstance(v, float)
            if abs(v) >= _EXACT_FLOAT:
                return None  # int64 → float64 rounds: several keys may equal it
            return [int(v)] if v == int(v) else []
        assert isinstance(v, Decimal)
        return [int(v)] if v == v.to_integral_value() else []
    if ck is K.NUMERIC and lk is K.NUMERIC and isinstance(v, Decimal):
        assert ctype.scale is not None and ctype.precision is not None
        try:
            q = v.quantize(Decimal(1).scaleb(-ctype.scale))
        except InvalidOperation:
            return None  # beyond the decimal context's precision: leave it to the filter
        if q != v:
            return []
        digits = len(q.as_tuple().digits)
        return [q] if digits <= ctype.precision else []
    return None


def _same(a: Datum, b: Datum) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and a == b)
