"""Random typed scalar expressions over the columns of a relation (for :mod:`plan_strategies`)."""

from __future__ import annotations

from hypothesis import strategies as st

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
    TimeUnit,
    UnaryFunc,
    VariadicFunc,
)
from spate.repr.desc import RelationDesc
from spate.repr.types import BOOL, FLOAT64, INT64, TEXT, TIMESTAMP, ScalarKind
from spate.testing.update_strategies import small_datums

K = ScalarKind


_EXPR_CACHE: dict[
    tuple[RelationDesc, frozenset[str], ScalarKind, int], st.SearchStrategy[ScalarExpr]
] = {}


class ScalarExprs:
    """Typed random scalar expressions over a list of column types."""

    def __init__(self, desc: RelationDesc, families: frozenset[str]) -> None:
        self.desc = desc
        self.families = families

    def columns_of(self, kind: ScalarKind) -> list[int]:
        return [i for i, c in enumerate(self.desc.columns) if c.type.kind is kind]

    def kinds(self) -> list[ScalarKind]:
        """Result kinds this generator can produce."""
        out = [K.INT64, K.BOOL]
        for k in (K.TEXT, K.TIMESTAMP, K.FLOAT64):
            if self.columns_of(k) or (k is K.TEXT and "string" in self.families):
                out.append(k)
        return out

    def leaf(self, kind: ScalarKind) -> st.SearchStrategy[ScalarExpr]:
        cols = self.columns_of(kind)
        t = {
            K.INT64: INT64,
            K.BOOL: BOOL,
            K.TEXT: TEXT,
            K.TIMESTAMP: TIMESTAMP,
            K.FLOAT64: FLOAT64,
        }[kind]
        lits = small_datums(t).map(lambda v: Literal(v, t))
        if cols:
            return st.one_of(st.sampled_from(cols).map(ColumnRef), lits)
        return lits

    def expr(self, kind: ScalarKind, depth: int) -> st.SearchStrategy[ScalarExpr]:
        key = (self.desc, self.families, kind, depth)
        found = _EXPR_CACHE.get(key)
        if found is None:
            found = _EXPR_CACHE[key] = self._expr(kind, depth)
        return found

    def _expr(self, kind: ScalarKind, depth: int) -> st.SearchStrategy[ScalarExpr]:
        leaf = self.leaf(kind)
        if depth <= 0:
            return leaf
        options = [leaf, leaf]
        f = self.families

        def sub(k: ScalarKind) -> st.SearchStrategy[ScalarExpr]:
            return self.expr(k, depth - 1)

        if kind is K.INT64:
            if "arith" in f:
                ops = st.sampled_from([BinaryFunc.ADD, BinaryFunc.SUB])
                options.append(st.builds(CallBinary, ops, sub(K.INT64), sub(K.INT64)))
                # Products with a small literal only: values stay far from int64 overflow.
                small = st.integers(-3, 4).map(lambda n: Literal(n, INT64))
                options.append(st.builds(CallBinary, st.just(BinaryFunc.MUL), sub(K.INT64), small))
            if "div" in f:
                divs = st.sampled_from([BinaryFunc.DIV, BinaryFunc.MOD])
                options.append(st.builds(CallBinary, divs, sub(K.INT64), sub(K.INT64)))
            if "string" in f:
                options.append(st.builds(CallUnary, st.just(UnaryFunc.LENGTH), sub(K.TEXT)))
            if "time" in f and self.columns_of(K.TIMESTAMP):
                units = st.sampled_from([TimeUnit.SECOND, TimeUnit.DOW, TimeUnit.YEAR])
                options.append(st.builds(Extract, units, sub(K.TIMESTAMP)))
                options.append(st.builds(CallUnary, st.just(UnaryFunc.EPOCH_MS), sub(K.TIMESTAMP)))
            if "cast" in f:
                options.append(st.builds(Cast, sub(K.BOOL), st.just(INT64)))
        elif kind is K.BOOL:
            if "compare" in f:
                cmp = st.sampled_from(sorted(COMPARISONS))
                for k in self.kinds():
                    if k is not K.BOOL:
                        options.append(st.builds(CallBinary, cmp, sub(k), sub(k)))
            if "logic" in f:
                logic = st.sampled_from([BinaryFunc.AND, BinaryFunc.OR])
                options.append(st.builds(CallBinary, logic, sub(K.BOOL), sub(K.BOOL)))
                options.append(st.builds(CallUnary, st.just(UnaryFunc.NOT), sub(K.BOOL)))
            if "null" in f:
                options.append(
                    st.sampled_from(self.kinds()).flatmap(
                        lambda k: st.builds(CallUnary, st.just(UnaryFunc.IS_NULL), sub(k))
                    )
                )
            if "string" in f:
                pats = st.sampled_from(["a%", "%b", "_", "%", "a\\%", "A%"])
                like = st.sampled_from([BinaryFunc.LIKE, BinaryFunc.ILIKE])
                options.append(
                    st.builds(CallBinary, like, sub(K.TEXT), pats.map(lambda p: Literal(p, TEXT)))
                )
        elif kind is K.TEXT and "string" in f:
            unary = st.sampled_from([UnaryFunc.LOWER, UnaryFunc.UPPER, UnaryFunc.TRIM])
            options.append(st.builds(CallUnary, unary, sub(K.TEXT)))
            options.append(
                st.builds(CallBinary, st.just(BinaryFunc.CONCAT), sub(K.TEXT), sub(K.TEXT))
            )
            options.append(
                st.tuples(sub(K.TEXT), self.leaf(K.INT64), self.leaf(K.INT64)).map(
                    lambda a: CallVariadic(VariadicFunc.SUBSTR, a)
                )
            )
            if "cast" in f:
                options.append(st.builds(Cast, sub(K.INT64), st.just(TEXT)))
        elif kind is K.TIMESTAMP and "time" in f:
            units = st.sampled_from([TimeUnit.MINUTE, TimeUnit.SECOND, TimeUnit.DAY])
            options.append(st.builds(DateTrunc, units, sub(K.TIMESTAMP)))
            ms = st.integers(0, 5).map(lambda n: Literal(n, INT64))
            shift = st.sampled_from([BinaryFunc.TIMESTAMP_ADD_MS, BinaryFunc.TIMESTAMP_SUB_MS])
            options.append(st.builds(CallBinary, shift, sub(K.TIMESTAMP), ms))
        elif kind is K.FLOAT64:
            if "arith" in f:
                fops = st.sampled_from([BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL])
                options.append(st.builds(CallBinary, fops, sub(K.FLOAT64), sub(K.FLOAT64)))
            if "cast" in f:
                options.append(st.builds(Cast, sub(K.INT64), st.just(FLOAT64)))
        if "case" in f:
            options.append(
                st.builds(
                    lambda c, a, b: Case(((c, a),), b),
                    sub(K.BOOL),
                    sub(kind),
                    st.one_of(st.none(), sub(kind)),
                )
            )
        if "null" in f:
            options.append(
                st.lists(sub(kind), min_size=2, max_size=3).map(
                    lambda xs: CallVariadic(VariadicFunc.COALESCE, tuple(xs))
                )
            )
        return st.one_of(*options)


COMPARISONS = {
    BinaryFunc.EQ,
    BinaryFunc.NE,
    BinaryFunc.LT,
    BinaryFunc.LE,
    BinaryFunc.GT,
    BinaryFunc.GE,
}
