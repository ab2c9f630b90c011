"""Relational building blocks the SQL lowering composes from the existing IR operators.

* :func:`build_join` — an n-ary inner join from a list of inputs and predicates over their
  concatenated columns: column equalities between inputs become equivalence classes, predicates
  on one input are filtered on it, temporal predicates stay in a ``Filter`` above.
* :func:`key_join` — join two relations on key columns with SQL equality or *null-safe*
  (NULL meets NULL; emulated by equating ``k IS NULL`` and ``coalesce(k, <some value>)``).
* :func:`lookup` — every key of a distinct relation ``D`` with the value a relation unique on
  those keys holds for it, or a default: ``Union(V, Map(Union(D, Negate(keys(V))), default))``.
* :func:`global_defaults` — one row of aggregate defaults when a key-less ``Reduce`` has none
  (per context key when there is a context prefix): SQL's ``SELECT count(*) FROM empty`` = 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Case,
    Cast,
    ColumnRef,
    DateTrunc,
    Extract,
    Literal,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
    column_refs,
    contains_now,
)
from spate.plan.relation import (
    Constant,
    Filter,
    Join,
    Map,
    Negate,
    Project,
    RelationExpr,
    Union,
)
from spate.repr.desc import RelationDesc
from spate.repr.types import BOOL
from spate.sql.scope import project, unique_names
from spate.sql.values import zero_of


def remap(expr: ScalarExpr, fn: Callable[[int], int]) -> ScalarExpr:
    """``expr`` with every column position ``i`` replaced by ``fn(i)``."""
    match expr:
        case ColumnRef(i):
            return ColumnRef(fn(i))
        case CallUnary(f, x):
            return CallUnary(f, remap(x, fn))
        case CallBinary(f, a, b):
            return CallBinary(f, remap(a, fn), remap(b, fn))
        case CallVariadic(f, xs):
            return CallVariadic(f, tuple(remap(x, fn) for x in xs))
        case Case(whens, otherwise):
            return Case(
                tuple((remap(c, fn), remap(r, fn)) for c, r in whens),
                None if otherwise is None else remap(otherwise, fn),
            )
        case Cast(x, t):
            return Cast(remap(x, fn), t)
        case DateTrunc(u, x):
            return DateTrunc(u, remap(x, fn))
        case Extract(u, x):
            return Extract(u, remap(x, fn))
    return expr


def conjuncts(expr: ScalarExpr) -> list[ScalarExpr]:
    if isinstance(expr, CallBinary) and expr.func is BinaryFunc.AND:
        return conjuncts(expr.left) + conjuncts(expr.right)
    return [expr]


def filter_(expr: RelationExpr, preds: Sequence[ScalarExpr]) -> RelationExpr:
    preds = [p for p in preds if p != Literal(True, BOOL)]
    return Filter(expr, tuple(preds)) if preds else expr


def build_join(inputs: Sequence[RelationExpr], preds: Sequence[ScalarExpr]) -> RelationExpr:
    """The inner join of ``inputs`` under ``preds`` (positions over the concatenated columns)."""
    if len(inputs) == 1:
        return filter_(inputs[0], preds)
    offsets: list[int] = []
    at = 0
    for i in inputs:
        offsets.append(at)
        at += i.desc.arity
    total = at

    def owner(p: int) -> int:
        k = 0
        for j, off in enumerate(offsets):
            if p >= off:
                k = j
        return k

    types = [c.type for i in inputs for c in i.desc.columns]
    parent = list(range(total))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    local: list[list[ScalarExpr]] = [[] for _ in inputs]
    residual: list[ScalarExpr] = []
    above: list[ScalarExpr] = []
    for p in [c for pred in preds for c in conjuncts(pred)]:
        if contains_now(p):
            above.append(p)
            continue
        if (
            isinstance(p, CallBinary)
            and p.func is BinaryFunc.EQ
            and isinstance(p.left, ColumnRef)
            and isinstance(p.right, ColumnRef)
            and owner(p.left.index) != owner(p.right.index)
            and types[p.left.index] == types[p.right.index]
        ):
            parent[find(p.left.index)] = find(p.right.index)
            continue
        refs = column_refs(p)
        owners = {owner(r) for r in refs}
        if len(owners) == 1:
            j = owners.pop()
            off = offsets[j]
            local[j].append(remap(p, lambda i, off=off: i - off))  # type: ignore[misc]
        elif not owners:
            above.append(p)
        else:
            residual.append(p)
    groups: dict[int, list[int]] = {}
    for x in range(total):
        groups.setdefault(find(x), []).append(x)
    classes = tuple(tuple(g) for g in groups.values() if len(g) > 1)
    filtered = [filter_(inp, local[j]) for j, inp in enumerate(inputs)]
    joined: RelationExpr = Join(tuple(filtered), classes, tuple(residual))
    return filter_(joined, above)


def key_join(
    left: RelationExpr,
    right: RelationExpr,
    left_keys: Sequence[int],
    right_keys: Sequence[int],
    *,
    null_safe: bool,
    plain: Sequence[tuple[int, int]] = (),
) -> RelationExpr:
    """``left ⋈ right`` on the key columns (null-safe if asked) and on ``plain`` pairs with SQL
    equality; output: left's columns, then right's."""
    la, ra = left.desc.arity, right.desc.arity
    needs_emulation = null_safe and any(
        left.desc.columns[a].nullable or right.desc.columns[b].nullable
        for a, b in zip(left_keys, right_keys, strict=True)
    )
    if not needs_emulation:
        pairs = [*zip(left_keys, right_keys, strict=True), *plain]
        classes = tuple((a, la + b) for a, b in pairs)
        return Join((left, right), classes)
    lx, lcols = _null_safe_keys(left, left_keys)
    rx, rcols = _null_safe_keys(right, right_keys)
    lw = lx.desc.arity
    pairs = [*zip(lcols, rcols, strict=True), *plain]
    classes = tuple((a, lw + b) for a, b in pairs)
    joined = Join((lx, rx), classes)
    keep = [*range(la), *(lw + i for i in range(ra))]
    return project(joined, keep)


def _null_safe_keys(rel: RelationExpr, keys: Sequence[int]) -> tuple[RelationExpr, list[int]]:
    scalars: list[ScalarExpr] = []
    for k in keys:
        col = rel.desc.columns[k]
        scalars.append(CallUnary(UnaryFunc.IS_NULL, ColumnRef(k)))
        if col.nullable:
            scalars.append(
                CallVariadic(
                    VariadicFunc.COALESCE, (ColumnRef(k), Literal(zero_of(col.type), col.type))
                )
            )
        else:
            scalars.append(ColumnRef(k))
    names = unique_names([*rel.desc.names, *(f"_k{i}" for i in range(len(scalars)))])
    mapped = Map(rel, tuple(scalars), tuple(names[rel.desc.arity :]))
    a = rel.desc.arity
    return mapped, list(range(a, a + len(scalars)))


def semijoin(
    x: RelationExpr, keys: Sequence[int], e: RelationExpr, *, null_safe: bool = True
) -> RelationExpr:
    """The rows of ``x`` whose ``keys`` occur in the distinct relation ``e`` (its columns)."""
    joined = key_join(x, e, keys, list(range(e.desc.arity)), null_safe=null_safe)
    return project(joined, range(x.desc.arity))


def antijoin(
    x: RelationExpr, keys: Sequence[int], e: RelationExpr, *, null_safe: bool = True
) -> RelationExpr:
    return Union((x, Negate(semijoin(x, keys, e, null_safe=null_safe))))


def lookup(d: RelationExpr, v: RelationExpr, defaults: Sequence[ScalarExpr]) -> RelationExpr:
    """``v`` (unique on its first ``arity(d)`` columns, keys of ``d``) plus a default row for
    every key of ``d`` that ``v`` lacks."""
    k = d.desc.arity
    missing = Union((d, Negate(project(v, range(k)))))
    names = unique_names(list(v.desc.names))[k:]
    filled = Map(missing, tuple(defaults), tuple(names))
    return Union((v, _retype(filled, v.desc)))


def _retype(rel: RelationExpr, like: RelationDesc) -> RelationExpr:
    """``rel`` with the names of ``like`` (same types required by Union)."""
    return Project(rel, tuple(range(rel.desc.arity)), like.names)


def unit() -> RelationExpr:
    """The relation with one empty row."""
    return Constant((((), 1),), RelationDesc([]))


def global_defaults(
    reduced: RelationExpr, context: RelationExpr | None, defaults: Sequence[ScalarExpr]
) -> RelationExpr:
    """``reduced`` (a Reduce keyed by the context prefix, or key-less) plus, for each context
    row without a group, one row of ``defaults``."""
    base = context if context is not None else unit()
    return lookup(base, reduced, defaults)


def rename(rel: RelationExpr, names: Sequence[str]) -> RelationExpr:
    names = unique_names(list(names))
    if tuple(names) == rel.desc.names:
        return rel
    return Project(rel, tuple(range(rel.desc.arity)), tuple(names))
