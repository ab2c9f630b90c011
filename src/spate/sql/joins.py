"""LEFT / RIGHT / FULL OUTER joins and USING, lowered with the existing IR operators.

The inner part ``J = Join(L, R, on)``; the left rows that matched are found from ``J`` and the
unmatched ones padded with NULLs::

    equi ON (column equalities plus one-sided conditions):
        Kmatched = Distinct(Project(J, left key columns))
        Lmatched = Project(Join(Filter(L, left-only conditions), Kmatched, key = key), L)
    any other ON:
        Lmatched = L ⋉ Distinct(Project(J, L columns))     (null-safe on every column)
    Lpad = Map(Union(L, Negate(Lmatched)), NULL for each R column)
    LEFT = Union(J, Lpad)    RIGHT: mirrored    FULL: Union(J, Lpad, Rpad)

``Lmatched`` is a subset of ``L`` by construction, so the difference needs no ``Threshold``; a
left-only ON condition filters ``Lmatched`` and not ``L``: rows failing it are padded and kept.
"""

from __future__ import annotations

import dataclasses

from sqlglot import exp

from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallVariadic,
    ColumnRef,
    ScalarExpr,
    VariadicFunc,
    column_refs,
)
from spate.plan.relation import Distinct, Map, Negate, RelationExpr, Union
from spate.sql.errors import SqlError
from spate.sql.query import QueryPlanner
from spate.sql.relops import build_join, conjuncts, filter_, key_join, remap, rename, semijoin
from spate.sql.scope import Col, Rel, Scope, append_nulls, project, unique_names


def _using_pairs(
    qp: QueryPlanner, left: Rel, right: Rel, using: list[str]
) -> list[tuple[int, int]]:
    pairs = []
    for name in using:
        node = exp.column(name)
        try:
            lp = left.scope.resolve(None, name, node)
            rp = right.scope.resolve(None, name, node)
        except SqlError as e:
            raise SqlError(
                f'column "{name}" specified in USING clause does not exist in '
                f"{'left' if 'left' not in str(e) else 'right'} table",
                text=qp.text,
                sqlstate="42703",
            ) from None
        pairs.append((lp, rp))
    return pairs


def outer_join(
    qp: QueryPlanner,
    left: Rel,
    right: Rel,
    side: str,
    on: exp.Expression | None,
    using: list[str],
) -> Rel:
    la, ra = left.arity, right.arity
    cols = left.scope.cols + right.scope.cols
    scope = Scope(cols, None, qp.text)
    preds: list[ScalarExpr] = []
    pairs: list[tuple[int, int]] = []
    if using:
        pairs = _using_pairs(qp, left, right, using)
        for lp, rp in pairs:
            lt, rt = left.scope.cols[lp].type, right.scope.cols[rp].type
            if lt.scalar != rt.scalar:
                raise SqlError(
                    f'JOIN/USING types {lt} and {rt} for column "{left.scope.cols[lp].name}" '
                    "cannot be matched",
                    text=qp.text,
                    sqlstate="42804",
                )
            preds.append(CallBinary(BinaryFunc.EQ, ColumnRef(lp), ColumnRef(la + rp)))
    elif on is not None:
        preds = conjuncts(qp.binder(scope, "JOIN/ON").predicate(on))
    l_expr, r_expr = left.expr, right.expr
    inner = build_join([l_expr, r_expr], preds)
    parts: list[RelationExpr] = [inner]
    if side in ("LEFT", "FULL"):
        matched = _matched(l_expr, r_expr, preds, inner, la, ra, left_side=True)
        pad = Union((l_expr, Negate(matched)))
        parts.append(_named_like(append_nulls(pad, right.scope.cols, r_expr), inner))
    if side in ("RIGHT", "FULL"):
        mirrored = [remap(p, lambda i: i + ra if i < la else i - la) for p in preds]
        inner_r = build_join([r_expr, l_expr], mirrored)
        matched = _matched(r_expr, l_expr, mirrored, inner_r, ra, la, left_side=True)
        pad = Union((r_expr, Negate(matched)))
        padded = append_nulls(pad, left.scope.cols, l_expr)
        reordered = project(padded, [*range(ra, ra + la), *range(ra)])
        parts.append(_named_like(reordered, inner))
    expr: RelationExpr = Union(tuple(parts)) if len(parts) > 1 else parts[0]
    rel = Rel(expr, Scope(cols, None, qp.text))
    if using:
        rel = _merge_using(rel, pairs, la, side)
    return rel


def _named_like(rel: RelationExpr, like: RelationExpr) -> RelationExpr:
    return rename(rel, like.desc.names)


def _matched(
    l_expr: RelationExpr,
    r_expr: RelationExpr,
    preds: list[ScalarExpr],
    inner: RelationExpr,
    la: int,
    ra: int,
    *,
    left_side: bool,
) -> RelationExpr:
    """The rows of the left input that have a partner under ``preds`` (with multiplicity)."""
    del ra, left_side
    keys: list[tuple[int, int]] = []
    left_only: list[ScalarExpr] = []
    general = False
    for p in preds:
        refs = column_refs(p)
        if (
            isinstance(p, CallBinary)
            and p.func is BinaryFunc.EQ
            and isinstance(p.left, ColumnRef)
            and isinstance(p.right, ColumnRef)
            and (p.left.index < la) != (p.right.index < la)
            and l_expr.desc.columns[min(p.left.index, p.right.index)].type
            == r_expr.desc.columns[max(p.left.index, p.right.index) - la].type
        ):
            lcol, rcol = sorted((p.left.index, p.right.index))
            keys.append((lcol, rcol - la))
        elif refs and all(r < la for r in refs):
            left_only.append(p)
        elif refs and all(r >= la for r in refs):
            continue
        else:
            general = True
    if keys and not general:
        lkeys = [lk for lk, _ in keys]
        kmatched = Distinct(project(inner, lkeys))
        base = filter_(l_expr, left_only)
        joined = key_join(base, kmatched, lkeys, list(range(len(lkeys))), null_safe=False)
        return project(joined, range(la))
    seen = Distinct(project(inner, range(la)))
    return semijoin(l_expr, list(range(la)), seen, null_safe=True)


def using_inner(qp: QueryPlanner, left: Rel, right: Rel, using: list[str]) -> Rel:
    la = left.arity
    pairs = _using_pairs(qp, left, right, using)
    preds = [CallBinary(BinaryFunc.EQ, ColumnRef(lp), ColumnRef(la + rp)) for lp, rp in pairs]
    expr = build_join([left.expr, right.expr], preds)
    rel = Rel(expr, Scope(left.scope.cols + right.scope.cols, None, qp.text))
    return _merge_using(rel, pairs, la, "INNER")


def _merge_using(rel: Rel, pairs: list[tuple[int, int]], la: int, side: str) -> Rel:
    """USING columns first (the left copy; RIGHT: the right copy; FULL: their coalesce), the
    joined copies reachable only qualified."""
    cols = list(rel.scope.cols)
    expr = rel.expr
    merged: list[int] = []
    if side == "FULL":
        scalars = [
            CallVariadic(VariadicFunc.COALESCE, (ColumnRef(lp), ColumnRef(la + rp)))
            for lp, rp in pairs
        ]
        names = unique_names([*expr.desc.names, *(cols[lp].name or "c" for lp, _ in pairs)])
        base = expr.desc.arity
        expr = Map(expr, tuple(scalars), tuple(names[base:]))
        for i, (lp, _) in enumerate(pairs):
            cols.append(Col(None, None, cols[lp].type, hidden=True))
            merged.append(base + i)
    else:
        for lp, rp in pairs:
            keep = la + rp if side == "RIGHT" else lp
            merged.append(keep)
    copies = {p for lp, rp in pairs for p in (lp, la + rp)}
    for p in copies:
        cols[p] = dataclasses.replace(cols[p], hidden=True, qualified_only=True)
    visible_merged = []
    for m, (lp, _) in zip(merged, pairs, strict=True):
        c = rel.scope.cols[lp]
        visible_merged.append(Col(c.name, None, cols[m].type))
    order = [*merged, *range(len(cols))]
    out_cols = visible_merged + cols
    return Rel(project(expr, order), Scope(out_cols, rel.scope.parent, rel.scope.text))
